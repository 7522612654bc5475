"""A C.A.T.A. bot that plays a uniformly random legal move: the baseline every other bot must beat.

python example_bots/cata/random_legal.py      (cellarena match sets the connection up)
"""

from __future__ import annotations

import random

from cellarena.sdk import run
from cellarena.sdk.games.cata import PASS, CataBot, View


class RandomLegal(CataBot):
    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def on_tick(self, view: View) -> tuple[int, int]:
        moves = view.legal_moves()
        return self.rng.choice(moves) if moves else PASS


if __name__ == "__main__":
    raise SystemExit(run(RandomLegal))
