"""Short matches of every game played in-process through its environment, recorded as replays, with
the observation each seat was given at each tick: what `replay fork` and the environments' reset
from a replay are checked against (tests/test_replay_fork.py, tests/test_env_reset_replay.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cellarena.server.env.games.cata import CataAECEnv
from cellarena.server.env.games.cloth import ClothAECEnv
from cellarena.server.env.games.colorblocks import ColorblocksAECEnv
from cellarena.server.env.games.drop2df import Drop2dfAECEnv
from cellarena.server.env.games.rezzo import RezzoParallelEnv
from cellarena.server.replay import ReplayWriter

#: Each game's environment and a small config (one match well under a second).
ENVS: dict[str, tuple[Any, dict[str, Any]]] = {
    "cata": (CataAECEnv, {"size": 16, "max_turns": 6}),
    "cloth": (ClothAECEnv, {"width": 16, "height": 16, "max_rounds": 3, "generations": 20}),
    "colorblocks": (ColorblocksAECEnv, {"max_turns": 12}),
    "drop2df": (Drop2dfAECEnv, {"turns": 12}),
    "rezzo": (RezzoParallelEnv, {"map": "duel", "max_ticks": 40}),
}

#: tick -> agent -> (observation, action mask or None), as the environment gave them at that tick.
Seen = dict[int, dict[str, tuple[np.ndarray, np.ndarray | None]]]


def _recording(env: Any, path: Path, seed: int) -> ReplayWriter:
    """A replay writer of ``env``'s match, fed by the engine's own `apply` as the env calls it."""
    engine = env.engine
    names = [f"p{i}" for i in range(engine.players)]
    writer = ReplayWriter(path, engine, seed=seed, names=names, events=True)
    real = engine.apply

    def apply(moves: dict[int, Any]) -> Any:
        tick = engine.tick
        events = real(moves)
        writer.record(tick, moves, engine, events=events.log)
        return events

    engine.apply = apply
    return writer


def play_aec(env: Any, path: Path, seed: int) -> Seen:
    """Random legal moves to the end; each agent's first observation and mask at each tick."""
    env.reset(seed=seed)
    writer = _recording(env, path, seed)
    rng = np.random.default_rng(seed)
    seen: Seen = {}
    while env.agents:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        mask = env.infos[agent]["action_mask"]
        seen.setdefault(env.engine.tick, {}).setdefault(agent, (env.observe(agent).copy(), mask.copy()))
        env.step(int(rng.choice(np.flatnonzero(mask))))
    writer.finish(env.engine.result())
    return seen


def play_parallel(env: Any, path: Path, seed: int) -> Seen:
    """Random moves to the end; every agent's observation at each tick."""
    obs, _ = env.reset(seed=seed)
    writer = _recording(env, path, seed)
    rng = np.random.default_rng(seed)
    seen: Seen = {}
    while env.agents:
        seen[env.engine.tick] = {a: (obs[a].copy(), None) for a in env.agents}
        obs, *_ = env.step({a: int(rng.integers(6)) for a in env.agents})
    writer.finish(env.engine.result())
    return seen


def play(game: str, path: Path, seed: int = 5) -> Seen:
    """One recorded match of ``game`` at ``path``."""
    cls, config = ENVS[game]
    env = cls(config)
    return play_parallel(env, path, seed) if game == "rezzo" else play_aec(env, path, seed)
