"""`cellarena bench drop2df`: the vectorised step against the plain-Python step, side by side.

The issue sets no speed goal; this shows what a lookahead bot gains from `step_many` (many rows per
call) over `step` (one row per call), and how many whole matches the engine plays per second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from cellarena.sdk.games.drop2df import HOLE, step, step_many


def _best_rate(work: Callable[[], int], budget_s: float) -> float:
    """Items per second of ``work`` (which returns how many it did), best of repeated batches."""
    best = 0.0
    end = time.perf_counter() + budget_s
    while True:
        t0 = time.perf_counter()
        done = work()
        best = max(best, done / (time.perf_counter() - t0))
        if time.perf_counter() >= end:
            return best


def run(rows: int, length: int, budget_s: float) -> dict[str, Any]:
    """Row-steps per second of both steps on the same random rows, and engine matches per second."""
    from cellarena.server.games.drop2df.engine import Drop2dfEngine

    rng = np.random.default_rng(0)
    batch = rng.integers(0, 5, size=(rows, length + 3), dtype=np.uint8)
    batch[:, 0] = batch[:, -1] = HOLE
    out, scratch = np.empty_like(batch), np.empty((rows, length + 1), np.uint8)
    plain = [r.tobytes() for r in batch[: min(rows, 2000)]]

    def vectorised() -> int:
        step_many(batch, out, scratch)
        return rows

    def python() -> int:
        for r in plain:
            step(r)
        return len(plain)

    def matches() -> int:
        for seed in range(20):
            engine = Drop2dfEngine.new({"length": length}, seed=seed)
            while engine.result() is None:
                engine.apply({})
        return 20

    fast = _best_rate(vectorised, budget_s)
    slow = _best_rate(python, budget_s)
    return {
        "rows": rows,
        "cells_per_row": length + 3,
        "step_many_rows_per_s": fast,
        "step_rows_per_s": slow,
        "ratio": fast / slow,
        "matches_per_s": _best_rate(matches, budget_s),
    }


@click.command("drop2df")
@click.option(
    "--rows", default=10000, show_default=True, type=click.IntRange(1, 10**7), help="Rows per batch."
)
@click.option("--length", default=8, show_default=True, type=click.IntRange(1, 64), help="Dice spaces.")
@click.option(
    "--seconds", default=1.0, show_default=True, type=click.FloatRange(0.05, 60), help="Budget per contender."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(rows: int, length: int, seconds: float, as_json: bool) -> None:
    """step_many (numpy, a batch of rows) against step (plain Python, a row at a time), in rows/s."""
    result = run(rows, length, seconds)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(
        f"{result['cells_per_row']}-cell rows: "
        f"step_many {result['step_many_rows_per_s'] / 1e6:.2f} M rows/s, "
        f"step {result['step_rows_per_s'] / 1e6:.3f} M rows/s, ratio {result['ratio']:.0f}x; "
        f"engine {result['matches_per_s']:.0f} default matches/s (2 seats, 30 turns)"
    )
