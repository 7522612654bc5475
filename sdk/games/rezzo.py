"""Rezzo's public codes: cell states, moves, facings and the viewport layout.

These numbers are the wire contract between the server and every bot, in any language, so they live
in the SDK and the server imports them from here. `docs/games/rezzo.md` documents the same table.

A cell code is one byte. Unowned states are 0..4 (and 7 for "outside the world"); owned states are
``kind + owner`` with ``kind`` one of AGENT, FLAG, GEYSER, BASE (multiples of 8) and ``owner`` 0..7.
In a viewport the owner is *relative*: 0 is the viewer, 1..P-1 the others in rotating seat order.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, get_type_hints

from cellarena.sdk.bot import GameBot
from cellarena.sdk.games import MovesError, bank_ms_of
from cellarena.sdk.protocol import Frame, Tick, as_int, is_int, is_number
from cellarena.sdk.protocol.fields import conforms

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


# ---------------------------------------------------------------------------------------- viewports
VIEW_CELLS = VIEW_SIZE * VIEW_SIZE
#: How far an agent sees: forward 0..VIEW_AHEAD, right -VIEW_SIDE..VIEW_SIDE.
VIEW_AHEAD = VIEW_AGENT_ROW
VIEW_SIDE = VIEW_AGENT_COL
#: Wire in any phase: what BUILD lays and what a signal runs along.
WIRE = (Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL)
#: Kinds a HIT is legal on (flags of any owner too).
HITTABLE = (Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.FLAG)

# Picture tokens, as in the project's test boards: one token per cell, owned kinds take an owner digit.
_UNOWNED_TOKENS = {
    ".": Cell.BLANK,
    "#": Cell.CONDUCTOR,
    "@": Cell.ELECTRON,
    "~": Cell.TAIL,
    "*": Cell.PHOTON,
    "X": Cell.OOB,
}
_OWNED_TOKENS = {"A": Cell.AGENT, "F": Cell.FLAG, "G": Cell.GEYSER, "B": Cell.BASE}
_TOKEN_OF_UNOWNED = {int(code): tok for tok, code in _UNOWNED_TOKENS.items()}
_TOKEN_OF_KIND = {int(code): tok for tok, code in _OWNED_TOKENS.items()}


def _token(code: int, damage: int) -> str:
    if code in _TOKEN_OF_UNOWNED:
        text = _TOKEN_OF_UNOWNED[code]
    elif code >= Cell.AGENT and (code & KIND_MASK) in _TOKEN_OF_KIND:
        text = f"{_TOKEN_OF_KIND[code & KIND_MASK]}{code & OWNER_MASK}"
    else:
        text = f"?{code}"
    return f"{text}:{damage}" if damage else text


def _parse_token(token: str, where: str) -> tuple[int, int]:
    """(code, damage) of one picture token such as ``#``, ``F1`` or ``#:2``."""
    body, colon, dmg = token.partition(":")
    damage = 0
    if colon:
        if not (dmg.isdigit() and 0 <= int(dmg) <= MAX_DAMAGE):
            raise ValueError(f"{where}: damage in {token!r} must be 0..{MAX_DAMAGE}")
        damage = int(dmg)
    if body.lower() == "x":
        return int(Cell.OOB), damage
    if body in _UNOWNED_TOKENS:
        return int(_UNOWNED_TOKENS[body]), damage
    kind_ = _OWNED_TOKENS.get(body[:1])
    if kind_ is not None and len(body) == 2 and body[1] in "01234567":
        return int(kind_) + int(body[1]), damage
    raise ValueError(
        f"{where}: unknown cell {token!r}; use . # @ ~ * X, or A/F/G/B plus an owner digit "
        "(agent, flag, geyser, base: A0 is yours, F1 a flag of the next player), optionally :damage"
    )


