"""Replays written in this process, without bots or sockets, for tests whose subject is what reads a
replay (the player, the install's pages), not a match: the engine plays to its end on moves a
function picks from its state, and every turn is recorded as a match would record it.

`clumps_replay` writes Cloth of Gold matches: each turn the seat to place puts a clump of units next
to a legal cell its seeded dice pick. The same seed writes the same replay, so a test gets the match
it needs every time (random_placer's unseeded dice once let both populations die in round 1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cellarena.sdk.games.cloth import SEAT_CODE, legal_cells, place
from cellarena.server.games import get_engine
from cellarena.server.replay import ReplayWriter


def write_replay(
    path: Path, engine: Any, *, seed: int, names: list[str], choose: Callable[[Any], dict[int, Any]]
) -> Path:
    """Play ``engine`` (new, made with ``seed``) to its end on ``choose(engine)``'s moves each turn,
    recording each turn to ``path`` with the seats named ``names``."""
    writer = ReplayWriter(path, engine, seed=seed, names=names)
    while engine.result() is None:
        tick = engine.tick
        moves = choose(engine)
        engine.apply(moves)
        writer.record(tick, moves, engine)
    result = engine.result()
    assert result is not None
    writer.finish(result)
    return path


def clumps_replay(path: Path, config: dict[str, Any], seed: int, units: int = 10) -> Path:
    """A whole match of ``config`` with engine and dice seeded by ``seed``, written to ``path``; the
    seats are named alpha and beta."""
    engine = get_engine("cloth").new(config, seed)
    rng = np.random.default_rng(seed)

    def clump(engine: Any) -> dict[int, Any]:
        seat = engine.to_place()
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
        return {seat: [list(u) for u in placed]}

    return write_replay(path, engine, seed=seed, names=["alpha", "beta"], choose=clump)
