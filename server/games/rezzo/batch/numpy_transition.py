"""`BatchedRezzo`'s transition in numpy: about 39 elementwise passes over chunks of worlds that stay in
the CPU caches; photons and losses, which are rare, resolved cell by cell.

Only elementwise ufuncs on preallocated arrays (a table `take` costs ~20 of them): the next code is the
old one plus per-rule differences, e.g. conductor 1 -> electron 2 adds 1. The fallback where numba is
missing, and the reference `batched_kernel._transition` is tested against.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from cellarena.server.games.rezzo.batch.cells import BASE, CONDUCTOR, ELECTRON, FLAG, PHOTON, TAIL
from cellarena.server.games.rezzo.planes import AT_BASE, BURNT, FORMED

#: Worlds per transition chunk: a duel chunk's ~20 scratch arrays stay in L2 (measured: 64 beats 1024 2x).
CHUNK = 64

u8 = np.uint8
band, bor, add, sub, eq, less = np.bitwise_and, np.bitwise_or, np.add, np.subtract, np.equal, np.less


class NumpyTransition:
    """The transition of the worlds ``codes`` (B, plane), each in a one-cell OOB border ``pw`` wide.

    ``near`` (B, plane): per cell, the bits of the players against whose flags a base lies in its 3x3
    block, and ``near_any`` whether any; ``photon``: what a photon becomes by its neighbours' owner bits;
    ``loss_any`` (B,) gets each world's loser bits, judged on the old state."""

    def __init__(
        self,
        codes: np.ndarray,
        near: np.ndarray,
        near_any: np.ndarray,
        photon: np.ndarray,
        loss_any: np.ndarray,
        pw: int,
    ) -> None:
        self._codes, self._near, self._near_any = codes, near, near_any
        self._photon, self._loss_any, self.pw = photon, loss_any, pw
        b, self.plane = codes.shape
        self._found: list[tuple[np.ndarray, int, np.ndarray]] = []
        # The transition runs on chunks of worlds whose scratch fits in the CPU caches. A chunk is one
        # flat run of its worlds' states ("span"), and its "inner" part leaves out the first and last
        # row, so that every inner cell has its 3x3 block in the span; contiguous 1-D arrays take
        # numpy's fastest loops. Inner cells include the border rows between two worlds: those are
        # OOB, which no rule changes, so what their blocks read across the seam does not matter.
        self.chunk = c = min(b, CHUNK)
        span, inner = c * self.plane, c * self.plane - 2 * pw
        self._span = {name: np.zeros(span, t) for name, t in _SPAN.items()}
        self._inner = {name: np.zeros(inner, t) for name, t in _INNER.items()}
        self._by_length: dict[int, SimpleNamespace] = {}
        # The 8 neighbours of a cell, as flat offsets.
        self._around = np.array([dy * pw + dx for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx], np.intp)

    def run(self, advancing: np.ndarray) -> np.ndarray:
        """The next codes of the ``advancing`` worlds in place (the others are put back), and the flags
        touched as rows (world, cell, kind, owner), as `batched_kernel`'s transition gives them."""
        self._found = []
        batch = self._codes.shape[0]
        for c0 in range(0, batch, self.chunk):
            self._chunk(c0, min(batch, c0 + self.chunk), advancing)
        return self._found_rows(advancing)

    def _found_rows(self, advancing: np.ndarray) -> np.ndarray:
        """The chunks' flags found, as the kernel's rows (world, cell, kind, owner), of the advancing
        worlds only (a chunk computes every world of it)."""
        if not self._found:
            return np.zeros((0, 4), np.int64)
        flat = np.concatenate([f for f, _, _ in self._found])
        kind = np.concatenate([np.full(len(f), k, np.int64) for f, k, _ in self._found])
        owner = np.concatenate([o.astype(np.int64) for _, _, o in self._found])
        world = flat // self.plane
        keep = advancing[world]
        return np.stack([world, flat % self.plane, kind, owner], axis=1)[keep]

    def _chunk(self, c0: int, c1: int, advancing: np.ndarray) -> None:
        """Worlds c0..c1-1; losses are only detected here, into ``loss_any``."""
        pw, plane = self.pw, self.plane
        length = (c1 - c0) * plane
        base = c0 * plane
        v = self._scratch_views(length)
        v.base, v.span = base, self._codes.reshape(-1)[base : base + length]
        v.inner = v.span[pw : length - pw]
        self._sums(v)
        self._rules(v)
        self._loss_any[c0:c1] = 0
        self._rare(v)
        moving = advancing[c0:c1]
        if moving.all():
            np.copyto(v.inner, v.new)
        else:
            # World j's rows 1..ph-2 lie at inner[j * plane : (j + 1) * plane - 2 * pw].
            for j in np.flatnonzero(moving):
                lo = int(j) * plane
                v.inner[lo : lo + plane - 2 * pw] = v.new[lo : lo + plane - 2 * pw]

    def _scratch_views(self, length: int) -> SimpleNamespace:
        """The scratch cut to a chunk of ``length`` cells, made once per length (views cost time)."""
        v = self._by_length.get(length)
        if v is None:
            n = length - 2 * self.pw
            v = SimpleNamespace(n=n)
            for name, arr in self._span.items():
                setattr(v, name, arr[:length])
            for name, arr in self._inner.items():
                setattr(v, name, arr[:n])
            self._by_length[length] = v
        return v

    def _sums(self, v: SimpleNamespace) -> None:
        """Per cell: electrons count 1 and tails 16 (one 3x3 sum gives both counts, at most 9 each),
        and whether it is a flag or geyser (codes 16..31); OOB (7) and blank give nothing. Then the
        3x3 sums and ORs: a row pass, then a column pass. Row ends fall in the OOB border."""
        pw, n, span = self.pw, v.n, v.span
        eq(span, ELECTRON, out=v.is_e)
        eq(span, TAIL, out=v.is_t)
        np.multiply(v.is_t.view(u8), 16, out=v.v)
        add(v.v, v.is_e.view(u8), out=v.v)
        sub(span, FLAG, out=v.u1)
        less(v.u1, 16, out=v.is_fg)
        hs, hf, vv, is_fg = v.hs, v.hf, v.v, v.is_fg
        hs[0] = hs[-1] = 0
        hf[0] = hf[-1] = False
        add(vv[:-2], vv[1:-1], out=hs[1:-1])
        add(hs[1:-1], vv[2:], out=hs[1:-1])
        bor(is_fg[:-2], is_fg[1:-1], out=hf[1:-1])
        bor(hf[1:-1], is_fg[2:], out=hf[1:-1])
        add(hs[:n], hs[pw : pw + n], out=v.s)
        add(v.s, hs[2 * pw :], out=v.s)
        bor(hf[:n], hf[pw : pw + n], out=v.fm)
        bor(v.fm, hf[2 * pw :], out=v.fm)
        band(v.s, 15, out=v.es)  # electron neighbours (the centre is no electron where it matters)

    def _rules(self, v: SimpleNamespace) -> None:
        """The next code as the old one plus per-rule differences; burnt flags noted."""
        pw, n, inner, new, m1, u2 = self.pw, v.n, v.inner, v.new, v.m1, v.u2
        # conductor -> electron with 1 or 2 electron neighbours: + 1
        sub(v.es, 1, out=u2)  # 0 electrons wraps to 255
        less(u2, 2, out=m1)
        eq(inner, CONDUCTOR, out=v.m2)
        band(m1, v.m2, out=m1)
        add(inner, m1.view(u8), out=new)
        # electron -> tail (+1), or photon (+2) beside a tail and a flag or geyser
        e_in, t_in = v.is_e[pw : pw + n], v.is_t[pw : pw + n]
        add(new, e_in.view(u8), out=new)
        np.greater(v.s, 15, out=m1)
        band(m1, v.fm, out=m1)
        band(m1, e_in, out=m1)
        add(new, m1.view(u8), out=new)
        # tail 3 -> conductor 1
        sub(new, t_in.view(u8), out=new)
        sub(new, t_in.view(u8), out=new)
        # flag (codes 16..23) -> conductor next to an electron: minus (code - 1). Arithmetic, as a
        # masked copy (`copyto(where=)`) costs 2 to 60 passes, the more the more cells it writes.
        sub(inner, FLAG, out=u2)
        less(u2, 8, out=v.is_flag)
        np.not_equal(v.es, 0, out=m1)
        band(m1, v.is_flag, out=m1)
        if m1.any():  # flags burnt by an electron (events)
            at = np.flatnonzero(m1)
            self._found.append((v.base + pw + at, BURNT, inner[at] & 7))
        add(u2, FLAG - CONDUCTOR, out=u2)
        np.multiply(u2, m1.view(u8), out=u2)
        sub(new, u2, out=new)

    def _rare(self, v: SimpleNamespace) -> None:
        """Losses (judged on the old state: flags next to a base) and photons, cell by cell."""
        start = v.base + self.pw
        band(v.is_flag, self._near_any.reshape(-1)[start : start + v.n], out=v.m1)
        if v.m1.any():
            self._detect_losses(start + np.flatnonzero(v.m1))
        # photon -> the flag of its single flag-or-geyser owner, else conductor (photons are few)
        eq(v.inner, PHOTON, out=v.m1)
        if v.m1.any():
            at = np.flatnonzero(v.m1)
            v.new[at] = became = self._photons(start + at)
            flags = became >= FLAG
            if flags.any():
                self._found.append((start + at[flags], FORMED, became[flags] & 7))

    def _detect_losses(self, flat: np.ndarray) -> None:
        """Set each world's bit of every player with a flag at ``flat`` (indices into the flat codes)
        next to a base that counts against it."""
        owner = self._codes.reshape(-1)[flat] & 7
        counts = (self._near.reshape(-1)[flat] >> owner) & 1 != 0
        worlds = flat[counts] // self.plane
        np.bitwise_or.at(self._loss_any, worlds, (1 << owner[counts]).astype(np.uint8))
        if counts.any():
            self._found.append((flat[counts], AT_BASE, owner[counts]))

    def _photons(self, flat: np.ndarray) -> np.ndarray:
        """What the photons at ``flat`` (indices into the flat codes) become: the flag of their single
        flag-or-geyser owner, else conductors."""
        around = self._codes.reshape(-1)[flat[:, None] + self._around]
        fg = (around >= FLAG) & (around < BASE)
        bits = np.bitwise_or.reduce(np.where(fg, 1 << (around & 7), 0), axis=1)
        result: np.ndarray = self._photon[bits]
        return result


#: The scratch over a chunk's span, and over its inner part: per-cell masks (electron, tail, flag or
#: geyser), sums and ORs, the new codes.
_SPAN = {"v": np.uint8, "hs": np.uint8, "hf": bool, "is_e": bool, "is_t": bool, "is_fg": bool, "u1": np.uint8}
_INNER = {
    "s": np.uint8,
    "es": np.uint8,
    "fm": bool,
    "u2": np.uint8,
    "m1": bool,
    "m2": bool,
    "is_flag": bool,
    "new": np.uint8,
}
