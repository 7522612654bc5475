"""Benchmark of the Rezzo step against the Wireworld step a numpy user would write.

The step runs on both backends (numba's compiled `ca_kernel` where numba is installed, and the numpy
ufunc passes) and the baseline in the same process, one after the other, on worlds of the same
size, so the ratios hold even on a noisy machine where the absolute figures drift.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterable
from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.bench.harness import (
    STEADY_RATIO,
    calls_per_second,
    report,
    sized_command,
)
from cellarena.server.games.rezzo.ca import BitWorld, numba_available

# Wireworld codes for the baseline
WW_EMPTY, WW_HEAD, WW_TAIL, WW_WIRE = 0, 1, 2, 3


def wireworld_step(grid: np.ndarray) -> np.ndarray:
    """The obvious pad-and-slice Wireworld step: the baseline a numpy user would write."""
    heads = np.pad(grid == WW_HEAD, 1).astype(np.uint8)
    n = (
        heads[:-2, :-2]
        + heads[:-2, 1:-1]
        + heads[:-2, 2:]
        + heads[1:-1, :-2]
        + heads[1:-1, 2:]
        + heads[2:, :-2]
        + heads[2:, 1:-1]
        + heads[2:, 2:]
    )
    out = grid.copy()
    out[grid == WW_HEAD] = WW_TAIL
    out[grid == WW_TAIL] = WW_WIRE
    out[(grid == WW_WIRE) & ((n == 1) | (n == 2))] = WW_HEAD
    return out


def random_rezzo_codes(size: int, players: int, rng: np.random.Generator) -> np.ndarray:
    """A dense, uniform mix of every Rezzo state and owner."""
    states: list[int] = [Cell.BLANK, Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.PHOTON]
    for p in range(players):
        states += [Cell.AGENT + p, Cell.FLAG + p, Cell.GEYSER + p, Cell.BASE + p]
    return rng.choice(np.array(states, np.uint8), size=(size, size))


def engine_footprint(world: BitWorld) -> int:
    """Bytes held by the CA's arrays (state, scratch and precomputed masks)."""
    arrays = [*world._bufs, world.static, world._near_base, world._nb, world._valid, *world.scratch_arrays()]
    return sum(a.nbytes for a in arrays)


def allocations(world: BitWorld, ticks: int) -> tuple[int, int]:
    """(peak bytes allocated within one step, bytes retained per step) over ``ticks`` steps.

    A hot path that allocated a world-sized temporary would show it in the peak; anything kept per
    tick would show in the growth, measured as the difference between two run lengths so that the
    profiler's own bookkeeping cancels out.
    """
    # Random worlds lose players in their first steps, and a loss recomputes the near-base masks once;
    # measure the steady state after that.
    quiet = 0
    while quiet < 3:
        quiet = 0 if world.step() else quiet + 1
    tracemalloc.start()
    peak = 0
    retained = []
    for n in (ticks, 2 * ticks):
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(n):
            world.step()
        current, top = tracemalloc.get_traced_memory()
        peak = max(peak, top - start)
        retained.append(current - start)
    tracemalloc.stop()
    return peak, max(0, (retained[1] - retained[0]) // ticks)


def run(
    sizes: Iterable[int] = (64, 256, 1024), budget_s: float = 1.0, players: int = 2, seed: int = 0
) -> dict[str, Any]:
    """Measure every size; the dict is what `cellarena bench rezzo --json` prints."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"sizes": {}, "numba": numba_available()}
    backends = ["numba", "numpy"] if out["numba"] else ["numpy"]
    for size in sizes:
        cells = size * size
        codes = random_rezzo_codes(size, players, rng)
        rates: dict[str, float] = {}
        for backend in backends:
            world = BitWorld.from_codes(codes, players, backend=backend)
            rates[backend] = calls_per_second(world.step, budget_s) * cells
        grid = rng.integers(0, 4, size=(size, size), dtype=np.uint8)
        state = {"grid": grid}

        def baseline(state: dict[str, np.ndarray] = state) -> None:
            state["grid"] = wireworld_step(state["grid"])

        base = calls_per_second(baseline, budget_s) * cells
        # The memory figures are the step a match runs: numba's where it is installed.
        world = BitWorld.from_codes(codes, players, backend=backends[0])
        peak, growth = allocations(world, 50)
        rate = rates[backends[0]]
        out["sizes"][str(size)] = {
            "backend": backends[0],
            "cells_per_s": rate,
            "numpy_cells_per_s": rates["numpy"],
            "numba_cells_per_s": rates.get("numba"),
            "baseline_cells_per_s": base,
            "ratio": rate / base,
            "numpy_ratio": rates["numpy"] / base,
            "bytes_per_cell": engine_footprint(world) / cells,
            "step_peak_alloc_bytes": peak,
            "retained_bytes_per_step": growth,
        }
    return out


# ---------------------------------------------------------------------------- the command
#: The Rezzo step's goals, checked against the 256x256 figures: the numpy step's (issue "Foundation"),
#: and the compiled step's where numba is installed (issue "Every core").
GOAL_CELLS_PER_S = 0.5e9
GOAL_RATIO = 8.0
GOAL_NUMBA_CELLS_PER_S = 2e9


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f} G"


@sized_command("rezzo", "64,256,1024", run, sizes_help="Comma-separated world sizes (square).")
def command(result: dict[str, Any]) -> None:
    """The Rezzo CA step (numba, numpy) against the plain numpy Wireworld step, in cell-updates/s."""
    goals = []
    if "256" in result["sizes"]:
        r = result["sizes"]["256"]
        goals = [
            (
                f"256x256 numpy step at least {GOAL_CELLS_PER_S / 1e9:.1f} G cell-updates/s",
                r["numpy_cells_per_s"] >= GOAL_CELLS_PER_S,
            ),
            (f"256x256 numpy step at least {GOAL_RATIO:.0f}x the baseline", r["numpy_ratio"] >= GOAL_RATIO),
        ]
        if result["numba"]:
            goals.append(
                (
                    f"256x256 numba step at least {GOAL_NUMBA_CELLS_PER_S / 1e9:.0f} G cell-updates/s",
                    r["numba_cells_per_s"] >= GOAL_NUMBA_CELLS_PER_S,
                )
            )
    notes = [
        "Cell-updates per second; numba x, numpy x: each over the baseline; peak, kept: bytes per step.",
        STEADY_RATIO,
    ]
    if not result["numba"]:
        notes.append("numba is not installed (the [rl] extra): only the numpy step was measured.")
    report(
        "Rezzo step (numba, numpy) vs pad-and-slice Wireworld (dense random worlds, 2 players)",
        ("size", "numba", "numpy", "base", "numba x", "numpy x", "B/cell", "peak", "kept"),
        [
            (
                f"{size}²",
                _rate(r["numba_cells_per_s"]),
                _rate(r["numpy_cells_per_s"]),
                _rate(r["baseline_cells_per_s"]),
                "-" if r["numba_cells_per_s"] is None else f"{r['ratio']:.1f}x",
                f"{r['numpy_ratio']:.1f}x",
                f"{r['bytes_per_cell']:.1f}",
                f"{r['step_peak_alloc_bytes']} B",
                f"{r['retained_bytes_per_step']} B",
            )
            for size, r in result["sizes"].items()
        ],
        goals,
        notes,
    )
