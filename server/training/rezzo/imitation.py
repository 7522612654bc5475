"""Rezzo's part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as samples,
and one match in-process.

The network is the bot folder's own (its ``policy.py``, as `example_bots/rezzo/trained/` and `new-bot
rezzo NAME --template trained` lay it out), so the weights written are the ones its ``bot.py`` loads.
Each imitated seat is replayed in tick order through the SDK's `View` and one `Tracker` per agent,
exactly as the bot meets a match, and the move the game applied is the label.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo, Move, Tracker, View, Viewport
from cellarena.sdk.games.rezzo import VIEW_SIZE
from cellarena.server.dataset.views import FixedView
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.training.bot_folder import policy_module
from cellarena.server.training.imitation import ImitationError, Samples, SeatRows
from cellarena.server.training.trainer import GameImitation, ReinforceRequest


def _moves(action: Any) -> dict[int, int]:
    """The replay's move of a seat (agent index -> move code) as ints; anything else is no move."""
    if not isinstance(action, dict):
        return {}
    return {int(k): int(v) for k, v in action.items() if isinstance(v, int)}


def _view(rows: SeatRows, tick: int, fixed: FixedView) -> View:
    """The SDK's View of one row, from its ``view`` columns: (agents, 2, 13, 13) cells, then damage."""
    agents = fixed.agents or []
    if not agents:  # a seat whose agents are all gone is still asked
        return View(tick, [], [])
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


def play(
    bot: ModuleType, policy: Any, opponent: type[Any], seat: int, config: Mapping[str, Any]
) -> int | None:
    """One match in-process: the bot folder's ``bot.py`` (its ``Trained`` class, playing ``policy``) in
    ``seat`` against an instance of ``opponent``; the winner's seat, or None for a draw."""
    mine = bot.Trained(policy)
    bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
    engine = RezzoEngine.new(dict(config))
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game="rezzo")
        b.on_start(b.info)
    while engine.result() is None:
        engine.apply({s: bots[s].on_tick(View.from_message(req)) for s, req in engine.pending().items()})
    result = engine.result()
    assert result is not None
    return result.winner


#: The example bots `train rezzo` plays (the evaluation's, and --opponent's names): stem -> class.
EXAMPLES = {"random_walker": "RandomWalker", "raider": "Raider", "builder": "Builder"}
#: Whom `train rezzo --reinforce` plays without --opponent: DAgger's mix (example_bots/rezzo/trained).
OPPONENTS = ("random_walker", "raider", "random")


def run_reinforce(request: ReinforceRequest) -> dict[str, Any]:
    """`train rezzo --reinforce`: REINFORCE on the bot folder's network (`reinforce`)."""
    # Loaded here: the vector environment needs the [rl] extra, which imitation does not.
    from cellarena.server.training.rezzo.reinforce import REWARDS, ReinforceOptions, opponent, reinforce

    net = policy_module(request.bot_dir, "rezzo")
    if request.from_weights is None:
        policy, start = net.Policy(seed=request.seed), f"a fresh network (seed {request.seed})"
    else:
        try:
            policy, start = net.Policy.load(request.from_weights), str(request.from_weights)
        except ValueError as exc:
            raise ImitationError(f"--from-weights: {exc}") from None
    names = list(request.opponents) or list(OPPONENTS)
    opponents = [opponent(name, request.bots_dir, EXAMPLES) for name in names]
    options = ReinforceOptions(
        map=str(request.config.get("map", "duel")), worlds=request.worlds, steps=request.steps,
        seconds=request.seconds, seed=request.seed, rewards={**REWARDS, **request.rewards},
    )  # fmt: skip
    done = reinforce(net, policy, opponents, request.out, options, request.say)
    return {
        "from": start, "opponents": names, "rewards": dict(options.rewards), "steps": done.steps,
        "agent_steps": done.agent_steps, "updates": done.updates, "seconds": done.seconds,
        "reward_per_agent_step": done.reward, "episodes": done.episodes,
    }  # fmt: skip


#: What `cellarena train rezzo` needs of Rezzo (found by `cellarena.server.cli.imitate`).
IMITATION = GameImitation(
    game="rezzo",
    seat_samples=seat_samples,
    play=play,
    opponents=EXAMPLES,
    move_name=lambda m: Move(m).name.lower(),
    against="random_walker,raider",
    match_options={
        "map": ("duel", "The evaluation's map."),
        "max_ticks": (3000, "The evaluation's tick cap."),
    },
    bot_dir="example_bots/rezzo/trained",
    reinforce=run_reinforce,
)
