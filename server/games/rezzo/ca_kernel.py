"""numba-compiled `BitWorld.step`: the same bit-sliced rules in four short passes instead of ~90 ufuncs.

The numpy step is about 90 ufunc calls, each a full pass over a plane with its own call overhead
(0.3 to 1 µs). On a 256x256 world a plane is only ~1,300 words, so most of the step is that overhead
and the traffic of writing every intermediate plane. Compiled, each word of the world is read a
few times and every intermediate value stays in a register or in a scratch that fits in L1.

It follows `BitWorld.step` rule for rule on the same planes (tests/test_rezzo_differential.py runs both
against the slow reference), so the two agree bit for bit. numba is optional (the ``[rl]`` extra):
`ca` imports this module only for the numba backend (`CompiledStep`). Every constant is a ``uint64``:
numba widens a uint64 mixed with an int64 to float64, which would be wrong and slow.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import numpy as np

from cellarena.server.games.rezzo.planes import (
    AT_BASE,
    BURNT,
    DYN_FIXED,
    FORMED,
    WORD,
    E,
    Found,
    StepArrays,
    T,
)

_1 = np.uint64(1)
_63 = np.uint64(63)
_0 = np.uint64(0)


def _electrons(e_src: np.ndarray, t_src: np.ndarray, lo: int, n: int, s: int, scratch: np.ndarray) -> None:
    """``e12`` (1 or 2 electrons), ``e1`` (any) and ``tany`` (any tail) over each cell's 3x3 block."""
    m = n + 2 * s  # the world's rows and the ghost rows above and below: where row sums are needed
    h0, h1, th = scratch[0], scratch[1], scratch[2]
    e12, e1, tany = scratch[4], scratch[5], scratch[6]
    # Row sums of the electrons (h0 + 2 * h1, over west, centre and east) and row ORs of the tails.
    ew, ec, ee = e_src[lo - s - 1 :], e_src[lo - s :], e_src[lo - s + 1 :]
    tw, tc, te = t_src[lo - s - 1 :], t_src[lo - s :], t_src[lo - s + 1 :]
    for k in range(m):
        e = ec[k]
        left = (e << _1) | (ew[k] >> _63)
        right = (e >> _1) | (ee[k] << _63)
        h0[k] = left ^ e ^ right
        h1[k] = (left & e) | (right & (left ^ e))
        t = tc[k]
        th[k] = t | (t << _1) | (tw[k] >> _63) | (t >> _1) | (te[k] << _63)
    # Three rows summed: electron counts in {1, 2} and >= 1; any tail in the 3x3 block.
    h0c, h0d, h1c, h1d, thc, thd = h0[s:], h0[2 * s :], h1[s:], h1[2 * s :], th[s:], th[2 * s :]
    for i in range(n):
        h0u, h1u = h0[i], h1[i]
        x = h0u ^ h0c[i]
        s0 = x ^ h0d[i]
        k2 = (h0u & h0c[i]) | (x & h0d[i])  # carry of the ones into the twos
        x1 = h1u ^ h1c[i]
        one = h1d[i] ^ k2
        anyq = x1 | one | h1u | h1d[i]
        one = x1 ^ one  # parity of the twos
        pair = (h1u & h1c[i]) | (h1d[i] & k2)
        one = one & ~pair  # the twos add up to exactly 1
        e12[i] = ((one ^ ~anyq) & s0) ^ one  # count 1 (odd, no twos) or 2 (even, one two)
        e1[i] = s0 | anyq
        tany[i] = th[i] | thc[i] | thd[i]


def _owners(fg_src: np.ndarray, gy_src: np.ndarray, lo: int, n: int, s: int, scratch: np.ndarray) -> None:
    """Per player, flags or geysers in each 3x3 block (``scratch[10 + o]``); ``fgany``: any owner,
    ``multi``: more than one."""
    m = n + 2 * s
    hd, fgany, multi = scratch[3], scratch[8], scratch[9]
    for i in range(n):
        fgany[i] = _0
        multi[i] = _0
    hdc, hdd = hd[s:], hd[2 * s :]
    for o in range(fg_src.shape[0]):
        fw, fc, fe = fg_src[o, lo - s - 1 :], fg_src[o, lo - s :], fg_src[o, lo - s + 1 :]
        gw, gc, ge = gy_src[o, lo - s - 1 :], gy_src[o, lo - s :], gy_src[o, lo - s + 1 :]
        for k in range(m):
            a = fc[k] | gc[k]
            hd[k] = a | (a << _1) | ((fw[k] | gw[k]) >> _63) | (a >> _1) | ((fe[k] | ge[k]) << _63)
        dil = scratch[10 + o]
        for i in range(n):
            d = hd[i] | hdc[i] | hdd[i]
            dil[i] = d
            multi[i] |= fgany[i] & d
            fgany[i] |= d


