"""`BatchedRezzo`'s viewports in numpy: every agent's 13x13 viewport, in all worlds, as one `take` of
codes and one of damage, through a table of the 169 cell indices per position and facing (cells off the
world read the OOB corner); owners made relative to the viewer with byte arithmetic (`relative`)."""

from __future__ import annotations

import functools

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.games.rezzo.batch.cells import AGENT, BORDER, MARGIN, VIEW_CELLS
from cellarena.server.games.rezzo.viewports import view_offsets

# Per facing, the (dy, dx) of the 169 viewport cells from the agent, in the wire's row-major order.
_DX, _DY = (view_offsets()[:, i].reshape(4, VIEW_CELLS).astype(np.intp) for i in (0, 1))


@functools.lru_cache(maxsize=8)
def _view_table(height: int, width: int) -> np.ndarray:
    """(H * W * 4, 169) flat indices into a world's state (one-cell border): row (y * W + x) * 4 +
    facing holds that viewport's cells; cells off the world read the corner, OOB with no damage.
    Shared (read-only) by every batch of that size, e.g. a vector environment and its template."""
    ys = np.arange(height)[:, None, None, None]
    xs = np.arange(width)[None, :, None, None]
    cy, cx = ys + _DY[None, None], xs + _DX[None, None]
    inside = (cy >= 0) & (cy < height) & (cx >= 0) & (cx < width)
    table = np.where(inside, (cy + BORDER) * (width + 2 * BORDER) + cx + BORDER, 0)
    table = np.ascontiguousarray(table.reshape(-1, VIEW_CELLS), np.intp)
    table.flags.writeable = False
    return table


