"""`BitWorld.step` in numpy: the bit-sliced rules as ~90 ufunc calls on slice views made once.

The fallback where numba is missing, the step of small worlds, and the reference the compiled step
(`ca_kernel`) is tested against. Every call writes into preallocated scratch through ``out=``: a step
allocates nothing of the world's size (tests/test_engine_interface.py measures it).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from cellarena.server.games.rezzo.planes import (
    AT_BASE,
    BURNT,
    DYN_FIXED,
    FORMED,
    PH,
    WORD,
    C,
    E,
    Found,
    StepArrays,
    T,
)

band, bor, bxor = np.bitwise_and, np.bitwise_or, np.bitwise_xor


def _fold_levels(rows: int) -> list[tuple[int, int]]:
    """(rows, half) per level of folding ``rows`` rows into one: rows[-half:] into rows[:half]."""
    levels = []
    while rows > 1:
        levels.append((rows, rows // 2))
        rows -= rows // 2
    return levels


class NumpyStep:
    """One world's transition from buffer ``parity`` of its arrays' ``bufs`` into the other, with
    its scratch."""

    def __init__(self, world: StepArrays) -> None:
        self.layout = layout = world.layout
        self._bufs, self._static, self._near_base = world.bufs, world.static, world.near_base
        self._nb = nb = world.nb
        self._scratch = np.zeros((12, layout.length), WORD)
        self._left = np.zeros_like(nb)
        self._right = np.zeros_like(nb)
        self._tmpb = np.zeros_like(nb)
        self._dil = np.zeros_like(nb)
        self._rep = np.zeros((layout.players, layout.length), WORD)  # one plane repeated for every player
        self._plans = [self._make_plan(b) for b in range(2)]

    def scratch_arrays(self) -> list[np.ndarray]:
        return [self._scratch, self._left, self._right, self._tmpb, self._dil, self._rep]

    # ----------------------------------------------------------------- views bound once
    def _make_plan(self, parity: int) -> SimpleNamespace:
        """Every slice view the step uses when buffer ``parity`` is the old state, made once.

        Making a view costs about as much as a ufunc call on a small world, so the step only calls ufuncs.
        """
        v = SimpleNamespace()
        self._plan_block(v, parity)
        self._plan_counts(v, parity)
        self._plan_players(v, parity)
        return v

    def _plan_block(self, v: SimpleNamespace, parity: int) -> None:
        """The neighbourhood block: its copies in, its west and east shifts, its dilation."""
        lay = self.layout
        s, p, ln = lay.stride, lay.players, lay.length
        old, nb = self._bufs[parity], self._nb
        n = 2 + p
        left, right, tmpb, dil = (a.reshape(-1) for a in (self._left, self._right, self._tmpb, self._dil))
        flat_nb = nb.reshape(-1)
        # Block work runs on the flattened, contiguous block (a strided 2-D view costs ~4x as much).
        # Shifts spill across plane boundaries only into pad and ghost words, which nothing reads.
        whole, west, east = slice(1, n * ln - 1), slice(0, n * ln - 2), slice(2, n * ln)
        v.nb_w, v.nb_west, v.nb_east = flat_nb[whole], flat_nb[west], flat_nb[east]
        v.left_w, v.right_w, v.tmpb_w = left[whole], right[whole], tmpb[whole]
        v.old_et, v.nb_et = old[E : T + 1], nb[0:2]
        v.old_fl, v.geysers, v.nb_fg = old[DYN_FIXED:], self._static[0:p], nb[2:]
        # dilation of the tail and flag-or-geyser planes (block rows 1..)
        d = slice(ln + 1, n * ln - 1)
        v.left_d, v.right_d, v.nb_d = left[d], right[d], flat_nb[d]
        dv = slice(ln + 1 + s, n * ln - 1 - s)
        v.hor_u = left[ln + 1 : n * ln - 1 - 2 * s]
        v.hor_c = left[dv]
        v.hor_d = left[ln + 1 + 2 * s : n * ln - 1]
        v.dil_d = dil[dv]

    def _plan_counts(self, v: SimpleNamespace, parity: int) -> None:
        """The electron counts' scratch, and the planes the cell rules read and write."""
        lay = self.layout
        s, h, p = lay.stride, lay.height, lay.players
        hr = slice(1, 1 + (h + 2) * s)  # rows 0..H+1: horizontal work
        vr = slice(1 + s, 1 + (h + 1) * s)  # rows 1..H: the world
        vu = slice(1, 1 + h * s)  # one row up
        vd = slice(1 + 2 * s, 1 + (h + 2) * s)  # one row down
        old, new, sc, nb, dil = self._bufs[parity], self._bufs[1 - parity], self._scratch, self._nb, self._dil
        v.l0, v.r0, v.e0 = self._left[0, hr], self._right[0, hr], nb[0, hr]
        t = [sc[i] for i in range(10)]
        v.tmp_hr, v.h0_hr, v.h1_hr = t[0][hr], t[1][hr], t[2][hr]
        v.h0u, v.h0c, v.h0d = t[1][vu], t[1][vr], t[1][vd]
        v.h1u, v.h1c, v.h1d = t[2][vu], t[2][vr], t[2][vd]
        v.tmp, v.s0, v.k, v.anyq, v.one, v.x1 = t[0][vr], t[3][vr], t[4][vr], t[5][vr], t[6][vr], t[7][vr]
        v.e12, v.e1 = t[1][vr], t[2][vr]  # reuse h0/h1 once they are spent
        v.fgany, v.multi, v.single = t[8][vr], t[9][vr], t[3][vr]
        v.tany = dil[1, vr]
        v.dil_fg = [dil[2 + i, vr] for i in range(p)]
        v.e_old, v.t_old, v.c_old, v.ph_old = old[E, vr], old[T, vr], old[C, vr], old[PH, vr]
        v.ne, v.nt, v.nc, v.nph = new[E, vr], new[T, vr], new[C, vr], new[PH, vr]
        v.any_first, v.multi_first, v.tmp_first = self._left[0, vr], self._right[0, vr], self._tmpb[0, vr]

    def _plan_players(self, v: SimpleNamespace, parity: int) -> None:
        """The per-player rules run on all players' planes at once, each (p, L) block flat as one
        contiguous run (a 2-D or broadcasting ufunc call allocates an iterator; a flat one does not).
        Bits outside the world compute to zero there because the old flags and the single-owner
        photons are zero there. Reductions over the players fold halves of the rows (log2 p calls).
        The left, right and tmpb blocks are free again by then."""
        p, ln = self.layout.players, self.layout.length
        old, new, sc = self._bufs[parity], self._bufs[1 - parity], self._scratch
        flat_rows = [
            (slice(0, half * ln), slice((rows - half) * ln, rows * ln)) for rows, half in _fold_levels(p)
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
        v.dil_fg_flat = self._dil[2 : 2 + p].reshape(-1)
        any_flat, multi_flat = self._left[:p].reshape(-1), self._right[:p].reshape(-1)
        tmp_flat = self._tmpb[:p].reshape(-1)
        v.any_flat, v.multi_flat, v.tmp_flat = any_flat, multi_flat, tmp_flat
        v.any_levels = [
            (any_flat[d], any_flat[r], multi_flat[d], multi_flat[r], tmp_flat[d]) for d, r in flat_rows
        ]
        v.tmp_levels = [(tmp_flat[d], tmp_flat[r]) for d, r in flat_rows]
        v.loss_fl = old[DYN_FIXED:].reshape(-1)
        v.loss_near = self._near_base.reshape(-1)
        v.loss_tmp = tmp_flat

    # ----------------------------------------------------------------- the step
    def transition(self, parity: int, found: list[Found] | None) -> list[int]:
        """Buffer ``parity`` into the other: returns the players who lost (judged on the old state);
        ``found``, if given, gets the flags touched (`BitWorld.step`)."""
        v = self._plans[parity]
        losers = self._losses(v, found)
        self._neighbours(v)
        self._electron_counts(v)
        self._owners(v)
        self._cells(v)
        self._flags(v, found)
        return losers

    def _losses(self, v: SimpleNamespace, found: list[Found] | None) -> list[int]:
        band(v.loss_fl, v.loss_near, out=v.loss_tmp)
        losers: list[int] = []
        if np.count_nonzero(v.loss_tmp):  # much cheaper than .any() on uint64
            per_player = v.loss_tmp.reshape(self.layout.players, -1).any(axis=1)
            losers = [int(i) for i in np.flatnonzero(per_player)]
            if found is not None:
                self.layout.bits(v.loss_tmp, AT_BASE, found)
        return losers

    def _neighbours(self, v: SimpleNamespace) -> None:
        """The block filled from the old state; west and east neighbours of every plane in it at once."""
        np.copyto(v.nb_et, v.old_et)
        bor(v.old_fl, v.geysers, out=v.nb_fg)
        if self.layout.torus:
            self.layout.fill_ghosts(self._nb)
        np.left_shift(v.nb_w, 1, out=v.left_w)
        np.right_shift(v.nb_west, 63, out=v.tmpb_w)
        bor(v.left_w, v.tmpb_w, out=v.left_w)
        np.right_shift(v.nb_w, 1, out=v.right_w)
        np.left_shift(v.nb_east, 63, out=v.tmpb_w)
        bor(v.right_w, v.tmpb_w, out=v.right_w)

    @staticmethod
    def _electron_counts(v: SimpleNamespace) -> None:
        """Electron count over each 3x3 block as bits: per row h0 + 2*h1, then three rows summed into
        s0 (ones) and q = u1 + c1 + d1 + k (twos, 0..4). The centre is counted too; that is harmless
        because only conductors and flags read the count, and they are not electrons."""
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

    def _owners(self, v: SimpleNamespace) -> None:
        """Any tail, and per player any flag or geyser, in each 3x3 block."""
        bor(v.left_d, v.right_d, out=v.left_d)
        bor(v.left_d, v.nb_d, out=v.left_d)
        bor(v.hor_u, v.hor_c, out=v.dil_d)
        bor(v.dil_d, v.hor_d, out=v.dil_d)
        if self.layout.players == 1:
            np.copyto(v.fgany, v.dil_fg[0])
            v.multi[:] = 0
            return
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

    @staticmethod
    def _cells(v: SimpleNamespace) -> None:
        """Every plane but the flags and the flags' share of the conductors."""
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
        # conductors: those that stay, tails, photons without a single owner
        bxor(v.c_old, v.ne, out=v.nc)
        bor(v.nc, v.t_old, out=v.nc)
        bxor(v.ph_old, v.single, out=v.tmp)
        bor(v.nc, v.tmp, out=v.nc)

    def _flags(self, v: SimpleNamespace, found: list[Found] | None) -> None:
        """Flags next to an electron -> conductor; photons with a single owner become that owner's flag."""
        self._repeat(v, v.e1_plane)
        band(v.fl_old_flat, v.rep, out=v.tmp_flat)
        if found is not None and np.count_nonzero(v.tmp_flat):
            self.layout.bits(v.tmp_flat, BURNT, found)
        bxor(v.fl_old_flat, v.tmp_flat, out=v.nfl_flat)
        for kept, folded in v.tmp_levels:
            bor(kept, folded, out=kept)
        bor(v.nc, v.tmp_first, out=v.nc)
        self._repeat(v, v.single_plane)
        band(v.dil_fg_flat, v.rep, out=v.tmp_flat)
        if found is not None and np.count_nonzero(v.tmp_flat):
            self.layout.bits(v.tmp_flat, FORMED, found)
        bor(v.nfl_flat, v.tmp_flat, out=v.nfl_flat)

    @staticmethod
    def _repeat(v: SimpleNamespace, plane: np.ndarray) -> None:
        """Fill the repeat block with ``plane`` once per player (doubling copies)."""
        np.copyto(v.rep_first, plane)
        for dst, src in v.rep_copies:
            np.copyto(dst, src)
