"""DAgger (Ross, Gordon and Bagnell, 2011) with a teacher bot, in `RezzoVectorEnv`: how the example
Rezzo policy (`example_bots/rezzo/trained/train.py`, `cellarena bench train`) is trained.

In each round the learner plays (in the first round the teacher plays), the teacher says what it
would do in every state the learner met, and the network is fitted to everything gathered so far.
The network and its inputs are a bot folder's ``policy.py`` (``net``), so the weights are the ones
its ``bot.py`` loads. The teacher is a bot class run in-process beside each world; a teacher that
keeps a `Tracker` per agent in ``agents[i].tracker`` (builder does) is told the move played, so
that it remembers where the learner went rather than where it would have gone.

All dice are seeded: the same options give the same weights, byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo, Move, Tracker, View, Viewport
from cellarena.server.training.imitation import Samples, fit
from cellarena.server.training.rezzo.opponents import BotOpponent, OpponentMix
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv


@dataclass(frozen=True)
class DaggerOptions:
    """The recipe: duels on ``map`` in ``worlds`` worlds from randomised starts (up to
    ``start_radius`` cells) and ``exact_worlds`` from the map's own start, ``rounds`` rounds of
    ``steps`` steps, ``epochs`` passes over all data after each round."""

    map: str = "duel"
    worlds: int = 16
    exact_worlds: int = 8
    rounds: int = 8
    steps: int = 300
    epochs: int = 4
    start_radius: int = 2
    max_ticks: int = 400
    seed: int = 0


@dataclass
class DaggerResult:
    seconds: float
    agent_steps: int
    samples: int
    accuracy: float


class _Learner:
    """Per world: each learner agent's Tracker and last move, and the teacher beside it."""

    def __init__(self, teacher: Callable[[], Any], seat: int, config: dict[str, Any]) -> None:
        self.trackers: dict[int, Tracker] = {}
        self.last: dict[int, int] = {}
        self.teacher = teacher()
        self.teacher.info = MatchInfo(
            seat=seat, players=2, names=("learner", "opponent"), game="rezzo", config=config
        )
        self.teacher.on_start(self.teacher.info)

    def follow(self, index: int, move: int) -> None:
        agents = getattr(self.teacher, "agents", None)
        tracker = getattr(agents.get(index), "tracker", None) if isinstance(agents, dict) else None
        if isinstance(tracker, Tracker):
            tracker.commit(move)


Rollout = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[int], dict[str, int]]


def _rollout(
    env: RezzoVectorEnv,
    net: ModuleType,
    teacher: Callable[[], Any],
    policy: Any,
    beta: float,
    steps: int,
    rng: np.random.Generator,
) -> Rollout:
    """Play ``steps`` steps: the teacher's move with probability ``beta``, else the policy's; record
    the inputs, legal moves and the teacher's move of every live learner agent."""
    cells: list[np.ndarray] = []
    extras: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    labels: list[int] = []
    k = env.agents_per_player
    obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    learners = [
        _Learner(teacher, int(env.learner_seats[b]), env._episode_config(b)) for b in range(env.batch)
    ]
    outcome = {"won": 0, "lost": 0, "drawn": 0}
    for _ in range(steps):
        actions = np.zeros(env.num_envs, np.int64)
        rows: list[tuple[int, int, int]] = []  # (world, agent, sample index) of this step's samples
        for b, learner in enumerate(learners):
            seat = int(env.learner_seats[b])
            live = [i for i in range(k) if env.worlds.alive[b, seat * k + i]]
            if not live:
                continue
            ports = [Viewport(obs[b * k + i, 0].tobytes(), obs[b * k + i, 1].tobytes()) for i in live]
            tick = int(env.worlds.tick[b])
            taught = learner.teacher.on_tick(View(tick, live, ports))
            for i, port, label in zip(live, ports, taught, strict=True):
                tracker = learner.trackers.setdefault(i, Tracker())
                tracker.observe(port)
                c, e = net.observe(tracker, port, learner.last.get(i, Move.NOOP), tick)
                m = net.legal(port)
                m[int(label)] = True
                rows.append((b, i, len(labels)))
                cells.append(c)
                extras.append(e)
                masks.append(m)
                labels.append(int(label))
        if not rows:
            obs, *_ = env.step(actions)
            continue
        at = [j for _, _, j in rows]
        chosen = np.array([labels[j] for j in at])
        if policy is not None:
            mine = policy.act(
                np.array([cells[j] for j in at]),
                np.array([extras[j] for j in at]),
                np.array([masks[j] for j in at]),
            )
            teach = rng.random(len(at)) < beta
            chosen = np.where(teach, chosen, mine)
        for (b, i, _), move in zip(rows, chosen.tolist(), strict=True):
            learner = learners[b]
            learner.trackers[i].commit(move)
            learner.follow(i, move)  # the teacher follows what was played
            learner.last[i] = move
            actions[b * k + i] = move
        obs, rewards, terminated, truncated, _ = env.step(actions)
        for b in np.flatnonzero((terminated | truncated).reshape(env.batch, k).any(axis=1)).tolist():
            r = float(rewards[b * k])
            outcome["won" if r > 0 else "lost" if r < 0 else "drawn"] += 1
            learners[b] = _Learner(teacher, int(env.learner_seats[b]), env._episode_config(b))
    return cells, extras, masks, labels, outcome


