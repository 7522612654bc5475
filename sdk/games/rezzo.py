"""Rezzo's public codes: cell states, moves, facings and the viewport layout.

These numbers are the wire contract between the server and every bot, in any language, so they live
in the SDK and the server imports them from here. `docs/games/rezzo.md` documents the same table.

A cell code is one byte. Unowned states are 0..4 (and 7 for "outside the world"); owned states are
``kind + owner`` with ``kind`` one of AGENT, FLAG, GEYSER, BASE (multiples of 8) and ``owner`` 0..7.
In a viewport the owner is *relative*: 0 is the viewer, 1..P-1 the others in rotating seat order.
"""

from __future__ import annotations

from enum import IntEnum

MAX_PLAYERS = 8
VIEW_SIZE = 13
#: Row and column of the viewing agent inside its viewport (bottom centre).
VIEW_AGENT_ROW = 12
VIEW_AGENT_COL = 6
#: Highest damage a cell can carry; the hit that would make it 4 blanks the cell instead.
MAX_DAMAGE = 3
OWNER_MASK = 0x07
KIND_MASK = 0xF8


class Cell(IntEnum):
    """Cell states. Owned kinds (AGENT, FLAG, GEYSER, BASE) are added to an owner number 0..7."""

    BLANK = 0
    CONDUCTOR = 1
    ELECTRON = 2
    TAIL = 3
    PHOTON = 4
    OOB = 7  # outside the world: only ever seen in viewports
    AGENT = 8
    FLAG = 16
    GEYSER = 24
    BASE = 32


OWNED_KINDS = (Cell.AGENT, Cell.FLAG, Cell.GEYSER, Cell.BASE)


class Move(IntEnum):
    """An agent's move for one tick. Anything else, or no answer, is NOOP."""

    NOOP = 0
    ADVANCE = 1
    LEFT = 2
    RIGHT = 3
    BUILD = 4
    HIT = 5


class Facing(IntEnum):
    """Compass facing; turning right adds one (mod 4)."""

    N = 0
    E = 1
    S = 2
    W = 3


#: (dx, dy) of one step forward, x to the right and y down.
FORWARD = {Facing.N: (0, -1), Facing.E: (1, 0), Facing.S: (0, 1), Facing.W: (-1, 0)}
#: (dx, dy) of one step to the agent's right.
RIGHTWARD = {Facing.N: (1, 0), Facing.E: (0, 1), Facing.S: (-1, 0), Facing.W: (0, -1)}


def kind(code: int) -> int:
    """The state without its owner: a Cell value."""
    return code if code < Cell.AGENT else code & KIND_MASK


def owner(code: int) -> int | None:
    """The owner of an owned state, else None."""
    return code & OWNER_MASK if code >= Cell.AGENT else None


def owned(kind_: Cell, owner_: int) -> int:
    """The code of an owned state."""
    if kind_ not in OWNED_KINDS:
        raise ValueError(f"{kind_!r} has no owner")
    if not 0 <= owner_ < MAX_PLAYERS:
        raise ValueError(f"owner {owner_} is outside 0..{MAX_PLAYERS - 1}")
    return int(kind_) + owner_


def describe(code: int) -> str:
    """A short human name such as 'flag1' or 'conductor'."""
    k = kind(code)
    try:
        name = Cell(k).name.lower()
    except ValueError:
        return f"unknown({code})"
    o = owner(code)
    return name if o is None else f"{name}{o}"
