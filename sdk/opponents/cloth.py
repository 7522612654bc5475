"""Cloth of Gold's random opponent: 1 to the most allowed units, each on a random legal cell."""

from __future__ import annotations

import random

import numpy as np

from cellarena.sdk.games.cloth import ClothBot, View, legal_cells, place
from cellarena.sdk.opponents import SEED


def random_units(view: View, rng: random.Random) -> list[tuple[int, int]]:
    """Units placed one by one on a copy of the board, so each is legal after the ones before it."""
    board = view.board.copy()
    first = view.first
    units: list[tuple[int, int]] = []
    for _ in range(rng.randint(1, max(1, view.max_units))):
        ys, xs = np.nonzero(legal_cells(board, view.me, first))
        if len(xs) == 0:
            break
        i = rng.randrange(len(xs))
        unit = (int(xs[i]), int(ys[i]))
        place(board, [unit], view.me, first)
        first = False
        units.append(unit)
    return units


class RandomCloth(ClothBot):
    def on_tick(self, view: View) -> list[tuple[int, int]]:
        return random_units(view, random.Random(f"{SEED}:{view.me}:{view.tick}"))
