"""Cloth of Gold (``cloth``): cell codes, the CA step, territory, placement rules and the bot-side view.

The rules are in `docs/games/cloth.md`. This module holds the one implementation of the step, of the
metaball territory and of the placement checks, so that the server's engine and a planning bot agree
by construction: the engine imports them from here. Unlike the rest of the SDK it needs numpy, because
a 64x64 board stepped 168 times per round is only affordable vectorised.

Cell codes: 0 empty, 1 player A (seat 0), 2 player B (seat 1), 3 neutral C, 4 dead D.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np

from cellarena.sdk.games import MovesError

# ---------------------------------------------------------------------------------------- codes
EMPTY = 0
A = 1  #: seat 0's cells
B = 2  #: seat 1's cells
C = 3  #: the neutral population
D = 4  #: killed cells: inert corpses
CHARS = ".abcd"
#: Seat -> its cell code, and back.
SEAT_CODE = (A, B)

#: Metaball radii: a unit's field reaches (R^2 - d^2)^2 / (R^2 - r^2)^2, and territory is field > 1.
RADIUS = 6
INNER = 3
#: Territory means sum of max(0, R^2 - d^2)^2 over a player's live cells > THRESHOLD = (R^2 - r^2)^2.
THRESHOLD = (RADIUS**2 - INNER**2) ** 2
_K = RADIUS - 1  # the kernel's reach: d < 6, so |dx|, |dy| <= 5
_dy, _dx = np.mgrid[-_K : _K + 1, -_K : _K + 1]
#: The integer field of one unit at the centre, (11, 11).
KERNEL = np.maximum(0, RADIUS**2 - (_dx**2 + _dy**2)).astype(np.int64) ** 2

# Why a placement was refused, as sent back to the bot.
MALFORMED = "malformed"  #: not an [x, y] pair of ints
OFF_BOARD = "off_board"
OCCUPIED = "occupied"  #: on a live cell (a, b or c)
DEAD = "dead"  #: on a d cell
NEXT_TO_OPPONENT = "next_to_opponent"  #: an opponent's cell is among the 8 neighbours
CONTESTED = "contested"  #: inside both players' territories
OUTSIDE_TERRITORY = "outside_territory"  #: not in your territory (only your first unit ever may be)
EMPTY_BATCH = "empty"  #: no unit at all although a legal cell existed (index -1)
REASONS = (MALFORMED, OFF_BOARD, OCCUPIED, DEAD, NEXT_TO_OPPONENT, CONTESTED, OUTSIDE_TERRITORY, EMPTY_BATCH)


def opponent(code: int) -> int:
    """The other player's code (A <-> B)."""
    return B if code == A else A


