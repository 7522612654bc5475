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
25x the numpy step at 256x256 on a busy machine); the numpy step stays the fallback, the step of
small worlds (`COMPILED_FROM`) and the reference the compiled one is tested against.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.games.rezzo import backends

if TYPE_CHECKING:
    from cellarena.server.games.rezzo import ca_kernel

WORD = np.dtype("<u8")
# The dynamic stack: electron and tail first, so they copy into the neighbourhood block in one go,
# then conductor, photon, and one flag plane per player.
E, T, C, PH = 0, 1, 2, 3
DYN_FIXED = 4
# The static stack is kind-major: all geysers, then all bases, then all agents, one plane per player.
G_KIND, B_KIND, A_KIND = 0, 1, 2
#: What `BitWorld.step` reports about a flag (and `batched` likewise): beside a base, burnt by an
#: electron, formed from a photon.
AT_BASE, BURNT, FORMED = 0, 1, 2


#: From this many cells up, a world's step is compiled where numba is installed ("auto"). Below, the
#: numpy step's ~0.1 ms or less is nothing at a match's 15 Hz, and importing numba would cost a
#: process about 0.9 s and 110 MB (every `cellarena match`, every replay check).
COMPILED_FROM = 128 * 128


@functools.cache
def _kernel() -> ca_kernel.Kernel:
    """The compiled step of `ca_kernel`, loaded once per process (ImportError without numba)."""
    from cellarena.server.games.rezzo import ca_kernel

    return ca_kernel.Kernel()