class Viewport:
    """What one agent sees: 13x13 cell codes and damage values, with the agent at the bottom centre.

    Two ways to address a cell:

    - ``cell(row, col)``: the wire layout. Row 0 is farthest ahead, the agent is at row 12, column 6.
    - ``at(forward, right)``: relative to the agent. ``at(0, 0)`` is the agent itself, ``at(1, 0)``
      the cell in front of it (= ``ahead()``), ``at(2, -1)`` two ahead and one to the left.
      ``forward`` runs 0..12 and ``right`` -6..6; anything else is outside the window and raises
      IndexError (check with ``in_view``).

    Owners are relative: 0 is you, 1.. the other players. Cells outside a bounded world read as
    ``Cell.OOB``. A Viewport is immutable and compares equal to another with the same bytes.
    """

    __slots__ = ("_cells", "_damage")

    def __init__(self, cells: bytes | bytearray | memoryview, damage: bytes | None = None) -> None:
        self._cells = bytes(cells)
        self._damage = bytes(VIEW_CELLS) if damage is None else bytes(damage)
        for name, plane in (("cells", self._cells), ("damage", self._damage)):
            if len(plane) != VIEW_CELLS:
                raise ValueError(f"a viewport's {name} plane needs {VIEW_CELLS} bytes, got {len(plane)}")

    # ------------------------------------------------------------------ raw planes and wire layout
    @property
    def cells(self) -> bytes:
        """The 169 cell codes, row-major, row 0 (farthest ahead) first."""
        return self._cells

    @property
    def damage(self) -> bytes:
        """The 169 damage values (0..3), laid out like ``cells``."""
        return self._damage

    @staticmethod
    def _index(row: int, col: int) -> int:
        if not (0 <= row < VIEW_SIZE and 0 <= col < VIEW_SIZE):
            raise IndexError(f"viewport row {row}, column {col} is outside 0..{VIEW_SIZE - 1}")
        return row * VIEW_SIZE + col

    def cell(self, row: int, col: int) -> int:
        """The code at viewport row ``row``, column ``col`` (row 0 is farthest ahead)."""
        return self._cells[self._index(row, col)]

    def cell_damage(self, row: int, col: int) -> int:
        """The damage at viewport row ``row``, column ``col``."""
        return self._damage[self._index(row, col)]

    # ------------------------------------------------------------------ relative coordinates
    @staticmethod
    def in_view(forward: int, right: int) -> bool:
        """Whether (forward, right) lies inside the window."""
        return 0 <= forward <= VIEW_AHEAD and -VIEW_SIDE <= right <= VIEW_SIDE

    @staticmethod
    def to_row_col(forward: int, right: int) -> tuple[int, int]:
        """The viewport (row, column) of a relative position."""
        if not Viewport.in_view(forward, right):
            raise IndexError(
                f"(forward={forward}, right={right}) is outside the window: "
                f"forward must be 0..{VIEW_AHEAD} and right {-VIEW_SIDE}..{VIEW_SIDE}"
            )
        return VIEW_AGENT_ROW - forward, VIEW_AGENT_COL + right

    @staticmethod
    def to_relative(row: int, col: int) -> tuple[int, int]:
        """The (forward, right) of a viewport row and column."""
        Viewport._index(row, col)
        return VIEW_AGENT_ROW - row, col - VIEW_AGENT_COL

    def at(self, forward: int, right: int = 0) -> int:
        """The code ``forward`` cells ahead and ``right`` cells to the right (negative: left)."""
        return self.cell(*self.to_row_col(forward, right))

    def damage_at(self, forward: int, right: int = 0) -> int:
        """The damage ``forward`` cells ahead and ``right`` cells to the right."""
        return self.cell_damage(*self.to_row_col(forward, right))

    def ahead(self, n: int = 1) -> int:
        """The code ``n`` cells straight ahead; ``ahead()`` is the cell a move acts on."""
        return self.at(n, 0)

    def can_advance(self) -> bool:
        """Whether ADVANCE or BUILD would be legal now (the cell ahead is blank)."""
        return self.ahead() == Cell.BLANK

    def can_hit(self) -> bool:
        """Whether HIT would be legal now (wire or a flag ahead)."""
        return kind(self.ahead()) in HITTABLE

    # ------------------------------------------------------------------ codes
    @staticmethod
    def kind(code: int) -> int:
        """The code without its owner, as a ``Cell`` member when it is one (``Cell.FLAG`` for 17)."""
        try:
            return _KIND_OF[code]  # bots call this for every cell of every view: a table, not an Enum call
        except (IndexError, TypeError):
            return kind(code)

    @staticmethod
    def owner(code: int) -> int | None:
        """The relative owner (0 is you) of an owned code, else None."""
        return owner(code)

    @staticmethod
    def is_mine(code: int) -> bool:
        """An agent, flag, geyser or base of yours."""
        return code >= Cell.AGENT and code & OWNER_MASK == 0

    @staticmethod
    def is_theirs(code: int) -> bool:
        """An agent, flag, geyser or base of another player."""
        return code >= Cell.AGENT and code & OWNER_MASK != 0

    @staticmethod
    def is_wire(code: int) -> bool:
        """Conductor, electron or tail."""
        return code in WIRE

    def find(self, kinds: int | Iterable[int], mine: bool | None = None) -> list[tuple[int, int]]:
        """Relative (forward, right) positions of cells of ``kinds``, nearest first.

        ``kinds`` is one kind (``Cell.FLAG``) or several (``WIRE``). For owned kinds, ``mine=True``
        keeps only yours and ``mine=False`` only the others'; ``None`` keeps both. The agent's own
        cell (0, 0) is never listed. Ties in distance are broken by forward, then right, so the
        order is deterministic.
        """
        wanted = {int(kinds)} if isinstance(kinds, int) else {int(k) for k in kinds}
        if mine is not None and any(k < Cell.AGENT for k in wanted):
            raise ValueError("mine=True/False only makes sense for owned kinds (AGENT, FLAG, GEYSER, BASE)")
        out = []
        for i, code in enumerate(self._cells):
            if kind(code) not in wanted:
                continue
            if mine is not None and (code & OWNER_MASK == 0) != mine:
                continue
            pos = self.to_relative(*divmod(i, VIEW_SIZE))
            if pos != (0, 0):
                out.append(pos)
        out.sort(key=lambda p: (abs(p[0]) + abs(p[1]), p[0], p[1]))
        return out

    # ------------------------------------------------------------------ pictures
    def __str__(self) -> str:
        """A picture in the ``from_ascii`` format: paste it into a test to replay a situation."""
        tokens = [_token(c, d) for c, d in zip(self._cells, self._damage, strict=True)]
        width = max(len(t) for t in tokens)
        rows = (tokens[r * VIEW_SIZE : (r + 1) * VIEW_SIZE] for r in range(VIEW_SIZE))
        return "\n".join(" ".join(t.ljust(width) for t in row).rstrip() for row in rows)

    def __repr__(self) -> str:
        return f"Viewport(ahead={describe(self.ahead())!r}, damage ahead={self.damage_at(1)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Viewport):
            return NotImplemented
        return self._cells == other._cells and self._damage == other._damage

    def __hash__(self) -> int:
        return hash((self._cells, self._damage))

    @classmethod
    def from_ascii(cls, picture: str) -> Viewport:
        """A viewport from a 13x13 picture, for testing bots without a server.

        One line per row, row 0 (farthest ahead) first, and you at the bottom centre. A row is 13
        whitespace-separated tokens::

            .  blank      #  conductor   @  electron   ~  tail   *  photon   X  outside the world
            A0 agent      F1 flag        G1 geyser     B1 base   (the digit is the relative owner: 0 is you)

        Any token may end in ``:d`` for damage d (``#:2``). A row without spaces is read one
        character per cell, which suits rows of only ``. # @ ~ * X``. Blank lines are ignored.
        ``str(viewport)`` prints this format.
        """
        rows = [line.strip() for line in picture.strip("\n").splitlines() if line.strip()]
        if len(rows) != VIEW_SIZE:
            raise ValueError(f"a viewport picture needs {VIEW_SIZE} rows, got {len(rows)}")
        cells, damage = bytearray(), bytearray()
        for r, line in enumerate(rows):
            tokens = line.split() if any(ch.isspace() for ch in line) else list(line)
            if len(tokens) != VIEW_SIZE:
                raise ValueError(f"row {r} of the picture has {len(tokens)} cells, not {VIEW_SIZE}: {line!r}")
            for c, token in enumerate(tokens):
                code, dmg = _parse_token(token, f"row {r}, column {c}")
                cells.append(code)
                damage.append(dmg)
        return cls(bytes(cells), bytes(damage))

    @classmethod
    def from_cells(
        cls,
        cells: Mapping[tuple[int, int], int] | None = None,
        damage: Mapping[tuple[int, int], int] | None = None,
        background: int = Cell.BLANK,
    ) -> Viewport:
        """A viewport of ``background`` with some cells set, by relative (forward, right) position.

        You (``Cell.AGENT``, owner 0) stand at (0, 0) unless ``cells`` says otherwise::

            Viewport.from_cells({(1, 0): Cell.FLAG + 1})   # an enemy flag right ahead
        """
        plane = bytearray([int(background)] * VIEW_CELLS)
        plane[VIEW_AGENT_ROW * VIEW_SIZE + VIEW_AGENT_COL] = Cell.AGENT
        dmg = bytearray(VIEW_CELLS)
        for (f, r), code in (cells or {}).items():
            row, col = cls.to_row_col(f, r)
            plane[row * VIEW_SIZE + col] = int(code)
        for (f, r), value in (damage or {}).items():
            if not 0 <= value <= MAX_DAMAGE:
                raise ValueError(f"damage at ({f}, {r}) must be 0..{MAX_DAMAGE}, got {value}")
            row, col = cls.to_row_col(f, r)
            dmg[row * VIEW_SIZE + col] = int(value)
        return cls(bytes(plane), bytes(dmg))

    def to_numpy(self) -> tuple[Any, Any]:
        """(cells, damage) as two 13x13 uint8 numpy arrays. Needs numpy; nothing else in the SDK does."""
        import numpy as np

        shape = (VIEW_SIZE, VIEW_SIZE)
        return (
            np.frombuffer(self._cells, np.uint8).reshape(shape),
            np.frombuffer(self._damage, np.uint8).reshape(shape),
        )


