"""Rezzo's cellular automaton on packed bit-planes.

Each state is a plane of bits, 64 cells to a ``uint64`` word, so one numpy operation updates 64 cells.
Neighbour counts come from bit-sliced adders (the technique of bitboard Life programs) instead of
per-cell sums. That is what lets a pure-numpy step beat a byte-per-cell step by an order of magnitude:
the byte version touches every cell in ~50 passes; this one touches every word in ~90 much smaller passes.

Layout of one plane, for a world of H rows and W columns, ``nw = ceil(W / 64)`` words per row:

    index 0 | row 0 (ghost) | row 1 .. row H (the world) | row H+1 (ghost) | index L-1

Each row is ``nw`` words followed by one pad word, so the row stride is ``S = nw + 1``. Cell (x, y)
is bit ``x % 64`` of word ``1 + (y + 1) * S + x // 64``. Pads and ghost rows read as blank, so the world
edge counts as nothing, as the rulebook wants. On a torus they are filled from the opposite edge
before each step and cleared after.

Every new plane is the AND of some old plane with a condition, so bits that are zero outside the
world stay zero, on a torus too: ghosts are filled only in the scratch block the counts read from.

Planes that the CA changes (conductor, electron, tail, photon, one flag plane per player) are double
buffered and ping-ponged; geysers, bases and agents never change in a transition and live in a single
"static" stack that the agent phase and loss processing edit in place.

Where numba is installed, the step of a big world runs as one compiled call (`ca_kernel`, 3.5x to
25x the numpy step at 256x256 on a busy machine); the numpy step (`ca_numpy`) stays the fallback, the
step of small worlds (`COMPILED_FROM`) and the reference the compiled one is tested against. The
layout of the planes is in `planes`.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.games.rezzo import backends
from cellarena.server.games.rezzo.ca_numpy import NumpyStep
from cellarena.server.games.rezzo.planes import (
    A_KIND,
    B_KIND,
    DYN_FIXED,
    G_KIND,
    WORD,
    C,
    Found,
    Layout,
    StepArrays,
)

#: From this many cells up, a world's step is compiled where numba is installed ("auto"). Below, the
#: numpy step's ~0.1 ms or less is nothing at a match's 15 Hz, and importing numba would cost a
#: process about 0.9 s and 110 MB (every `cellarena match`, every replay check).
COMPILED_FROM = 128 * 128


@functools.cache
def numba_available() -> bool:
    """Whether the compiled step can run here (numba installed and importable); known once per process."""
    from cellarena.server.games.rezzo import ca_kernel

    try:
        ca_kernel.kernel()
    except ImportError:
        return False
    return True


class _Step(Protocol):
    """What `BitWorld` asks of its backend's step (`ca_numpy.NumpyStep`, `ca_kernel.CompiledStep`)."""

    def transition(self, parity: int, found: list[Found] | None) -> list[int]: ...

    def scratch_arrays(self) -> list[np.ndarray]: ...