def _cells(old: np.ndarray, new: np.ndarray, lo: int, n: int, scratch: np.ndarray) -> None:
    """Every plane but the flags and the flags' share of the conductors; ``single``: the photons
    beside one owner's flags or geysers."""
    e12, tany, single, fgany, multi = scratch[4], scratch[6], scratch[7], scratch[8], scratch[9]
    oe, ot, oc, oph = old[0, lo:], old[1, lo:], old[2, lo:], old[3, lo:]
    ne, nt, nc, nph = new[0, lo:], new[1, lo:], new[2, lo:], new[3, lo:]
    for i in range(n):
        e, ph, c = oe[i], oph[i], oc[i]
        photon = e & tany[i] & fgany[i]
        one_owner = ph & ~multi[i] & fgany[i]
        single[i] = one_owner
        born = c & e12[i]
        ne[i] = born
        nt[i] = e ^ photon
        nph[i] = photon
        nc[i] = (c ^ born) | ot[i] | (ph ^ one_owner)


def _flags(
    old: np.ndarray,
    new: np.ndarray,
    near: np.ndarray,
    lo: int,
    n: int,
    scratch: np.ndarray,
    events: np.ndarray,
    flags: np.ndarray,
) -> None:
    """Flags next to an electron burn to conductors; single-owner photons become flags. Fills
    ``flags`` (and ``events`` if asked) as `_step` says."""
    e1, single, nc = scratch[5], scratch[7], new[2, lo:]
    losers = at_base = burnt_any = formed_any = _0
    record = flags[4] != 0
    for o in range(near.shape[0]):
        fl, nfl, dil, nb = old[4 + o, lo:], new[4 + o, lo:], scratch[10 + o], near[o, lo:]
        touch = burn = form = _0
        for i in range(n):
            f = fl[i]
            b = f & e1[i]
            nfl[i] = (f ^ b) | (dil[i] & single[i])
            nc[i] |= b
            touch |= f & nb[i]
            burn |= b
        for i in range(n):
            form |= dil[i] & single[i]
        if record:
            ea, eb, ef = events[0, o, lo:], events[1, o, lo:], events[2, o, lo:]
            for i in range(n):
                f = fl[i]
                ea[i] = f & nb[i]
                eb[i] = f & e1[i]
                ef[i] = dil[i] & single[i]
        if touch:
            losers |= _1 << np.uint64(o)
        at_base |= touch
        burnt_any |= burn
        formed_any |= form
    flags[0] = losers
    flags[1] = at_base != _0
    flags[2] = burnt_any != _0
    flags[3] = formed_any != _0


def _step(
    e_src: np.ndarray,
    t_src: np.ndarray,
    fg_src: np.ndarray,
    gy_src: np.ndarray,
    old: np.ndarray,
    new: np.ndarray,
    near: np.ndarray,
    bounds: np.ndarray,
    scratch: np.ndarray,
    events: np.ndarray,
    flags: np.ndarray,
) -> None:
    """One transition from the stack ``old`` (E, T, C, PH, flags...) into ``new``, words
    ``bounds[0]``..``bounds[1]`` (the world's rows, pads included); ``bounds[2]`` is the row stride.

    The neighbourhoods are read from ``e_src``, ``t_src`` and ``fg_src | gy_src`` (p, L): the old
    planes themselves, or on a torus `BitWorld`'s block with its ghosts filled (and ``gy_src`` zero).
    ``near``: `BitWorld._near_base`. ``scratch``: (10 + p, L). ``events`` (3, p, L): if ``flags[4]``
    is 1, the flags beside a base, burnt and formed (`planes.AT_BASE`, `BURNT`, `FORMED`) as planes.
    ``flags`` gets: [0] the loser bits (a flag beside a base on the old state), [1..3] whether any
    flag was beside a base, burnt or formed.

    Every loop runs an index from 0 over views that start where it starts: numba checks a possibly
    negative index for wraparound, and that check stops LLVM from vectorising the loop.
    """
    lo, hi, s = bounds[0], bounds[1], bounds[2]
    n = hi - lo
    _electrons(e_src, t_src, lo, n, s, scratch)
    _owners(fg_src, gy_src, lo, n, s, scratch)
    _cells(old, new, lo, n, scratch)
    _flags(old, new, near, lo, n, scratch, events, flags)


