"""A text picture of a drop2df match for `--watch`: the turn, then each seat's row and score."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cellarena.sdk.games.drop2df import text


def render(engine: Any) -> Text:
    """One line per seat: its row as the puzzle writes it, and its score."""
    out = Text(f"turn {min(engine.tick + 1, engine.turns)}/{engine.turns}\n", style="bold")
    for seat, score in enumerate(engine.scores()):
        out.append(f"seat {seat}  {text(engine.row(seat))}  score {score}\n")
    return out
