"""Random legal: each turn, a handful of actions drawn at random from those legal at that moment.

Every action is drawn from `View.legal_actions()` and applied to the bot's copy of the board before
the next is drawn, so the server never refuses one. The dice are seeded from the seat and the turn,
so the same position always gets the same turn, as tournaments need.

    python example_bots/colorblocks/random_legal.py --port 7777
"""

from __future__ import annotations

import random
from typing import Any

from cellarena.sdk import run
from cellarena.sdk.games.colorblocks import ColorblocksBot, View, random_turn

SEED = 20240808


class RandomLegal(ColorblocksBot):
    def on_tick(self, view: View) -> list[list[Any]]:
        return random_turn(view, random.Random(f"{SEED}:{view.seat}:{view.turn}"))


if __name__ == "__main__":
    raise SystemExit(run(RandomLegal))
