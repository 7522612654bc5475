"""Benchmark of the C.A.T.A. step against the plain-Python reference step of the tests.

Both run in the same process, one after the other, on the same random boards and rule, so their
ratio holds even on a noisy machine where the absolute figures drift. The reference is
`tests/cata_reference.py` of a source checkout (the one implementation the tests trust).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import numpy as np

from cellarena.sdk.games.cata import Automaton
from cellarena.server.bench.harness import (
    STEADY_RATIO,
    calls_per_second,
    report,
    sized_command,
)

REFERENCE = Path(__file__).resolve().parents[3] / "tests" / "cata_reference.py"
#: The issue's goal: the fast step at least this many times the reference at 512x512.
GOAL_RATIO = 100.0


def load_reference() -> ModuleType:
    """The tests' reference module, loaded from its file; a clear error outside a source checkout."""
    if not REFERENCE.is_file():
        raise click.ClickException(
            f"the reference step {REFERENCE} is missing: run the benchmark from a source checkout "
            "(pip install -e .)"
        )
    spec = importlib.util.spec_from_file_location("cata_reference", REFERENCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(sizes: Iterable[int] = (64, 512), budget_s: float = 1.0, seed: int = 0) -> dict[str, Any]:
    """Measure every size; the dict is what `cellarena bench cata --json` prints."""
    reference = load_reference()
    rng = np.random.default_rng(seed)
    # A rule that keeps a random board busy: every cell takes the parity of its neighbourhood.
    rule = [bin(i).count("1") & 1 for i in range(32)]
    out: dict[str, Any] = {"rule": rule, "sizes": {}}
    for size in sizes:
        board = rng.integers(0, 2, (size, size), dtype=np.uint8)
        ca = Automaton(size)
        ca.load(board)
        fast = calls_per_second(partial(ca.step, rule), budget_s)
        state = {"board": board.tolist()}

        def slow(state: dict[str, Any] = state) -> None:
            state["board"] = reference.reference_step(state["board"], rule)

        ref = calls_per_second(slow, budget_s)
        out["sizes"][str(size)] = {
            "generations_per_s": fast,
            "reference_generations_per_s": ref,
            "ratio": fast / ref,
            "cell_updates_per_s": fast * size * size,
        }
    return out


@sized_command("cata", "64,512", run)
def command(result: dict[str, Any]) -> None:
    """The C.A.T.A. step against the plain-Python reference step, in generations per second."""
    goals = []
    if "512" in result["sizes"]:
        goals = [
            (
                f"512x512 at least {GOAL_RATIO:.0f}x the reference",
                result["sizes"]["512"]["ratio"] >= GOAL_RATIO,
            )
        ]
    report(
        "C.A.T.A. step vs the reference step (random boards, parity rule)",
        ("size", "fast gen/s", "reference gen/s", "ratio", "fast cell-updates/s"),
        [
            (
                f"{size}x{size}",
                f"{r['generations_per_s']:,.0f}",
                f"{r['reference_generations_per_s']:,.2f}",
                f"{r['ratio']:,.0f}x",
                f"{r['cell_updates_per_s'] / 1e6:,.0f} M",
            )
            for size, r in result["sizes"].items()
        ],
        goals,
        [STEADY_RATIO],
    )