# ---------------------------------------------------------------------------------------- the step
class ClothWorld:
    """A board as bit planes (64 cells of a row per uint64 word) and the vectorised step.

    Planes are one-hot: A, B, C, D, plus L = A|B|C (the cells that count as neighbours), kept with
    the state so that the three planes whose neighbours are counted sit side by side and every
    counting operation handles all three at once. Each plane is one flat run of rows; a row is its
    words plus one zero word, and a zero row lies above and below the board. So a neighbour across
    a word boundary is the previous or next word of the run (the zero word stops carries between
    rows), the rows above and below are the run shifted by one row, and every operand is
    contiguous. Two state buffers ping-pong and all scratch is allocated once; a large board is
    stepped in bands of rows so that the scratch stays in the CPU's cache.
    """

    #: Scratch bytes per band; the working set of one band then fits a typical 2 MB L2 cache.
    BAND_BYTES = 1 << 20

    def __init__(self, height: int, width: int) -> None:
        if height < 1 or width < 1:
            raise ValueError(f"a board needs at least one row and column, got {width}x{height}")
        self.height, self.width = height, width
        self.words = (width + 63) // 64
        self.stride = s = self.words + 1
        self._cur = np.zeros((5, (height + 2) * s), np.uint64)  # A, B, L, C, D
        self._nxt = np.zeros_like(self._cur)
        # About 45 scratch planes of `band` rows each.
        self.band = band = max(8, min(height, self.BAND_BYTES // (45 * 8 * s)))
        three = (3, (band + 2) * s)
        self._w, self._e, self._tmp = (np.zeros(three, np.uint64) for _ in range(3))
        self._lo2, self._hi2, self._lo3, self._hi3 = (np.zeros(three, np.uint64) for _ in range(4))
        inner = (3, band * s)
        self._bit0, self._bit1, self._v1, self._v2, self._v3 = (np.zeros(inner, np.uint64) for _ in range(5))
        self._t1, self._t2, self._t3, self._g, self._lt, self._m = (
            np.zeros(band * s, np.uint64) for _ in range(6)
        )
        # Births may only happen on the board: not past the right edge, not in the zero words.
        row = np.full(s, ~np.uint64(0), np.uint64)
        row[-1] = 0
        if width % 64:
            row[-2] = np.uint64((1 << (width % 64)) - 1)
        self._mask = np.tile(row, band)

    @classmethod
    def from_codes(cls, codes: np.ndarray) -> ClothWorld:
        """A world holding ``codes`` (an (H, W) array of cell codes 0..4)."""
        codes = np.asarray(codes)
        world = cls(*codes.shape)
        world.load(codes)
        return world

    def _rows(self, plane: np.ndarray) -> np.ndarray:
        """A plane as (H, words): the board's rows without the zero word and rows (a view)."""
        return plane.reshape(self.height + 2, self.stride)[1:-1, :-1]

    def load(self, codes: np.ndarray) -> None:
        """Replace the state with ``codes`` (same shape as the world)."""
        codes = np.asarray(codes)
        if codes.shape != (self.height, self.width):
            raise ValueError(f"codes of shape {codes.shape} for a {self.width}x{self.height} world")
        padded = np.zeros((self.height, self.words * 64), np.uint8)
        for k, code in enumerate((A, B, -1, C, D)):
            plane = codes == code if code >= 0 else (codes == A) | (codes == B) | (codes == C)
            padded[:, : self.width] = plane
            self._rows(self._cur[k])[...] = np.packbits(padded, axis=1, bitorder="little").view("<u8")
        self._nxt[...] = 0

    def codes(self) -> np.ndarray:
        """The board as an (H, W) uint8 array of cell codes."""
        out = np.zeros((self.height, self.width), np.uint8)
        for k, code in ((0, A), (1, B), (3, C), (4, D)):
            raw = np.ascontiguousarray(self._rows(self._cur[k])).astype("<u8", copy=False).view(np.uint8)
            bits = np.unpackbits(raw, axis=1, bitorder="little")[:, : self.width]
            out[bits.astype(bool)] = code
        return out

    def step(self) -> None:
        """One generation (see the decision table in `docs/games/cloth.md`)."""
        for y0 in range(0, self.height, self.band):
            self._step_rows(y0, min(self.height, y0 + self.band))
        self._cur, self._nxt = self._nxt, self._cur

    def _step_rows(self, y0: int, y1: int) -> None:
        """Board rows y0..y1-1 of the next state."""
        s = self.stride
        n = (y1 - y0) * s  # words of the band
        cur, nxt = self._cur, self._nxt
        p = cur[0:3, y0 * s : (y1 + 2) * s]  # A, B, L with one row of halo each side
        w, e, tmp = self._w[:, : n + 2 * s], self._e[:, : n + 2 * s], self._tmp[:, : n + 2 * s]
        # West and east neighbours: shift within words, carry across word boundaries.
        np.left_shift(p, _ONE, out=w)
        np.right_shift(p[:, :-1], _63, out=tmp[:, 1:])
        np.bitwise_or(w[:, 1:], tmp[:, 1:], out=w[:, 1:])
        np.right_shift(p, _ONE, out=e)
        np.left_shift(p[:, 1:], _63, out=tmp[:, :-1])
        np.bitwise_or(e[:, :-1], tmp[:, :-1], out=e[:, :-1])
        # Per row: W+E (2 bits) and W+self+E (2 bits).
        lo2, hi2 = self._lo2[:, : n + 2 * s], self._hi2[:, : n + 2 * s]
        lo3, hi3 = self._lo3[:, : n + 2 * s], self._hi3[:, : n + 2 * s]
        np.bitwise_xor(w, e, out=lo2)
        np.bitwise_and(w, e, out=hi2)
        np.bitwise_xor(w, p, out=tmp)
        np.bitwise_xor(tmp, e, out=lo3)
        np.bitwise_and(tmp, e, out=tmp)
        np.bitwise_and(w, p, out=w)
        np.bitwise_or(w, tmp, out=hi3)
        # Column sums: row above (3) + own row (2) + row below (3) = the 8 neighbours, mod 4,
        # exact whenever the total is at most 3, which is the only case where A vs B matters.
        a0, b0, c0 = lo3[:, :n], lo2[:, s : s + n], lo3[:, 2 * s :]
        a1, b1, c1 = hi3[:, :n], hi2[:, s : s + n], hi3[:, 2 * s :]
        bit0, bit1 = self._bit0[:, :n], self._bit1[:, :n]
        v1, v2, v3 = self._v1[:, :n], self._v2[:, :n], self._v3[:, :n]
        np.bitwise_xor(a0, b0, out=v1)
        np.bitwise_xor(v1, c0, out=bit0)
        np.bitwise_and(v1, c0, out=v1)
        np.bitwise_and(a0, b0, out=v2)
        np.bitwise_or(v2, v1, out=v2)  # carry into the 2s
        np.bitwise_xor(a1, b1, out=v1)
        np.bitwise_xor(c1, v2, out=v3)
        np.bitwise_xor(v1, v3, out=bit1)
        t1, t2, t3 = self._t1[:n], self._t2[:n], self._t3[:n]
        g, lt, m = self._g[:n], self._lt[:n], self._m[:n]
        # m: 2 <= N <= 3, i.e. N mod 4 in {2, 3} and at most one of the four 2s is set.
        np.bitwise_and(a1[2], b1[2], out=t1)
        np.bitwise_and(c1[2], v2[2], out=t2)
        np.bitwise_or(t1, t2, out=t1)
        np.bitwise_and(v1[2], v3[2], out=t2)
        np.bitwise_or(t1, t2, out=t1)
        np.invert(t1, out=m)
        np.bitwise_and(m, bit1[2], out=m)
        # g: N_A > N_B, lt: N_A < N_B (2-bit comparisons of the mod-4 counts).
        na0, na1, nb0, nb1 = bit0[0], bit1[0], bit0[1], bit1[1]
        np.bitwise_xor(na1, nb1, out=t1)
        np.invert(t1, out=t3)  # high bits equal
        np.invert(nb0, out=t2)
        np.bitwise_and(t2, na0, out=t2)
        np.bitwise_and(t2, t3, out=t2)
        np.bitwise_and(na1, t1, out=g)
        np.bitwise_or(g, t2, out=g)
        np.invert(na0, out=t2)
        np.bitwise_and(t2, nb0, out=t2)
        np.bitwise_and(t2, t3, out=t2)
        np.bitwise_and(nb1, t1, out=lt)
        np.bitwise_or(lt, t2, out=lt)
        # The decision table.
        ca, cb, cl, cc, cd = (cur[k, (y0 + 1) * s : (y1 + 1) * s] for k in range(5))
        na, nbb, nl, nc, nd = (nxt[k, (y0 + 1) * s : (y1 + 1) * s] for k in range(5))
        np.bitwise_or(cl, cd, out=t1)
        np.invert(t1, out=t1)
        np.bitwise_and(t1, bit0[2], out=t1)  # empty with N odd (N = 3 under m)
        np.bitwise_or(t1, cc, out=t1)  # cells a majority may take (births and conversions)
        np.invert(lt, out=t2)
        np.bitwise_and(t2, ca, out=t2)
        np.bitwise_and(g, t1, out=t3)
        np.bitwise_or(t2, t3, out=t2)
        np.bitwise_and(t2, m, out=na)
        np.invert(g, out=t2)
        np.bitwise_and(t2, cb, out=t2)
        np.bitwise_and(lt, t1, out=t3)
        np.bitwise_or(t2, t3, out=t2)
        np.bitwise_and(t2, m, out=nbb)
        np.bitwise_or(g, lt, out=t2)
        np.invert(t2, out=t2)
        np.bitwise_and(t2, cc, out=t2)
        np.bitwise_and(t2, m, out=nc)
        np.bitwise_and(ca, lt, out=t2)
        np.bitwise_and(cb, g, out=t3)
        np.bitwise_or(t2, t3, out=t2)
        np.bitwise_or(t2, cd, out=t2)
        np.bitwise_and(t2, m, out=nd)
        np.bitwise_and(na, self._mask[:n], out=na)
        np.bitwise_and(nbb, self._mask[:n], out=nbb)
        np.bitwise_or(na, nbb, out=nl)
        np.bitwise_or(nl, nc, out=nl)

    def run(self, generations: int) -> None:
        for _ in range(generations):
            self.step()

    def counts(self) -> tuple[int, int, int, int]:
        """Cells of A, B, C and D."""
        return tuple(int(np.bitwise_count(self._cur[k]).sum()) for k in (0, 1, 3, 4))  # type: ignore[return-value]


_ONE = np.uint64(1)
_63 = np.uint64(63)


def step(board: np.ndarray, generations: int = 1) -> np.ndarray:
    """``board`` after ``generations`` steps, as a new (H, W) uint8 array."""
    world = ClothWorld.from_codes(board)
    world.run(generations)
    return world.codes()


# ---------------------------------------------------------------------------------------- territory
def field(board: np.ndarray, code: int) -> np.ndarray:
    """The integer metaball field of ``code``'s live cells: an (H, W) int64 array (territory: > THRESHOLD)."""
    board = np.asarray(board)
    h, w = board.shape
    padded = _padded_field(board, code)
    return padded[_K : _K + h, _K : _K + w].copy()


def _padded_field(board: np.ndarray, code: int) -> np.ndarray:
    """The field with a margin of 5 on every side, so a unit's kernel can be added as one slice."""
    h, w = board.shape
    out = np.zeros((h + 2 * _K, w + 2 * _K), np.int64)
    ys, xs = np.nonzero(board == code)
    if len(ys) <= 121:  # few units: stamp each one
        for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
            out[y : y + 2 * _K + 1, x : x + 2 * _K + 1] += KERNEL
        return out
    ind = np.zeros_like(out)
    ind[_K : _K + h, _K : _K + w] = board == code
    core = out[_K : _K + h, _K : _K + w]
    for dy in range(-_K, _K + 1):
        for dx in range(-_K, _K + 1):
            weight = int(KERNEL[dy + _K, dx + _K])
            if weight:
                core += weight * ind[_K - dy : _K - dy + h, _K - dx : _K - dx + w]
    return out


def territory(board: np.ndarray, code: int) -> np.ndarray:
    """Where ``code``'s field exceeds 1: an (H, W) bool array."""
    return field(board, code) > THRESHOLD


def contested(board: np.ndarray) -> np.ndarray:
    """Cells inside both players' territories."""
    return territory(board, A) & territory(board, B)


def territory_plane(board: np.ndarray) -> np.ndarray:
    """One byte per cell: bit 0 set in A's territory, bit 1 in B's (3 = contested)."""
    return (territory(board, A).astype(np.uint8) | (territory(board, B).astype(np.uint8) << 1)).astype(
        np.uint8
    )


def _near(board: np.ndarray, code: int) -> np.ndarray:
    """Cells with a ``code`` cell within Chebyshev distance 1 (itself included)."""
    h, w = board.shape
    pad = np.zeros((h + 2, w + 2), bool)
    pad[1:-1, 1:-1] = board == code
    out = np.zeros((h, w), bool)
    for dy in range(3):
        for dx in range(3):
            out |= pad[dy : dy + h, dx : dx + w]
    return out


def legal_cells(board: np.ndarray, me: int, first: bool = False) -> np.ndarray:
    """Where player ``me`` (A or B) may place a unit now: an (H, W) bool array.

    ``first`` says the first-unit exemption still applies (you have never placed a unit), so the
    cell need not be in your territory. A cell legal now may become illegal after you place
    another unit (it could make a cell contested); `place` checks units one by one.
    """
    board = np.asarray(board)
    mine = field(board, me) > THRESHOLD
    theirs = field(board, opponent(me)) > THRESHOLD
    ok = (board == EMPTY) & ~_near(board, opponent(me)) & ~(mine & theirs)
    if not first:
        ok &= mine
    return ok


@dataclass(frozen=True)
class Rejection:
    """One refused unit: its index in the batch (-1 for the batch as a whole), where, and why."""

    index: int
    x: int
    y: int
    reason: str

    def to_wire(self) -> list[Any]:
        return [self.index, self.x, self.y, self.reason]


def _as_xy(unit: Any) -> tuple[int, int] | None:
    """``unit`` as an (x, y) pair of ints, or None."""
    if not isinstance(unit, (list, tuple)) or len(unit) != 2:
        return None
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in unit):
        return None
    return int(unit[0]), int(unit[1])


def place(
    board: np.ndarray, units: Sequence[Any], me: int, first: bool = False
) -> tuple[list[tuple[int, int]], list[Rejection]]:
    """Place ``units`` (each [x, y]) for player ``me`` on ``board`` in place, one by one.

    Each unit is checked against the board as the earlier units of the batch left it. Returns the
    units placed and the refusals, with the first failing check of: malformed, off_board,
    occupied / dead, next_to_opponent, contested, outside_territory. ``first`` is the first-unit
    exemption (see `legal_cells`); it is spent by the first unit placed.
    """
    h, w = board.shape
    opp = opponent(me)
    f_me = _padded_field(board, me)
    f_opp = _padded_field(board, opp)
    placed: list[tuple[int, int]] = []
    rejected: list[Rejection] = []
    for i, unit in enumerate(units):
        xy = _as_xy(unit)
        if xy is None:
            rejected.append(Rejection(i, -1, -1, MALFORMED))
            continue
        x, y = xy
        reason = None
        if not (0 <= x < w and 0 <= y < h):
            reason = OFF_BOARD
        elif board[y, x] != EMPTY:
            reason = DEAD if board[y, x] == D else OCCUPIED
        elif (board[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2] == opp).any():
            reason = NEXT_TO_OPPONENT
        else:
            mine = f_me[y + _K, x + _K] > THRESHOLD
            if mine and f_opp[y + _K, x + _K] > THRESHOLD:
                reason = CONTESTED
            elif not mine and not first:
                reason = OUTSIDE_TERRITORY
        if reason is not None:
            rejected.append(Rejection(i, x, y, reason))
            continue
        board[y, x] = me
        f_me[y : y + 2 * _K + 1, x : x + 2 * _K + 1] += KERNEL
        placed.append((x, y))
        first = False
    return placed, rejected


# ---------------------------------------------------------------------------------------- the view
@dataclass
class View:
    """What ``on_tick`` gets: the board when it is your turn to place, and everything around it.

    ``board`` is an (H, W) uint8 array of codes with absolute owners (A is seat 0); ``me`` is your
    code. ``rejected`` lists the refusals of your previous batch.
    """

    tick: int
    round: int
    me: int
    board: np.ndarray
    territory: np.ndarray
    first: bool
    max_units: int
    generations: int
    units: tuple[int, int]
    scores: tuple[int, int]
    places_first: bool
    rejected: list[Rejection] = dc_field(default_factory=list)
    budget_ms: int = 0
    received_at: float = dc_field(default_factory=time.monotonic, compare=False, repr=False)

    @property
    def opp(self) -> int:
        return opponent(self.me)

    @property
    def height(self) -> int:
        return int(self.board.shape[0])

    @property
    def width(self) -> int:
        return int(self.board.shape[1])

    def legal(self) -> np.ndarray:
        """Where you may place your next unit (see `legal_cells`)."""
        return legal_cells(self.board, self.me, self.first)

    def time_left_ms(self) -> float:
        """Milliseconds of the budget left, measured from when this request was read."""
        return self.budget_ms - (time.monotonic() - self.received_at) * 1000.0

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> View:
        """The View of a ``tick`` message; ValueError says what is malformed."""

        def get(key: str, kind: type | tuple[type, ...]) -> Any:
            value = message.get(key)
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise ValueError(f"tick: field {key!r} must be {kind}, got {value!r:.60}")
            return value

        w, h = get("width", int), get("height", int)
        cells, terr = get("cells", (bytes, bytearray)), get("territory", (bytes, bytearray))
        for name, plane in (("cells", cells), ("territory", terr)):
            if len(plane) != w * h:
                raise ValueError(f"tick: field {name!r} must hold {w * h} bytes, got {len(plane)}")
        units, scores = get("units", list), get("scores", list)
        rejected = []
        for r in get("rejected", list):
            if not (isinstance(r, list) and len(r) == 4):
                raise ValueError(f"tick: a rejection must be [index, x, y, reason], got {r!r:.60}")
            rejected.append(Rejection(int(r[0]), int(r[1]), int(r[2]), str(r[3])))
        return cls(
            tick=get("tick", int),
            round=get("round", int),
            me=get("you", int),
            board=np.frombuffer(bytes(cells), np.uint8).reshape(h, w).copy(),
            territory=np.frombuffer(bytes(terr), np.uint8).reshape(h, w).copy(),
            first=get("first", bool),
            max_units=get("max_units", int),
            generations=get("generations", int),
            units=(int(units[0]), int(units[1])),
            scores=(int(scores[0]), int(scores[1])),
            places_first=get("places_first", bool),
            rejected=rejected,
            budget_ms=int(message.get("budget_ms", 0) or 0),
        )


def render(board: np.ndarray) -> str:
    """The board as text, one character per cell (``.abcd``)."""
    return "\n".join("".join(CHARS[c] for c in row) for row in np.asarray(board).tolist())


# ---------------------------------------------------------------------------------------- the bot loop
def units_for(answer: object, max_units: int) -> list[list[int]]:
    """The ``moves`` field for ``answer``: an iterable of (x, y) pairs. Raises `MovesError`."""
    value = answer.tolist() if hasattr(answer, "tolist") else answer
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes, Mapping)):
        raise MovesError(f"on_tick returned {type(answer).__name__}; return a list of (x, y) pairs")
    out = []
    for item in value:
        try:
            x, y = (operator.index(v) for v in item)
        except (TypeError, ValueError):
            raise MovesError(f"on_tick returned {item!r:.40} as a unit; a unit is an (x, y) pair") from None
        out.append([x, y])
    if len(out) > max_units:
        raise MovesError(f"on_tick returned {len(out)} units; at most {max_units} per turn")
    return out


def make_view(message: dict[str, Any]) -> View:
    """The `View` of a ``tick`` message (see `cellarena.sdk.games.GameAdapter`)."""
    return View.from_message(message)


def encode_answer(answer: object, message: dict[str, Any]) -> list[list[int]]:
    """The units to send, from what ``on_tick`` returned."""
    return units_for(answer, int(message.get("max_units") or 10))


def noop_answer(message: dict[str, Any]) -> list[list[int]]:
    """No units: a pass (counted illegal when a legal cell existed)."""
    return []
