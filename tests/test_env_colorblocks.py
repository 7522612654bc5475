"""Colorblocks's PettingZoo AEC environment: PettingZoo's API test, and a whole match against the engine."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import api_test

from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.colorblocks.env import ColorblocksAECEnv

SMALL = {"max_turns": 12}


def test_api() -> None:
    api_test(ColorblocksAECEnv(SMALL), num_cycles=60)


def test_a_match_plays_as_the_engine_and_rewards_the_winner() -> None:
    env = ColorblocksAECEnv(SMALL)
    env.reset(seed=2)
    twin = ColorblocksEngine.new(SMALL, 2)
    rng = np.random.default_rng(0)
    totals = dict.fromkeys(env.possible_agents, 0.0)
    turn: list = []
    for agent in env.agent_iter():
        _, reward, term, trunc, info = env.last()
        totals[agent] += reward
        if term or trunc:
            env.step(None)
            continue
        assert list(twin.pending()) == [int(agent.split("_")[1])]
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal))
        if action == env.end_turn:
            twin.apply({int(agent.split("_")[1]): turn})
            turn = []
        else:
            turn.append(env._codes[agent][action])
        env.step(action)
    result = twin.result()
    assert result is not None and twin.state_hash() == env.engine.state_hash()
    if result.winner is None:
        assert set(totals.values()) == {0.0}
    else:
        assert totals[f"player_{result.winner}"] == 1.0 and totals[f"player_{1 - result.winner}"] == -1.0
