"""2dFDCAL's random opponent: now and then a random legal edit, and a token spent at random."""

from __future__ import annotations

import random

from cellarena.sdk.games.drop2df import Drop2dfBot, Token, View, edited, token_error
from cellarena.sdk.opponents import SEED


def random_ops(view: View, rng: random.Random) -> list[int | Token]:
    """At most one edit and one token, each legal on the row as it is (the edit acts first)."""
    ops: list[int | Token] = []
    row = view.row
    edits = view.legal_edits()
    if edits and rng.random() < 0.3:
        cell = rng.choice(edits)
        ops.append(cell)
        row = edited(row, cell)
    if view.tokens and rng.random() < 0.1:
        face = rng.choice(view.tokens)
        cells = [c for c in range(1, len(row) - 1) if token_error(row, face, c, view.tokens) is None]
        if cells:
            ops.append(Token(face, rng.choice(cells)))
    return ops


class RandomDrop2df(Drop2dfBot):
    def on_tick(self, view: View) -> list[int | Token]:
        return random_ops(view, random.Random(f"{SEED}:{view.tick}:{view.turn}"))