@functools.cache
def numba_available() -> bool:
    """Whether the compiled step can run here (numba installed and importable); known once per process."""
    try:
        _kernel()
    except ImportError:
        return False
    return True


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
        self.nw = (width + 63) // 64
        self.stride = self.nw + 1
        self.length = (height + 2) * self.stride + 2
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
        # Scratch planes, allocated once: the step allocates nothing of the world's size. Each backend
        # has its own; the other's are left out (`scratch_arrays`).
        if self.backend == "numpy":
            self._scratch = np.zeros((12, self.length), WORD)
            self._left = np.zeros_like(self._nb)
            self._right = np.zeros_like(self._nb)
            self._tmpb = np.zeros_like(self._nb)
            self._dil = np.zeros_like(self._nb)
            self._rep = np.zeros((players, self.length), WORD)  # one plane repeated for every player
            self._plans = [self._make_plan(b) for b in range(2)]
        else:
            s = self.stride
            self._k_bounds = np.array([1 + s, 1 + (height + 1) * s, s], np.int64)
            self._k_scratch = np.zeros((10 + players, self.length), WORD)
            self._k_events = np.zeros((3, players, self.length), WORD)
            self._k_flags = np.zeros(5, WORD)
            # A torus's block holds flags and geysers ORed: the kernel's geysers are then none.
            self._k_no_geysers = np.zeros((players, self.length if torus else 0), WORD)
            # The kernel's arguments per buffer parity, made once: views cost allocations each step.
            self._k_args = [self._kernel_args(b) for b in range(2)]
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
        if self.backend == "numpy":
            return [self._scratch, self._left, self._right, self._tmpb, self._dil, self._rep]
        return [self._k_scratch, self._k_events, self._k_no_geysers]

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

    @staticmethod
    def _fold_levels(rows: int) -> list[tuple[int, int]]:
        """(rows, half) per level of folding ``rows`` rows into one: rows[-half:] into rows[:half]."""
        levels = []
        while rows > 1:
            levels.append((rows, rows // 2))
            rows -= rows // 2
        return levels

    def _make_plan(self, parity: int) -> SimpleNamespace:
        """Every slice view the step uses when buffer ``parity`` is the old state, made once.

        Making a view costs about as much as a ufunc call on a small world, so the step only calls ufuncs.
        """
        s, h, p = self.stride, self.height, self.players
        hr = slice(1, 1 + (h + 2) * s)  # rows 0..H+1: horizontal work
        vr = slice(1 + s, 1 + (h + 1) * s)  # rows 1..H: the world
        vu = slice(1, 1 + h * s)  # one row up
        vd = slice(1 + 2 * s, 1 + (h + 2) * s)  # one row down
        old, new, sc = self._bufs[parity], self._bufs[1 - parity], self._scratch
        nb, left, right, tmpb, dil = self._nb, self._left, self._right, self._tmpb, self._dil
        n, ln = 2 + p, self.length
        flat = {
            name: arr.reshape(-1)
            for name, arr in (("nb", nb), ("left", left), ("right", right), ("tmpb", tmpb), ("dil", dil))
        }
        v = SimpleNamespace()
        # Block work runs on the flattened, contiguous block (a strided 2-D view costs ~4x as much).
        # Shifts spill across plane boundaries only into pad and ghost words, which nothing reads.
        whole, west, east = slice(1, n * ln - 1), slice(0, n * ln - 2), slice(2, n * ln)
        v.nb_w, v.nb_west, v.nb_east = flat["nb"][whole], flat["nb"][west], flat["nb"][east]
        v.left_w, v.right_w, v.tmpb_w = flat["left"][whole], flat["right"][whole], flat["tmpb"][whole]
        v.old_et, v.nb_et = old[E : T + 1], nb[0:2]
        v.old_fl, v.geysers, v.nb_fg = old[DYN_FIXED:], self.static[0:p], nb[2:]
        # dilation of the tail and flag-or-geyser planes (block rows 1..)
        d = slice(ln + 1, n * ln - 1)
        v.left_d, v.right_d, v.nb_d = flat["left"][d], flat["right"][d], flat["nb"][d]
        dv = slice(ln + 1 + s, n * ln - 1 - s)
        v.hor_u = flat["left"][ln + 1 : n * ln - 1 - 2 * s]
        v.hor_c = flat["left"][dv]
        v.hor_d = flat["left"][ln + 1 + 2 * s : n * ln - 1]
        v.dil_d = flat["dil"][dv]
        # electron counts
        v.l0, v.r0, v.e0 = left[0, hr], right[0, hr], nb[0, hr]
        t = [sc[i] for i in range(10)]
        v.tmp_hr, v.h0_hr, v.h1_hr = t[0][hr], t[1][hr], t[2][hr]
        v.h0u, v.h0c, v.h0d = t[1][vu], t[1][vr], t[1][vd]
        v.h1u, v.h1c, v.h1d = t[2][vu], t[2][vr], t[2][vd]
        v.tmp, v.s0, v.k, v.anyq, v.one, v.x1 = t[0][vr], t[3][vr], t[4][vr], t[5][vr], t[6][vr], t[7][vr]
        v.e12, v.e1 = t[1][vr], t[2][vr]  # reuse h0/h1 once they are spent
        v.fgany, v.multi, v.single = t[8][vr], t[9][vr], t[3][vr]
        v.tany = dil[1, vr]
        v.dil_fg = [dil[2 + i, vr] for i in range(p)]
        # The per-player rules run on all players' planes at once, each (p, L) block flat as one
        # contiguous run (a 2-D or broadcasting ufunc call allocates an iterator; a flat one does not).
        # Bits outside the world compute to zero there because the old flags and the single-owner
        # photons are zero there. Reductions over the players fold halves of the rows (log2 p calls).
        # The left, right and tmpb blocks are free again by then.
        flat_rows = [
            (slice(0, half * ln), slice((rows - half) * ln, rows * ln)) for rows, half in self._fold_levels(p)
        ]
        rep = self._rep.reshape(-1)
        v.rep_first, v.rep_copies = rep[:ln], []
        done = 1
        while done < p:
            more = min(done, p - done)
            v.rep_copies.append((rep[done * ln : (done + more) * ln], rep[: more * ln]))
            done += more
        v.rep = rep
        v.e1_plane, v.single_plane = sc[2], sc[3]
        v.fl_old_flat, v.nfl_flat = old[DYN_FIXED:].reshape(-1), new[DYN_FIXED:].reshape(-1)
        v.dil_fg_flat = dil[2 : 2 + p].reshape(-1)
        any_flat, multi_flat, tmp_flat = left[:p].reshape(-1), right[:p].reshape(-1), tmpb[:p].reshape(-1)
        v.any_flat, v.multi_flat, v.tmp_flat = any_flat, multi_flat, tmp_flat
        v.any_levels = [
            (any_flat[d], any_flat[r], multi_flat[d], multi_flat[r], tmp_flat[d]) for d, r in flat_rows
        ]
        v.tmp_levels = [(tmp_flat[d], tmp_flat[r]) for d, r in flat_rows]
        v.any_first, v.multi_first, v.tmp_first = left[0, vr], right[0, vr], tmpb[0, vr]
        v.e_old, v.t_old, v.c_old, v.ph_old = old[E, vr], old[T, vr], old[C, vr], old[PH, vr]
        v.ne, v.nt, v.nc, v.nph = new[E, vr], new[T, vr], new[C, vr], new[PH, vr]
        v.loss_fl = old[DYN_FIXED:].reshape(-1)
        v.loss_near = self._near_base.reshape(-1)
        v.loss_tmp = tmpb[:p].reshape(-1)
        return v

    # ----------------------------------------------------------------- the step
    def _fill_ghosts(self, block: np.ndarray) -> None:
        """On a torus, copy the opposite edges into the ghost rows, pad words and spare bits.

        ``block`` is (n, L): n planes treated at once.
        """
        h, w, s, nw = self.height, self.width, self.stride, self.nw
        rows = block[:, 1 : 1 + (h + 2) * s].reshape(block.shape[0], h + 2, s)
        rows[:, 0, :nw] = rows[:, h, :nw]
        rows[:, h + 1, :nw] = rows[:, 1, :nw]
        rows[:, :, nw] = 0
        if w % 64:
            rows[:, :, nw - 1] &= np.uint64((1 << (w % 64)) - 1)
        last = (rows[:, :, (w - 1) >> 6] >> np.uint64((w - 1) & 63)) & np.uint64(1)
        first = rows[:, :, 0] & np.uint64(1)
        block[:, 0] = last[:, 0] << np.uint64(63)  # west of row 0's first cell
        rows[:, :-1, nw] = last[:, 1:] << np.uint64(63)  # west of the next row's first cell
        if w % 64 == 0:
            rows[:, :, nw] |= first  # east of the last cell: bit 0 of the pad
        else:
            rows[:, :, nw - 1] |= first << np.uint64(w % 64)

    def _dilate(self, x: np.ndarray, out: np.ndarray) -> None:
        """``out`` = OR over each cell's 3x3 block of plane ``x`` (rows 1..H). Not on the hot path."""
        s, h = self.stride, self.height
        hr, hl, hn = slice(1, 1 + (h + 2) * s), slice(0, (h + 2) * s), slice(2, 2 + (h + 2) * s)
        acc = x[hr] | (x[hr] << np.uint64(1)) | (x[hl] >> np.uint64(63))
        acc |= (x[hr] >> np.uint64(1)) | (x[hn] << np.uint64(63))
        out[:] = 0
        out[1 + s : 1 + (h + 1) * s] = acc[: h * s] | acc[s : (h + 1) * s] | acc[2 * s :]

    def step(self, found: list[tuple[int, int, int, int]] | None = None) -> list[int]:
        """One CA transition and loss processing. Returns the players who lost, sorted.

        ``found``, if given, gets the flags this transition touched as (kind, player, x, y):
        `AT_BASE` (judged on the old state: the flag beside a base that makes its player lose),
        `BURNT` (a flag next to an electron, now a conductor) and `FORMED` (a photon now a flag).
        """
        if self._near_base_dirty:
            self._update_near_base()
        if self.backend == "numba":
            return self._compiled_step(found)
        v = self._plans[self._cur]
        band, bor, bxor = np.bitwise_and, np.bitwise_or, np.bitwise_xor

        # Losses are judged on the state before the transition.
        band(v.loss_fl, v.loss_near, out=v.loss_tmp)
        losers: list[int] = []
        if np.count_nonzero(v.loss_tmp):  # much cheaper than .any() on uint64
            per_player = v.loss_tmp.reshape(self.players, -1).any(axis=1)
            losers = [int(i) for i in np.flatnonzero(per_player)]
            if found is not None:
                self._bits(v.loss_tmp, AT_BASE, found)

        np.copyto(v.nb_et, v.old_et)
        bor(v.old_fl, v.geysers, out=v.nb_fg)
        if self.torus:
            self._fill_ghosts(self._nb)
        # West and east neighbours of every plane in the block at once.
        np.left_shift(v.nb_w, 1, out=v.left_w)
        np.right_shift(v.nb_west, 63, out=v.tmpb_w)
        bor(v.left_w, v.tmpb_w, out=v.left_w)
        np.right_shift(v.nb_w, 1, out=v.right_w)
        np.left_shift(v.nb_east, 63, out=v.tmpb_w)
        bor(v.right_w, v.tmpb_w, out=v.right_w)

        # Electron count over each 3x3 block as bits: per row h0 + 2*h1, then three rows summed into
        # s0 (ones) and q = u1 + c1 + d1 + k (twos, 0..4). The centre is counted too; that is harmless
        # because only conductors and flags read the count, and they are not electrons.
        bxor(v.l0, v.e0, out=v.tmp_hr)
        bxor(v.tmp_hr, v.r0, out=v.h0_hr)
        band(v.r0, v.tmp_hr, out=v.tmp_hr)
        band(v.l0, v.e0, out=v.h1_hr)
        bor(v.h1_hr, v.tmp_hr, out=v.h1_hr)
        bxor(v.h0u, v.h0c, out=v.tmp)
        bxor(v.tmp, v.h0d, out=v.s0)
        band(v.tmp, v.h0d, out=v.tmp)
        band(v.h0u, v.h0c, out=v.k)
        bor(v.k, v.tmp, out=v.k)
        bxor(v.h1u, v.h1c, out=v.x1)
        bxor(v.h1d, v.k, out=v.one)
        bor(v.x1, v.one, out=v.anyq)
        bor(v.anyq, v.h1u, out=v.anyq)  # u1 ^ c1 misses u1 & c1: add them back
        bor(v.anyq, v.h1d, out=v.anyq)  # likewise d1 & k
        bxor(v.x1, v.one, out=v.one)  # parity of q
        band(v.h1u, v.h1c, out=v.x1)
        band(v.h1d, v.k, out=v.tmp)
        bor(v.x1, v.tmp, out=v.x1)  # a pair within (u1, c1) or (d1, k): q >= 2
        band(v.one, v.x1, out=v.tmp)
        bxor(v.one, v.tmp, out=v.one)  # q == 1
        np.invert(v.anyq, out=v.tmp)  # q == 0
        bxor(v.one, v.tmp, out=v.e12)
        band(v.e12, v.s0, out=v.e12)
        bxor(v.e12, v.one, out=v.e12)  # count in {1, 2}: s0 ? q == 0 : q == 1
        bor(v.s0, v.anyq, out=v.e1)  # count >= 1

        # Any tail, and per player any flag or geyser, in each 3x3 block.
        bor(v.left_d, v.right_d, out=v.left_d)
        bor(v.left_d, v.nb_d, out=v.left_d)
        bor(v.hor_u, v.hor_c, out=v.dil_d)
        bor(v.dil_d, v.hor_d, out=v.dil_d)
        p = self.players
        if p == 1:
            np.copyto(v.fgany, v.dil_fg[0])
            v.multi[:] = 0
        else:
            # "Any owner" and "more than one owner" over the players, folding halves of the rows: a
            # cell has several owners if either half has, or both halves have one.
            np.copyto(v.any_flat, v.dil_fg_flat)
            v.multi_flat.fill(0)
            for any_d, any_r, multi_d, multi_r, both in v.any_levels:
                band(any_d, any_r, out=both)
                bor(multi_d, multi_r, out=multi_d)
                bor(multi_d, both, out=multi_d)
                bor(any_d, any_r, out=any_d)
            np.copyto(v.fgany, v.any_first)
            np.copyto(v.multi, v.multi_first)

        # conductor -> electron with 1 or 2 electron neighbours
        band(v.c_old, v.e12, out=v.ne)
        # electron -> photon beside a flag or geyser and a tail; otherwise -> tail
        band(v.e_old, v.tany, out=v.nph)
        band(v.nph, v.fgany, out=v.nph)
        bxor(v.e_old, v.nph, out=v.nt)
        # photon -> flag when its flag/geyser neighbours have a single owner; otherwise -> conductor
        band(v.ph_old, v.multi, out=v.tmp)
        bxor(v.ph_old, v.tmp, out=v.single)
        band(v.single, v.fgany, out=v.single)
        # conductors: those that stay, tails, photons without a single owner, flags next to an electron
        bxor(v.c_old, v.ne, out=v.nc)
        bor(v.nc, v.t_old, out=v.nc)
        bxor(v.ph_old, v.single, out=v.tmp)
        bor(v.nc, v.tmp, out=v.nc)
        # flags: next to an electron -> conductor; photons with a single owner become that owner's flag
        self._repeat(v, v.e1_plane)
        band(v.fl_old_flat, v.rep, out=v.tmp_flat)
        if found is not None and np.count_nonzero(v.tmp_flat):
            self._bits(v.tmp_flat, BURNT, found)
        bxor(v.fl_old_flat, v.tmp_flat, out=v.nfl_flat)
        for kept, folded in v.tmp_levels:
            bor(kept, folded, out=kept)
        bor(v.nc, v.tmp_first, out=v.nc)
        self._repeat(v, v.single_plane)
        band(v.dil_fg_flat, v.rep, out=v.tmp_flat)
        if found is not None and np.count_nonzero(v.tmp_flat):
            self._bits(v.tmp_flat, FORMED, found)
        bor(v.nfl_flat, v.tmp_flat, out=v.nfl_flat)

        self._cur = 1 - self._cur
        self.version += 1
        for i in losers:
            self._convert_loser(i)
        return losers

    def _kernel_args(self, parity: int) -> tuple[np.ndarray, ...]:
        """`ca_kernel.Kernel.step`'s arguments when buffer ``parity`` is the old state."""
        p, nb = self.players, self._nb
        old, new = self._bufs[parity], self._bufs[1 - parity]
        if self.torus:
            sources = (nb[0], nb[1], nb[2:], self._k_no_geysers)
        else:
            sources = (old[E], old[T], old[DYN_FIXED:], self.static[0:p])
        scratch = (self._k_bounds, self._k_scratch, self._k_events, self._k_flags)
        return (*sources, old, new, self._near_base, *scratch)

    def _compiled_step(self, found: list[tuple[int, int, int, int]] | None) -> list[int]:
        """`step` through `ca_kernel`: the same planes, flags found and losers."""
        p = self.players
        old = self._bufs[self._cur]
        flags = self._k_flags
        flags[4] = found is not None
        if self.torus:
            # The neighbourhoods are read from the block with its ghosts filled, flags and geysers ORed.
            nb = self._nb
            np.copyto(nb[0:2], old[E : T + 1])
            np.bitwise_or(old[DYN_FIXED:], self.static[0:p], out=nb[2:])
            self._fill_ghosts(nb)
        _kernel().step(*self._k_args[self._cur])
        mask = int(flags[0])
        losers = [i for i in range(p) if mask >> i & 1]
        if found is not None:
            for kind in (AT_BASE, BURNT, FORMED):
                if flags[1 + kind]:
                    self._bits(self._k_events[kind].reshape(-1), kind, found)
        self._cur = 1 - self._cur
        self.version += 1
        for i in losers:
            self._convert_loser(i)
        return losers

    def _bits(self, planes: np.ndarray, kind: int, found: list[tuple[int, int, int, int]]) -> None:
        """Append (kind, player, x, y) for every set bit of ``planes``, one plane per player, flat."""
        ln, s = self.length, self.stride
        for i in np.flatnonzero(planes).tolist():
            player, w = divmod(i, ln)
            row, col = divmod(w - 1, s)
            word = np.array([planes[i]], WORD).view(np.uint8)
            for bit in np.flatnonzero(np.unpackbits(word, bitorder="little")).tolist():
                found.append((kind, player, col * 64 + bit, row - 1))

    @staticmethod
    def _repeat(v: SimpleNamespace, plane: np.ndarray) -> None:
        """Fill the repeat block with ``plane`` once per player (doubling copies)."""
        np.copyto(v.rep_first, plane)
        for dst, src in v.rep_copies:
            np.copyto(dst, src)

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
                self._fill_ghosts(bases)
            self._dilate(bases[0], self._near_base[i])
            np.bitwise_and(self._near_base[i], self._valid, out=self._near_base[i])
        self._near_base_dirty = False
