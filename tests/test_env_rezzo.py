"""Rezzo's PettingZoo environment and vector environment: PettingZoo's API test, the wire observation,
and the vector environment's episodes against separate engines, auto-reset included."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cellarena_cli import here
from pettingzoo.test import parallel_api_test
from rich.text import Text

from cellarena.sdk.games.rezzo import VIEW_SIZE
from cellarena.server.env.games.rezzo import RezzoParallelEnv, agent_name
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.render import render_engine
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv

VIEW_CELLS = VIEW_SIZE * VIEW_SIZE


def test_parallel_api() -> None:
    parallel_api_test(RezzoParallelEnv({"map": "duel", "max_ticks": 60}), num_cycles=100)
    parallel_api_test(RezzoParallelEnv({"map": "duel2", "max_ticks": 30}), num_cycles=40)


def test_observation_is_the_wire_request() -> None:
    env = RezzoParallelEnv({"map": "duel2", "max_ticks": 50})
    obs, _ = env.reset()
    twin = RezzoEngine.new({"map": "duel2", "max_ticks": 50})
    rng = np.random.default_rng(3)
    for _ in range(50):
        for seat, request in twin.pending().items():
            for j, index in enumerate(request["agents"]):
                got = obs[agent_name(seat, index)]
                assert got[0].tobytes() == request["cells"][j * VIEW_CELLS : (j + 1) * VIEW_CELLS]
                assert got[1].tobytes() == request["damage"][j * VIEW_CELLS : (j + 1) * VIEW_CELLS]
        actions = {a: int(rng.integers(0, 6)) for a in env.agents}
        twin.apply({p: [actions[agent_name(p, k)] for k in range(2)] for p in range(2)})
        obs, *_ = env.step(actions)
        if not env.agents:
            break
    assert twin.state_hash() == env.engine.state_hash()


def test_a_lost_match_rewards_the_winner() -> None:
    """Player 1 walks its agent off into a corner while player 0 hits; whoever loses gets -1."""
    env = RezzoParallelEnv({"map": "duel", "max_ticks": 3000})
    env.reset()
    rng = np.random.default_rng(0)
    total = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        _, rewards, _, _, _ = env.step({a: int(rng.choice([1, 2, 4, 5, 5])) for a in env.agents})
        for a, r in rewards.items():
            total[a] += r
    result = env.engine.result()
    assert result is not None
    if result.winner is None:
        assert set(total.values()) == {0.0}
    else:
        assert total[agent_name(result.winner, 0)] == 1.0
        assert total[agent_name(1 - result.winner, 0)] == -1.0


def test_vector_env_matches_engines_and_resets() -> None:
    batch, cap = 6, 40
    env = RezzoVectorEnv(batch, {"map": "duel", "max_ticks": cap})
    obs, _ = env.reset()
    engines = [RezzoEngine.new({"map": "duel", "max_ticks": cap}) for _ in range(batch)]
    rng = np.random.default_rng(5)
    resets = 0
    for _ in range(3 * cap):
        for b, engine in enumerate(engines):
            for seat, request in engine.pending().items():
                assert obs[2 * b + seat, 0].tobytes() == request["cells"]
                assert obs[2 * b + seat, 1].tobytes() == request["damage"]
        moves = rng.choice([0, 1, 2, 3, 4, 5, 5], size=(batch, 2))
        for b, engine in enumerate(engines):
            engine.apply({p: [int(moves[b, p])] for p in engine.frame()["alive"]})
        obs, rewards, terminations, truncations, _ = env.step(moves.reshape(-1))
        dones = (terminations | truncations).reshape(batch, 2)
        for b in range(batch):
            result = engines[b].result()
            assert dones[b].all() == (result is not None)
            if result is not None:
                want = (
                    [0.0, 0.0]
                    if result.winner is None
                    else [1.0 if p == result.winner else -1.0 for p in (0, 1)]
                )
                assert list(rewards[2 * b : 2 * b + 2]) == want
                engines[b] = RezzoEngine.new({"map": "duel", "max_ticks": cap})
                resets += 1
            else:
                assert not rewards[2 * b : 2 * b + 2].any()
    assert resets >= batch * 2


def test_bench_env_command_reports_both_contenders() -> None:
    out = here("bench", "env", "--batches", "1,3", "--seconds", "0.05", "--json")
    assert out.exit_code == 0, out.output
    figures = json.loads(out.output)["batches"]
    assert set(figures) == {"1", "3"}
    assert figures["3"]["agents"] == 6
    for row in figures.values():
        assert row["vector_agent_steps_per_s"] > 0 and row["engines_agent_steps_per_s"] > 0
    bad = here("bench", "env", "--batches", "0")
    assert bad.exit_code != 0 and "batch sizes must be 1..65536" in bad.output


def test_render_shows_the_watch_picture() -> None:
    env = RezzoParallelEnv({"map": "duel2", "max_ticks": 20}, render_mode="ansi")
    env.reset()
    env.step(dict.fromkeys(env.agents, 1))
    picture = env.render()
    assert isinstance(picture, str) and Text.from_ansi(picture).plain == render_engine(env.engine).plain
    with pytest.warns(UserWarning, match="render_mode"):  # no mode: a warning, and nothing drawn
        assert RezzoParallelEnv({"map": "duel2"}).render() is None
    with pytest.raises(ValueError, match="render_mode 'rgb_array' is not offered"):
        RezzoParallelEnv({"map": "duel2"}, render_mode="rgb_array")
