"""Rezzo's random opponent: each agent wanders, laying a little wire and hitting what it bumps into."""

from __future__ import annotations

import random

from cellarena.sdk.games.rezzo import Move, RezzoBot, View, Viewport
from cellarena.sdk.opponents import SEED


def random_move(viewport: Viewport, rng: random.Random) -> Move:
    """A random move, weighted towards walking, among those that are legal now (advance and build
    only onto blank cells, hit only wire and flags)."""
    options: list[tuple[Move, int]] = [(Move.LEFT, 2), (Move.RIGHT, 2)]
    if viewport.can_advance():
        options += [(Move.ADVANCE, 10), (Move.BUILD, 2)]
    if viewport.can_hit():
        options.append((Move.HIT, 3))
    moves = [move for move, _ in options]
    return rng.choices(moves, [weight for _, weight in options])[0]


class RandomRezzo(RezzoBot):
    def on_tick(self, view: View) -> list[int]:
        seat = self.info.seat if self.info and self.info.seat is not None else 0
        return [
            random_move(viewport, random.Random(f"{SEED}:{seat}:{view.tick}:{agent}"))
            for agent, viewport in view
        ]
