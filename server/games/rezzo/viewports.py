"""The agents' 13x13 viewports of one Rezzo world, as its bots receive them: cell codes with owners
relative to the viewer, and damage. `RezzoEngine` owns one, and the world's damage lives in it."""

from __future__ import annotations

import numpy as np

from cellarena.sdk.games import rezzo as sdk
from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell
from cellarena.server.games.rezzo.ca import BitWorld

#: Below this many world cells per viewing agent, decoding the whole world beats per-cell gathers.
CELLS_PER_AGENT_TO_DECODE = 4096
#: How far a viewport reaches from its agent: the margin of the padded copies the views are read from.
VIEW_REACH = VIEW_SIZE - 1  # the agent sits at the bottom edge: the view reaches 12 cells ahead


def view_offsets() -> np.ndarray:
    """(4, 2, 13, 13): per facing, the dx and dy of every viewport cell from its agent."""
    r = np.arange(VIEW_SIZE)[:, None]
    c = np.arange(VIEW_SIZE)[None, :]
    out = np.zeros((4, 2, VIEW_SIZE, VIEW_SIZE), np.int64)
    ahead, right = sdk.VIEW_AGENT_ROW - r, c - sdk.VIEW_AGENT_COL
    for f in sdk.Facing:
        (fx, fy), (rx, ry) = sdk.FORWARD[f], sdk.RIGHTWARD[f]
        out[f, 0] = ahead * fx + right * rx
        out[f, 1] = ahead * fy + right * ry
    return out


class Viewports:
    """Viewports of ``world``, whose damage (H, W) starts as ``damage`` (default none) and is `damage`.

    Agents are given as ``at``: (n, 3) rows of x, y and facing."""

    def __init__(self, world: BitWorld, damage: np.ndarray | None = None) -> None:
        self.world = world
        h, w, m = world.height, world.width, VIEW_REACH
        # Damage lives inside a zero border as wide as a viewport reaches, so that the viewports of a
        # small world are one gather from the padded array; ``damage`` is the world part of it.
        self._damage_padded = np.zeros((h + 2 * m, w + 2 * m), np.uint8)
        self.damage = self._damage_padded[m : m + h, m : m + w]
        if damage is not None:
            self.damage[:] = np.asarray(damage, dtype=np.uint8)
        self._codes_padded = np.full(self._damage_padded.shape, Cell.OOB, np.uint8)
        self._offsets = view_offsets()
        pw = w + 2 * m
        self._flat_offsets = (self._offsets[:, 1] * pw + self._offsets[:, 0]).astype(np.intp)
        if world.torus:
            self._wrap_rows = (np.arange(-m, h + m) % h)[:, None]
            self._wrap_cols = (np.arange(-m, w + m) % w)[None, :]
        # (players, 256): a code with absolute owner -> the code as viewer v sees it (owners relative).
        p = world.players
        c = np.arange(256)
        owned = c >= Cell.AGENT
        rel = [np.where(owned, (c & 0xF8) + ((c & 7) - v) % p, c) for v in range(p)]
        self._relative_lut = np.array(rel, np.uint8).reshape(-1)

    def decodes(self, agents: int) -> bool:
        """Whether the views of ``agents`` agents read a decoded copy of the world (small world, many
        agents) rather than the planes at each cell."""
        return self.world.width * self.world.height <= agents * CELLS_PER_AGENT_TO_DECODE

    def views(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Codes (absolute owners) and damage of the viewports of the agents ``at``: (n, 13, 13) each."""
        if self.decodes(len(at)):
            return self.views_padded(self.padded_index(at))
        world, w, h = self.world, self.world.width, self.world.height
        off = self._offsets[at[:, 2]]
        xs = at[:, 0, None, None] + off[:, 0]
        ys = at[:, 1, None, None] + off[:, 1]
        if world.torus:
            xs %= w
            ys %= h
            inside = np.ones(xs.shape, bool)
        else:
            inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
            xs = np.where(inside, xs, 0)
            ys = np.where(inside, ys, 0)
        codes = world.gather(xs, ys)
        codes[~inside] = Cell.OOB
        dmg = np.where(inside, self.damage[ys, xs], 0).astype(np.uint8)
        return codes, dmg

    def padded_index(self, at: np.ndarray) -> np.ndarray:
        """(n, 13, 13) flat indices of the viewports of the agents ``at`` into the padded arrays."""
        pw = self.world.width + 2 * VIEW_REACH
        base = (at[:, 1] + VIEW_REACH) * pw + at[:, 0] + VIEW_REACH
        return base[:, None, None] + self._flat_offsets[at[:, 2]]

    def views_padded(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Codes and damage at ``index`` (`padded_index`) of copies of the world in a border."""
        m, h, w = VIEW_REACH, self.world.height, self.world.width
        codes = self.world.codes_view()
        if self.world.torus:
            # Wrapped copies: the border holds the opposite edges.
            padded_codes = codes[self._wrap_rows, self._wrap_cols]
            padded_damage = self.damage[self._wrap_rows, self._wrap_cols]
        else:
            padded_codes, padded_damage = self._codes_padded, self._damage_padded  # OOB / zero borders
            padded_codes[m : m + h, m : m + w] = codes
        return padded_codes.reshape(-1).take(index), padded_damage.reshape(-1).take(index)

    def relative(self, codes: np.ndarray, viewer: int | np.ndarray) -> np.ndarray:
        """Owners renumbered from the viewer: 0 is the viewer, then the others in seat order.

        ``viewer`` may be an array broadcasting against ``codes`` (one viewer per viewport).
        """
        owned = codes >= Cell.AGENT
        rel = ((codes & 7).astype(np.int16) - viewer) % self.world.players
        return np.where(owned, (codes & 0xF8) + rel, codes).astype(np.uint8)

    def relative_rows(self, codes: np.ndarray, viewers: np.ndarray) -> np.ndarray:
        """``codes`` (n, 13, 13) with owners relative to each row's viewer, through one table lookup."""
        return self._relative_lut.take(codes + (viewers * 256).astype(np.intp)[:, None, None])