def dagger(
    net: ModuleType,
    teacher: Callable[[], Any],
    opponents: Sequence[BotOpponent],
    out: Path,
    options: DaggerOptions,
    say: Callable[[str], None] = print,
) -> DaggerResult:
    """Train ``net.Policy`` by DAgger with ``teacher`` (a bot class) against ``opponents`` (one per
    world and episode, an `OpponentMix`), saving the weights to ``out`` after every round."""
    began = time.monotonic()
    o = options
    rng = np.random.default_rng(o.seed)
    mix = OpponentMix(list(opponents), seed=o.seed)
    config = {"map": o.map, "max_ticks": o.max_ticks}
    # Worlds from randomised starts teach it to find its way; worlds from the map's own start teach the
    # openings a tournament plays.
    envs = [
        RezzoVectorEnv(o.worlds, config, opponent=mix, random_start=o.start_radius),
        RezzoVectorEnv(o.exact_worlds, config, opponent=mix),
    ]
    policy = net.Policy(seed=o.seed)
    data: list[list[Any]] = [[], [], [], []]
    steps, acc = 0, 0.0
    for r in range(o.rounds):
        beta = 1.0 if r == 0 else 0.5**r
        won = {"won": 0, "lost": 0, "drawn": 0}
        for env in envs:
            got = _rollout(env, net, teacher, None if r == 0 else policy, beta, o.steps, rng)
            parts: tuple[list[Any], ...] = got[:4]
            for store, part in zip(data, parts, strict=True):
                store.extend(part)
            steps += o.steps * env.num_envs
            won = {key: won[key] + got[4][key] for key in won}
        arrays = Samples(
            np.array(data[0], np.uint8).reshape(-1, net.CROP),
            np.array(data[1], np.float32).reshape(-1, net.EXTRA),
            np.array(data[2], bool).reshape(-1, net.MOVES),
            np.array(data[3], np.int64),
        )
        acc = fit(policy, net.one_hot, arrays, o.epochs, rng)
        policy.save(out)  # after every round: a run cut short leaves its latest weights
        say(
            f"round {r + 1}/{o.rounds}  teacher share {beta:.2f}  samples {len(arrays.labels):6d}  "
            f"fit {acc:.1%}  episodes won/lost/drawn {won['won']}/{won['lost']}/{won['drawn']}  "
            f"{time.monotonic() - began:6.1f} s"
        )
    policy.save(out)
    return DaggerResult(time.monotonic() - began, steps, len(data[3]), acc)
