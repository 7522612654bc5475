"""A text picture of a Colorblocks board for `--watch`: map characters, guards `G`, units by kind letter."""

from __future__ import annotations

from collections.abc import Sequence
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


def legend(names: Sequence[str]) -> Text:
    """The map's characters, the units' letters, and which seat is red and which blue."""
    out = Text()
    out.append("R", STYLES[Block.RED]).append(f" seat 0 ({names[0]})'s block  ")
    out.append("B", STYLES[Block.BLUE]).append(f" seat 1 ({names[1]})'s block  ")
    out.append("1", STYLES[Block.OBJECTIVE_RED]).append(" 2", STYLES[Block.OBJECTIVE_BLUE])
    out.append(" objectives  ")
    out.append("s t spawns  . neutral  T true neutral  X dead\n")
    for seat, name in enumerate(names[:2]):
        out.append(" ".join(UNIT_LETTERS.values()) + " G", SEAT_STYLES[seat])
        out.append(f" seat {seat} ({name})'s units and guards\n")
    out.append("units: " + ", ".join(f"{letter} {kind}" for kind, letter in UNIT_LETTERS.items()) + "\n")
    return out
