"""Benchmark of the Rezzo step against the Wireworld step a numpy user would write.

Both run in the same process, one after the other, on worlds of the same size, so the ratio holds
even on a noisy machine where the absolute figures drift.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterable
from typing import Any

import click
import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.bench.harness import (
    STEADY_RATIO,
    calls_per_second,
    json_option,
    report,
    seconds_option,
    sizes_option,
)
from cellarena.server.games.rezzo.ca import BitWorld

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
    arrays = [
        *world._bufs,
        world.static,
        world._scratch,
        world._near_base,
        world._nb,
        world._left,
        world._right,
        world._tmpb,
        world._dil,
        world._valid,
    ]
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
    out: dict[str, Any] = {"sizes": {}}
    for size in sizes:
        cells = size * size
        world = BitWorld.from_codes(random_rezzo_codes(size, players, rng), players)
        rate = calls_per_second(world.step, budget_s) * cells
        grid = rng.integers(0, 4, size=(size, size), dtype=np.uint8)
        state = {"grid": grid}

        def baseline(state: dict[str, np.ndarray] = state) -> None:
            state["grid"] = wireworld_step(state["grid"])

        base = calls_per_second(baseline, budget_s) * cells
        peak, growth = allocations(world, 50)
        out["sizes"][str(size)] = {
            "cells_per_s": rate,
            "baseline_cells_per_s": base,
            "ratio": rate / base,
            "bytes_per_cell": engine_footprint(world) / cells,
            "step_peak_alloc_bytes": peak,
            "retained_bytes_per_step": growth,
        }
    return out


# ---------------------------------------------------------------------------- the command
#: The Rezzo step's goals (issue "Foundation"), checked against the 256x256 figures.
GOAL_CELLS_PER_S = 0.5e9
GOAL_RATIO = 8.0


@click.command("rezzo")
@sizes_option("64,256,1024", "Comma-separated world sizes (square).")
@seconds_option()
@json_option
def command(sizes: list[int], seconds: float, as_json: bool) -> None:
    """The Rezzo CA step against the plain numpy Wireworld step, in cell-updates per second."""
    result = run(sizes, budget_s=seconds)
    if as_json:
        click.echo(json.dumps(result))
        return
    goals = []
    if "256" in result["sizes"]:
        r = result["sizes"]["256"]
        goals = [
            (
                f"256x256 at least {GOAL_CELLS_PER_S / 1e9:.1f} G cell-updates/s",
                r["cells_per_s"] >= GOAL_CELLS_PER_S,
            ),
            (f"256x256 at least {GOAL_RATIO:.0f}x the baseline", r["ratio"] >= GOAL_RATIO),
        ]
    report(
        "Rezzo step vs pad-and-slice Wireworld (dense random worlds, 2 players)",
        ("size", "rezzo /s", "baseline /s", "ratio", "B/cell", "peak/step", "kept/step"),
        [
            (
                f"{size}x{size}",
                f"{r['cells_per_s'] / 1e6:,.0f} M",
                f"{r['baseline_cells_per_s'] / 1e6:,.0f} M",
                f"{r['ratio']:.1f}x",
                f"{r['bytes_per_cell']:.1f}",
                f"{r['step_peak_alloc_bytes']} B",
                f"{r['retained_bytes_per_step']} B",
            )
            for size, r in result["sizes"].items()
        ],
        goals,
        [STEADY_RATIO],
    )
