"""A slow, obviously correct Cloth of Gold step and territory, cell by cell, straight from the table.

The fast bit-plane step in `cellarena.sdk.games.cloth` is checked against these on random boards.
"""

from __future__ import annotations

A, B, C, D = 1, 2, 3, 4


def rule(w: int, na: int, nb: int, nc: int) -> int:
    """The normative decision table: a cell's next state from its state and its neighbour counts."""
    n = na + nb + nc
    if n < 2 or n > 3:
        return 0
    delta = na - nb
    if w == 0:
        if n != 3 or delta == 0:
            return 0
        return A if delta > 0 else B
    if w == A:
        return D if delta < 0 else A
    if w == B:
        return D if delta > 0 else B
    if w == C:
        return A if delta > 0 else B if delta < 0 else C
    return D  # w == D


def step(board: list[list[int]]) -> list[list[int]]:
    """One generation; cells outside the board count as empty."""
    h, w = len(board), len(board[0])
    out = [[0] * w for _ in range(h)]
    for y in range(h):
        for x in range(w):
            counts = {A: 0, B: 0, C: 0}
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    if (dy or dx) and 0 <= y + dy < h and 0 <= x + dx < w:
                        v = board[y + dy][x + dx]
                        if v in counts:
                            counts[v] += 1
            out[y][x] = rule(board[y][x], counts[A], counts[B], counts[C])
    return out


def field(board: list[list[int]], code: int) -> list[list[int]]:
    """Sum over the player's cells of max(0, 36 - d^2)^2, for every cell."""
    h, w = len(board), len(board[0])
    units = [(x, y) for y in range(h) for x in range(w) if board[y][x] == code]
    return [
        [sum(max(0, 36 - (x - ux) ** 2 - (y - uy) ** 2) ** 2 for ux, uy in units) for x in range(w)]
        for y in range(h)
    ]