def _compile(numba: Any, function: Any) -> Any:
    """``function`` compiled on first call, cached on disk if numba finds a writable cache directory."""
    try:
        return numba.njit(cache=True, boundscheck=False)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(function)


#: The passes `_step` calls. A compiled function calls only compiled ones, which it finds among the
#: module's names as it compiles: so each pass is compiled first, in place of its plain function.
_PASSES = ("_electrons", "_owners", "_cells", "_flags")


@functools.cache
def _compile_passes(numba: Any) -> None:
    names = globals()
    for name in _PASSES:
        names[name] = _compile(numba, names[name])


class Kernel:
    """The compiled step. Constructing it imports numba (ImportError without it); the step compiles,
    or loads from numba's cache, on its first call."""

    def __init__(self) -> None:
        numba = importlib.import_module("numba")
        _compile_passes(numba)
        self._step = _compile(numba, _step)

    def step(self, *arrays: np.ndarray) -> None:
        """`_step` with its arguments in its order."""
        self._step(*arrays)


@functools.cache
def kernel() -> Kernel:
    """The compiled step, loaded once per process (ImportError without numba)."""
    return Kernel()


class CompiledStep:
    """`ca_numpy.NumpyStep`'s twin through the compiled `_step`: the same planes, flags found and
    losers, for one world (its arrays as `BitWorld` holds them)."""

    def __init__(self, world: StepArrays) -> None:
        self.layout = layout = world.layout
        self._bufs, self._static, self._nb = world.bufs, world.static, world.nb
        s, h, p, ln = layout.stride, layout.height, layout.players, layout.length
        self._bounds = np.array([1 + s, 1 + (h + 1) * s, s], np.int64)
        self._scratch = np.zeros((10 + p, ln), WORD)
        self._events = np.zeros((3, p, ln), WORD)
        self._flags = np.zeros(5, WORD)
        # A torus's block holds flags and geysers ORed: the kernel's geysers are then none.
        self._no_geysers = np.zeros((p, ln if layout.torus else 0), WORD)
        # The kernel's arguments per buffer parity, made once: views cost allocations each step.
        self._args = [self._kernel_args(b, world.near_base) for b in range(2)]
        self._players, self._torus, self._step = p, layout.torus, kernel().step  # bound once: a step is µs

    def scratch_arrays(self) -> list[np.ndarray]:
        return [self._scratch, self._events, self._no_geysers]

    def _kernel_args(self, parity: int, near_base: np.ndarray) -> tuple[np.ndarray, ...]:
        """`Kernel.step`'s arguments when buffer ``parity`` is the old state."""
        p, nb = self.layout.players, self._nb
        old, new = self._bufs[parity], self._bufs[1 - parity]
        if self.layout.torus:
            sources = (nb[0], nb[1], nb[2:], self._no_geysers)
        else:
            sources = (old[E], old[T], old[DYN_FIXED:], self._static[0:p])
        scratch = (self._bounds, self._scratch, self._events, self._flags)
        return (*sources, old, new, near_base, *scratch)

    def transition(self, parity: int, found: list[Found] | None) -> list[int]:
        """Buffer ``parity`` into the other: the players who lost; ``found`` as `BitWorld.step` says."""
        p = self._players
        old = self._bufs[parity]
        flags = self._flags
        flags[4] = found is not None
        if self._torus:
            # The neighbourhoods are read from the block with its ghosts filled, flags and geysers ORed.
            nb = self._nb
            np.copyto(nb[0:2], old[E : T + 1])
            np.bitwise_or(old[DYN_FIXED:], self._static[0:p], out=nb[2:])
            self.layout.fill_ghosts(nb)
        self._step(*self._args[parity])
        mask = int(flags[0])
        losers = [i for i in range(p) if mask >> i & 1]
        if found is not None:
            for kind in (AT_BASE, BURNT, FORMED):
                if flags[1 + kind]:
                    self.layout.bits(self._events[kind].reshape(-1), kind, found)
        return losers