@dataclass
class View:
    """One tick's request, as ``Bot.on_tick`` gets it.

    ``viewports[i]`` is what agent ``agents[i]`` sees. Answer with one move per entry of ``agents``,
    in the same order (or a single move when you have one agent). ``budget_ms`` is your time to
    answer, counted from when the server sent the tick; ``time_left_ms()`` estimates what is left.
    """

    tick: int
    agents: list[int]
    viewports: list[Viewport]
    budget_ms: int = 0
    #: What is left of your time bank, in ms (docs/protocol.md#the-time-bank); None when the match
    #: has none. An answer after ``budget_ms`` is still taken while this lasts.
    bank_ms: int | None = None
    received_at: float = field(default_factory=time.monotonic, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.agents) != len(self.viewports):
            raise ValueError(f"{len(self.agents)} agents but {len(self.viewports)} viewports")

    @property
    def viewport(self) -> Viewport:
        """The first (with one agent per seat, the only) agent's viewport."""
        if not self.viewports:
            raise IndexError("this tick has no live agents")
        return self.viewports[0]

    def __len__(self) -> int:
        return len(self.agents)

    def __iter__(self) -> Iterator[tuple[int, Viewport]]:
        """(agent index, viewport) pairs, in answer order."""
        return iter(zip(self.agents, self.viewports, strict=True))

    def time_left_ms(self) -> float:
        """Milliseconds of the budget left, measured from when this request was read."""
        return self.budget_ms - (time.monotonic() - self.received_at) * 1000.0

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> View:
        """The View of a ``tick`` message; ValueError says what is malformed."""
        tick, agents, budget = message.get("tick"), message.get("agents"), message.get("budget_ms", 0)
        cells, damage = message.get("cells"), message.get("damage")
        if not is_int(tick):
            raise ValueError(f"tick: field 'tick' must be an int, got {tick!r}")
        if not isinstance(agents, list) or not all(is_int(a) for a in agents):
            raise ValueError(f"tick: field 'agents' must be a list of ints, got {agents!r}")
        if not is_number(budget):
            raise ValueError(f"tick: field 'budget_ms' must be a number, got {budget!r}")
        size = VIEW_CELLS * len(agents)
        planes = []
        for name, plane in (("cells", cells), ("damage", damage)):
            if not isinstance(plane, (bytes, bytearray)):
                raise ValueError(f"tick: field {name!r} must be bytes, got {type(plane).__name__}")
            if len(plane) != size:
                raise ValueError(
                    f"tick: field {name!r} must hold {size} bytes for {len(agents)} agents, got {len(plane)}"
                )
            planes.append(bytes(plane))
        spans = [slice(i * VIEW_CELLS, (i + 1) * VIEW_CELLS) for i in range(len(agents))]
        viewports = [Viewport(planes[0][s], planes[1][s]) for s in spans]
        return cls(tick, list(agents), viewports, int(budget), bank_ms_of(message))

    @classmethod
    def from_ascii(
        cls, *pictures: str | Viewport, tick: int = 1, agents: list[int] | None = None, budget_ms: int = 66
    ) -> View:
        """A View for tests: one picture (see ``Viewport.from_ascii``) or Viewport per agent."""
        viewports = [p if isinstance(p, Viewport) else Viewport.from_ascii(p) for p in pictures]
        indices = list(range(len(viewports))) if agents is None else list(agents)
        return cls(tick, indices, viewports, budget_ms)


