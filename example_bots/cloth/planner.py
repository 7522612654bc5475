"""Cloth of Gold: tries candidate placements on a copy of the board, runs each round's generations
with the SDK's step, and keeps the batch that leaves it furthest ahead."""

from __future__ import annotations

import random
import time

import numpy as np

from cellarena.sdk import run
from cellarena.sdk.games.cloth import A, ClothBot, ClothWorld, View, field, place

#: Shapes worth trying, as (dx, dy) offsets: still lifes survive the generations, the others grow.
SHAPES: dict[str, list[tuple[int, int]]] = {
    "block": [(0, 0), (1, 0), (0, 1), (1, 1)],
    "beehive": [(1, 0), (2, 0), (0, 1), (3, 1), (1, 2), (2, 2)],
    "loaf": [(1, 0), (2, 0), (0, 1), (3, 1), (1, 2), (3, 2), (2, 3)],
    "boat": [(0, 0), (1, 0), (0, 1), (2, 1), (1, 2)],
    "tub": [(1, 0), (0, 1), (2, 1), (1, 2)],
    "r_pentomino": [(1, 0), (2, 0), (0, 1), (1, 1), (1, 2)],
    "blinker": [(0, 0), (1, 0), (2, 0)],
    "two_blocks": [(0, 0), (1, 0), (0, 1), (1, 1), (3, 0), (4, 0), (3, 1), (4, 1)],
    "pond": [(1, 0), (2, 0), (0, 1), (3, 1), (0, 2), (3, 2), (1, 3), (2, 3)],
}
#: Share of the move budget spent planning; the rest is margin for a busy machine.
BUDGET_SHARE = 0.35
MAX_PLAN_MS = 700.0


class Planner(ClothBot):
    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.world: ClothWorld | None = None

    def candidates(self, view: View) -> list[list[tuple[int, int]]]:
        """Shapes anchored at legal cells, best places first: near our own field, then anywhere."""
        legal = view.legal()
        ys, xs = np.nonzero(legal)
        if len(xs) == 0:
            return []
        # Prefer cells deep in our territory, where a whole shape fits; on the first turn, the middle.
        if view.first:
            h, w = view.board.shape
            weight = -((xs - w / 2) ** 2 + (ys - h / 2) ** 2)
        else:
            weight = field(view.board, view.me)[ys, xs].astype(float)
        order = np.argsort(-weight + np.array([self.rng.random() for _ in xs]) * 1e-3)
        anchors = [(int(xs[i]), int(ys[i])) for i in order[:12]]
        self.rng.shuffle(anchors)
        out = []
        for x, y in anchors:
            for shape in SHAPES.values():
                if len(shape) <= view.max_units:
                    out.append([(x + dx, y + dy) for dx, dy in shape])
        self.rng.shuffle(out)
        return out

    def evaluate(self, view: View, units: list[tuple[int, int]]) -> tuple[float, list[tuple[int, int]]]:
        """Our lead after this round's generations if we place ``units`` (and the units that stick)."""
        board = view.board.copy()
        placed, _ = place(board, units, view.me, view.first)
        if not placed:
            return float("-inf"), []
        if self.world is None or (self.world.height, self.world.width) != board.shape:
            self.world = ClothWorld(*board.shape)
        self.world.load(board)
        self.world.run(view.generations)
        a, b, _, _ = self.world.counts()
        mine, theirs = (a, b) if view.me == A else (b, a)
        return mine - theirs + 0.01 * len(placed), placed

    def on_tick(self, view: View) -> list[tuple[int, int]]:
        deadline = time.monotonic() + min(MAX_PLAN_MS, BUDGET_SHARE * view.budget_ms) / 1000.0
        best: tuple[float, list[tuple[int, int]]] = (float("-inf"), [])
        for units in self.candidates(view):
            if time.monotonic() > deadline and best[1]:
                break
            score, placed = self.evaluate(view, units)
            if score > best[0]:
                best = (score, placed)
        if not best[1]:  # nothing stuck: any legal cell beats an empty batch
            ys, xs = np.nonzero(view.legal())
            return [(int(xs[0]), int(ys[0]))] if len(xs) else []
        return best[1]


if __name__ == "__main__":
    raise SystemExit(run(Planner))
