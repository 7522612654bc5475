"""Colorblocks' random opponent: a handful of actions drawn from those legal at each moment."""

from __future__ import annotations

import random
from typing import Any

from cellarena.sdk.games.colorblocks import ColorblocksBot, View, random_turn
from cellarena.sdk.opponents import SEED


class RandomColorblocks(ColorblocksBot):
    def on_tick(self, view: View) -> list[list[Any]]:
        return random_turn(view, random.Random(f"{SEED}:{view.seat}:{view.turn}"))