def _kind_member(code: int) -> int:
    k = kind(code)
    return Cell(k) if k in Cell._value2member_map_ else k


_KIND_OF = tuple(_kind_member(code) for code in range(256))


def observation(viewport: Viewport) -> bytes:
    """One agent's viewport as the training environments' observation (there ``numpy.frombuffer(...,
    uint8)`` shaped (2, 13, 13)): the cell codes in the wire layout, then the damage. Here, in the SDK,
    so that a trained bot decodes its requests with the very code the environments
    (`cellarena.server.env.games.rezzo`) trained it on."""
    return viewport.cells + viewport.damage


# ---------------------------------------------------------------------------------------- tracking
def _stable(code: int) -> int | None:
    """A cell's class that agents rarely change, for matching views; None for agents (they move)."""
    if code == Cell.BLANK:
        return 0
    if code < Cell.OOB or Cell.FLAG <= code < Cell.GEYSER:
        return 1  # wire, signals, photons and flags turn into one another on their own
    if Cell.AGENT <= code < Cell.FLAG:
        return None
    return code  # OOB, geysers and bases never change


_STABLE_OF = tuple(_stable(code) for code in range(256))
_VIEW_RELATIVE = [
    (VIEW_AGENT_ROW - i // VIEW_SIZE, i % VIEW_SIZE - VIEW_AGENT_COL) for i in range(VIEW_CELLS)
]
#: Per heading, each viewport cell's (dx, dy) from the agent, in ``Viewport.cells`` order.
_VIEW_OFFSETS = {
    h: tuple(
        (f * FORWARD[h][0] + r * RIGHTWARD[h][0], f * FORWARD[h][1] + r * RIGHTWARD[h][1])
        for f, r in _VIEW_RELATIVE
    )
    for h in Facing
}


class Tracker:
    """Dead reckoning and a memory of the world for one agent, in a frame of its own.

    Agents are never told where they are. A Tracker keeps a private position and heading: the agent
    starts at (0, 0) with heading ``Facing.N`` in this frame (whatever its real facing), x grows to
    the right and y downwards, as in the world. Call ``observe(viewport)`` at the start of every tick
    and ``commit(move)`` with the move you send. An advance that did not happen (another agent took
    the cell first) is noticed by matching the next view against memory.

        tracker.observe(view.viewport)
        move = tracker.step_to({goal}) or Move.RIGHT
        return tracker.commit(move)
    """

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.heading = Facing.N
        #: (x, y) -> the code last seen there, with relative owners.
        self.memory: dict[tuple[int, int], int] = {}
        self._pending: int = Move.NOOP
        #: The last path `step_to` found: (goals, unknown, path), reused while it stays walkable.
        self._path: tuple[frozenset[tuple[int, int]], bool, list[tuple[int, int]]] | None = None

    @property
    def pos(self) -> tuple[int, int]:
        return self.x, self.y

    def world(self, forward: int, right: int = 0) -> tuple[int, int]:
        """The tracker-frame (x, y) of a position relative to the agent."""
        (fx, fy), (rx, ry) = FORWARD[self.heading], RIGHTWARD[self.heading]
        return self.x + forward * fx + right * rx, self.y + forward * fy + right * ry

    def relative(self, x: int, y: int) -> tuple[int, int]:
        """The (forward, right) of a tracker-frame cell, the inverse of ``world``."""
        (fx, fy), (rx, ry) = FORWARD[self.heading], RIGHTWARD[self.heading]
        dx, dy = x - self.x, y - self.y
        return dx * fx + dy * fy, dx * rx + dy * ry

    def known(self, x: int, y: int) -> int | None:
        """The code last seen at (x, y), or None if never seen."""
        return self.memory.get((x, y))

    def view_positions(self) -> list[tuple[int, int]]:
        """The tracker-frame (x, y) of every viewport cell, in ``Viewport.cells`` order."""
        x, y = self.x, self.y
        return [(x + dx, y + dy) for dx, dy in _VIEW_OFFSETS[self.heading]]

    def _misfits(self, viewport: Viewport, x: int, y: int, heading: Facing) -> int:
        """How many remembered cells disagree with ``viewport`` seen from this pose."""
        wrong = 0
        get = self.memory.get
        for (dx, dy), code in zip(_VIEW_OFFSETS[heading], viewport.cells, strict=True):
            now = _STABLE_OF[code]
            if now is None:
                continue
            old = get((x + dx, y + dy))
            if old is not None and (then := _STABLE_OF[old]) is not None and then != now:
                wrong += 1
        return wrong

    def observe(self, viewport: Viewport) -> None:
        """Settle last tick's move, then remember everything in ``viewport``."""
        move, self._pending = self._pending, Move.NOOP
        if move == Move.LEFT:
            self.heading = Facing((self.heading + 3) % 4)
        elif move == Move.RIGHT:
            self.heading = Facing((self.heading + 1) % 4)
        elif move in (Move.ADVANCE, Move.BUILD):
            fx, fy = FORWARD[self.heading]
            moved = (self.x + fx, self.y + fy)
            # Keep the advance unless the view fits staying put strictly better. Overlap with memory
            # is larger when staying put, so count disagreements only.
            wrong_if_moved = self._misfits(viewport, *moved, self.heading)
            if wrong_if_moved <= self._misfits(viewport, self.x, self.y, self.heading):
                self.memory[self.pos] = Cell.CONDUCTOR if move == Move.BUILD else Cell.BLANK
                self.x, self.y = moved
        self.memory.update(zip(self.view_positions(), viewport.cells, strict=True))

    def commit(self, move: int) -> int:
        """Record the move about to be sent (applied at the next ``observe``) and return it."""
        self._pending = int(move)
        return move

    def turn_toward(self, x: int, y: int) -> int | None:
        """The turn that brings the neighbouring cell (x, y) ahead, or None when it already is."""
        f, r = self.relative(x, y)
        if (f, r) == (1, 0):
            return None
        if abs(f) + abs(r) != 1:
            raise ValueError(f"({x}, {y}) is not next to the agent at {self.pos}")
        return Move.RIGHT if r == 1 else Move.LEFT

    def path_to(
        self, goals: Iterable[tuple[int, int]], *, unknown: bool = True, limit: int = 6000
    ) -> list[tuple[int, int]] | None:
        """The shortest 4-neighbour walk to any of ``goals`` over blank cells, excluding the start.

        Cells never seen count as walkable when ``unknown`` is true. A goal itself need not be
        blank. ``[]`` means the agent stands on a goal; None means no walk was found after
        looking at ``limit`` cells (A* search, so that a bot stays within its time budget).
        """
        targets = set(goals)
        start = self.pos
        if start in targets:
            return []
        if not targets:
            return None
        # Manhattan distance to the goals' bounding box: a lower bound, so A* stays exact.
        x0, x1 = min(x for x, _ in targets), max(x for x, _ in targets)
        y0, y1 = min(y for _, y in targets), max(y for _, y in targets)

        def bound(x: int, y: int) -> int:
            return max(x0 - x, 0, x - x1) + max(y0 - y, 0, y - y1)

        cost = {start: 0}
        came = {start: start}
        heap = [(bound(*start), 0, 0, start)]
        done: set[tuple[int, int]] = set()
        pushed = 0
        memory = self.memory
        blank = int(Cell.BLANK)  # plain ints: this loop is the hot spot of a searching bot
        while heap and len(done) < limit:
            _, _, _, cell = heapq.heappop(heap)
            if cell in done:
                continue
            if cell in targets:
                path = [cell]
                while came[path[-1]] != start:
                    path.append(came[path[-1]])
                return path[::-1]
            done.add(cell)
            cx, cy = cell
            g = cost[cell] + 1
            for nxt in ((cx, cy - 1), (cx + 1, cy), (cx, cy + 1), (cx - 1, cy)):
                if nxt in done:
                    continue
                code = memory.get(nxt)
                if not (code == blank or (code is None and unknown) or nxt in targets):
                    continue
                if g < cost.get(nxt, g + 1):
                    cost[nxt] = g
                    came[nxt] = cell
                    pushed += 1
                    nx, ny = nxt
                    h = max(x0 - nx, 0, nx - x1) + max(y0 - ny, 0, ny - y1)
                    # Ties go to the deeper cell, then to the order of discovery: deterministic.
                    heapq.heappush(heap, (g + h, -g, pushed, nxt))
        return None

    def _reuse_path(self, targets: frozenset[tuple[int, int]], unknown: bool) -> list[tuple[int, int]] | None:
        """Last tick's path to the same goals, from where the agent is now, if every cell on it is
        still walkable: a bot that heads somewhere over many ticks searches once, not every tick."""
        if self._path is None or self._path[0] != targets or self._path[1] != unknown:
            return None
        path = self._path[2]
        if self.pos in path:
            path = path[path.index(self.pos) + 1 :]
        if not path or abs(path[0][0] - self.x) + abs(path[0][1] - self.y) != 1:
            return None
        blank = int(Cell.BLANK)
        for cell in path[:-1]:
            code = self.memory.get(cell)
            if not (code == blank or (code is None and unknown)):
                return None
        if path[-1] not in targets:
            return None
        return path

    def step_to(
        self,
        goals: Iterable[tuple[int, int]],
        *,
        build: bool = False,
        unknown: bool = True,
        limit: int = 6000,
    ) -> int | None:
        """The move that starts the shortest walk to a goal cell (see ``path_to``), turning first if
        needed; BUILD instead of ADVANCE when ``build``. None when there is no walk or the agent is
        already on a goal."""
        targets = frozenset(goals)
        path = self._reuse_path(targets, unknown)
        if path is None:
            path = self.path_to(targets, unknown=unknown, limit=limit)
            self._path = (targets, unknown, path) if path else None
        if not path:
            return None
        turn = self.turn_toward(*path[0])
        if turn is not None:
            return turn
        if self.memory.get(path[0], Cell.BLANK) != Cell.BLANK:
            return None  # the goal itself cannot be entered: you are next to it, facing it
        return Move.BUILD if build else Move.ADVANCE


# ---------------------------------------------------------------------------------------- the bot loop
_MOVE_CODES = frozenset(int(m) for m in Move)


def moves_for(answer: object, agents: int) -> list[int]:
    """The move codes to send for ``answer`` (what ``on_tick`` returned) when the seat has ``agents``.

    A single move (an int or `Move`) is accepted for one agent; otherwise a list or tuple of exactly
    ``agents`` moves. Raises `MovesError` saying what is wrong.
    """
    value = answer.tolist() if hasattr(answer, "tolist") else answer  # numpy arrays and scalars
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif is_int(value):
        if agents != 1:
            raise MovesError(
                f"on_tick returned a single move, but this seat has {agents} agents: "
                f"return a list of {agents} moves, one per entry of view.agents"
            )
        items = [value]
    else:
        raise MovesError(
            f"on_tick returned {type(answer).__name__} {answer!r:.60}; return a Move (or int), "
            "or a list with one move per agent"
        )
    if len(items) != agents:
        raise MovesError(
            f"on_tick returned {len(items)} moves for {agents} agent{'s' * (agents != 1)}; "
            "return one per entry of view.agents"
        )
    codes = []
    for i, item in enumerate(items):
        code = as_int(item)
        if code not in _MOVE_CODES:
            raise MovesError(f"on_tick returned {item!r:.40} for agent #{i}, which is not a Move (0..5)")
        codes.append(code)
    return codes


# ---------------------------------------------------------------------------------------- messages
class RezzoTick(Tick):
    """Rezzo's ``tick``: what each of the seat's live agents sees (`View` reads it)."""

    agents: list[int]
    cells: bytes
    damage: bytes


class RezzoFrame(Frame):
    """Rezzo's spectator ``frame``: the whole world, with absolute owners."""

    width: int
    height: int
    cells: bytes
    damage: bytes
    agents: list[Any]  # [seat, index, x, y, facing, alive] per agent
    alive: list[int]


@dataclass(frozen=True)
class RezzoSettings:
    """Rezzo's settings from the ``welcome``'s ``config`` (`MatchInfo.settings`)."""

    map: str = ""
    width: int = 0
    height: int = 0
    agents_per_player: int = 1
    view_size: int = VIEW_SIZE
    max_ticks: int = 0
    torus: bool = False
    own_base_counts: bool = True

    def summary(self) -> str:
        return f"map {self.map}" if self.map else ""


def parse_config(config: Mapping[str, Any]) -> RezzoSettings:
    """The settings in a ``welcome``'s ``config``. Forgiving, as a bot should be: an entry that is
    missing or of the wrong type keeps its default, and unknown entries are ignored."""
    hints = get_type_hints(RezzoSettings)
    names = [f.name for f in fields(RezzoSettings)]
    return RezzoSettings(**{k: config[k] for k in names if k in config and conforms(config[k], hints[k])})


def make_view(message: dict[str, Any]) -> View:
    """The `View` of a ``tick`` message (see `cellarena.sdk.games.GameAdapter`)."""
    return View.from_message(message)


def encode_answer(answer: object, message: dict[str, Any]) -> list[int]:
    """One move code per agent of the request, from what ``on_tick`` returned."""
    return moves_for(answer, len(message.get("agents") or ()))


def noop_answer(message: dict[str, Any]) -> list[int]:
    """A no-op for every agent of the request."""
    return [int(Move.NOOP)] * len(message.get("agents") or ())


def idle_answer(view: View) -> list[Move]:
    """A NOOP for every agent in view."""
    return [Move.NOOP] * len(view.agents)


# ---------------------------------------------------------------------------------------- the bot class
#: What a Rezzo bot's ``on_tick`` returns: one move per entry of ``view.agents``, in that order, or a
#: single move when the seat has one agent. A `Move` is an int; codes that are no move fail at run time.
Answer: TypeAlias = int | Sequence[int]


class RezzoBot(GameBot[View, Answer]):
    """Subclass this for a Rezzo bot (`cellarena.sdk.Bot` is this class) and override
    ``on_tick(self, view: View) -> Answer``: a `Move` per agent, or one `Move` for a single agent."""

    game: ClassVar[str] = "rezzo"


if TYPE_CHECKING:
    # mypy checks this module against the bot loop's protocol, with its own view and answer types.
    from cellarena.sdk.games import GameAdapter
    from cellarena.sdk.games import rezzo as _this

    _ADAPTER: GameAdapter[View, Answer] = _this
