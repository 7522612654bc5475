"""Colorblocks for bots: the public codes, the complete rules of a position, and legal-action listing.

The rules live here, in `Board`, and the server's engine plays every turn through the same class, so
what `Board.check` accepts is exactly what the server accepts. A bot gets a `View` (the board as the
server showed it, its seat and the reasons its last turn's refused actions were refused) and returns
a list of actions::

    ["place", x, y]                    put a colour block of yours on (x, y)
    ["move", unit, x, y]               move a unit in a straight line to (x, y)
    ["move", unit, x, y, "dead"]       capture onto an objective and turn it into a dead block
    ["act", unit, x, y]                the unit's action on (x, y): fighter, paver, cleaner, shooter
    ["destruct", unit]                 the unit destroys itself
    ["guard", x, y]                    place a guard from your reserve on (x, y)
    ["guard", x, y, from_x, from_y]    move your guard at (from_x, from_y) to (x, y)
    ["spawn", kind]                    the kind of unit your spawn block makes next turn

`docs/games/colorblocks.md` has the rules in full; `docs/protocol.md` the wire format.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

import numpy as np

from cellarena.sdk.bot import GameBot
from cellarena.sdk.games import MovesError, bank_ms_of
from cellarena.sdk.protocol import Tick, is_int

WIDTH = HEIGHT = 9
PLAYERS = 2
MAX_TURNS = 100
GUARDS = 2
#: A longer list of actions is invalid as a whole: the turn passes.
MAX_ACTIONS = 64
KINDS = ("fighter", "paver", "cleaner", "shooter", "shield")
FIRST_SPAWN = "fighter"
SHOOTER_RANGE = (2, 3)
#: Orthogonal steps as (dx, dy): east, west, south, north.
STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))


class Block(IntEnum):
    """A block code, one byte per cell of the ``board`` field. Seat 0 is red, seat 1 blue."""

    NEUTRAL = 0
    RED = 1
    BLUE = 2
    TRUE_NEUTRAL = 3
    DEAD = 4
    OBJECTIVE_RED = 5
    OBJECTIVE_BLUE = 6
    SPAWN_RED = 7
    SPAWN_BLUE = 8


def color(seat: int) -> int:
    """The colour block code of ``seat``."""
    return Block.RED + seat


def objective(seat: int) -> int:
    return Block.OBJECTIVE_RED + seat


def spawn_block(seat: int) -> int:
    return Block.SPAWN_RED + seat


#: The default 9x9 layout (rulebook section 5.3), in the map format of `docs/games/colorblocks.md`.
CLASSIC = """\
B B B B 2 B B B B
. . . B t B . . .
. . . . . . . . .
. X . . . . . X .
. . . . T . . . .
. X . . . . . X .
. . . . . . . . .
. . . R s R . . .
R R R R 1 R R R R
"""
#: Map character -> block code.
LEGEND: dict[str, int] = {
    ".": Block.NEUTRAL,
    "R": Block.RED,
    "B": Block.BLUE,
    "T": Block.TRUE_NEUTRAL,
    "X": Block.DEAD,
    "1": Block.OBJECTIVE_RED,
    "2": Block.OBJECTIVE_BLUE,
    "s": Block.SPAWN_RED,
    "t": Block.SPAWN_BLUE,
}
CHARS = {code: ch for ch, code in LEGEND.items()}


@dataclass
class Unit:
    id: int
    owner: int
    kind: str
    x: int
    y: int

    def to_list(self) -> list[Any]:
        return [self.id, self.owner, self.kind, self.x, self.y]


class Refused(Exception):  # noqa: N818 (a refusal is the normal outcome, not an error)
    """An action that does nothing: ``malformed`` (wrong shape) or illegal (the rules forbid it)."""

    def __init__(self, reason: str, malformed: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.malformed = malformed


# ------------------------------------------------------------------------------ colour change
def color_change(board: Board, x: int, y: int, seat: int) -> list[tuple[int, int]]:
    """The cells a block of ``seat`` placed at (x, y) converts, direction by direction.

    In each direction the scan collects neutral and enemy colour blocks (without a guard); the
    collected cells convert only if the scan then reaches an unguarded own colour block. Anything
    else (the edge, a guard, a true neutral, a spawn, a dead block, an objective) ends that direction
    with nothing converted. Units neither stop a scan nor are counted.
    """
    own, enemy = color(seat), color(1 - seat)
    out: list[tuple[int, int]] = []
    blocks, guards = board.blocks, board.guards
    for dx, dy in STEPS:
        run: list[tuple[int, int]] = []
        cx, cy = x + dx, y + dy
        while 0 <= cx < board.width and 0 <= cy < board.height and guards[cy, cx] < 0:
            b = blocks[cy, cx]
            if b in (Block.NEUTRAL, enemy):
                run.append((cx, cy))
            elif b == own:
                out.extend(run)
                break
            else:
                break
            cx += dx
            cy += dy
    return out


def placement_gains(blocks: np.ndarray, guards: np.ndarray, seat: int) -> np.ndarray:
    """For every cell, how many cells a block of ``seat`` placed there would convert (vectorised).

    Whether the cell itself may take a block is not checked here (see `Board.placeable`). Per
    direction, a minimum-accumulate gives each cell the first non-convertible cell beyond it; the
    run up to it converts if that cell is an unguarded own colour block.
    """
    unguarded = guards < 0
    conv = ((blocks == Block.NEUTRAL) | (blocks == color(1 - seat))) & unguarded
    anchor = (blocks == color(seat)) & unguarded
    total = np.zeros(blocks.shape, np.int32)
    for c, a, t in (
        (conv, anchor, total),
        (conv[:, ::-1], anchor[:, ::-1], total[:, ::-1]),
        (conv.T, anchor.T, total.T),
        (conv.T[:, ::-1], anchor.T[:, ::-1], total.T[:, ::-1]),
    ):
        _gains_east(c, a, t)
    return total


def _gains_east(conv: np.ndarray, anchor: np.ndarray, total: np.ndarray) -> None:
    """Adds to ``total`` each cell's conversions looking east (increasing column) in these views."""
    w = conv.shape[1]
    if w < 3:
        return
    cols = np.arange(w, dtype=np.int32)
    # First non-convertible column at or after each column (w if none), from a reversed min-scan.
    idx = np.where(conv, np.int32(w), cols)
    stop = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]
    # A block at column j scans from j + 1: the run ends at stop[:, j + 1].
    after = stop[:, 1:]
    run = after - cols[None, 1:]
    ends = np.take_along_axis(anchor, np.minimum(after, w - 1), axis=1) & (after < w)
    total[:, :-1] += np.where(ends & (run > 0), run, 0)


