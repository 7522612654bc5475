"""C.A.T.A.'s random opponent: a uniformly random legal move (strike, block, meditate or pass)."""

from __future__ import annotations

import random

from cellarena.sdk.games.cata import PASS, CataBot, View
from cellarena.sdk.opponents import SEED


def random_move(view: View, rng: random.Random) -> tuple[int, int]:
    moves = view.legal_moves()
    return rng.choice(moves) if moves else PASS


class RandomCata(CataBot):
    def on_tick(self, view: View) -> tuple[int, int]:
        return random_move(view, random.Random(f"{SEED}:{view.seat}:{view.tick}"))
