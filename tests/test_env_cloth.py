"""Cloth of Gold's PettingZoo AEC environment: PettingZoo's API and render tests, and whole matches of
multi-unit batches against the engine."""

from __future__ import annotations

from typing import Any

import numpy as np
from env_checks import assert_render_is_the_watch_picture, assert_rewards_follow_the_result
from pettingzoo.test import api_test

from cellarena.server.env.games.cloth import ClothAECEnv
from cellarena.server.games.cloth.engine import ClothEngine
from cellarena.server.games.cloth.render import render

SMALL = {"width": 16, "height": 16, "max_rounds": 3, "generations": 20}


def test_api() -> None:
    api_test(ClothAECEnv(SMALL), num_cycles=60)


def test_render_shows_the_watch_picture() -> None:
    assert_render_is_the_watch_picture(
        lambda render_mode=None: ClothAECEnv(SMALL, render_mode=render_mode), render
    )


def test_a_match_plays_as_the_engine_and_rewards_the_winner() -> None:
    """Batches of up to max_units units, built a unit per step, are what the engine gets."""
    for seed in (2, 5):
        env = ClothAECEnv(SMALL)
        env.reset(seed=seed)
        twin = ClothEngine.new(SMALL, seed)
        rng = np.random.default_rng(seed)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        batch: list[Any] = []
        sizes = []
        for agent in env.agent_iter():
            _, reward, term, trunc, info = env.last()
            totals[agent] += reward
            if term or trunc:
                env.step(None)
                continue
            seat = int(agent.split("_")[1])
            assert list(twin.pending()) == [seat]
            legal = np.flatnonzero(info["action_mask"])
            assert (env.end in legal) == bool(batch)  # an empty batch is not offered
            action = int(rng.choice(legal))
            if action == env.end:
                twin.apply({seat: batch})
                sizes.append(len(batch))
                batch = []
            else:
                batch.append(env.actions(agent)[action])
            env.step(action)
        result = twin.result()
        assert result is not None and twin.state_hash() == env.engine.state_hash()
        assert 1 < max(sizes) <= 10  # max_units
        assert_rewards_follow_the_result(result, totals)


def test_a_batch_the_mask_allows_is_placed_whole() -> None:
    """Four units, each legal on the board as the ones before it left it, all land."""
    env = ClothAECEnv(SMALL)
    env.reset(seed=3)
    agent = env.agent_selection
    chosen = []
    for _ in range(4):
        legal = np.flatnonzero(env.infos[agent]["action_mask"][: env.end])
        action = int(legal[len(legal) // 2])
        chosen.append(env.actions(agent)[action])
        env.step(action)
        assert env.agent_selection == agent  # the same seat goes on building its batch
    env.step(env.end)
    seat = int(agent.split("_")[1])
    assert all(env.engine.board[y, x] == seat + 1 for x, y in chosen)  # A is 1, B is 2
    assert env.agent_selection != agent
