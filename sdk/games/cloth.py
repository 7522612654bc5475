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
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias

import numpy as np

from cellarena.sdk.bot import GameBot
from cellarena.sdk.games import MovesError, bank_ms_of
from cellarena.sdk.protocol import Length, Tick, as_int, is_int

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
    """A board as bit planes and the vectorised step: one generation is about 45 numpy calls.

    Planes are one-hot: L = A|B|C (the cells that count as neighbours), A, B, C, D, in that order in
    one flat array, so that the three planes whose neighbours are counted form one contiguous run and
    every counting operation handles all three in a single 1-D call (a 2-D or broadcast call costs
    several times the dispatch of a 1-D one, and at 256x256 dispatch is most of the cost).

    A row of a plane is ``n = ceil(W / k)`` words of ``k`` bits, **interleaved**: cell x is bit
    ``x // n`` of word ``x % n``. The east neighbour of a word is then simply the next word, and the
    west one the previous word; only the row's last word needs its east neighbour from the first
    word shifted by one bit, and the first word its west one from the last word. Each row keeps those
    two as guard words (``[west guard, n words, east guard]``), refreshed by two strided shifts per
    step, so every neighbour of every word is a plain offset view of the flat array: no shifts with
    carries. A zero row lies above and below each plane, so the rows above and below are the run
    offset by one row, and a plane's neighbour never leaks into the next plane.

    Counting is bit-sliced: per column, up+down and up+self+down; then per word, west column + own
    column + east column. The parity of the count is shared by all three planes; L adds the carries,
    for "2 <= N <= 3", while A and B need only an or of their eight neighbours: under "2 <= N <= 3"
    their counts are at most 3, and zero, odd and nonzero-even (2) tell which player dominates. The
    decision table is applied to A and B as one pair of planes (and to C and D as another), and the
    outcome "2 <= N <= 3" is ANDed into the four new planes A, B, C, D in one call. Guard words of the new
    state may hold garbage: the guards of the counted planes are rewritten before they are read, and
    nothing else reads them. Two state buffers ping-pong; all scratch is allocated once, and each
    buffer parity has its list of prebound calls, so a step allocates nothing and makes no views.

    A large board is cut into bands of rows, each with its own buffers and a ghost row above and
    below that holds a copy of the neighbouring band's edge row (zeros at the board's edge), so that
    one band's working set stays in the CPU's cache; bands of equal height share their scratch.
    """

    #: The word type. Numpy's bitwise loops cost about the same per byte whatever the type, and bytes
    #: waste the least on the two guard words per row (6% at 256 wide, against 50% for 64-bit words).
    WORD = np.uint8
    #: Bytes of state and scratch per band of rows. Bands keep a working set in the CPU's cache, but
    #: each costs its own ~45 calls: measured, a 1024x1024 board is fastest as one band (6 MB) and a
    #: 2048-wide one in bands of 512 to 700 rows.
    BAND_BYTES = 8 << 20

    def __init__(self, height: int, width: int, band: int | None = None) -> None:
        if height < 1 or width < 1:
            raise ValueError(f"a board needs at least one row and column, got {width}x{height}")
        self.height, self.width = height, width
        dt = np.dtype(self.WORD).newbyteorder("<")
        self._dtype = dt
        self._k = k = dt.itemsize * 8
        self.words = n = (width + k - 1) // k
        self.stride = s = n + 2
        # About 45 planes' worth of state and scratch per row of a band.
        band = band or max(64, self.BAND_BYTES // (45 * s * dt.itemsize))
        count = -(-height // min(band, height))
        self.band = -(-height // count)  # equal bands, the last one possibly shorter
        self._spans = [(y0, min(height, y0 + self.band)) for y0 in range(0, height, self.band)]
        self._allocated = 0
        self._pool: dict[tuple[str, int], np.ndarray] = {}
        # Per band: two state buffers (ping-pong) of 5 planes, each (rows + 2) x stride words.
        self._bufs = [
            (self._zeros(5 * (y1 - y0 + 2) * s), self._zeros(5 * (y1 - y0 + 2) * s)) for y0, y1 in self._spans
        ]
        # Each call as (function, arguments): unpacking a stored tuple is the cheapest way to call.
        self._plans = [[(call[0], call[1:]) for call in self._make_step(p)] for p in (0, 1)]
        self._parity = 0

    def _zeros(self, size: int) -> np.ndarray:
        """A zeroed array whose start is staggered against the others' modulo 4 KiB.

        Buffers of the same size would otherwise all start at the same offset within a page, and a
        call that reads one while writing another at the same index stalls on 4K aliasing.
        """
        self._allocated += 1
        item = self._dtype.itemsize
        pad = (self._allocated * 7 % 32) * 128 // item
        raw = np.zeros(size + pad + 4096 // item, self._dtype)
        start = (-raw.ctypes.data % 4096) // item + pad
        return raw[start : start + size]

    def _scratch(self, name: str, size: int) -> np.ndarray:
        """Scratch shared by the bands of equal height (they are stepped one after the other)."""
        key = (name, size)
        if key not in self._pool:
            self._pool[key] = self._zeros(size)
        return self._pool[key]

    def _make_step(self, parity: int) -> list[tuple[Any, ...]]:
        """All calls of one step from buffer ``parity`` to the other: halo rows, then band by band."""
        plan: list[tuple[Any, ...]] = []
        s = self.stride
        planes = [
            (bufs[parity].reshape(5, y1 - y0 + 2, s), y1 - y0)
            for bufs, (y0, y1) in zip(self._bufs, self._spans, strict=True)
        ]
        # Each band's ghost rows hold its neighbours' edge rows of L, A, B (the board's edge: zeros).
        for i in range(len(planes) - 1):
            (upper, h), (lower, _) = planes[i], planes[i + 1]
            plan.append(_copy(upper[:3, h], lower[:3, 0]))
            plan.append(_copy(lower[:3, 1], upper[:3, h + 1]))
        for bufs, (y0, y1) in zip(self._bufs, self._spans, strict=True):
            plan += self._make_plan(bufs[parity], bufs[parity ^ 1], y1 - y0)
        return plan

    def _make_plan(self, cur: np.ndarray, nxt: np.ndarray, h: int) -> list[tuple[Any, ...]]:
        """The calls stepping one band of ``h`` rows from ``cur`` to ``nxt``: ufuncs and their arguments.

        Made in four parts that hand each other scratch through the pool, by name (`_scratch`)."""
        return [
            *self._plan_sums(cur, h),
            *self._plan_live_count(h),
            *self._plan_dominance(h),
            *self._plan_rules(cur, nxt, h),
        ]

    def _sizes(self, h: int) -> tuple[int, int, int]:
        """For a band of ``h`` rows: words of a plane, of its rows 1..h, and of the counted run."""
        s = self.stride
        pw = (h + 2) * s
        return pw, h * s, 3 * pw - 2 * s  # the counted run: L, A, B less a row at each end

    def _plan_sums(self, cur: np.ndarray, h: int) -> list[tuple[Any, ...]]:
        """The guard words, then the column sums of three rows."""
        n, s = self.words, self.stride
        pw, rw, mw = self._sizes(h)
        xor, and_, or_ = np.bitwise_xor, np.bitwise_and, np.bitwise_or
        plan: list[tuple[Any, ...]] = []
        # Guard words of L, A, B: west guard = last word << 1, east guard = first word >> 1.
        rows = cur[: 3 * pw].reshape(3 * (h + 2), s)
        plan.append((np.add, rows[:, n], rows[:, n], rows[:, 0]))  # x + x: thrice as fast as x << 1
        plan.append((np.right_shift, rows[:, 1], self._dtype.type(1), rows[:, n + 1]))
        # Column sums. Run index i (0 <= i < mw) is state word s + i; scratch keeps it at i + 1, so
        # that its west and east neighbours are views too (the two never-written ends only ever
        # reach guard columns, whose results are not used). Scratch is reused once dead, and
        # written in place where it can, so that a band's working set stays small.
        ab = pw + rw  # A's and B's rows, as one run from A's row 1 to B's row h
        up, mid, down = cur[:mw], cur[s : s + mw], cur[2 * s : 2 * s + mw]
        x2, x3 = self._scratch("x2", mw + 2), self._scratch("x3", mw + 2)  # parity of up+down, up+self+down
        c2, c3 = self._scratch("c2", rw + 2), self._scratch("c3", rw + 2)  # L only: their carries
        o2, o3 = (
            self._scratch("o2", ab + 2),
            self._scratch("o3", ab + 2),
        )  # A and B only: up|down, up|self|down
        return [
            *plan,
            (xor, up, down, x2[1 : mw + 1]),
            (xor, x2[1 : mw + 1], mid, x3[1 : mw + 1]),
            (and_, up[:rw], down[:rw], c2[1 : rw + 1]),
            (and_, x2[1 : rw + 1], mid[:rw], c3[1 : rw + 1]),
            (or_, c3[1 : rw + 1], c2[1 : rw + 1], c3[1 : rw + 1]),
            (or_, up[pw:], down[pw:], o2[1 : ab + 1]),
            (or_, o2[1 : ab + 1], mid[pw:], o3[1 : ab + 1]),
        ]

    def _plan_live_count(self, h: int) -> list[tuple[Any, ...]]:
        """``m``: the cells with 2 or 3 live neighbours, from the column sums."""
        _, rw, mw = self._sizes(h)
        xor, and_, or_ = np.bitwise_xor, np.bitwise_and, np.bitwise_or
        x2, x3 = self._scratch("x2", mw + 2), self._scratch("x3", mw + 2)
        c2, c3 = self._scratch("c2", rw + 2), self._scratch("c3", rw + 2)
        # N = west v3 + own v2 + east v3. For L: N = odd + 2 * (c3 west + c2 own + c3 east + carry),
        # with odd = x3 west ^ x2 own ^ x3 east and carry their majority, so 2 <= N <= 3 iff exactly
        # one of those four 2s is set: m = x & ~twos, where x is their xor and twos says that a pair
        # (west, own) or (east, carry) is both set.
        odd = self._scratch("odd", mw)  # first x3 west ^ x2 own, then the parity of N, for all three
        carry, both, x, m = (self._scratch(name, rw) for name in ("carry", "both", "x", "m"))
        x3w, x2o, x3e = x3[:mw], x2[1 : mw + 1], x3[2 : mw + 2]
        c3w, c2o, c3e = c3[:rw], c2[1 : rw + 1], c3[2 : rw + 2]
        plan: list[tuple[Any, ...]] = [
            (xor, x3w, x2o, odd),
            (and_, odd[:rw], x3e[:rw], carry),
            (xor, odd, x3e, odd),
            (and_, x3w[:rw], x2o[:rw], both),
            (or_, carry, both, carry),
            (xor, c3w, c2o, x),
            (and_, c3w, c2o, both),
            (xor, x, c3e, x),
            (xor, x, carry, x),
            (and_, carry, c3e, carry),
            (or_, carry, both, carry),
            (or_, x, carry, m),
            (xor, m, carry, m),
        ]
        if self.width % self._k:  # no births past the right edge
            plan.append((and_, m, self._edge_mask(h), m))
        return plan

    def _plan_dominance(self, h: int) -> list[tuple[Any, ...]]:
        """Over A's and B's rows (``pw`` apart, as in the state): where A dominates B and the reverse."""
        pw, rw, mw = self._sizes(h)
        xor, and_, or_ = np.bitwise_xor, np.bitwise_and, np.bitwise_or
        ab = pw + rw
        o2, o3 = self._scratch("o2", ab + 2), self._scratch("o3", ab + 2)
        # A and B: only whether N_A and N_B are 0 (z, an or of the eight), 2 (z and even) or odd is
        # needed. Under m, N_A + N_B <= 3, so N_A > N_B iff N_A != 0 and not (N_A odd and N_B != 0):
        # g = zA & ~(oddA & zB) = zA ^ (oddA & zA & zB), and lt the mirror. A's and B's rows lie pw
        # apart in these runs, as in the state.
        z, zz, odd_ab = o2[1 : ab + 1], self._scratch("both", rw), self._scratch("odd", mw)[pw:]
        return [
            (or_, z, o3[:ab], z),
            (or_, z, o3[2 : ab + 2], z),
            (and_, z[:rw], z[pw:], zz),
            (and_, odd_ab[:rw], zz, odd_ab[:rw]),
            (and_, odd_ab[pw:], zz, odd_ab[pw:]),
            (xor, z, odd_ab, z),
        ]

    def _plan_rules(self, cur: np.ndarray, nxt: np.ndarray, h: int) -> list[tuple[Any, ...]]:
        """The next state from the counts and the dominance: takes, births, kills and survivals."""
        s = self.stride
        pw, rw, mw = self._sizes(h)
        xor, and_, or_ = np.bitwise_xor, np.bitwise_and, np.bitwise_or
        ab = pw + rw

        def real(buf: np.ndarray, plane: int, planes: int = 1) -> np.ndarray:
            """Rows 1..h of ``plane`` (and the ``planes - 1`` next ones, ghost rows between)."""
            return buf[plane * pw + s : (plane + planes - 1) * pw + s + rw]

        z = self._scratch("o2", ab + 2)[1 : ab + 1]
        odd, m = self._scratch("odd", mw), self._scratch("m", rw)
        g, lt = z[:rw], z[pw:]
        # take: cells a dominant player takes, births (empty with N = 3: odd under m) and conversions (c).
        occ, take = self._scratch("carry", rw), self._scratch("x", rw)
        plan: list[tuple[Any, ...]] = [
            (or_, real(cur, _PL), real(cur, _PD), occ),
            (or_, odd[:rw], occ, take),
            (xor, take, occ, take),
            (or_, take, real(cur, _PC), take),
        ]
        # The decision table, before "and m": A survives unless lt, is taken where g; B the mirror;
        # killed players become d; c stays unless taken; L is what lives. The rows between A's and
        # B's of killed (later gain) and taken are never written, so the state's stay zero.
        killed, taken = self._scratch("killed", ab), self._scratch("taken", ab)
        gain, nab = killed, real(nxt, _PA, 2)
        plan += [
            (and_, real(cur, _PA), lt, killed[:rw]),
            (and_, real(cur, _PB), g, killed[pw:]),
            (or_, killed[:rw], killed[pw:], taken[pw:]),  # [c taken, d made] xor [c, d] = [new c, new d]
            (or_, g, lt, taken[:rw]),
            (and_, taken[:rw], real(cur, _PC), taken[:rw]),
            (xor, real(cur, _PC, 2), taken, real(nxt, _PC, 2)),
            (xor, real(cur, _PA, 2), killed, nab),
            (and_, g, take, gain[:rw]),
            (and_, lt, take, gain[pw:]),
            (or_, nab, gain, nab),
        ]
        # Only cells with 2 <= N <= 3 live on; then L is what lives.
        alive = nxt.reshape(5, pw)[_PA:, s : s + rw]
        return [
            *plan,
            (and_, alive, m, alive),
            (or_, real(nxt, _PA), real(nxt, _PB), real(nxt, _PL)),
            (or_, real(nxt, _PL), real(nxt, _PC), real(nxt, _PL)),
        ]

    def _edge_mask(self, h: int) -> np.ndarray:
        """Over a band's rows 1..h: the bits of cells on the board (guard words 0)."""
        row = np.zeros(self.words * self._k, bool)
        row[: self.width] = True
        words = self._pack(row[None, :])[0]
        out = np.zeros((h, self.stride), self._dtype)
        out[:, 1:-1] = words
        return out.reshape(-1)

    def _pack(self, bits: np.ndarray) -> np.ndarray:
        """(H, n*k) bools, cell x at column x, as (H, n) interleaved words."""
        h, n, k = bits.shape[0], self.words, self._k
        cols = bits.reshape(h, k, n).transpose(0, 2, 1)  # [y, word, bit]
        packed = np.packbits(np.ascontiguousarray(cols), axis=2, bitorder="little")
        return packed.view(self._dtype).reshape(h, n)

    def _words(self, plane: int) -> list[np.ndarray]:
        """A plane's board words, band by band, as (rows, n) views of the current state."""
        s = self.stride
        return [
            bufs[self._parity].reshape(5, y1 - y0 + 2, s)[plane, 1:-1, 1:-1]
            for bufs, (y0, y1) in zip(self._bufs, self._spans, strict=True)
        ]

    @classmethod
    def from_codes(cls, codes: np.ndarray, band: int | None = None) -> ClothWorld:
        """A world holding ``codes`` (an (H, W) array of cell codes 0..4)."""
        codes = np.asarray(codes)
        height, width = codes.shape
        world = cls(height, width, band=band)
        world.load(codes)
        return world

    def load(self, codes: np.ndarray) -> None:
        """Replace the state with ``codes`` (same shape as the world)."""
        codes = np.asarray(codes)
        if codes.shape != (self.height, self.width):
            raise ValueError(f"codes of shape {codes.shape} for a {self.width}x{self.height} world")
        for bufs in self._bufs:
            for buf in bufs:
                buf[...] = 0
        padded = np.zeros((self.height, self.words * self._k), bool)
        for plane, code in enumerate((-1, A, B, C, D)):
            padded[:, : self.width] = (codes == code) if code >= 0 else (codes != EMPTY) & (codes != D)
            words = self._pack(padded)
            for view, (y0, y1) in zip(self._words(plane), self._spans, strict=True):
                view[...] = words[y0:y1]

    def codes(self) -> np.ndarray:
        """The board as an (H, W) uint8 array of cell codes."""
        h, n, k = self.height, self.words, self._k
        out = np.zeros((h, self.width), np.uint8)
        for plane, code in ((1, A), (2, B), (3, C), (4, D)):
            words = np.concatenate(self._words(plane))
            raw = words.view(np.uint8).reshape(h, n, k // 8)
            bits = np.unpackbits(raw, axis=2, bitorder="little").transpose(0, 2, 1).reshape(h, n * k)
            out[bits[:, : self.width].astype(bool)] = code
        return out

    def step(self) -> None:
        """One generation (see the decision table in `docs/games/cloth.md`)."""
        for f, args in self._plans[self._parity]:
            f(*args)
        self._parity ^= 1

    def run(self, generations: int) -> None:
        plan = self._plans[self._parity]
        other = self._plans[self._parity ^ 1]
        for _ in range(generations):
            for f, args in plan:
                f(*args)
            plan, other = other, plan
        self._parity ^= generations & 1

    def counts(self) -> tuple[int, int, int, int]:
        """Cells of A, B, C and D."""
        return tuple(  # type: ignore[return-value]
            sum(int(np.bitwise_count(view).sum()) for view in self._words(p)) for p in (1, 2, 3, 4)
        )


#: The planes' order in a state buffer (the first three are the counted ones).
_PL, _PA, _PB, _PC, _PD = range(5)


def _copy(src: np.ndarray, dst: np.ndarray) -> tuple[Any, ...]:
    """A plan entry copying ``src`` into ``dst`` (``dst[...] = src`` without a Python frame)."""
    return (dst.__setitem__, Ellipsis, src)


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
    both: np.ndarray = territory(board, A) & territory(board, B)
    return both


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
    ok: np.ndarray = (board == EMPTY) & ~_near(board, opponent(me)) & ~(mine & theirs)
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
    x, y = as_int(unit[0]), as_int(unit[1])
    if x is None or y is None:
        return None
    return x, y


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


# ---------------------------------------------------------------------------------------- the message
class ClothTick(Tick):
    """Cloth of Gold's ``tick``, to the one seat placing now (`View` reads it)."""

    round: int
    you: int
    width: int
    height: int
    cells: bytes
    territory: bytes
    first: bool
    places_first: bool
    max_units: int
    generations: int
    units: Annotated[list[int], Length(2, 2)]
    scores: Annotated[list[int], Length(2, 2)]
    rejected: list[Any]  # [index, x, y, reason] per refusal


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
    #: What is left of your time bank, in ms (docs/protocol.md#the-time-bank); None when the match
    #: has none. An answer after ``budget_ms`` is still taken while this lasts.
    bank_ms: int | None = None
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
            if not (is_int(value) if kind is int else isinstance(value, kind)):
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
            bank_ms=bank_ms_of(message),
        )


def observation(view: View) -> np.ndarray:
    """The view as the training environment's observation, (2, H, W) uint8: the board's codes, then the
    territory (bit 0 A's, bit 1 B's). Here, in the SDK, so that a trained bot decodes its requests
    with the very code the environment (`cellarena.server.env.games.cloth`) trained it on."""
    return np.stack([np.asarray(view.board, np.uint8), np.asarray(view.territory, np.uint8)])


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


def idle_answer(view: View) -> list[tuple[int, int]]:
    """No units (see `noop_answer`)."""
    return []


# ---------------------------------------------------------------------------------------- the bot class
#: What a Cloth of Gold bot's ``on_tick`` returns: the units to place this turn, as (x, y) pairs (at
#: most ``view.max_units``).
Answer: TypeAlias = Sequence[tuple[int, int]]


class ClothBot(GameBot[View, Answer]):
    """Subclass this for a Cloth of Gold bot and override ``on_tick(self, view: View) -> Answer``:
    the (x, y) cells to place units on (`View.legal` shows where you may)."""

    game: ClassVar[str] = "cloth"


if TYPE_CHECKING:
    # mypy checks this module against the bot loop's protocol, with its own view and answer types.
    from cellarena.sdk.games import GameAdapter
    from cellarena.sdk.games import cloth as _this

    _ADAPTER: GameAdapter[View, Answer] = _this
