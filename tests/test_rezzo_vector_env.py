"""The Rezzo vector environment is a Gymnasium `VectorEnv` whose sub-environments are the agents.

Gymnasium's `env_checker` checks single environments only, so this checks what its vector API
promises: the spaces hold every observation and action, and autoreset happens as
``metadata["autoreset_mode"]`` (SAME_STEP) says, side by side with separate `RezzoEngine`s and the
slow reference's viewports, on both of `BatchedRezzo`'s backends (numpy and numba).
"""

from __future__ import annotations

import numpy as np
import pytest
from cellarena_cli import here
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from rezzo_reference import reference_viewport
from test_rezzo_batched import both_backends, use

from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell, Move
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.training.rezzo.vector_env import THREADS_FROM, RezzoVectorEnv, thread_count

CELLS = VIEW_SIZE * VIEW_SIZE


def engine_obs(engine: RezzoEngine, agents: int, k: int) -> np.ndarray:
    """Every agent's observation as its bot receives it (rows of agents asked nothing stay zero)."""
    out = np.zeros((agents, 2, CELLS), np.uint8)
    for seat, request in engine.pending().items():
        for j, index in enumerate(request["agents"]):
            span = slice(j * CELLS, (j + 1) * CELLS)
            out[seat * k + index, 0] = np.frombuffer(request["cells"][span], np.uint8)
            out[seat * k + index, 1] = np.frombuffer(request["damage"][span], np.uint8)
    return out.reshape(agents, 2, VIEW_SIZE, VIEW_SIZE)


def final_view(engine: RezzoEngine, player: int, index: int) -> np.ndarray:
    """An agent's viewport of its ended world, from the slow reference."""
    agent = next(a for a in engine.agents() if (a.player, a.index) == (player, index))
    codes, damage = reference_viewport(
        engine.cells(), engine.damage(), agent.x, agent.y, int(agent.facing), player, engine.players
    )
    return np.stack([np.asarray(codes, np.uint8), np.asarray(damage, np.uint8)]).reshape(2, VIEW_SIZE, -1)


def test_spaces_follow_the_vector_api() -> None:
    env = RezzoVectorEnv(3, {"map": "duel2"})
    assert isinstance(env, VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.num_envs == 3 * 4  # duel2: two players with two agents each
    assert env.single_observation_space == spaces.Box(0, 255, (2, VIEW_SIZE, VIEW_SIZE), np.uint8)
    assert env.single_action_space == spaces.Discrete(len(Move))
    assert env.observation_space == spaces.Box(0, 255, (12, 2, VIEW_SIZE, VIEW_SIZE), np.uint8)
    assert env.action_space == spaces.MultiDiscrete([len(Move)] * 12)
    obs, infos = env.reset(seed=1)
    assert obs in env.observation_space
    assert list(infos["map"]) == ["duel2"] * 12 and infos["_map"].all()
    env.action_space.seed(2)
    for _ in range(5):
        obs, rewards, terminations, truncations, infos = env.step(env.action_space.sample())
        assert obs in env.observation_space
        assert rewards.shape == terminations.shape == truncations.shape == (12,)
        assert rewards.dtype == np.float32 and terminations.dtype == truncations.dtype == np.bool_
    env.close()
    assert env.closed


@both_backends
@pytest.mark.parametrize("copy", [True, False])
def test_autoreset_same_step_against_engines(copy: bool, backend: str) -> None:
    """Duels capped at 12 ticks: truncation, final_obs and the reset world's first observation."""
    worlds, cap = 3, 12
    config = {"map": "duel", "max_ticks": cap}
    env = RezzoVectorEnv(worlds, config, copy=copy, backend=use(backend))
    assert env.worlds.backend == env.template.backend == backend
    obs, _ = env.reset(seed=0)
    own = obs
    engines = [RezzoEngine.new(config) for _ in range(worlds)]
    env.action_space.seed(0)
    endings = 0
    for step in range(3 * cap + 2):
        for b, engine in enumerate(engines):
            assert np.array_equal(obs[2 * b : 2 * b + 2], engine_obs(engine, 2, 1)), f"step {step} world {b}"
        actions = env.action_space.sample()
        kept = obs.copy()
        for b, engine in enumerate(engines):
            engine.apply({p: [int(actions[2 * b + p])] for p in engine.frame()["alive"]})
        obs, rewards, terminations, truncations, infos = env.step(actions)
        if not copy:
            assert obs is own and np.shares_memory(obs, env.worlds.observations)  # refilled in place
        else:
            assert not np.shares_memory(kept, obs)
        for b, engine in enumerate(engines):
            agents = slice(2 * b, 2 * b + 2)
            result = engine.result()
            if result is None:
                assert not terminations[agents].any() and not truncations[agents].any()
                assert not rewards[agents].any()
                assert "_final_obs" not in infos or not infos["_final_obs"][agents].any()
                continue
            endings += 1
            assert result.reason.startswith("tick cap")
            assert truncations[agents].all() and not terminations[agents].any()
            want = (
                [0.0, 0.0] if result.winner is None else [1.0 if p == result.winner else -1.0 for p in (0, 1)]
            )
            assert list(rewards[agents]) == want
            assert infos["_final_obs"][agents].all()
            for p in (0, 1):
                assert np.array_equal(infos["final_obs"][2 * b + p], final_view(engine, p, 0))
            engines[b] = RezzoEngine.new(config)  # the same step's observation is the new episode's first
    assert endings == 3 * worlds


@both_backends
def test_a_loss_terminates_and_rewards_the_winner(backend: str) -> None:
    """A world whose player 0 has a flag beside its own base: player 0 loses in the first step."""
    cells = np.zeros((5, 6), np.uint8)
    cells[0, 0], cells[0, 1] = Cell.BASE + 0, Cell.FLAG + 0
    cells[4, 1], cells[4, 4] = Cell.AGENT + 0, Cell.AGENT + 1
    start = RezzoEngine.from_board(cells, players=2, max_ticks=50)
    env = RezzoVectorEnv(2, start=start, backend=use(backend))
    first, _ = env.reset()
    obs, rewards, terminations, truncations, infos = env.step(np.array([Move.LEFT, 0, 0, Move.HIT]))
    assert terminations.all() and not truncations.any()
    assert list(rewards) == [-1.0, 1.0, -1.0, 1.0]
    assert infos["_final_obs"].all()
    assert np.array_equal(obs, first)  # both worlds began again
    # Player 0's agent was removed by the loss; its final viewport looks at where it stood.
    assert infos["final_obs"][1][0, VIEW_SIZE - 1, VIEW_SIZE // 2] == Cell.AGENT  # player 1 sees itself


def test_bad_actions_and_options_are_refused() -> None:
    env = RezzoVectorEnv(2, {"map": "duel"})
    env.reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(4,\)"):
        env.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"worlds": [0]})
    with pytest.raises(ValueError, match="at least one world"):
        RezzoVectorEnv(0)
    with pytest.raises(ValueError, match="torus"):
        RezzoVectorEnv(1, {"map": "duel", "torus": True})
    # Codes that are no move are no-ops, as they are for a bot.
    obs, rewards, *_ = env.step(np.array([9, -1, 200, 6]))
    assert obs in env.observation_space and not rewards.any()


