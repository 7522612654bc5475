"""`cellarena bench env` for Rezzo: agent-steps per second of the Rezzo vector environment against B engines.

All contenders do the same work per step for B duels: every live agent's viewport as a bot receives
it, then one move per agent, the agent phase, the next transition and loss processing. The vector
environment does it for all B worlds at once on `BatchedRezzo` (and resets ended worlds): on the
backend a user gets ("auto": numba where it is installed) on one thread, and with numba on all of its
threads (``threads="all"``) where it has more than one, and on the numpy one; the last contender
loops over B separate `RezzoEngine`s (`pending()` then `apply()`), as a server or a naive trainer
would. All are timed in the same run, so the ratios hold on a noisy machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import click
import numpy as np

from cellarena.server.bench.harness import (
    STEADY_RATIO,
    calls_per_second,
    int_list_option,
    json_option,
    report,
    seconds_option,
)
from cellarena.server.games.rezzo.batch.batched import NO_NUMBA_VARIABLE
from cellarena.server.games.rezzo.engine import RezzoEngine

#: Goals from issue 20, checked at the largest batch.
GOAL_AGENT_STEPS = 1_000_000
GOAL_RATIO = 10.0
#: Moves drawn for the timing: turns and hits, so that agents stay busy but the worlds stay comparable.
MOVE_MIX = (0, 1, 2, 3, 4, 5, 5)
BANK = 16  # distinct move arrays cycled through


def _vector_step(
    batch: int, config: dict[str, Any], rng: np.random.Generator, backend: str, threads: int | str = 1
) -> tuple[Callable[[], object], int, str]:
    """One step of a vector environment of ``batch`` worlds, its agents per world, and its backend."""
    from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv

    # copy=False: a trainer copies the observations into its rollout buffer itself.
    env = RezzoVectorEnv(batch, config, copy=False, backend=backend, threads=threads)
    env.reset()
    bank = [rng.choice(MOVE_MIX, size=env.num_envs) for _ in range(BANK)]
    state = {"i": 0}

    def step() -> None:
        state["i"] = (state["i"] + 1) % BANK
        env.step(bank[state["i"]])

    return step, env.n_agents, env.worlds.backend


def _engines_step(batch: int, config: dict[str, Any], rng: np.random.Generator) -> Callable[[], object]:
    engines = [RezzoEngine.new(config) for _ in range(batch)]
    k = engines[0].agents_per_player
    players = engines[0].players
    bank = [rng.choice(MOVE_MIX, size=(batch, players, k)).tolist() for _ in range(BANK)]
    state = {"i": 0}

    def step() -> None:
        state["i"] = (state["i"] + 1) % BANK
        moves = bank[state["i"]]
        for b in range(batch):
            if engines[b].result() is not None:
                engines[b] = RezzoEngine.new(config)
            engine = engines[b]
            requests = engine.pending()
            engine.apply({seat: moves[b][seat][: len(req["agents"])] for seat, req in requests.items()})

    return step


def run(
    batches: Iterable[int] = (1, 64, 1024), budget_s: float = 1.0, map_name: str = "duel"
) -> dict[str, Any]:
    """Measure every batch size; the dict is what `cellarena bench env --json` prints.

    ``backend``: what "vector" ran on (numba, or numpy where numba is missing), on one thread;
    "ratio" is vector over the separate engines, "over_numpy" vector over the same environment on
    the numpy backend. With numba and more than one thread (``threads``, numba's), "threaded" is the
    same environment on all of them (``threads="all"``), and "threads_over_one" its rate over one
    thread's; both are None otherwise.
    """
    config: dict[str, Any] = {"map": map_name, "max_ticks": 3000}
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"map": map_name, "batches": {}, "threads": 1}
    for batch in batches:
        vector, n_agents, backend = _vector_step(batch, config, rng, "auto", 1)
        threads = _threads() if backend == "numba" else 1
        out["threads"] = threads
        threaded = _vector_step(batch, config, rng, "auto", "all")[0] if threads > 1 else None
        numpy_vector, _, _ = _vector_step(batch, config, rng, "numpy", 1)
        engines = _engines_step(batch, config, rng)
        agent_steps = batch * n_agents
        vec = calls_per_second(vector, budget_s) * agent_steps
        vec_threads = None if threaded is None else calls_per_second(threaded, budget_s) * agent_steps
        vec_numpy = calls_per_second(numpy_vector, budget_s) * agent_steps
        sep = calls_per_second(engines, budget_s) * agent_steps
        out["backend"] = backend
        out["batches"][str(batch)] = {
            "agents": agent_steps,
            "vector_agent_steps_per_s": vec,
            "threaded_agent_steps_per_s": vec_threads,
            "numpy_agent_steps_per_s": vec_numpy,
            "engines_agent_steps_per_s": sep,
            "ratio": vec / sep,
            "over_numpy": vec / vec_numpy,
            "threads_over_one": None if vec_threads is None else vec_threads / vec,
        }
    return out


def _threads() -> int:
    """The threads numba runs a parallel loop on (1 without numba)."""
    try:
        from cellarena.server.games.rezzo.batch.batched_parallel import threads_available
    except ImportError:
        return 1
    return threads_available()


@click.command("rezzo")
@int_list_option("--batches", "1,64,1024", "batch sizes", (1, 65536), "Worlds per step.")
@click.option("--map", "map_name", default="duel", show_default=True, help="A built-in Rezzo map.")
@seconds_option()
@json_option
def command(batches: list[int], map_name: str, seconds: float, as_json: bool) -> None:
    """The Rezzo vector environment against B separate engines, in agent-steps per second."""
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "bench env times the Gymnasium vector environment: install the [rl] extra "
            "(pip install 'cellarena[rl]')"
        ) from None
    result = run(batches, budget_s=seconds, map_name=map_name)
    if as_json:
        click.echo(json.dumps(result))
        return
    largest = result["batches"][str(max(batches))]
    goals = [
        (
            f"B={max(batches)}: at least {GOAL_AGENT_STEPS:,} agent-steps/s",
            largest["vector_agent_steps_per_s"] >= GOAL_AGENT_STEPS,
        ),
        (
            f"B={max(batches)}: at least {GOAL_RATIO:.0f}x the separate engines",
            largest["ratio"] >= GOAL_RATIO,
        ),
    ]
    backend = result["backend"]
    notes = [STEADY_RATIO]
    if backend != "numba":
        # "\\[": rich would take "[rl]" for markup.
        notes.insert(
            0,
            f"Both vector columns ran on numpy: {NO_NUMBA_VARIABLE}=1 is set, or numba is not installed "
            "(install the \\[rl] extra).",
        )
    threads = result["threads"]
    if threads > 1:
        notes.insert(
            0,
            f"{threads} threads: the same environment with threads='all' (numba's {threads} threads); x1: "
            "its rate over one thread's. On a machine busy with other work it waits for its slower thread.",
        )
    report(
        f"Rezzo vector env on {backend} and on numpy vs separate engines ({map_name}, with viewports)",
        (
            "worlds",
            "agents",
            f"{backend} /s",
            f"{threads} threads /s",
            "x1",
            "numpy /s",
            "engines /s",
            "vs numpy",
            "vs engines",
        ),
        [
            (
                b,
                str(r["agents"]),
                f"{r['vector_agent_steps_per_s']:,.0f}",
                "-" if r["threaded_agent_steps_per_s"] is None else f"{r['threaded_agent_steps_per_s']:,.0f}",
                "-" if r["threads_over_one"] is None else f"{r['threads_over_one']:.2f}x",
                f"{r['numpy_agent_steps_per_s']:,.0f}",
                f"{r['engines_agent_steps_per_s']:,.0f}",
                f"{r['over_numpy']:.2f}x",
                f"{r['ratio']:.1f}x",
            )
            for b, r in result["batches"].items()
        ],
        goals,
        notes,
    )
