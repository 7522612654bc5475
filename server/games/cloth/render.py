"""A terminal picture of a Cloth of Gold board for ``--watch``: cells coloured, territory shaded."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cellarena.sdk.games.cloth import CHARS, territory_plane

#: Cell code -> style; territory (bit 0: A's, bit 1: B's) -> background.
STYLES = ("grey30", "bold red", "bold blue", "green", "grey50")
BACKGROUNDS = ("", "on grey11", "on grey15", "on grey23")


def render(engine: Any) -> Text:
    """The board, one character per cell, with a status line."""
    board = engine.board
    terr = territory_plane(board)
    text = Text()
    a, b = engine.units()
    text.append(f"round {engine.round}  a {a}  b {b}  scores {engine.scores()}\n")
    for y, row in enumerate(board.tolist()):
        for x, code in enumerate(row):
            style = " ".join(s for s in (STYLES[code], BACKGROUNDS[int(terr[y, x])]) if s)
            text.append(CHARS[code], style=style)
        text.append("\n")
    return text
