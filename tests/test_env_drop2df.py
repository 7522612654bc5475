"""Drop2df's PettingZoo AEC environment: PettingZoo's API test, and episodes against the engine."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import api_test

from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.games.drop2df.env import Drop2dfAECEnv


def test_api() -> None:
    api_test(Drop2dfAECEnv({"turns": 12}), num_cycles=100)


def test_rewards_add_up_to_the_engines_scores() -> None:
    env = Drop2dfAECEnv({"turns": 30})
    env.reset(seed=4)
    twin = Drop2dfEngine.new({"turns": 30}, 4)
    rng = np.random.default_rng(1)
    totals = dict.fromkeys(env.possible_agents, 0.0)
    chosen: dict[int, list[int]] = {}
    for agent in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        totals[agent] += reward
        seat = int(agent.split("_")[1])
        if term or trunc:
            env.step(None)
            continue
        assert obs.tobytes() == twin.pending()[seat]["row"]
        action = int(rng.integers(0, len(obs)))
        chosen[seat] = [action] if action else []
        if len(chosen) == 2:
            twin.apply(chosen)
            chosen = {}
        env.step(action)
    assert twin.result() is not None
    assert [totals[f"player_{s}"] for s in (0, 1)] == [float(s) for s in twin.frame()["scores"]]