def test_bench_env_times_both_backends_and_the_engines() -> None:
    """`cellarena bench env` puts the numba backend beside the numpy one and the separate engines."""
    from cellarena.server.bench.games.rezzo.env import run

    result = run([2], budget_s=0.02)
    assert result["backend"] == use("numba")
    row = result["batches"]["2"]
    assert row["agents"] == 4
    vector, numpy_vector, engines = (
        row[f"{name}_agent_steps_per_s"] for name in ("vector", "numpy", "engines")
    )
    assert min(vector, numpy_vector, engines) > 0
    assert row["ratio"] == pytest.approx(vector / engines)
    assert row["over_numpy"] == pytest.approx(vector / numpy_vector)
    # On more than one core, the same environment on all of numba's threads beside it.
    if result["threads"] > 1:
        assert row["threaded_agent_steps_per_s"] > 0
        assert row["threads_over_one"] == pytest.approx(row["threaded_agent_steps_per_s"] / vector)


def test_threads_split_the_worlds_with_the_same_results() -> None:
    """threads=2: the worlds stepped in two runs on two threads give what one thread gives (the
    batch's own comparison is tests/test_rezzo_batched.py's; here through the environment)."""
    from cellarena.server.games.rezzo.batch.batched_parallel import threads_available

    one = RezzoVectorEnv(6, {"map": "duel"}, backend=use("numba"))
    two = RezzoVectorEnv(6, {"map": "duel"}, backend="numba", threads=2)
    assert two.worlds.threads == 2 and one.worlds.threads == 1
    assert RezzoVectorEnv(1, {"map": "duel"}, threads="all").worlds.threads == 1  # one world, one run
    assert RezzoVectorEnv(6, {"map": "duel"}).worlds.threads == 1  # "auto": few worlds, one thread
    assert thread_count("auto", THREADS_FROM) == threads_available()
    rng = np.random.default_rng(3)
    for got, want in zip(two.reset(seed=5), one.reset(seed=5), strict=True):
        assert np.array_equal(got, want) if isinstance(got, np.ndarray) else got.keys() == want.keys()
    for _ in range(30):
        actions = rng.integers(0, 6, size=one.num_envs)
        for got, want in zip(two.step(actions)[:4], one.step(actions)[:4], strict=True):
            assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="threads must be a count of 1 or more, 'all' or 'auto', got 0"):
        RezzoVectorEnv(2, {"map": "duel"}, threads=0)


def test_bench_env_says_when_numba_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELLARENA_NO_NUMBA", "1")
    out = here("bench", "env", "--batches", "1", "--seconds", "0.05")
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())  # as one line, however rich wrapped it
    assert "Both vector columns ran on numpy: CELLARENA_NO_NUMBA=1 is set" in text
    assert "(install the [rl] extra)" in text
