"""Headless Rezzo matches with built-in agents: for trying maps and rules without any bot."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell, Move
from cellarena.server.games.base import Result
from cellarena.server.games.rezzo.engine import RezzoConfig, RezzoEngine

POLICIES = ("idle", "random")


@dataclass
class SimReport:
    engine: RezzoEngine
    ticks: int
    result: Result | None
    first_flag: dict[int, int] = field(default_factory=dict)  # player -> first tick with a flag
    illegal: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "map": self.engine.map_name,
            "ticks": self.ticks,
            "result": None if r is None else {"winner": r.winner, "ranks": r.ranks, "reason": r.reason},
            "first_flag": self.first_flag,
            "illegal": self.illegal,
            "state_hash": self.engine.state_hash(),
        }


def simulate(
    config: RezzoConfig,
    ticks: int,
    policy: str = "idle",
    seed: int = 0,
    on_tick: Callable[[RezzoEngine], None] | None = None,
) -> SimReport:
    """Run up to ``ticks`` decision points with every agent following ``policy``.

    ``random`` draws each move uniformly from the five moves and the no-op with a seeded generator,
    so a run is repeatable.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    engine = RezzoEngine.new(config, seed)
    rng = np.random.default_rng(seed)
    report = SimReport(engine, 0, None)
    flag_lo, flag_hi = Cell.FLAG, Cell.FLAG + engine.players
    for _ in range(ticks):
        cells = engine.cells()
        for p in np.unique(cells[(cells >= flag_lo) & (cells < flag_hi)] - flag_lo):
            report.first_flag.setdefault(int(p), engine.tick)
        if on_tick is not None:
            on_tick(engine)
        requests = engine.pending()
        if not requests:
            break
        moves: dict[int, dict[int, int]] = {}
        if policy == "random":
            picks = {
                seat: [int(m) for m in rng.integers(0, len(Move), size=len(req["agents"]))]
                for seat, req in requests.items()
            }
            moves = {seat: dict(zip(requests[seat]["agents"], ms, strict=True)) for seat, ms in picks.items()}
        events = engine.apply(moves)
        for seat, n in events.illegal.items():
            report.illegal[seat] = report.illegal.get(seat, 0) + n
        report.ticks += 1
    report.result = engine.result()
    return report
