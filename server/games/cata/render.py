"""A text picture of a C.A.T.A. match for `--watch`: the board (two cells per character), the rule
board and the health."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from cellarena.sdk.games.cata import HALF

#: Upper and lower cell of one character cell, (top, bottom) -> glyph: white cells are drawn.
GLYPHS = {(0, 0): " ", (1, 0): "▀", (0, 1): "▄", (1, 1): "█"}


def render(engine: Any) -> Text:
    """The board at most 128 cells wide (larger boards are sampled), then the rule and health."""
    board = engine.board
    step = max(1, board.shape[0] // 128)
    b = board[::step, ::step]
    out = Text()
    for r in range(0, b.shape[0], 2):
        top = b[r]
        bottom = b[r + 1] if r + 1 < b.shape[0] else top * 0
        out.append("".join(GLYPHS[(int(t), int(d))] for t, d in zip(top, bottom, strict=True)) + "\n")
    rule = [int(v) for v in engine.rule]
    out.append("rule black " + "".join(".#"[v] for v in rule[:HALF]), style="bold")
    out.append("  white " + "".join(".#"[v] for v in rule[HALF:]) + "\n", style="bold")
    q = engine.q
    out.append(
        f"turn {engine.turn} move {engine.move}  health black {engine.health[0] / q:.2f}"
        f"  white {engine.health[1] / q:.2f}\n"
    )
    return out


def legend(names: Sequence[str]) -> Text:
    """What the picture's characters mean, and whose colour is which."""
    out = Text("█ ▀ ▄ white cells, blank black (two cells to a character: top and bottom)\n")
    out.append(f"black: seat 0 ({names[0]})'s colour, health black; ")
    out.append(f"white: seat 1 ({names[1]})'s, health white\n")
    return out
