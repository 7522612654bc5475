"""The slow, obviously correct C.A.T.A. automaton: one cell at a time, straight from the rulebook.

The fast step in `cellarena.sdk.games.cata` is checked against these on random boards and rules;
`cellarena bench cata` times `reference_step` beside it.
"""

from __future__ import annotations

Board = list[list[int]]


def reference_step(board: Board, rule: list[int], torus: bool = False) -> Board:
    """next(row, col) = rule[16*C + 8*U + 4*R + 2*D + L]; outside cells are black unless ``torus``."""
    n = len(board)

    def at(row: int, col: int) -> int:
        if torus:
            return board[row % n][col % n]
        if 0 <= row < n and 0 <= col < n:
            return board[row][col]
        return 0

    out = []
    for row in range(n):
        line = []
        for col in range(n):
            c, u, r = at(row, col), at(row - 1, col), at(row, col + 1)
            d, left = at(row + 1, col), at(row, col - 1)
            line.append(rule[16 * c + 8 * u + 4 * r + 2 * d + left])
        out.append(line)
    return out


def reference_react(
    board: Board,
    rule: list[int],
    loser: int | None,
    max_generations: int,
    pick_window: int,
    torus: bool = False,
) -> tuple[str, int, int, Board]:
    """(ended, generations, period, final board) of a reaction phase, by plain list search."""
    states = [board]
    for g in range(1, max_generations + 1):
        nxt = reference_step(states[-1], rule, torus)
        if nxt == states[-1]:
            return "static", g, 1, nxt
        if nxt in states:
            j = states.index(nxt)
            return "cycle", g, g - j, _pick(states[j:], loser, nxt)
        states.append(nxt)
    return "cap", max_generations, 0, _pick(states[-pick_window:], loser, states[-1])


def _pick(candidates: list[Board], loser: int | None, default: Board) -> Board:
    if loser is None:
        return default
    counts = [sum(v == loser for line in s for v in line) for s in candidates]
    return candidates[counts.index(max(counts))]  # index() finds the earliest of the best
