"""Rezzo's reward terms counted on one engine, tick by tick: what an exported dataset's rows carry
(`cellarena replay export`, docs/datasets.md), the same terms as `rewards.RewardShaper` pays a
learner in the vector environment (docs/training.md) where one engine can count them.

The distance terms and ``wire_built`` need the batch's bookkeeping (bases' distance maps, where each
agent stood) and are not counted here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.games.rezzo.engine import RezzoEngine

TERMS = ("own_flags", "enemy_flags", "flag_formed", "own_flag_destroyed", "enemy_flag_destroyed")


class RezzoTerms:
    """Each seat's terms for each ``apply()`` of ``engine``, from the board's flags and the events."""

    def __init__(self, engine: RezzoEngine) -> None:
        self.players = engine.players
        self.flags = self._count(engine)

    def _count(self, engine: RezzoEngine) -> np.ndarray:
        codes = engine.world.codes_view()
        return np.array([np.count_nonzero(codes == Cell.FLAG + p) for p in range(self.players)], np.int64)

    def after(self, engine: RezzoEngine, events: list[dict[str, Any]]) -> list[dict[str, float]]:
        now = self._count(engine)
        change, self.flags = now - self.flags, now
        formed, destroyed = np.zeros(self.players), np.zeros(self.players)
        for e in events:
            if e["kind"] == "flag_formed":
                formed[e["seat"]] += 1
            elif e["kind"] == "flag_destroyed":
                destroyed[e["seat"]] += 1
        return [
            {
                "own_flags": float(change[s]),
                "enemy_flags": float(change.sum() - change[s]),
                "flag_formed": float(formed[s]),
                "own_flag_destroyed": float(destroyed[s]),
                "enemy_flag_destroyed": float(destroyed.sum() - destroyed[s]),
            }
            for s in range(self.players)
        ]
