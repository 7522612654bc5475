"""C.A.T.A.'s PettingZoo AEC environment: PettingZoo's API test, and a whole match against the engine."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import api_test

from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.games.cata.env import RULE, CataAECEnv

SMALL = {"size": 16, "max_turns": 6}


def test_api() -> None:
    api_test(CataAECEnv(SMALL), num_cycles=60)


def test_a_match_plays_as_the_engine_and_rewards_the_winner() -> None:
    env = CataAECEnv(SMALL)
    env.reset(seed=2)
    twin = CataEngine.new(SMALL, 2)
    rng = np.random.default_rng(0)
    totals = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        _, reward, term, trunc, info = env.last()
        totals[agent] += reward
        if term or trunc:
            env.step(None)
            continue
        assert list(twin.pending()) == [int(agent.split("_")[1])]
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal))
        twin.apply({int(agent.split("_")[1]): [action // RULE, action % RULE]})
        env.step(action)
    result = twin.result()
    assert result is not None and twin.state_hash() == env.engine.state_hash()
    if result.winner is None:
        assert set(totals.values()) == {0.0}
    else:
        assert totals[f"player_{result.winner}"] == 1.0 and totals[f"player_{1 - result.winner}"] == -1.0
