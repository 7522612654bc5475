"""A text picture of a Colorblocks board for `--watch`: map characters, guards `G`, units by kind letter."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cellarena.sdk.games.colorblocks import CHARS, Block, Board

STYLES: dict[int, str] = {
    Block.RED: "red",
    Block.BLUE: "blue",
    Block.OBJECTIVE_RED: "bold red",
    Block.OBJECTIVE_BLUE: "bold blue",
}
SEAT_STYLES = ("bold white on red", "bold white on blue")
UNIT_LETTERS = {"fighter": "f", "paver": "p", "cleaner": "c", "shooter": "h", "shield": "d"}


def render(board: Board, turn: int, to_move: int) -> Text:
    """One character per cell (units and guards drawn over their block), then a status line."""
    where = board.occupied()
    out = Text()
    for y in range(board.height):
        for x in range(board.width):
            unit = where.get((x, y))
            if unit is not None:
                out.append(UNIT_LETTERS[unit.kind], SEAT_STYLES[unit.owner])
            elif board.guards[y, x] >= 0:
                out.append("G", SEAT_STYLES[int(board.guards[y, x])])
            else:
                b = int(board.blocks[y, x])
                out.append(CHARS[b], STYLES.get(b, "bright_black"))
            out.append(" ")
        out.append("\n")
    out.append(
        f"turn {turn}, {'red' if to_move == 0 else 'blue'} to move; guards in reserve {board.reserves}"
    )
    return out


def render_engine(engine: Any) -> Text:
    """An engine's board and whose turn it is, for `cellarena match --watch` and `replay show`."""
    return render(engine.board, engine.turn, engine.to_move)
