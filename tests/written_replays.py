"""Cloth of Gold replays written in this process, without bots: each turn the seat to place puts a
clump of units next to a legal cell its seeded dice pick. The same seed writes the same replay, so a
test gets the match it needs every time (random_placer's unseeded dice once let both populations
die in round 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cellarena.sdk.games.cloth import SEAT_CODE, legal_cells, place
from cellarena.server.games import get_engine
from cellarena.server.replay import ReplayWriter


def clumps_replay(path: Path, config: dict[str, Any], seed: int, units: int = 10) -> Path:
    """A whole match of ``config`` with engine and dice seeded by ``seed``, written to ``path``; the
    seats are named alpha and beta."""
    engine = get_engine("cloth").new(config, seed)
    rng = np.random.default_rng(seed)
    writer = ReplayWriter(path, engine, seed=seed, names=["alpha", "beta"])
    while engine.result() is None:
        seat, tick = engine.to_place(), engine.tick
        board, first = engine.board.copy(), not engine.placed_any[seat]
        placed: list[tuple[int, int]] = []
        for _ in range(units):
            ys, xs = np.nonzero(legal_cells(board, SEAT_CODE[seat], first))
            if not len(xs):
                break
            near = np.abs(xs - placed[0][0]) + np.abs(ys - placed[0][1]) if placed else None
            i = int(np.argmin(near)) if near is not None else int(rng.integers(0, len(xs)))
            placed.append((int(xs[i]), int(ys[i])))
            place(board, [placed[-1]], SEAT_CODE[seat], first)
            first = False
        moves = {seat: [list(u) for u in placed]}
        engine.apply(moves)
        writer.record(tick, moves, engine)
    result = engine.result()
    assert result is not None
    writer.finish(result)
    return path
