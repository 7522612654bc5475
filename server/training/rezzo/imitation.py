"""Rezzo imitation from an exported dataset: a bot folder's network fitted to another bot's moves.

The network is the bot folder's own (its ``policy.py``, as `example_bots/rezzo/trained/` lays it out:
``Policy``, ``observe``, ``legal``, ``one_hot``), so the weights written are the ones its ``bot.py``
loads. Each imitated seat is replayed in tick order through the SDK's `View` and one `Tracker` per
agent, exactly as the bot meets a match, and the move the game applied is the label. The evaluation
plays the bot folder's ``bot.py`` in-process against example bots, both seats.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo, Move, Tracker, View, Viewport
from cellarena.sdk.games.rezzo import VIEW_SIZE
from cellarena.server.dataset.views import FixedView
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.training.imitation import (
    ImitationError,
    Samples,
    SeatRows,
    class_weights,
    fit,
    read_seats,
)

#: The example bots the evaluation plays against, and their classes.
OPPONENTS = {"random_walker": "RandomWalker", "raider": "Raider", "builder": "Builder"}


def _unique_name(path: Path) -> str:
    """A module name no other file takes: the file's resolved path made an identifier."""
    return "cellarena_bot_file_" + re.sub(r"\W", "_", str(path.resolve()))


@contextmanager
def _as_if_run(folder: Path, plain: dict[str, ModuleType]) -> Iterator[None]:
    """While a bot file runs its imports: its folder first on sys.path and ``plain`` (the folder's
    files already loaded, by their plain names) in sys.modules, as running the file would have them;
    afterwards sys.path as it was and no module of the folder left under any name but its own."""
    path, before = list(sys.path), set(sys.modules)
    saved = {name: sys.modules.get(name) for name in plain}
    sys.path.insert(0, str(folder))
    sys.modules.update(plain)
    try:
        yield
    finally:
        sys.path[:] = path
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for name in set(sys.modules) - before:  # a sibling the file imported by its plain name
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).resolve().parent == folder:
                del sys.modules[name]


def load_module(path: Path, plain: dict[str, ModuleType] | None = None) -> ModuleType:
    """The Python file ``path`` (bot folders are not packages) as a module of a name of its own, so
    that two bot folders' ``policy.py`` never meet; loaded once per process. Its imports see its folder
    as running it would (``bot.py``'s ``from policy import ...`` gets ``plain["policy"]``), and
    nothing of that outlives the loading: sys.path and the plain names are put back."""
    name = _unique_name(path)
    known = sys.modules.get(name)
    if known is not None:
        return known
    if not path.is_file():
        raise ImitationError(
            f"{path}: not found; give the folder of a bot laid out as example_bots/rezzo/trained"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by its name
    try:
        with _as_if_run(path.parent.resolve(), plain or {}):
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ImitationError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc})") from None
    return module


def policy_module(bot_dir: Path) -> ModuleType:
    """The bot folder's ``policy.py``, checked for what the training uses."""
    if not (bot_dir / "policy.py").is_file():
        raise ImitationError(
            f"--bot-dir {bot_dir}: no policy.py in it; give the folder of a bot laid out as "
            "example_bots/rezzo/trained (run from a cellarena checkout, or copy that folder)"
        )
    module = load_module(bot_dir / "policy.py")
    missing = [n for n in ("Policy", "observe", "legal", "one_hot", "MOVES") if not hasattr(module, n)]
    if missing:
        raise ImitationError(
            f"{bot_dir / 'policy.py'}: lacks {', '.join(missing)}; "
            "start from example_bots/rezzo/trained/policy.py"
        )
    return module


def _moves(action: Any) -> dict[int, int]:
    """The replay's move of a seat (agent index -> move code) as ints; anything else is no move."""
    if not isinstance(action, dict):
        return {}
    return {int(k): int(v) for k, v in action.items() if isinstance(v, int)}


def _view(rows: SeatRows, tick: int, fixed: FixedView) -> View:
    """The SDK's View of one row, from its ``view`` columns: (agents, 2, 13, 13) cells, then damage."""
    agents = fixed.agents or []
    if fixed.cells.shape != (len(agents), 2, VIEW_SIZE, VIEW_SIZE):
        raise ImitationError(
            f"match {rows.match}, seat {rows.seat}, tick {tick}: a view of shape {fixed.cells.shape} for "
            f"{len(agents)} agents; export the replays again"
        )
    ports = [Viewport(a[0].tobytes(), a[1].tobytes()) for a in fixed.cells]
    return View(tick, list(agents), ports)


