"""A text picture of a drop2df match for `--watch`: the turn, then each seat's row and score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from cellarena.sdk.games.drop2df import text


def render(engine: Any) -> Text:
    """One line per seat: its row as the puzzle writes it, and its score."""
    out = Text(f"turn {min(engine.tick + 1, engine.turns)}/{engine.turns}\n", style="bold")
    for seat, score in enumerate(engine.scores()):
        out.append(f"seat {seat}  {text(engine.row(seat))}  score {score}\n")
    return out


def legend(names: Sequence[str]) -> Text:
    """The cells' characters as the rules print them, and each seat's name."""
    out = Text("[ ] empty  [+] positive charge  [-] negative charge  [#] block  [@] the r@bbit wave  ")
    out.append("[0] hole\n")
    out.append("  ".join(f"seat {seat}: {name}" for seat, name in enumerate(names)) + "\n")
    return out
