"""`cellarena train GAME`: behaviour cloning of one bot's rows of an exported dataset into a bot
folder's network, then the result played in-process against the game's example bots. The same code
for every game that offers it; what is a game's own is its `GameImitation`: how a seat's rows become
samples (through the bot folder's own ``policy.observe``), how one match is played in-process, and
its example bots.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.server.training.bot_folder import load_module, policy_module
from cellarena.server.training.imitation import (
    ImitationError,
    Samples,
    SeatRows,
    class_weights,
    fit,
    read_seats,
)


@dataclass(frozen=True)
class ReinforceRequest:
    """What `cellarena train GAME --reinforce` asks of a game that offers reinforcement: fine-tune
    ``bot_dir``'s network (from ``from_weights``, else a fresh one of ``seed``) against ``opponents``
    (names; empty: the game's default) with the reward weights ``rewards`` (over the game's
    defaults) for ``steps`` steps of ``worlds`` worlds or ``seconds``, the weights written to
    ``out``; ``config`` holds the match options (``--map``...), ``say`` shows the progress."""

    bot_dir: Path
    out: Path
    from_weights: Path | None
    opponents: Sequence[str]
    bots_dir: Path
    steps: int
    seconds: float | None
    seed: int
    worlds: int
    rewards: Mapping[str, float]
    config: Mapping[str, Any]
    say: Callable[[str], None]


@dataclass(frozen=True)
class GameImitation:
    """What imitation needs of one game."""

    game: str
    #: One seat's rows -> samples, through the bot folder's policy module.
    seat_samples: Callable[[SeatRows, ModuleType], Samples]
    #: One match in-process: (the bot folder's bot.py module, the policy, the opponent's class, the
    #: trained bot's seat, the engine's config) -> the winner's seat, None for a draw.
    play: Callable[[ModuleType, Any, type[Any], int, Mapping[str, Any]], int | None]
    #: The example bots the evaluation may play: file stem -> class name (example_bots/GAME).
    opponents: Mapping[str, str]
    #: The name of each move code, for the report.
    move_name: Callable[[int], str]
    #: The example bots the evaluation plays by default, comma-separated.
    against: str
    #: The evaluation's match options: engine config key -> (default, help); `cellarena train GAME`
    #: offers each as ``--key-with-dashes``.
    match_options: Mapping[str, tuple[Any, str]]
    #: The default --bot-dir (None: the option is required).
    bot_dir: str | None = None
    #: Whether `seat_samples` reads the observations' msgpack (the ``view`` columns do not hold all).
    messages: bool = False
    #: Whether each evaluation match gets a board of its own: `play` then finds the match's number
    #: as ``config["seed"]`` (a game whose board comes from the seed, such as a duplicate puzzle).
    seeded: bool = False
    #: Reinforcement with the game's reward terms (`cellarena train GAME --reinforce`): what it did, as
    #: JSON-ready numbers. None: the game has no reward terms, and ``--reinforce`` says so.
    reinforce: Callable[[ReinforceRequest], dict[str, Any]] | None = None


@dataclass
class Imitation:
    """What `imitate` did."""

    seats: int
    samples: int
    accuracy: float
    seconds: float
    moves: dict[str, int] = field(default_factory=dict)


def imitate(
    spec: GameImitation,
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
    net = policy_module(bot_dir, spec.game)
    seats = read_seats(dataset, spec.game, bot, messages=spec.messages)
    if winners_only:
        seats = [s for s in seats if s.outcome == "win"]
        if not seats:
            raise ImitationError(f"--winners-only: {bot} won no match of the dataset")
    data = Samples.join([spec.seat_samples(s, net) for s in seats])
    if not len(data.labels):
        raise ImitationError(f"--imitate {bot}: its rows hold no moves")
    rng = np.random.default_rng(seed)
    policy = net.Policy(seed=seed)
    weights = class_weights(data.labels, net.MOVES, balance) if balance else None
    acc = fit(policy, net.one_hot, data, epochs, rng, weights=weights)
    policy.save(out)
    counts = np.bincount(data.labels, minlength=net.MOVES)
    moves: dict[str, int] = {}
    for m, c in enumerate(counts.tolist()):
        if c:
            moves[spec.move_name(m)] = moves.get(spec.move_name(m), 0) + int(c)
    return Imitation(len(seats), len(data.labels), acc, time.monotonic() - began, moves)


def opponent_class(spec: GameImitation, bots_dir: Path, name: str) -> type[Any]:
    """An example bot's class, from ``bots_dir/NAME.py`` (example_bots/GAME)."""
    if name not in spec.opponents:
        raise ImitationError(f"--against {name}: one of {', '.join(spec.opponents)}")
    if not (bots_dir / f"{name}.py").is_file():
        raise ImitationError(
            f"--bots-dir {bots_dir}: no {name}.py in it; give the folder of cellarena's example "
            f"{spec.game} bots (a checkout's example_bots/{spec.game}), or --eval 0"
        )
    cls: type[Any] = getattr(load_module(bots_dir / f"{name}.py"), spec.opponents[name])
    return cls


def evaluate(
    spec: GameImitation,
    bot_dir: Path,
    weights: Path,
    bots_dir: Path,
    opponents: Sequence[str],
    matches: int,
    config: Mapping[str, Any],
) -> dict[str, dict[str, int]]:
    """``matches`` matches against each opponent, seats in turn: the trained bot's wins, draws, losses."""
    out: dict[str, dict[str, int]] = {}
    if not opponents:
        return out
    net = policy_module(bot_dir, spec.game)
    policy = net.Policy.load(weights)
    bot = load_module(bot_dir / "bot.py", {"policy": net})
    for name in opponents:
        cls = opponent_class(spec, bots_dir, name)
        tally = {"wins": 0, "draws": 0, "losses": 0}
        for i in range(matches):
            seat = i % 2
            winner = spec.play(bot, policy, cls, seat, {**config, "seed": i} if spec.seeded else config)
            tally["draws" if winner is None else "wins" if winner == seat else "losses"] += 1
        out[name] = tally
    return out
