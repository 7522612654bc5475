"""The bit-plane layout of Rezzo's CA, shared by `ca.BitWorld` and its two steps (`ca_numpy`, `ca_kernel`).

For a world of H rows and W columns, ``nw = ceil(W / 64)`` words per row, one plane is

    index 0 | row 0 (ghost) | row 1 .. row H (the world) | row H+1 (ghost) | index L-1

Each row is ``nw`` words followed by one pad word, so the row stride is ``S = nw + 1``. Cell (x, y)
is bit ``x % 64`` of word ``1 + (y + 1) * S + x // 64``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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

#: A flag a transition touched: (kind, player, x, y), the kind one of the three above.
Found = tuple[int, int, int, int]


@dataclass(frozen=True)
class Layout:
    """The shape of a world's planes: words per row (``nw``), the row stride and words per plane."""

    height: int
    width: int
    players: int
    torus: bool
    nw: int = field(init=False)
    stride: int = field(init=False)
    length: int = field(init=False)

    def __post_init__(self) -> None:
        nw = (self.width + 63) // 64
        object.__setattr__(self, "nw", nw)  # frozen: derived once here
        object.__setattr__(self, "stride", nw + 1)
        object.__setattr__(self, "length", (self.height + 2) * (nw + 1) + 2)

    def fill_ghosts(self, block: np.ndarray) -> None:
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

    def bits(self, planes: np.ndarray, kind: int, found: list[Found]) -> None:
        """Append (kind, player, x, y) for every set bit of ``planes``, one plane per player, flat."""
        ln, s = self.length, self.stride
        for i in np.flatnonzero(planes).tolist():
            player, w = divmod(i, ln)
            row, col = divmod(w - 1, s)
            word = np.array([planes[i]], WORD).view(np.uint8)
            for bit in np.flatnonzero(np.unpackbits(word, bitorder="little")).tolist():
                found.append((kind, player, col * 64 + bit, row - 1))


@dataclass(frozen=True)
class StepArrays:
    """What a world's step (`ca_numpy.NumpyStep`, `ca_kernel.CompiledStep`) works on, as `ca.BitWorld`
    holds it."""

    layout: Layout
    #: The state's two buffers, old and new by turns.
    bufs: list[np.ndarray]
    #: The geysers, bases and agents.
    static: np.ndarray
    #: Per player, the cells where a flag loses.
    near_base: np.ndarray
    #: The neighbourhood block: electron, tail, each player's flags-or-geysers.
    nb: np.ndarray