class BitWorld:
    """The CA state of one Rezzo world and its step. Damage, agents and moves live in the engine.

    ``backend``: "numba" steps through the compiled `ca_kernel`, "numpy" through the ufunc passes of
    `step`; "auto" picks numba for a world of `COMPILED_FROM` cells or more where it is installed,
    unless CELLARENA_NO_NUMBA is 1 (`backends`), and numpy for smaller ones. Both give the same
    states and the same flags found, bit for bit."""

    def __init__(
        self,
        height: int,
        width: int,
        players: int,
        *,
        torus: bool = False,
        own_base_counts: bool = True,
        backend: str = "auto",
    ) -> None:
        if height < 1 or width < 1:
            raise ValueError(f"world size {width}x{height} must be at least 1x1")
        #: "numpy" or "numba", as resolved from ``backend``.
        if backend == "auto" and height * width < COMPILED_FROM:
            backend = "numpy"
        self.backend = backends.resolve(backend, numba_available, "BitWorld")
        self.height, self.width, self.players = height, width, players
        self.torus, self.own_base_counts = torus, own_base_counts
        self.layout = Layout(height, width, players, torus)
        self.nw, self.stride, self.length = self.layout.nw, self.layout.stride, self.layout.length
        n_dyn = DYN_FIXED + players
        self._bufs = [np.zeros((n_dyn, self.length), WORD) for _ in range(2)]
        self._cur = 0
        self.static = np.zeros((3 * players, self.length), WORD)
        self._near_base = np.zeros((players, self.length), WORD)
        #: Codes of geysers, bases and agents (0 elsewhere), kept in step with the static planes.
        self._static_codes = np.zeros((height, width), np.uint8)
        self._dyn_codes, self._stat_codes = self._plane_codes()
        # The neighbourhood block: electron, tail, then each player's flags-or-geysers (on a torus the
        # compiled step reads it too, its ghosts filled).
        self._nb = np.zeros((2 + players, self.length), WORD)
        self._valid = self._valid_mask()
        # The step and its scratch, allocated once: a step allocates nothing of the world's size.
        self._step: _Step
        arrays = StepArrays(self.layout, self._bufs, self.static, self._near_base, self._nb)
        if self.backend == "numpy":
            self._step = NumpyStep(arrays)
        else:
            from cellarena.server.games.rezzo.ca_kernel import CompiledStep

            self._step = CompiledStep(arrays)
        self._near_base_dirty = True
        #: Bumped by every change of the state, so that decoded copies can be cached per state.
        self.version = 0
        self._codes_version = -1
        self._codes_cache = np.zeros((height, width), np.uint8)

    # ----------------------------------------------------------------- construction and reading
    @classmethod
    def from_codes(
        cls,
        codes: np.ndarray,
        players: int,
        *,
        torus: bool = False,
        own_base_counts: bool = True,
        backend: str = "auto",
    ) -> BitWorld:
        """A world holding ``codes``, an (H, W) array of public cell codes with absolute owners."""
        codes = np.asarray(codes, dtype=np.uint8)
        world = cls(
            codes.shape[0],
            codes.shape[1],
            players,
            torus=torus,
            own_base_counts=own_base_counts,
            backend=backend,
        )
        world.load_codes(codes)
        return world

    def _plane_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The public code each plane stands for, for the dynamic and the static stack."""
        p = range(self.players)
        dyn = [Cell.ELECTRON, Cell.TAIL, Cell.CONDUCTOR, Cell.PHOTON] + [Cell.FLAG + i for i in p]
        stat = [Cell.GEYSER + i for i in p] + [Cell.BASE + i for i in p] + [Cell.AGENT + i for i in p]
        return np.array(dyn, np.uint8), np.array(stat, np.uint8)

    def load_codes(self, codes: np.ndarray) -> None:
        h, w = self.height, self.width
        if codes.shape != (h, w):
            raise ValueError(f"codes of shape {codes.shape} do not fit a {w}x{h} world")
        dyn_codes, stat_codes = self._dyn_codes, self._stat_codes
        known = np.isin(codes, np.concatenate([dyn_codes, stat_codes, [Cell.BLANK]]))
        if not known.all():
            y, x = np.argwhere(~known)[0]
            raise ValueError(
                f"cell ({x}, {y}) holds code {codes[y, x]}, not a state of a {self.players}-player world"
            )
        for stack, plane_codes in ((self.dyn, dyn_codes), (self.static, stat_codes)):
            for i, code in enumerate(plane_codes):
                stack[i] = self._pack(codes == code)
        self._static_codes = np.where(np.isin(codes, stat_codes), codes, 0).astype(np.uint8)
        self._near_base_dirty = True
        self.version += 1

    def _pack(self, mask: np.ndarray) -> np.ndarray:
        """An (H, W) bool mask as one plane."""
        h, w, s = self.height, self.width, self.stride
        bits = np.zeros((h, self.nw * 64), np.uint8)
        bits[:, :w] = mask
        words = np.packbits(bits, axis=1, bitorder="little").view(WORD)
        plane = np.zeros(self.length, WORD)
        plane[1 + s : 1 + (h + 1) * s].reshape(h, s)[:, : self.nw] = words
        return plane

    def codes(self) -> np.ndarray:
        """The world as an (H, W) uint8 array of public codes with absolute owners (a new array)."""
        return self.codes_view().copy()

    def codes_view(self) -> np.ndarray:
        """Like `codes`, but decoded once per state and shared: the caller must not write to it.

        Only the dynamic planes are unpacked; geysers, bases and agents come from a byte grid kept
        up to date as they change, which is far cheaper with many players.
        """
        if self._codes_version == self.version:
            return self._codes_cache
        h, s, nw, n = self.height, self.stride, self.nw, len(self.dyn)
        rows = np.ascontiguousarray(self.dyn[:, 1 + s : 1 + (h + 1) * s].reshape(n, h, s)[:, :, :nw])
        bits = np.unpackbits(rows.view(np.uint8), axis=2, count=self.width, bitorder="little")
        bits *= self._dyn_codes[:, None, None]
        out = self._codes_cache
        np.maximum.reduce(bits, axis=0, out=out)  # states are exclusive: the max selects
        np.maximum(out, self._static_codes, out=out)
        self._codes_version = self.version
        return out

    @property
    def dyn(self) -> np.ndarray:
        """The current dynamic stack (conductor, electron, tail, photon, flags)."""
        return self._bufs[self._cur]

    def locate(self, x: int, y: int) -> tuple[int, np.uint64]:
        """Word index and bit mask of cell (x, y)."""
        return self._word(x, y), np.uint64(1 << (x & 63))

    def _word(self, x: Any, y: Any) -> Any:
        """Word index of cell (x, y); works on scalars and on integer arrays alike."""
        return 1 + (y + 1) * self.stride + (x >> 6)

    def code_at(self, x: int, y: int) -> int:
        """The public code of one cell (absolute owner)."""
        word, bit = self.locate(x, y)
        dyn_codes, stat_codes = self._dyn_codes, self._stat_codes
        hit = np.flatnonzero(self.dyn[:, word] & bit)
        if hit.size:
            return int(dyn_codes[hit[0]])
        hit = np.flatnonzero(self.static[:, word] & bit)
        return int(stat_codes[hit[0]]) if hit.size else int(Cell.BLANK)

    def set_code(self, x: int, y: int, code: int) -> None:
        """Put one cell into state ``code`` (absolute owner), whatever it held before."""
        word, bit = self.locate(x, y)
        self.version += 1
        p = self.players
        bases = self.static[B_KIND * p : (B_KIND + 1) * p, word]
        if (bases & bit).any() or Cell.BASE <= code < Cell.BASE + p:
            self._near_base_dirty = True
        self.dyn[:, word] &= ~bit
        self.static[:, word] &= ~bit
        self._static_codes[y, x] = code if code >= Cell.AGENT and not Cell.FLAG <= code < Cell.GEYSER else 0
        dyn_codes, stat_codes = self._dyn_codes, self._stat_codes
        for stack, plane_codes in ((self.dyn, dyn_codes), (self.static, stat_codes)):
            idx = np.flatnonzero(plane_codes == code)
            if idx.size:
                stack[idx[0], word] |= bit
                return
        if code != Cell.BLANK:
            raise ValueError(f"code {code} is not a state of a {self.players}-player world")

    def gather(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """Public codes (absolute owners) at many cells (xs, ys) at once, without decoding the world."""
        words = self._word(xs, ys)
        out = np.zeros(words.shape, np.uint8)
        shifts = (xs & 63).astype(WORD)
        for stack, plane_codes in ((self.dyn, self._dyn_codes), (self.static, self._stat_codes)):
            got = ((stack[:, words] >> shifts) & np.uint64(1)).astype(np.uint8)
            got *= plane_codes.reshape((-1,) + (1,) * words.ndim)
            np.maximum(out, got.max(axis=0), out=out)
        return out

    def scratch_arrays(self) -> list[np.ndarray]:
        """The step's preallocated scratch (its backend's), for measuring the footprint."""
        return self._step.scratch_arrays()

    # ----------------------------------------------------------------- views bound once
    def _valid_mask(self) -> np.ndarray:
        mask = np.zeros(self.length, WORD)
        h, s, nw = self.height, self.stride, self.nw
        rows = mask[1 + s : 1 + (h + 1) * s].reshape(h, s)
        rows[:, :nw] = np.uint64(0xFFFFFFFFFFFFFFFF)
        tail = self.width % 64
        if tail:
            rows[:, nw - 1] = np.uint64((1 << tail) - 1)
        return mask

    # ----------------------------------------------------------------- the step
    def _dilate(self, x: np.ndarray, out: np.ndarray) -> None:
        """``out`` = OR over each cell's 3x3 block of plane ``x`` (rows 1..H). Not on the hot path."""
        s, h = self.stride, self.height
        hr, hl, hn = slice(1, 1 + (h + 2) * s), slice(0, (h + 2) * s), slice(2, 2 + (h + 2) * s)
        acc = x[hr] | (x[hr] << np.uint64(1)) | (x[hl] >> np.uint64(63))
        acc |= (x[hr] >> np.uint64(1)) | (x[hn] << np.uint64(63))
        out[:] = 0
        out[1 + s : 1 + (h + 1) * s] = acc[: h * s] | acc[s : (h + 1) * s] | acc[2 * s :]

    def step(self, found: list[Found] | None = None) -> list[int]:
        """One CA transition and loss processing. Returns the players who lost, sorted.

        ``found``, if given, gets the flags this transition touched as (kind, player, x, y):
        `AT_BASE` (judged on the old state: the flag beside a base that makes its player lose),
        `BURNT` (a flag next to an electron, now a conductor) and `FORMED` (a photon now a flag).
        """
        if self._near_base_dirty:
            self._update_near_base()
        losers = self._step.transition(self._cur, found)
        self._cur = 1 - self._cur
        self.version += 1
        for i in losers:
            self._convert_loser(i)
        return losers

    def _convert_loser(self, i: int) -> None:
        """Loss conversion on the new state: flags become conductors, the rest of the player blank."""
        p = self.players
        fl = self.dyn[DYN_FIXED + i]
        np.bitwise_or(self.dyn[C], fl, out=self.dyn[C])
        fl[:] = 0
        for kind in (G_KIND, B_KIND, A_KIND):
            self.static[kind * p + i] = 0
        owned = self._static_codes >= Cell.AGENT
        self._static_codes[owned & ((self._static_codes & 7) == i)] = 0
        self._near_base_dirty = True

    def _update_near_base(self) -> None:
        """Per player, the cells with a base in their 3x3 block that counts against that player's flags."""
        p = self.players
        bases = np.zeros((1, self.length), WORD)
        for i in range(p):
            bases[:] = 0
            for j in range(p):
                if j != i or self.own_base_counts:
                    np.bitwise_or(bases[0], self.static[B_KIND * p + j], out=bases[0])
            if self.torus:
                self.layout.fill_ghosts(bases)
            self._dilate(bases[0], self._near_base[i])
            np.bitwise_and(self._near_base[i], self._valid, out=self._near_base[i])
        self._near_base_dirty = False
