"""Reinforcement for `cellarena train rezzo --reinforce`: REINFORCE (Williams, 1992) with the reward
terms of `rewards` (docs/training.md), on a bot folder's own network, in `RezzoVectorEnv`.

The learner plays one seat of each world (seats in turn) against the named opponents (one per world
and episode, `OpponentMix`), each of its agents through one `Tracker` and the folder's
``policy.observe``, exactly as its ``bot.py`` meets a match; but where the bot plays its preferred
legal move, the learner draws one from the network's softmax over the legal moves, so that it tries
others. Every ``horizon`` steps each sample's discounted return (cut where its world's episode
ended) less the batch's mean, over its spread, weighs the log-probability of the move drawn: one
pass of `imitation.fit` (Adam) with those weights, which is the policy gradient. All dice come from
``seed``: the same options and starting weights write the same bytes (a ``seconds`` budget stops
at whatever step the clock says, so only ``steps`` is reproducible).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import Move, Tracker, Viewport
from cellarena.sdk.opponents.rezzo import RandomRezzo
from cellarena.server.training.bot_folder import load_module, policy_module
from cellarena.server.training.imitation import ImitationError, Samples, fit
from cellarena.server.training.rezzo.opponents import BotOpponent, OpponentMix
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv

#: The reward weights unless ``--reward`` says otherwise: the outcome, and the flags' distances to the
#: bases that count against them (steer the enemy's flags into a base, keep one's own away).
REWARDS: Mapping[str, float] = {"outcome": 1.0, "enemy_flag_distance": 0.05, "own_flag_distance": 0.05}


@dataclass(frozen=True)
class ReinforceOptions:
    """``steps`` steps of ``worlds`` duels on ``map`` (each capped at ``max_ticks``, from starts moved
    up to ``start_radius`` cells), an update every ``horizon`` steps; ``seconds`` (None: no limit)
    stops it sooner."""

    map: str = "duel"
    worlds: int = 16
    steps: int = 2000
    seconds: float | None = None
    horizon: int = 50
    max_ticks: int = 400
    start_radius: int = 2
    gamma: float = 0.98
    lr: float = 5e-4
    seed: int = 0
    rewards: Mapping[str, float] = field(default_factory=lambda: dict(REWARDS))


@dataclass
class ReinforceResult:
    steps: int
    agent_steps: int
    updates: int
    seconds: float
    reward: float  # per agent-step, over the whole run
    episodes: dict[str, int]


def opponent(name: str, bots_dir: Path, examples: Mapping[str, str]) -> BotOpponent:
    """``--opponent NAME``: ``random`` (the SDK's random bot), an example bot of ``bots_dir`` by its
    file stem, or a trained bot folder (its ``bot.py``'s ``Trained`` playing its ``policy.npz``)."""
    if name == "random":
        return BotOpponent(RandomRezzo, "random")
    if name in examples:
        if not (bots_dir / f"{name}.py").is_file():
            raise ImitationError(
                f"--opponent {name}: no {name}.py in --bots-dir {bots_dir}; give the folder of "
                "cellarena's example rezzo bots (a checkout's example_bots/rezzo)"
            )
        cls: type[Any] = getattr(load_module(bots_dir / f"{name}.py"), examples[name])
        return BotOpponent(cls, name)
    folder = Path(name)
    if not folder.is_dir():
        raise ImitationError(
            f"--opponent {name}: neither random, an example bot ({', '.join(examples)}) nor a folder; "
            "give one of those, or a bot folder `cellarena new-bot rezzo NAME --template trained` wrote"
        )
    weights = folder / "policy.npz"
    if not weights.is_file():
        raise ImitationError(f"--opponent {name}: no policy.npz in it; train that folder first")
    net = policy_module(folder, "rezzo")
    bot = load_module(folder / "bot.py", {"policy": net})
    try:
        policy = net.Policy.load(weights)
    except ValueError as exc:
        raise ImitationError(f"--opponent {name}: {exc}") from None
    return BotOpponent(lambda: bot.Trained(policy), folder.name)


def _sample(
    policy: Any,
    net: ModuleType,
    cells: np.ndarray,
    extras: np.ndarray,
    masks: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """One move per row, drawn from the network's softmax over the legal moves."""
    z, _ = policy.logits(net.one_hot(cells, extras))
    z = np.where(masks, z, -np.inf)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random((len(p), 1))
    drawn: np.ndarray = np.minimum((p.cumsum(axis=1) < u).sum(axis=1), net.MOVES - 1)
    return drawn


def _returns(rewards: np.ndarray, ends: np.ndarray, gamma: float) -> np.ndarray:
    """(T, envs) discounted returns, each cut where its episode ended."""
    out = np.zeros_like(rewards)
    g = np.zeros(rewards.shape[1], rewards.dtype)
    for t in range(len(rewards) - 1, -1, -1):
        g = rewards[t] + gamma * g * ~ends[t]
        out[t] = g
    return out


class _Run:
    """One reinforcement run's state: the environment, each agent's Tracker, the samples of the
    current horizon."""

    def __init__(self, net: ModuleType, policy: Any, opponents: Sequence[BotOpponent], o: ReinforceOptions):
        self.net, self.policy, self.o = net, policy, o
        self.rng = np.random.default_rng(o.seed)
        try:
            self.env = RezzoVectorEnv(
                o.worlds,
                {"map": o.map, "max_ticks": o.max_ticks},
                opponent=OpponentMix(list(opponents), seed=o.seed),
                random_start=o.start_radius,
                reward_weights=dict(o.rewards),
                threads=1,
            )
        except ValueError as exc:
            raise ImitationError(f"--reward: {exc}") from None
        self.obs, _ = self.env.reset(seed=int(self.rng.integers(1 << 30)))
        self.trackers: list[dict[int, Tracker]] = [{} for _ in range(o.worlds)]
        self.last: list[dict[int, int]] = [{} for _ in range(o.worlds)]
        self.episodes = {"won": 0, "lost": 0, "drawn": 0}
        self.total = 0.0
        self._clear()

    def _clear(self) -> None:
        self.cells: list[np.ndarray] = []
        self.extras: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.moves: list[int] = []
        self.at: list[tuple[int, int]] = []  # (step in the horizon, sub-environment)
        self.rewards: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []

    def step(self) -> int:
        """One step of every world; the learner agents that moved."""
        env, net, k = self.env, self.net, self.env.agents_per_player
        t, rows, first = len(self.rewards), [], len(self.moves)
        for b in range(env.batch):
            seat = int(env.learner_seats[b])
            tick = int(env.worlds.tick[b])
            for i in range(k):
                if not env.worlds.alive[b, seat * k + i]:
                    continue
                o = self.obs[b * k + i]
                port = Viewport(o[0].tobytes(), o[1].tobytes())
                tracker = self.trackers[b].setdefault(i, Tracker())
                tracker.observe(port)
                c, e = net.observe(tracker, port, self.last[b].get(i, Move.NOOP), tick)
                self.cells.append(c)
                self.extras.append(e)
                self.masks.append(net.legal(port))
                self.at.append((t, b * k + i))
                rows.append((b, i))
        actions = np.zeros(env.num_envs, np.int64)
        if rows:
            drawn = _sample(
                self.policy,
                net,
                np.array(self.cells[first:]),
                np.array(self.extras[first:]),
                np.array(self.masks[first:]),
                self.rng,
            )
            for (b, i), move in zip(rows, drawn.tolist(), strict=True):
                self.trackers[b][i].commit(move)
                self.last[b][i] = move
                actions[b * k + i] = move
                self.moves.append(move)
        self.obs, rewards, terminated, truncated, _ = env.step(actions)
        ended = terminated | truncated
        self.rewards.append(rewards.astype(np.float64))
        self.ends.append(ended)
        self.total += float(rewards.sum())
        for b in np.flatnonzero(ended.reshape(env.batch, k).any(axis=1)).tolist():
            r = float(rewards[b * k])
            self.episodes["drawn" if truncated[b * k] or r == 0 else "won" if r > 0 else "lost"] += 1
            self.trackers[b], self.last[b] = {}, {}
        return len(rows)

    def update(self) -> bool:
        """The policy-gradient step over the horizon's samples; False where there was nothing to learn
        (no sample, or every return the same)."""
        if not self.moves:
            self._clear()
            return False
        returns = _returns(np.array(self.rewards), np.array(self.ends), self.o.gamma)
        steps, envs = (np.array(v) for v in zip(*self.at, strict=True))
        g = returns[steps, envs]
        spread = float(g.std())
        data = Samples(
            np.array(self.cells, np.uint8),
            np.array(self.extras, np.float32),
            np.array(self.masks, bool),
            np.array(self.moves, np.int64),
        )
        self._clear()
        if spread < 1e-9:
            return False
        weights = ((g - g.mean()) / spread).astype(np.float32)
        fit(self.policy, self.net.one_hot, data, 1, self.rng, lr=self.o.lr, weights=weights)
        return True


def reinforce(
    net: ModuleType,
    policy: Any,
    opponents: Sequence[BotOpponent],
    out: Path,
    options: ReinforceOptions,
    say: Callable[[str], None] = print,
) -> ReinforceResult:
    """Fine-tune ``policy`` (a ``net.Policy``) by REINFORCE against ``opponents``; the weights are
    saved to ``out`` after every update and at the end."""
    began = time.monotonic()
    o = options
    run = _Run(net, policy, opponents, o)
    steps = agent_steps = updates = 0
    while steps < o.steps and (o.seconds is None or time.monotonic() - began < o.seconds):
        agent_steps += run.step()
        steps += 1
        if len(run.rewards) == o.horizon or steps == o.steps:
            updates += run.update()
            policy.save(out)
            e = run.episodes
            say(
                f"step {steps:6d}  reward per agent-step {run.total / max(agent_steps, 1):+.4f}  "
                f"episodes won/lost/drawn {e['won']}/{e['lost']}/{e['drawn']}  "
                f"{time.monotonic() - began:6.1f} s"
            )
    if run.rewards:  # stopped by the clock within a horizon
        updates += run.update()
    policy.save(out)
    return ReinforceResult(
        steps,
        agent_steps,
        updates,
        time.monotonic() - began,
        run.total / max(agent_steps, 1),
        dict(run.episodes),
    )
