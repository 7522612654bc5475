"""Text pictures of a Rezzo world, for `cellarena sim`, `match --watch` and `replay show`.

One character per cell, coloured by owner where the terminal allows. The characters follow the map
format where it has one (`.` `#` `@` `~`, bases `A`-`H`, geysers `a`-`h`); states a map cannot hold
get their own: `*` photon, a flag its owner's seat number `0`-`7` (so that owners show without
colour too: base `A`, geyser `a` and flag `0` are seat 0's), and an arrow for an agent's facing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.text import Text

from cellarena.sdk.games.rezzo import Cell, Facing

if TYPE_CHECKING:
    from rich.console import Console

OWNER_STYLES = (
    "bold red",
    "bold blue",
    "bold green",
    "bold magenta",
    "bold yellow",
    "bold cyan",
    "bold white",
    "bold bright_black",
)
PLAIN = {
    Cell.BLANK: ".",
    Cell.CONDUCTOR: "#",
    Cell.ELECTRON: "@",
    Cell.TAIL: "~",
    Cell.PHOTON: "*",
    Cell.OOB: " ",
}
PLAIN_STYLES = {
    Cell.BLANK: "bright_black",
    Cell.CONDUCTOR: "yellow",
    Cell.ELECTRON: "bold bright_white",
    Cell.TAIL: "cyan",
    Cell.PHOTON: "bold bright_yellow",
}
ARROWS = {Facing.N: "^", Facing.E: ">", Facing.S: "v", Facing.W: "<"}


def cell_char(code: int, facing: Facing | None = None) -> str:
    """The character for one cell code (absolute owner)."""
    if code < Cell.AGENT:
        return PLAIN.get(Cell(code), "?")
    kind, owner = code & 0xF8, code & 7
    if kind == Cell.AGENT:
        return ARROWS[facing] if facing is not None else "&"
    if kind == Cell.FLAG:
        return str(owner)
    if kind == Cell.GEYSER:
        return "abcdefgh"[owner]
    return "ABCDEFGH"[owner]


def render(cells: np.ndarray, agents: Iterable[tuple[int, int, Facing]] = ()) -> Text:
    """The world as rich Text; ``agents`` gives (x, y, facing) so agents show as arrows."""
    facing = {(x, y): f for x, y, f in agents}
    out = Text()
    for y, row in enumerate(cells):
        for x, raw in enumerate(row):
            code = int(raw)
            ch = cell_char(code, facing.get((x, y)))
            style = OWNER_STYLES[code & 7] if code >= Cell.AGENT else PLAIN_STYLES.get(Cell(code), "")
            out.append(ch, style=style)
        out.append("\n")
    return out


def render_engine(engine: Any) -> Text:
    """An engine's world with its live agents, for `cellarena match --watch`."""
    return render(engine.cells(), [(a.x, a.y, a.facing) for a in engine.agents() if a.alive])


PLAIN_WORDS = {
    Cell.BLANK: "blank",
    Cell.CONDUCTOR: "wire",
    Cell.ELECTRON: "electron",
    Cell.TAIL: "tail",
    Cell.PHOTON: "photon",
}


def legend(names: Sequence[str]) -> Text:
    """What `render` draws, each character in its own style; one line per seat names its owner."""
    out = Text()
    for code, word in PLAIN_WORDS.items():
        out.append(PLAIN[code], style=PLAIN_STYLES[code])
        out.append(f" {word}" + ("\n" if code == Cell.PHOTON else "  "))
    for owner, name in enumerate(names):
        style = OWNER_STYLES[owner]
        out.append(f"{'ABCDEFGH'[owner]} {'abcdefgh'[owner]} {owner} ^>v<", style=style)
        out.append(f"  seat {owner} ({name}): base, geyser, flag, agents (pointing where they face)\n")
    return out


def show(console: Console, engine: Any, seat: Callable[[int], str]) -> None:
    """`cellarena replay show`: where each agent is, then the world."""
    for a in engine.agents():
        state = "" if a.alive else " (gone)"
        console.print(
            f"  player {seat(a.player)} agent {a.index}: ({a.x}, {a.y}) facing {a.facing.name}{state}"
        )
    # soft_wrap: a board wider than the terminal must not be re-wrapped into a different picture.
    console.print(render_engine(engine), soft_wrap=True)
