"""A terminal picture of a Cloth of Gold board for ``--watch``: cells coloured, territory shaded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from cellarena.sdk.games.cloth import CHARS, territory_plane

#: Cell code -> style; territory (bit 0: A's, bit 1: B's) -> background, tinted with its owner's
#: colour: two greys were too close to tell whose territory a cell is in.
STYLES = ("grey30", "bold red", "bold blue", "green", "grey50")
BACKGROUNDS = ("", "on rgb(72,16,16)", "on rgb(16,24,88)", "on rgb(64,64,64)")


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


def legend(names: Sequence[str]) -> Text:
    """Each character and background of the picture, the seats by name."""
    out = Text()
    seats = [f"seat {s} ({name})'s cell" for s, name in enumerate(names[:2])]
    words = ("empty", *seats, "neutral cell", "killed cell")
    for code, word in enumerate(words):
        out.append(CHARS[code], style=STYLES[code]).append(f" {word}  ")
    out.append("\n")
    territories = (f"{names[0]}'s territory", f"{names[1]}'s territory", "both territories")
    for terr, word in enumerate(territories, 1):
        out.append("  ", style=BACKGROUNDS[terr]).append(f" {word}  ")
    out.append("\n")
    return out