def seat_samples(rows: SeatRows, net: ModuleType) -> Samples:
    """One seat's samples: its observations replayed through one Tracker per agent, labelled with the
    moves the game applied."""
    cells, extras, masks, labels = [], [], [], []
    trackers: dict[int, Tracker] = {}
    last: dict[int, int] = {}
    for tick, fixed, action in zip(rows.ticks, rows.views, rows.actions, strict=True):
        if fixed is None:
            continue
        view = _view(rows, tick, fixed)
        moves = _moves(action)
        for index, port in view:
            tracker = trackers.setdefault(index, Tracker())
            tracker.observe(port)
            c, e = net.observe(tracker, port, last.get(index, Move.NOOP), view.tick)
            label = moves.get(index, int(Move.NOOP)) % net.MOVES
            m = net.legal(port)
            m[label] = True  # the move played is a choice even where the network would not offer it
            cells.append(c)
            extras.append(e)
            masks.append(m)
            labels.append(label)
            tracker.commit(label)
            last[index] = label
    if not labels:
        return Samples(
            np.zeros((0, net.CROP), np.uint8),
            np.zeros((0, net.EXTRA), np.float32),
            np.zeros((0, net.MOVES), bool),
            np.zeros(0, np.int64),
        )
    return Samples(
        np.array(cells, np.uint8),
        np.array(extras, np.float32),
        np.array(masks, bool),
        np.array(labels, np.int64),
    )


@dataclass
class Imitation:
    """What `imitate` did."""

    seats: int
    samples: int
    accuracy: float
    seconds: float
    moves: dict[str, int] = field(default_factory=dict)


def imitate(
    dataset: Path,
    bot: str,
    out: Path,
    bot_dir: Path,
    epochs: int = 30,
    seed: int = 0,
    balance: float = 0.0,
    winners_only: bool = False,
) -> Imitation:
    """Behaviour cloning of ``bot``'s rows of ``dataset`` into ``bot_dir``'s network, saved to ``out``.
    Seeded: the same arguments write the same bytes."""
    began = time.monotonic()
    net = policy_module(bot_dir)
    seats = read_seats(dataset, "rezzo", bot)
    if winners_only:
        seats = [s for s in seats if s.outcome == "win"]
        if not seats:
            raise ImitationError(f"--winners-only: {bot} won no match of the dataset")
    data = Samples.join([seat_samples(s, net) for s in seats])
    if not len(data.labels):
        raise ImitationError(f"--imitate {bot}: its rows hold no moves of live agents")
    rng = np.random.default_rng(seed)
    policy = net.Policy(seed=seed)
    weights = class_weights(data.labels, net.MOVES, balance) if balance else None
    acc = fit(policy, net.one_hot, data, epochs, rng, weights=weights)
    policy.save(out)
    counts = np.bincount(data.labels, minlength=net.MOVES)
    moves = {Move(m).name.lower(): int(c) for m, c in enumerate(counts.tolist())}
    return Imitation(len(seats), len(data.labels), acc, time.monotonic() - began, moves)


def play(
    bot_dir: Path, policy: Any, opponent: type[Any], seat: int, map_name: str, max_ticks: int
) -> int | None:
    """One match in-process: the bot folder's ``bot.py`` (its ``Trained`` class, playing ``policy``) in
    ``seat`` against an instance of ``opponent``; the winner's seat, or None for a draw."""
    module = load_module(bot_dir / "bot.py", {"policy": policy_module(bot_dir)})
    mine = module.Trained(policy)
    bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
    engine = RezzoEngine.new({"map": map_name, "max_ticks": max_ticks})
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game="rezzo")
        b.on_start(b.info)
    while engine.result() is None:
        engine.apply({s: bots[s].on_tick(View.from_message(req)) for s, req in engine.pending().items()})
    result = engine.result()
    assert result is not None
    return result.winner


def opponent_class(bots_dir: Path, name: str) -> type[Any]:
    """An example bot's class, from ``bots_dir/NAME.py`` (example_bots/rezzo)."""
    if name not in OPPONENTS:
        raise ImitationError(f"--against {name}: one of {', '.join(OPPONENTS)}")
    if not (bots_dir / f"{name}.py").is_file():
        raise ImitationError(
            f"--bots-dir {bots_dir}: no {name}.py in it; give the folder of cellarena's example Rezzo "
            "bots (a checkout's example_bots/rezzo), or --eval 0"
        )
    module = load_module(bots_dir / f"{name}.py")
    cls: type[Any] = getattr(module, OPPONENTS[name])
    return cls


def evaluate(
    bot_dir: Path,
    weights: Path,
    bots_dir: Path,
    opponents: Sequence[str],
    matches: int,
    map_name: str = "duel",
    max_ticks: int = 3000,
) -> dict[str, dict[str, int]]:
    """``matches`` matches against each opponent, seats in turn: the trained bot's wins, draws, losses."""
    out: dict[str, dict[str, int]] = {}
    policy = policy_module(bot_dir).Policy.load(weights) if opponents else None
    for name in opponents:
        cls = opponent_class(bots_dir, name)
        tally = {"wins": 0, "draws": 0, "losses": 0}
        for i in range(matches):
            seat = i % 2
            winner = play(bot_dir, policy, cls, seat, map_name, max_ticks)
            tally["draws" if winner is None else "wins" if winner == seat else "losses"] += 1
        out[name] = tally
    return out
