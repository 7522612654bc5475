"""`cellarena bench drop2df`: the vectorised step against the plain-Python step, side by side.

The issue sets no speed goal; this shows what a lookahead bot gains from `step_many` (many rows per
call) over `step` (one row per call), and how many whole matches the engine plays per second.
"""

from __future__ import annotations

import json
from typing import Any

import click
import numpy as np

from cellarena.sdk.games.drop2df import HOLE, step, step_many
from cellarena.server.bench.harness import calls_per_second, json_option, seconds_option
from cellarena.server.cli.params import ranged_option


def run(rows: int, length: int, budget_s: float) -> dict[str, Any]:
    """Row-steps per second of both steps on the same random rows, and engine matches per second."""
    from cellarena.server.games.drop2df.engine import Drop2dfEngine

    rng = np.random.default_rng(0)
    batch = rng.integers(0, 5, size=(rows, length + 3), dtype=np.uint8)
    batch[:, 0] = batch[:, -1] = HOLE
    out, scratch = np.empty_like(batch), np.empty((rows, length + 1), np.uint8)
    plain = [r.tobytes() for r in batch[: min(rows, 2000)]]

    def python() -> None:
        for r in plain:
            step(r)

    def matches() -> None:  # twenty seeds, so one board's luck does not set the figure
        for seed in range(20):
            engine = Drop2dfEngine.new({"length": length}, seed=seed)
            while engine.result() is None:
                engine.apply({})

    fast = calls_per_second(lambda: step_many(batch, out, scratch), budget_s) * rows
    slow = calls_per_second(python, budget_s) * len(plain)
    return {
        "rows": rows,
        "cells_per_row": length + 3,
        "step_many_rows_per_s": fast,
        "step_rows_per_s": slow,
        "ratio": fast / slow,
        "matches_per_s": calls_per_second(matches, budget_s) * 20,
    }


@click.command("drop2df")
@ranged_option("--rows", 10000, click.IntRange(1, 10**7), "Rows per batch.")
@ranged_option("--length", 8, click.IntRange(1, 64), "Dice spaces.")
@seconds_option("Timing budget per contender.")
@json_option
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
