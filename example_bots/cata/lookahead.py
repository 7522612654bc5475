"""A C.A.T.A. bot that tries every legal move on a copy of the game and keeps the best.

For each candidate it runs the reaction phase with the engine's own code (`react` from the SDK):
meditation's reset, the tally, and the automaton until it settles, with the losing side's pick.
A move scores the cells of its colour minus the opponent's, at the coming tally and at the end of
the reaction (the next tally). It ignores the opponent's remaining moves and the health thresholds.

Its work is capped twice, so that it answers well inside the budget: a total number of simulated
generations per decision, shared by the candidates, and a wall-clock stop at a fraction of the
budget (whatever it has evaluated by then decides).
"""

from __future__ import annotations

import time

import numpy as np

from cellarena.sdk import run
from cellarena.sdk.games.cata import PASS, Act, Automaton, CataBot, View, quadrants, react, white_count


class Lookahead(CataBot):
    #: Generations simulated per decision, over all candidates (about 40 us each on 64x64).
    generation_budget = 4000
    #: Stop evaluating after this fraction of the move's budget.
    time_fraction = 0.3

    def __init__(self, generation_budget: int | None = None) -> None:
        if generation_budget is not None:
            self.generation_budget = generation_budget
        self._ca: Automaton | None = None

    def on_tick(self, view: View) -> tuple[int, int]:
        started = time.monotonic()
        stop = started + view.budget_ms * self.time_fraction / 1000.0 if view.budget_ms else None
        moves = view.legal_moves()
        if not moves:
            return PASS
        if self._ca is None or self._ca.size != view.size:
            self._ca = Automaton(view.size)
        per_move = max(8, self.generation_budget // len(moves))
        best, best_score = moves[0], None
        for kind, index in moves:
            score = self.evaluate(view, kind, index, per_move)
            if best_score is None or score > best_score:
                best, best_score = (kind, index), score
            if stop is not None and time.monotonic() > stop:
                break
        return best

    def evaluate(self, view: View, kind: int, index: int, generations: int) -> int:
        """My cells minus the opponent's, at the coming tally plus after the reaction phase."""
        ca = self._ca
        assert ca is not None
        rule = np.array(view.rule, np.uint8)
        if kind in (Act.STRIKE, Act.BLOCK):
            rule[index] = view.seat
        meditate = kind == Act.MEDITATE or view.meditated or view.opponent_meditated
        start = quadrants(view.size) if meditate else view.board
        cells = view.size * view.size
        whites = white_count(start)
        health = [view.health[0] - whites, view.health[1] - (cells - whites)]
        loser = None if health[0] == health[1] else int(np.argmin(health))
        ca.load(start)
        react(ca, rule, loser=loser, max_generations=generations)
        after = white_count(ca.board)
        diff = (2 * whites - cells) + (2 * after - cells)  # white minus black, twice
        return diff if view.seat == 1 else -diff


if __name__ == "__main__":
    raise SystemExit(run(Lookahead))
