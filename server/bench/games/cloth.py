"""Benchmark of the Cloth of Gold step against the single-population Life step a numpy user would write.

Both run in the same process, one after the other, on boards of the same size, so the ratio holds
even on a noisy machine where the absolute figures drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from cellarena.sdk.games.cloth import ClothWorld
from cellarena.server.bench.harness import (
    STEADY_RATIO,
    calls_per_second,
    report,
    sized_command,
)


def life_step(grid: np.ndarray) -> np.ndarray:
    """The obvious pad-and-slice Life step (one population, no wrap): the baseline."""
    p = np.pad(grid, 1)
    n = (
        p[:-2, :-2]
        + p[:-2, 1:-1]
        + p[:-2, 2:]
        + p[1:-1, :-2]
        + p[1:-1, 2:]
        + p[2:, :-2]
        + p[2:, 1:-1]
        + p[2:, 2:]
    )
    return ((n == 3) | ((grid == 1) & (n == 2))).astype(np.uint8)


def run(sizes: Iterable[int] = (64, 256, 1024), budget_s: float = 1.0, seed: int = 0) -> dict[str, Any]:
    """Measure every size; the dict is what `cellarena bench cloth --json` prints."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"sizes": {}}
    for size in sizes:
        cells = size * size
        # Dense mixed boards: every state, so no branch of the table is idle.
        world = ClothWorld.from_codes(rng.choice(5, size=(size, size)).astype(np.uint8))
        rate = calls_per_second(world.step, budget_s) * cells
        state = {"grid": (rng.random((size, size)) < 0.4).astype(np.uint8)}

        def baseline(state: dict[str, np.ndarray] = state) -> None:
            state["grid"] = life_step(state["grid"])

        base = calls_per_second(baseline, budget_s) * cells
        out["sizes"][str(size)] = {"cells_per_s": rate, "baseline_cells_per_s": base, "ratio": rate / base}
    return out


#: The goal (issue "Cloth of Gold"): at least this many times the baseline at 256x256 and 1024x1024.
GOAL_RATIO = 2.0


@sized_command("cloth", "64,256,1024", run)
def command(result: dict[str, Any]) -> None:
    """The Cloth of Gold step against plain numpy Life, in cell-updates per second."""
    report(
        "Cloth of Gold step (5 states) vs pad-and-slice numpy Life (2 states)",
        ("size", "cloth /s", "life /s", "ratio"),
        [
            (
                f"{size}x{size}",
                f"{r['cells_per_s'] / 1e6:,.0f} M",
                f"{r['baseline_cells_per_s'] / 1e6:,.0f} M",
                f"{r['ratio']:.2f}x",
            )
            for size, r in result["sizes"].items()
        ],
        [
            (
                f"{size}x{size} at least {GOAL_RATIO:.0f}x the baseline",
                result["sizes"][size]["ratio"] >= GOAL_RATIO,
            )
            for size in ("256", "1024")
            if size in result["sizes"]
        ],
        [STEADY_RATIO],
    )
