"""Random walker: wanders about, laying a little wire and hitting what it bumps into.

The simplest bot that really plays. Each agent picks among the moves that are legal right now
(advance and build only onto blank cells, hit only wire and flags), with advancing most likely. The
dice are seeded from the tick and the agent index, so the same view always gets the same move, as
tournaments need.

    python example_bots/rezzo/random_walker.py --port 7777
"""

from __future__ import annotations

import random

from cellarena.sdk import Bot, Move, View, Viewport, run

SEED = 20240601


def choose(viewport: Viewport, rng: random.Random) -> Move:
    """A random move, weighted towards walking, among those that are legal now."""
    options: list[tuple[Move, int]] = [(Move.LEFT, 2), (Move.RIGHT, 2)]
    if viewport.can_advance():
        options += [(Move.ADVANCE, 10), (Move.BUILD, 2)]
    if viewport.can_hit():
        options.append((Move.HIT, 3))
    return rng.choices([move for move, _ in options], [weight for _, weight in options])[0]


class RandomWalker(Bot):
    def on_tick(self, view: View) -> list[int]:
        seat = self.info.seat if self.info and self.info.seat is not None else 0
        out: list[int] = []
        for agent, viewport in view:
            rng = random.Random(f"{SEED}:{seat}:{view.tick}:{agent}")
            out.append(choose(viewport, rng))
        return out


if __name__ == "__main__":
    raise SystemExit(run(RandomWalker))
