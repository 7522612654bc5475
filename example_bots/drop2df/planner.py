"""A drop2df bot that plans the whole game on its first turn by beam search over edits, then follows it.

The game is deterministic and nobody else touches your board, so a plan made once stays right. Each
turn of the search expands every kept row by a pass and every legal edit, scores and steps them all
at once with the SDK's vectorised step, merges equal rows (keeping the best score), and keeps the
best `WIDTH`. If the best plan does not beat plain passing, the bot passes: it never does worse
(when the whole game fits in its time; a very long game is planned in pieces).
"""

from __future__ import annotations

import time

import numpy as np

from cellarena.sdk import run
from cellarena.sdk.games.drop2df import BLOCK, EMPTY, MINUS, PLUS, RABBIT, Drop2dfBot, View, step, step_many

WIDTH = 1000
#: Code -> code after an edit; codes that cannot be edited map to themselves (and are skipped).
TOGGLE = np.array([BLOCK, MINUS, PLUS, EMPTY, RABBIT, 5], np.uint8)
EDITABLE = np.array([True, True, True, True, False, False])
PASS = 0  # in a plan, 0 is a pass and i > 0 edits cell i (cell 0 is a hole, never edited)


def passing_score(row: bytes, turns: int) -> int:
    """What ``row`` scores in ``turns`` turns with no edits."""
    score = 0
    for _ in range(turns):
        score += row[-2] == RABBIT
        row = step(row)
    return score


def row_keys(rows: np.ndarray) -> np.ndarray:
    """One sortable key per row: an int64 packing 3 bits per inner cell when they fit, else raw bytes."""
    inner = rows[:, 1:-1]
    if inner.shape[1] <= 21:
        return inner.astype(np.int64) @ (np.int64(8) ** np.arange(inner.shape[1], dtype=np.int64))
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()


def plan(row: bytes, turns: int, width: int = WIDTH, seconds: float = 1e9) -> tuple[int, list[int]]:
    """(score, one op per turn) of the best plan the beam finds for ``turns`` turns from ``row``.

    If ``seconds`` run out first, the plan covers only the turns searched so far (at least one).
    """
    deadline = time.monotonic() + seconds
    n = len(row)
    rows = np.frombuffer(row, np.uint8)[None, :].copy()
    scores = np.zeros(1, np.int64)
    history: list[tuple[np.ndarray, np.ndarray]] = []  # per turn: (parent index, op) of each kept row
    moves = np.arange(n - 1)  # 0 = pass, i = edit cell i (1..n-2)
    for _ in range(turns):
        k = len(rows)
        parent = np.repeat(np.arange(k), n - 1)
        op = np.tile(moves, k)
        cand = rows[parent]
        at = cand[np.arange(len(op)), op]
        legal = (op == PASS) | EDITABLE[at]
        parent, op, cand = parent[legal], op[legal], cand[legal]
        edit = op != PASS
        cand[np.flatnonzero(edit), op[edit]] = TOGGLE[cand[np.flatnonzero(edit), op[edit]]]
        gained = scores[parent] + (cand[:, -2] == RABBIT)
        stepped = step_many(cand)
        # Merge equal rows, keeping the best score; then keep the best `width`, fewer edits first.
        keys = row_keys(stepped)
        order = np.lexsort((edit, -gained, keys))
        keys_sorted = keys[order]
        first = np.ones(len(order), bool)
        first[1:] = keys_sorted[1:] != keys_sorted[:-1]
        keep = order[first]
        if len(keep) > width:
            # Among equal scores, rows with more of the @ wave alive have more to gain.
            alive = np.count_nonzero(stepped[keep] == RABBIT, axis=1)
            keep = keep[np.lexsort((edit[keep], -alive, -gained[keep]))[:width]]
        rows, scores = stepped[keep], gained[keep]
        history.append((parent[keep], op[keep]))
        if time.monotonic() > deadline:
            break  # a long game on a slow machine: plan the rest later
    best = int(np.argmax(scores))
    ops = []
    for parent, op in reversed(history):
        ops.append(int(op[best]))
        best = int(parent[best])
    ops.reverse()
    return int(scores.max()), ops


class Planner(Drop2dfBot):
    def __init__(self) -> None:
        self.ops: list[int] = []
        self.expect: bytes | None = None

    def on_tick(self, view: View) -> int | None:
        if view.row != self.expect or not self.ops:
            # A short budget (or a slow machine) gets a narrower, quicker search; a third of the
            # budget is the most it may take, so a plan that does not fit is made in pieces.
            width = WIDTH if view.budget_ms >= 1000 else WIDTH // 5
            seconds = view.budget_ms / 3000 if view.budget_ms else 1.0
            score, ops = plan(view.row, view.turns_left, width, seconds)
            self.ops = ops if score > passing_score(view.row, len(ops)) else [PASS] * len(ops)
        op = self.ops.pop(0)
        row = (
            view.row
            if op == PASS
            else view.row[:op] + bytes((int(TOGGLE[view.row[op]]),)) + view.row[op + 1 :]
        )
        self.expect = step(row)
        return None if op == PASS else op


if __name__ == "__main__":
    raise SystemExit(run(Planner))
