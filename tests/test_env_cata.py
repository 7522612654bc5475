"""C.A.T.A.'s PettingZoo AEC environment: PettingZoo's API and render tests, and a whole match against the
engine in which every observation is the SDK's decoding of the request a bot gets."""

from __future__ import annotations

import numpy as np
from env_checks import assert_render_is_the_watch_picture, assert_rewards_follow_the_result
from pettingzoo.test import api_test

from cellarena.sdk.games.cata import View, action_mask, observation
from cellarena.sdk.protocol.messages import tick
from cellarena.server.env.games.cata import RULE, CataAECEnv
from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.games.cata.render import render

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
        # What a bot's on_tick gets, through the SDK's functions: the same arrays.
        view = View.from_message(dict(tick(twin.tick, 0, twin.pending()[int(agent[-1])])))
        assert np.array_equal(observation(view), env.observe(agent))
        assert np.array_equal(action_mask(view), info["action_mask"])
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal))
        twin.apply({int(agent.split("_")[1]): [action // RULE, action % RULE]})
        env.step(action)
    result = twin.result()
    assert result is not None and twin.state_hash() == env.engine.state_hash()
    assert_rewards_follow_the_result(result, totals)


def test_render_shows_the_watch_picture() -> None:
    assert_render_is_the_watch_picture(
        lambda render_mode=None: CataAECEnv(SMALL, render_mode=render_mode), render
    )
