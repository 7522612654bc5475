"""Benchmark of the Colorblocks hot paths, each measured side by side with its plain alternative.

* The gain map (how many blocks a placement on each cell would convert: what legal-placement
  listing and greedy bots need) vectorised with numpy, against calling the per-placement scan on
  every cell, on random boards of several sizes.
* The engine replaying recorded turns of random legal play, in turns per second.

Both contenders run in the same process one after the other, so the ratio holds on a noisy machine.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np

from cellarena.sdk.games.colorblocks import Board, color_change, make_view, placement_gains, random_turn
from cellarena.server.bench.harness import calls_per_second, report, sized_command
from cellarena.server.games.colorblocks.engine import ColorblocksEngine

CODES = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4], np.uint8)


def random_board(size: int, rng: np.random.Generator) -> Board:
    """A dense random mix of neutral, colour, true neutral and dead blocks, with a few guards."""
    blocks = rng.choice(CODES, size=(size, size))
    guards = np.where(rng.random((size, size)) < 0.03, rng.integers(0, 2, (size, size)), -1).astype(np.int8)
    guards[blocks > 2] = -1
    return Board(blocks, guards)


def scan_gains(board: Board, seat: int) -> np.ndarray:
    """The gain map the plain way: the per-placement scan on every cell."""
    out = np.zeros(board.blocks.shape, np.int32)
    for y in range(board.height):
        for x in range(board.width):
            out[y, x] = len(color_change(board, x, y, seat))
    return out


def recorded_turns(games: int, seed: int = 0) -> list[list[Any]]:
    """The action lists of ``games`` whole matches of random legal play, in order."""
    turns: list[list[Any]] = []
    rng = random.Random(seed)
    for _ in range(games):
        engine = ColorblocksEngine.new({})
        while engine.result() is None:
            ((seat, request),) = engine.pending().items()
            actions = random_turn(make_view({"tick": engine.tick, **request}), rng)
            turns.append(actions)
            engine.apply({seat: actions})
    return turns


def run(sizes: Iterable[int] = (9, 32, 128), budget_s: float = 1.0, seed: int = 0) -> dict[str, Any]:
    """Measure everything; the dict is what `cellarena bench colorblocks --json` prints."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"gain_map": {}}
    for size in sizes:
        board = random_board(size, rng)
        assert (placement_gains(board.blocks, board.guards, 0) == scan_gains(board, 0)).all()
        fast = calls_per_second(partial(placement_gains, board.blocks, board.guards, 0), budget_s)
        slow = calls_per_second(partial(scan_gains, board, 0), budget_s)
        out["gain_map"][str(size)] = {
            "maps_per_s": fast,
            "scan_maps_per_s": slow,
            "ratio": fast / slow,
            "cells_per_s": fast * size * size,
        }
    turns = recorded_turns(2, seed)

    def replay() -> None:
        engine = ColorblocksEngine.new({})
        for actions in turns:
            if engine.result() is not None:
                engine = ColorblocksEngine.new({})
            engine.apply({engine.to_move: actions})

    out["engine"] = {"turns": len(turns), "turns_per_s": calls_per_second(replay, budget_s) * len(turns)}
    view = make_view({"tick": 0, **ColorblocksEngine.new({}).pending()[0]})
    out["legal_actions_per_s"] = calls_per_second(view.legal_actions, budget_s)
    return out


@sized_command(
    "colorblocks",
    "9,32,128",
    run,
    sizes_help="Comma-separated board sizes (square) for the gain map.",
    seconds_help="Timing budget per contender.",
)
def command(result: dict[str, Any]) -> None:
    """The vectorised gain map against the per-cell scan, and the engine's turns per second."""
    e = result["engine"]
    report(
        "Colorblocks gain map: numpy vs the per-cell scan (random boards)",
        ("size", "numpy maps/s", "scan maps/s", "ratio", "numpy cells/s"),
        [
            (
                f"{size}x{size}",
                f"{r['maps_per_s']:,.0f}",
                f"{r['scan_maps_per_s']:,.1f}",
                f"{r['ratio']:.1f}x",
                f"{r['cells_per_s'] / 1e6:,.1f} M",
            )
            for size, r in result["gain_map"].items()
        ],
        notes=[
            f"engine: {e['turns_per_s']:,.0f} turns/s replaying {e['turns']} turns of random legal play",
            f"legal_actions on the opening board: {result['legal_actions_per_s']:,.0f} /s",
        ],
    )
