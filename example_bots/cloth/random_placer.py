"""Cloth of Gold: places a random number of units (1 to the most allowed) on random legal cells."""

from __future__ import annotations

import random

import numpy as np

from cellarena.sdk import run
from cellarena.sdk.games.cloth import ClothBot, View, legal_cells, place


class RandomPlacer(ClothBot):
    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def on_tick(self, view: View) -> list[tuple[int, int]]:
        board = view.board.copy()
        first = view.first
        units: list[tuple[int, int]] = []
        for _ in range(self.rng.randint(1, view.max_units)):
            ys, xs = np.nonzero(legal_cells(board, view.me, first))
            if len(xs) == 0:
                break
            i = self.rng.randrange(len(xs))
            unit = (int(xs[i]), int(ys[i]))
            place(board, [unit], view.me, first)  # later units are checked against this one
            first = False
            units.append(unit)
        return units


if __name__ == "__main__":
    raise SystemExit(run(RandomPlacer))