# ------------------------------------------------------------------------------ the board
@dataclass
class Board:
    """One position: blocks, the guard overlay, units, reserves, and what each seat did this turn.

    ``blocks`` is (height, width) of `Block` codes and ``guards`` (height, width) of the guard's
    owner or -1, both indexed [y, x]. Actions go through `play`, which checks them with `check`
    (raising `Refused`) and applies them. `begin_turn` spawns and resets the per-turn limits.
    """

    blocks: np.ndarray
    guards: np.ndarray
    units: dict[int, Unit] = field(default_factory=dict)
    reserves: list[int] = field(default_factory=lambda: [GUARDS, GUARDS])
    next_spawn: list[str] = field(default_factory=lambda: [FIRST_SPAWN, FIRST_SPAWN])
    next_id: int = 0
    winner: int | None = None
    # This turn's limits.
    placed: bool = False
    guard_moved: bool = False
    moved: set[int] = field(default_factory=set)
    acted: set[int] = field(default_factory=set)

    @classmethod
    def from_blocks(cls, blocks: np.ndarray, guards: int = GUARDS) -> Board:
        b = np.array(blocks, dtype=np.uint8)
        return cls(b, np.full(b.shape, -1, np.int8), reserves=[guards, guards])

    @property
    def height(self) -> int:
        return int(self.blocks.shape[0])

    @property
    def width(self) -> int:
        return int(self.blocks.shape[1])

    def copy(self) -> Board:
        return Board(
            self.blocks.copy(),
            self.guards.copy(),
            {k: Unit(u.id, u.owner, u.kind, u.x, u.y) for k, u in self.units.items()},
            list(self.reserves),
            list(self.next_spawn),
            self.next_id,
            self.winner,
            self.placed,
            self.guard_moved,
            set(self.moved),
            set(self.acted),
        )

    # -------------------------------------------------------------- reading
    def inside(self, x: int, y: int) -> bool:
        return 0 <= x < self.width and 0 <= y < self.height

    def unit_at(self, x: int, y: int) -> Unit | None:
        for u in self.units.values():
            if u.x == x and u.y == y:
                return u
        return None

    def occupied(self) -> dict[tuple[int, int], Unit]:
        return {(u.x, u.y): u for u in self.units.values()}

    def free(self, x: int, y: int) -> bool:
        """No unit and no guard on (x, y)."""
        return self.guards[y, x] < 0 and self.unit_at(x, y) is None

    def shielded(self, unit: Unit) -> bool:
        """A unit next to a shield (of either seat) cannot be destroyed by fighters or colour changes."""
        return any(
            s.kind == "shield" and abs(s.x - unit.x) + abs(s.y - unit.y) == 1 for s in self.units.values()
        )

    def find(self, block: int) -> list[tuple[int, int]]:
        ys, xs = np.nonzero(self.blocks == block)
        return [(int(x), int(y)) for y, x in zip(ys, xs, strict=True)]

    def passable(self, seat: int, x: int, y: int) -> bool:
        """A unit of ``seat`` may pass over and stop on (x, y): own colour, own spawn or true neutral."""
        b = self.blocks[y, x]
        return (
            b in (color(seat), spawn_block(seat), Block.TRUE_NEUTRAL)
            and self.guards[y, x] < 0
            and self.unit_at(x, y) is None
        )

    def placeable(self, seat: int) -> np.ndarray:
        """(height, width) bool: where ``seat`` may place a block (ignoring the one-per-turn limit)."""
        gains = placement_gains(self.blocks, self.guards, seat)
        ok: np.ndarray = (
            ((self.blocks == Block.NEUTRAL) | (self.blocks == color(seat))) & (self.guards < 0) & (gains > 0)
        )
        for u in self.units.values():
            ok[u.y, u.x] = False
        return ok

    # -------------------------------------------------------------- turns
    def begin_turn(self, seat: int) -> Unit | None:
        """Reset the per-turn limits and spawn on ``seat``'s spawn block if it is free of units."""
        self.placed = self.guard_moved = False
        self.moved.clear()
        self.acted.clear()
        for x, y in self.find(spawn_block(seat)):
            if self.unit_at(x, y) is None:
                unit = Unit(self.next_id, seat, self.next_spawn[seat], x, y)
                self.units[unit.id] = unit
                self.next_id += 1
                return unit
        return None

    def play(self, seat: int, action: Any) -> None:
        """Check and apply one action; raises `Refused` (and changes nothing) if it cannot be done."""
        self.check(seat, action)
        self._do(seat, action)

    def check(self, seat: int, action: Any) -> None:
        """Raise `Refused` with the reason if ``action`` cannot be played by ``seat`` now."""
        if self.winner is not None:
            raise Refused("the game is over")
        if not isinstance(action, (list, tuple)) or not action or not isinstance(action[0], str):
            raise Refused('an action is a list that starts with its name, e.g. ["place", x, y]', True)
        verb, args = action[0], list(action[1:])
        shape = _SHAPES.get(verb)
        if shape is None:
            raise Refused(f"unknown action {verb!r}; known: {', '.join(_SHAPES)}", True)
        if not any(len(args) == len(s) and all(ok(a) for ok, a in zip(s, args, strict=True)) for s in shape):
            raise Refused(f"{verb} takes {_USAGE[verb]}, got {list(action)!r}", True)
        _CHECKS[verb](self, seat, *args)

    # -------------------------------------------------------------- applying (after check)
    def _do(self, seat: int, action: Sequence[Any]) -> None:
        verb, args = action[0], action[1:]
        if verb == "place":
            x, y = args
            cells = color_change(self, x, y, seat)
            self.placed = True
            self.blocks[y, x] = color(seat)
            self._convert(seat, cells)
        elif verb == "move":
            self._do_move(seat, *args)
        elif verb == "act":
            self._do_act(seat, *args)
        elif verb == "destruct":
            self.acted.add(args[0])
            del self.units[args[0]]
        elif verb == "guard":
            self._do_guard(seat, *args)
        elif verb == "spawn":
            self.next_spawn[seat] = args[0]

    def _do_move(self, seat: int, uid: int, x: int, y: int, how: str = "color") -> None:
        unit = self.units[uid]
        self.moved.add(uid)
        unit.x, unit.y = x, y
        if self.blocks[y, x] == objective(1 - seat):
            self.blocks[y, x] = Block.DEAD if how == "dead" else color(seat)
            if not self.find(objective(1 - seat)):
                self.winner = seat

    def _do_act(self, seat: int, uid: int, x: int, y: int) -> None:
        unit = self.units[uid]
        self.acted.add(uid)
        if unit.kind == "fighter":
            target = self.unit_at(x, y)
            assert target is not None
            del self.units[target.id]
        elif unit.kind == "cleaner":
            self.blocks[y, x] = Block.NEUTRAL
        else:  # paver, shooter: no colour change follows
            self.blocks[y, x] = color(seat)

    def _do_guard(self, seat: int, x: int, y: int, fx: int | None = None, fy: int | None = None) -> None:
        if fx is None or fy is None:
            self.reserves[seat] -= 1
        else:
            self.guards[fy, fx] = -1
        self.guards[y, x] = seat
        self.guard_moved = True

    def _convert(self, seat: int, cells: list[tuple[int, int]]) -> None:
        """Colour ``cells`` for ``seat``; enemy units there die unless shielded (judged before any dies)."""
        where = self.occupied()
        doomed = [
            u for c in cells if (u := where.get(c)) is not None and u.owner != seat and not self.shielded(u)
        ]
        for x, y in cells:
            self.blocks[y, x] = color(seat)
        for u in doomed:
            del self.units[u.id]

    # -------------------------------------------------------------- listing legal actions
    def legal_actions(self, seat: int) -> list[list[Any]]:
        """Every action ``seat`` could play now, one at a time (``spawn`` choices not included)."""
        if self.winner is not None:
            return []
        out: list[list[Any]] = []
        if not self.placed:
            ys, xs = np.nonzero(self.placeable(seat))
            out += [["place", int(x), int(y)] for y, x in zip(ys, xs, strict=True)]
        for unit in [u for u in self.units.values() if u.owner == seat]:
            out += self.unit_actions(unit)
        if not self.guard_moved:
            out += self._guard_actions(seat)
        return out

    def unit_actions(self, unit: Unit) -> list[list[Any]]:
        """The legal moves and actions of one unit now."""
        out: list[list[Any]] = []
        seat = unit.owner
        if unit.id not in self.moved:
            for dx, dy in STEPS:
                x, y = unit.x + dx, unit.y + dy
                if self.inside(x, y) and self.blocks[y, x] == objective(1 - seat) and self.free(x, y):
                    out.append(["move", unit.id, x, y])
                while self.inside(x, y) and self.passable(seat, x, y):
                    out.append(["move", unit.id, x, y])
                    x, y = x + dx, y + dy
        if unit.id not in self.acted:
            out.append(["destruct", unit.id])
            if unit.kind == "shooter":
                targets = [(unit.x + dx * r, unit.y + dy * r) for dx, dy in STEPS for r in (2, 3)]
            else:
                targets = [(unit.x + dx, unit.y + dy) for dx, dy in STEPS]
            for x, y in targets:
                if (
                    unit.kind != "shield"
                    and self.inside(x, y)
                    and self._ok(_check_act, self, seat, unit.id, x, y)
                ):
                    out.append(["act", unit.id, x, y])
        return out

    def _guard_actions(self, seat: int) -> list[list[Any]]:
        spots = ((self.blocks == Block.NEUTRAL) | (self.blocks == color(seat))) & (self.guards < 0)
        for u in self.units.values():
            spots[u.y, u.x] = False
        ys, xs = np.nonzero(spots)
        cells = [(int(x), int(y)) for y, x in zip(ys, xs, strict=True)]
        out: list[list[Any]] = []
        if self.reserves[seat] > 0:
            out += [["guard", x, y] for x, y in cells]
        gy, gx = np.nonzero(self.guards == seat)
        for fx, fy in zip(gx.tolist(), gy.tolist(), strict=True):
            out += [["guard", x, y, fx, fy] for x, y in cells]
        return out

    @staticmethod
    def _ok(fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
        except Refused:
            return False
        return True

    # -------------------------------------------------------------- wire form
    def to_request(self) -> dict[str, Any]:
        """The board fields of a ``tick`` request (see `docs/protocol.md`)."""
        return {
            "width": self.width,
            "height": self.height,
            "board": self.blocks.astype(np.uint8).tobytes(),
            "guards": [[int(o), int(x), int(y)] for (y, x), o in np.ndenumerate(self.guards) if o >= 0],
            "units": [u.to_list() for u in sorted(self.units.values(), key=lambda u: u.id)],
            "reserves": list(self.reserves),
            "next_spawn": list(self.next_spawn),
        }

    @classmethod
    def from_request(cls, message: Mapping[str, Any]) -> Board:
        """The board of a ``tick`` request; ValueError if a field is missing or malformed."""
        try:
            w, h = int(message["width"]), int(message["height"])
            raw = message["board"]
            if not isinstance(raw, (bytes, bytearray)) or len(raw) != w * h:
                raise ValueError(f"board must be {w * h} bytes")
            blocks = np.frombuffer(bytes(raw), np.uint8).reshape(h, w).copy()
            guards = np.full((h, w), -1, np.int8)
            for owner, x, y in message["guards"]:
                guards[int(y), int(x)] = int(owner)
            units = {}
            for uid, owner, kind, x, y in message["units"]:
                units[int(uid)] = Unit(int(uid), int(owner), str(kind), int(x), int(y))
            reserves = [int(r) for r in message["reserves"]]
            spawns = [str(k) for k in message["next_spawn"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"colorblocks tick message is malformed: {exc}") from None
        return cls(blocks, guards, units, reserves, spawns, next_id=max(units, default=-1) + 1)


# ------------------------------------------------------------------------------ why an action is refused
# One check per action name, each raising `Refused` with the reason (`Board.check` picks it by name).


def _cell(board: Board, x: int, y: int) -> None:
    if not board.inside(x, y):
        raise Refused(f"({x}, {y}) is off the {board.width}x{board.height} board")


def _own_unit(board: Board, seat: int, uid: int) -> Unit:
    unit = board.units.get(uid)
    if unit is None:
        raise Refused(f"there is no unit {uid} (destroyed, or never made)")
    if unit.owner != seat:
        raise Refused(f"unit {uid} is not yours")
    return unit


def _check_place(board: Board, seat: int, x: int, y: int) -> None:
    _cell(board, x, y)
    if board.placed:
        raise Refused("only one colour block may be placed per turn")
    if board.blocks[y, x] not in (Block.NEUTRAL, color(seat)):
        raise Refused(f"({x}, {y}) is {Block(board.blocks[y, x]).name}; place on a neutral or your own block")
    if not board.free(x, y):
        raise Refused(f"({x}, {y}) has a unit or guard on it")
    if not color_change(board, x, y, seat):
        raise Refused(f"a block at ({x}, {y}) would convert nothing")


def _check_move(board: Board, seat: int, uid: int, x: int, y: int, how: str = "color") -> None:
    unit = _own_unit(board, seat, uid)
    _cell(board, x, y)
    if uid in board.moved:
        raise Refused(f"unit {uid} has already moved this turn")
    dx, dy = x - unit.x, y - unit.y
    if (dx == 0) == (dy == 0):
        raise Refused(f"unit {uid} moves along a row or column, at least one cell")
    if board.blocks[y, x] == objective(1 - seat):
        if abs(dx) + abs(dy) != 1:
            raise Refused(f"unit {uid} must be next to the objective at ({x}, {y}) to capture it")
        if board.guards[y, x] >= 0 or board.unit_at(x, y) is not None:  # cannot happen on a map, kept safe
            raise Refused(f"({x}, {y}) is occupied")
        return
    if how != "color":
        raise Refused('only a capture onto an objective takes "dead"')
    sx, sy = (dx > 0) - (dx < 0), (dy > 0) - (dy < 0)
    cx, cy = unit.x, unit.y
    while (cx, cy) != (x, y):
        cx, cy = cx + sx, cy + sy
        if not board.passable(seat, cx, cy):
            raise Refused(f"unit {uid} cannot pass ({cx}, {cy}): {_why_blocked(board, seat, cx, cy)}")


def _why_blocked(board: Board, seat: int, x: int, y: int) -> str:
    if board.guards[y, x] >= 0:
        return "a guard"
    if board.unit_at(x, y) is not None:
        return "a unit"
    return f"{Block(board.blocks[y, x]).name} (units walk on their own colour, own spawn and TRUE_NEUTRAL)"


def _check_act(board: Board, seat: int, uid: int, x: int, y: int) -> None:
    unit = _own_unit(board, seat, uid)
    _cell(board, x, y)
    if uid in board.acted:
        raise Refused(f"unit {uid} has already acted this turn")
    dist = abs(x - unit.x) + abs(y - unit.y)
    straight = x == unit.x or y == unit.y
    kind = unit.kind
    if kind == "shield":
        raise Refused("a shield has no action: it protects its neighbours by standing there")
    if kind == "shooter":
        if not straight or not SHOOTER_RANGE[0] <= dist <= SHOOTER_RANGE[1]:
            raise Refused(f"a shooter hits a cell 2 or 3 away in its row or column, not ({x}, {y})")
    elif dist != 1:
        raise Refused(f"a {kind} acts on a neighbouring cell, not ({x}, {y})")
    if kind == "fighter":
        target = board.unit_at(x, y)
        if target is None:
            raise Refused(f"no unit at ({x}, {y}) to destroy")
        if board.shielded(target):
            raise Refused(f"unit {target.id} at ({x}, {y}) is next to a shield")
        return
    if not board.free(x, y):
        raise Refused(f"({x}, {y}) has a unit or guard on it")
    b = board.blocks[y, x]
    if kind == "cleaner":
        if b not in (Block.RED, Block.BLUE):
            raise Refused(f"a cleaner turns a colour block neutral; ({x}, {y}) is {Block(b).name}")
    elif b not in (Block.NEUTRAL, color(1 - seat)):
        raise Refused(f"a {kind} colours a neutral or enemy block; ({x}, {y}) is {Block(b).name}")


def _check_destruct(board: Board, seat: int, uid: int) -> None:
    _own_unit(board, seat, uid)
    if uid in board.acted:
        raise Refused(f"unit {uid} has already acted this turn")


def _check_guard(
    board: Board, seat: int, x: int, y: int, fx: int | None = None, fy: int | None = None
) -> None:
    _cell(board, x, y)
    if board.guard_moved:
        raise Refused("only one guard move per turn")
    if fx is None or fy is None:
        if board.reserves[seat] <= 0:
            raise Refused('no guard left in reserve; move one with ["guard", x, y, from_x, from_y]')
    else:
        _cell(board, fx, fy)
        if board.guards[fy, fx] != seat:
            raise Refused(f"no guard of yours at ({fx}, {fy})")
    if board.blocks[y, x] not in (Block.NEUTRAL, color(seat)):
        raise Refused(
            f"a guard goes on a neutral or your own block; ({x}, {y}) is {Block(board.blocks[y, x]).name}"
        )
    if not board.free(x, y):
        raise Refused(f"({x}, {y}) has a unit or guard on it")


def _check_spawn(board: Board, seat: int, kind: str) -> None:
    if kind not in KINDS:
        raise Refused(f"unknown unit kind {kind!r}; kinds: {', '.join(KINDS)}", True)


_CHECKS: dict[str, Callable[..., None]] = {
    "place": _check_place,
    "move": _check_move,
    "act": _check_act,
    "destruct": _check_destruct,
    "guard": _check_guard,
    "spawn": _check_spawn,
}


_XY = (is_int, is_int)
_SHAPES: dict[str, tuple[tuple[Any, ...], ...]] = {
    "place": (_XY,),
    "move": ((is_int, *_XY), (is_int, *_XY, lambda v: v in ("dead", "color"))),
    "act": ((is_int, *_XY),),
    "destruct": ((is_int,),),
    "guard": (_XY, (*_XY, *_XY)),
    "spawn": ((lambda v: isinstance(v, str),),),
}
_USAGE = {
    "place": "x, y",
    "move": 'unit, x, y (and "dead" for a capture that leaves a dead block)',
    "act": "unit, x, y",
    "destruct": "unit",
    "guard": "x, y (from reserve) or x, y, from_x, from_y",
    "spawn": f"one kind of {', '.join(KINDS)}",
}


# ------------------------------------------------------------------------------ the message
class ColorblocksTick(Tick):
    """Colorblocks' ``tick``, to the seat to move (`View` reads it)."""

    seat: int
    turn: int
    max_turns: int
    width: int
    height: int
    board: bytes
    guards: list[Any]  # [owner, x, y] per guard
    units: list[Any]  # [id, owner, kind, x, y] per unit
    reserves: list[int]
    next_spawn: list[str]
    refused: list[Any]  # [index, reason] per action that did nothing


# ------------------------------------------------------------------------------ the bot side
@dataclass
class View:
    """What ``on_tick`` gets: the board, your seat, the turn, and why last turn's refusals were refused.

    ``refused`` lists [index in your last list, reason] pairs. `legal_actions` lists what you may
    play now; `play` applies one of your actions to ``board`` (a private copy), so a bot can build a
    turn action by action and see each result.
    """

    board: Board
    seat: int
    turn: int
    max_turns: int
    refused: list[tuple[int, str]]
    #: Your time to answer, counted from when the server sent the tick.
    budget_ms: int = 0
    #: What is left of your time bank, in ms (docs/protocol.md#the-time-bank); None when the match
    #: has none. An answer after ``budget_ms`` is still taken while this lasts.
    bank_ms: int | None = None

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> View:
        board = Board.from_request(message)
        try:
            seat, turn, max_turns = int(message["seat"]), int(message["turn"]), int(message["max_turns"])
            refused = [(int(i), str(r)) for i, r in message.get("refused", [])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"colorblocks tick message is malformed: {exc}") from None
        budget = message.get("budget_ms", 0)
        budget_ms = int(budget) if isinstance(budget, int) and not isinstance(budget, bool) else 0
        return cls(board, seat, turn, max_turns, refused, budget_ms, bank_ms_of(message))

    @property
    def my_units(self) -> list[Unit]:
        return [u for u in self.board.units.values() if u.owner == self.seat]

    @property
    def enemy_units(self) -> list[Unit]:
        return [u for u in self.board.units.values() if u.owner != self.seat]

    def legal_actions(self) -> list[list[Any]]:
        return self.board.legal_actions(self.seat)

    def play(self, action: Sequence[Any]) -> bool:
        """Apply one of your actions to ``board``; False (board unchanged) if it would be refused."""
        try:
            self.board.play(self.seat, list(action))
        except Refused:
            return False
        return True


# ------------------------------------------------------------------------------ for learning
def observation(view: View) -> np.ndarray:
    """The view as the training environment's observation, (4, H, W) uint8: block codes, units (1 +
    kind index for yours, 6 + kind index for the opponent's), guards (1 yours, 2 the opponent's), and
    your seat everywhere. Here, in the SDK, so that a trained bot decodes its requests with the very
    code the environment (`cellarena.server.env.games.colorblocks`) trained it on."""
    board = view.board
    out = np.zeros((4, board.height, board.width), np.uint8)
    out[0] = board.blocks
    for unit in board.units.values():
        out[1, unit.y, unit.x] = 1 + KINDS.index(unit.kind) + (0 if unit.owner == view.seat else 5)
    out[2] = np.where(board.guards < 0, 0, np.where(board.guards == view.seat, 1, 2))
    out[3] = view.seat
    return out


class ActionCodes:
    """The training environment's actions: one number for each action a turn may hold, then the end of
    the turn. With N = width * height cells, cell numbers ``y * width + x``, directions in `STEPS`
    order and R = max(width, height) - 1, the numbers are, in order:

    - N ``["place", x, y]``, by target cell;
    - N * 4 * R ``["move", unit, x, y]``: the unit's cell, direction, distance 1..R (captures too);
    - N * 4 ``["move", unit, x, y, "dead"]``: a capture leaving a dead block, by unit cell and direction;
    - N * 4 * 3 ``["act", unit, x, y]``: the unit's cell, direction, distance 1..3;
    - N ``["destruct", unit]``, by the unit's cell;
    - (guards + 1) * N ``["guard", ...]``: the source (0 the reserve, i your i-th guard on the board in
      row order), then the target cell;
    - 5 ``["spawn", kind]`` in `KINDS` order;
    - 1: end the turn (`end_turn`).
    """

    def __init__(self, width: int, height: int, guards: int = GUARDS) -> None:
        self.width, self.height, self.guards = width, height, guards
        self.cells = n = width * height
        self.reach = max(width, height) - 1
        self.move = n
        self.capture_dead = self.move + n * 4 * self.reach
        self.act = self.capture_dead + n * 4
        self.destruct = self.act + n * 4 * 3
        self.guard = self.destruct + n
        self.spawn = self.guard + (guards + 1) * n
        self.end_turn = self.spawn + len(KINDS)
        self.size = self.end_turn + 1

    def legal(self, view: View) -> dict[int, list[Any]]:
        """Action number -> the SDK action it plays, for every action legal now (not the end of turn)."""
        board, w = view.board, self.width
        if board.winner is not None:
            return {}
        mine = np.nonzero(board.guards == view.seat)
        slot = {(int(x), int(y)): i + 1 for i, (y, x) in enumerate(zip(*mine, strict=True))}
        out: dict[int, list[Any]] = {}
        for action in view.legal_actions():
            verb = action[0]
            if verb == "place":
                out[action[2] * w + action[1]] = action
            elif verb in ("move", "act"):
                unit = board.units[action[1]]
                dx, dy = action[2] - unit.x, action[3] - unit.y
                side, far = STEPS.index(((dx > 0) - (dx < 0), (dy > 0) - (dy < 0))), abs(dx) + abs(dy)
                cell = unit.y * w + unit.x
                if verb == "act":
                    out[self.act + (cell * 4 + side) * 3 + far - 1] = action
                    continue
                out[self.move + (cell * 4 + side) * self.reach + far - 1] = action
                if board.blocks[action[3], action[2]] == objective(1 - view.seat):
                    out[self.capture_dead + cell * 4 + side] = [*action, "dead"]
            elif verb == "destruct":
                unit = board.units[action[1]]
                out[self.destruct + unit.y * w + unit.x] = action
            elif verb == "guard":
                source = 0 if len(action) == 3 else slot.get((action[3], action[4]))
                if source is not None and source <= self.guards:
                    out[self.guard + source * self.cells + action[2] * w + action[1]] = action
        for i, kind in enumerate(KINDS):
            out[self.spawn + i] = ["spawn", kind]
        return out


def random_turn(view: View, rng: random.Random, max_actions: int = 12) -> list[list[Any]]:
    """A turn of random legal actions, each applied to ``view.board`` before the next is drawn."""
    out: list[list[Any]] = []
    for _ in range(max_actions):
        options = view.legal_actions()
        if not options or rng.random() < 0.15:
            break
        action = rng.choice(options)
        view.play(action)
        out.append(action)
    out.append(["spawn", rng.choice(KINDS)])
    return out


def actions_of(answer: Any) -> list[list[Any]]:
    """The ``moves`` field for a list of actions; MovesError says what is wrong."""
    if not isinstance(answer, (list, tuple)):
        raise MovesError(f"colorblocks on_tick must return a list of actions, got {type(answer).__name__}")
    out = []
    for i, action in enumerate(answer):
        if not isinstance(action, (list, tuple)) or not action or not isinstance(action[0], str):
            raise MovesError(f'action {i} must be a list such as ["place", x, y], got {action!r}')
        out.append([int(a) if isinstance(a, np.integer) else a for a in action])
    if len(out) > MAX_ACTIONS:
        raise MovesError(f"at most {MAX_ACTIONS} actions per turn, got {len(out)}")
    return out


def iter_cells(board: Board) -> Iterator[tuple[int, int, int]]:
    """(x, y, block) for every cell, row by row."""
    for (y, x), b in np.ndenumerate(board.blocks):
        yield int(x), int(y), int(b)


def make_view(message: dict[str, Any]) -> View:
    """The `View` of a ``tick`` message (see `cellarena.sdk.games.GameAdapter`)."""
    return View.from_message(message)


def encode_answer(answer: object, message: dict[str, Any]) -> list[list[Any]]:
    """The ``moves`` field: the list of actions ``on_tick`` returned."""
    return actions_of(answer)


def noop_answer(message: dict[str, Any]) -> list[list[Any]]:
    """An empty turn: nothing placed, moved or changed."""
    return []


def idle_answer(view: View) -> list[list[Any]]:
    """An empty turn."""
    return []


# ------------------------------------------------------------------------------ the bot class
#: One action, as `View.legal_actions` lists them: ``["place", x, y]``, ``["spawn", "fighter"]``, ...
Action: TypeAlias = list[Any]
#: What a Colorblocks bot's ``on_tick`` returns: this turn's actions, in order (at most `MAX_ACTIONS`).
Answer: TypeAlias = Sequence[Action]


class ColorblocksBot(GameBot[View, Answer]):
    """Subclass this for a Colorblocks bot and override ``on_tick(self, view: View) -> Answer``: a
    list of actions (`random_turn` builds a legal one)."""

    game: ClassVar[str] = "colorblocks"


if TYPE_CHECKING:
    # mypy checks this module against the bot loop's protocol, with its own view and answer types.
    from cellarena.sdk.games import GameAdapter
    from cellarena.sdk.games import colorblocks as _this

    _ADAPTER: GameAdapter[View, Answer] = _this