def relative(
    codes: np.ndarray, viewer: int, players: int, scratch: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    """Owned codes (8 and up) in place with owner o made (o - viewer) mod players: arithmetic on
    bytes, as a lookup table costs several passes. ``scratch``: arrays of ``codes``' shape."""
    u8, (o, owned, wraps) = np.uint8, scratch
    np.greater_equal(codes, AGENT, out=owned)
    if players == 2:  # the other player's owner bit flips
        np.bitwise_xor(codes, owned.view(u8), out=codes)
        return
    np.bitwise_and(codes, 7, out=o)
    np.less(o, viewer, out=wraps)
    np.bitwise_and(wraps, owned, out=wraps)
    np.multiply(owned.view(u8), viewer, out=o)
    np.subtract(codes, o, out=codes)
    np.multiply(wraps.view(u8), players, out=o)
    np.add(codes, o, out=codes)


class NumpyViews:
    """The viewports of the worlds whose state is ``codes`` and ``dmg`` (B, plane) and whose agents
    stand at ``agents`` = (x, y, facing) (B, N), ``per_player`` agents each; ``size``: (H, W, players).
    ``table``: whether to keep a table of every position's cell indices (else each call copies the
    worlds into a border a viewport wide)."""

    def __init__(
        self,
        codes: np.ndarray,
        dmg: np.ndarray,
        agents: tuple[np.ndarray, np.ndarray, np.ndarray],
        size: tuple[int, int, int],
        per_player: int,
        table: bool,
    ) -> None:
        self._codes, self._dmg = codes, dmg
        self._x, self._y, self._facing = agents
        self.height, self.width, self.players = size
        self.per_player = per_player
        b, n = self._x.shape
        h, w = self.height, self.width
        self._vi = np.zeros((b, n, VIEW_CELLS), np.intp)
        self._vkey = np.zeros((b, n), np.intp)
        world_base = np.arange(b, dtype=np.intp) * codes.shape[1]
        self._view_table: np.ndarray | None = None
        if table:
            # One row of 169 flat cell indices (within a world's state) per position and facing; cells
            # off the world read the state's corner, which is OOB with no damage.
            self._view_table = _view_table(h, w)
            # Rows of `_vi` are rebuilt only for agents whose position or facing changed.
            self._vkey_before = np.full((b, n), -1, np.intp)
            self._vchanged = np.zeros((b, n), bool)
            self._vrows = np.zeros((b * n, VIEW_CELLS), np.intp)
            self._vbase = np.repeat(world_base, n)
        else:
            # Too many positions for a table: a copy of the worlds inside a border a viewport wide.
            self.vph, self.vpw = h + 2 * MARGIN, w + 2 * MARGIN
            self._view_offsets = _DY * self.vpw + _DX
            self._voff = np.zeros((b, n, VIEW_CELLS), np.intp)
            self._vgrid = np.full((b, self.vph, self.vpw), Cell.OOB, np.uint8)
            self._vdmg = np.zeros((b, self.vph, self.vpw), np.uint8)
            m = MARGIN
            self._vgrid_in = self._vgrid[:, m : m + h, m : m + w]
            self._vdmg_in = self._vdmg[:, m : m + h, m : m + w]
            self._vworld_base = np.arange(b, dtype=np.intp) * self.vph * self.vpw
            ph, pw = h + 2 * BORDER, w + 2 * BORDER
            self._codes_in = codes.reshape(b, ph, pw)[:, 1:-1, 1:-1]
            self._dmg_in = dmg.reshape(b, ph, pw)[:, 1:-1, 1:-1]
        # Owners relative to the viewer, for the agents of one player at a time (player 0's need none).
        k = per_player
        self._rel = (
            np.zeros((b, k, VIEW_CELLS), np.uint8),
            np.zeros((b, k, VIEW_CELLS), bool),
            np.zeros((b, k, VIEW_CELLS), bool),
        )

    def fill(self, view_codes: np.ndarray, view_damage: np.ndarray) -> None:
        """Every agent's viewport into ``view_codes`` and ``view_damage`` (B, N, 169)."""
        vi, codes, dmg = self._indices()
        np.take(codes, vi, out=view_codes, mode="clip")
        np.take(dmg, vi, out=view_damage, mode="clip")
        k = self.per_player
        for viewer in range(1, self.players):
            relative(view_codes[:, viewer * k : (viewer + 1) * k], viewer, self.players, self._rel)

    def of(self, worlds: np.ndarray) -> np.ndarray:
        """The viewports of the worlds ``worlds`` only, as a new (len, N, 2, 169) array."""
        vi, codes, dmg = self._indices()
        rows = vi[worlds]
        out = np.empty((len(rows), vi.shape[1], 2, VIEW_CELLS), np.uint8)
        np.take(codes, rows, out=out[:, :, 0], mode="clip")
        np.take(dmg, rows, out=out[:, :, 1], mode="clip")
        k = self.per_player
        for viewer in range(1, self.players):
            part = out[:, viewer * k : (viewer + 1) * k, 0]
            scratch = (np.empty(part.shape, np.uint8), np.empty(part.shape, bool), np.empty(part.shape, bool))
            relative(part, viewer, self.players, scratch)
        return out

    def _indices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (B, N, 169) flat indices of every viewport's cells, and the code and damage arrays they
        index (the state itself, or its copy inside a viewport-wide border)."""
        key, vi = self._vkey, self._vi
        if self._view_table is not None:
            np.multiply(self._y, self.width, out=key)
            np.add(key, self._x, out=key)
            np.multiply(key, 4, out=key)
            np.add(key, self._facing, out=key)
            np.not_equal(key, self._vkey_before, out=self._vchanged)
            at = np.flatnonzero(self._vchanged)
            if at.size:
                rows = self._vrows[: at.size]
                np.take(self._view_table, key.reshape(-1)[at], axis=0, out=rows, mode="clip")
                np.add(rows, self._vbase[at, None], out=rows)
                vi.reshape(-1, VIEW_CELLS)[at] = rows
                np.copyto(self._vkey_before, key)
            return vi, self._codes.reshape(-1), self._dmg.reshape(-1)
        np.copyto(self._vgrid_in, self._codes_in)
        np.copyto(self._vdmg_in, self._dmg_in)
        np.add(self._y, MARGIN, out=key)
        np.multiply(key, self.vpw, out=key)
        np.add(key, self._x, out=key)
        np.add(key, MARGIN + self._vworld_base[:, None], out=key)
        np.take(self._view_offsets, self._facing, axis=0, out=self._voff, mode="clip")
        np.add(self._voff, key[:, :, None], out=vi)
        return vi, self._vgrid.reshape(-1), self._vdmg.reshape(-1)
