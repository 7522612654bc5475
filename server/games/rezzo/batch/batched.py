"""B same-shape Rezzo worlds stepped as one array operation, for training and vector environments.

A real Rezzo world is small (a duel is 32x32), so stepping one world at a time is dominated by numpy's
per-call cost. Here all B worlds live in one byte array, one code per cell, each world inside a
one-cell border of OOB cells. Then:

- the transition is about 39 elementwise passes over chunks of worlds that stay in the CPU caches,
  each chunk one flat run of cells: 3x3 sums and ORs of small per-cell values, then the next code
  as the old one plus per-rule differences; photons and losses, which are rare, are resolved cell
  by cell;
- the agent phase runs one resolution slot at a time, each slot a vectorised move of one agent in
  every world (moves within a world stay sequential, as the rulebook wants);
- every agent's 13x13 viewport, in all worlds, is one `take` of codes and one of damage, through a
  table of the 169 cell indices per position and facing (cells off the world read the OOB corner);
  owners are made relative to the viewer with byte arithmetic.

The border makes bounds checks free: an OOB cell is never blank or hittable, and its 3x3 values are 0.
It agrees bit for bit with `RezzoEngine` (tests/test_rezzo_batched.py); only bounded worlds are batched
(a torus would need wrapped borders refreshed every tick).

Where numba is installed, the transition, the viewports and the agent phase run as compiled loops
instead (`batched_kernel`, 3.5x the whole step at 1024 duels); the numpy code here is the fallback
and the reference they are tested against.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cellarena.sdk.games.rezzo import (
    FORWARD,
    MAX_DAMAGE,
    RIGHTWARD,
    VIEW_AGENT_COL,
    VIEW_AGENT_ROW,
    VIEW_SIZE,
    Cell,
    Facing,
    Move,
)
from cellarena.server.games.rezzo import backends
from cellarena.server.games.rezzo.engine import (
    RezzoEngine,
    blocked_event,
    hit_event,
    loss_events,
    transition_events,
)
from cellarena.server.games.rezzo.planes import AT_BASE, BURNT, FORMED

if TYPE_CHECKING:
    from cellarena.server.games.rezzo.batch import batched_kernel, batched_parallel

#: How far a viewport reaches from its agent, and so the width of the OOB border around each world.
MARGIN = VIEW_SIZE - 1
#: The state's own border: one OOB cell, enough for 3x3 neighbourhoods and the cell in front of an agent.
BORDER = 1
VIEW_CELLS = VIEW_SIZE * VIEW_SIZE
#: Worlds per transition chunk: a duel chunk's ~20 scratch arrays stay in L2 (measured: 64 beats 1024 2x).
CHUNK = 64
#: Largest viewport index table (entries: positions x 4 facings x 169) kept per batch (16 MiB; a duel's
#: is 5.5 MiB); larger worlds copy themselves into a viewport-wide border every call instead.
VIEW_TABLE_MAX = 1 << 21
_NOOP, _ADVANCE, _LEFT, _RIGHT, _BUILD, _HIT = (int(m) for m in Move)
# Plain ints: an IntEnum operand makes numpy compute in int64, and its attribute lookups cost time.
_BLANK, _CONDUCTOR, _ELECTRON, _TAIL, _PHOTON = (
    int(c) for c in (Cell.BLANK, Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.PHOTON)
)
_AGENT, _FLAG, _BASE = int(Cell.AGENT), int(Cell.FLAG), int(Cell.BASE)
#: Per facing N, E, S, W: the step forward.
_FX = np.array([FORWARD[f][0] for f in Facing], np.intp)
_FY = np.array([FORWARD[f][1] for f in Facing], np.intp)


def _view_offsets() -> tuple[np.ndarray, np.ndarray]:
    """Per facing, the (dy, dx) of the 169 viewport cells from the agent, in the wire's row-major order."""
    r = np.arange(VIEW_SIZE)[:, None]
    col = np.arange(VIEW_SIZE)[None, :]
    dys, dxs = np.zeros((4, VIEW_CELLS), np.intp), np.zeros((4, VIEW_CELLS), np.intp)
    for f in Facing:
        (fx, fy), (rx, ry) = FORWARD[f], RIGHTWARD[f]
        dxs[f] = ((VIEW_AGENT_ROW - r) * fx + (col - VIEW_AGENT_COL) * rx).reshape(-1)
        dys[f] = ((VIEW_AGENT_ROW - r) * fy + (col - VIEW_AGENT_COL) * ry).reshape(-1)
    return dys, dxs


_DY, _DX = _view_offsets()


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


#: The backends and the variable that turns numba off, as `backends` defines them for every Rezzo step.
BACKENDS, NO_NUMBA_VARIABLE = backends.BACKENDS, backends.NO_NUMBA_VARIABLE


@functools.cache
def _kernels() -> batched_kernel.Kernels:
    """The compiled loops of `batched_kernel`, loaded once per process (ImportError without numba)."""
    from cellarena.server.games.rezzo.batch import batched_kernel

    return batched_kernel.Kernels()


@functools.cache
def numba_available() -> bool:
    """Whether the numba backend can run here (numba installed and importable). Known once per
    process: without numba, each try to import it searches the path again (some 45 µs), and the
    match server asks for every match that waits for a batch, every tick."""
    try:
        _kernels()
    except ImportError:
        return False
    return True


def resolve_backend(name: str) -> str:
    """``name`` as the backend a batch made with it runs: "numpy" or "numba"."""
    return backends.resolve(name, numba_available, "BatchedRezzo")


def _tables(players: int) -> dict[str, np.ndarray]:
    """The lookup tables for ``players`` players: which codes can be hit, and what a photon becomes by
    the OR of its flag-or-geyser neighbours' owner bits (one owner o: o's flag; none or several: wire)."""
    c = np.arange(256)
    owner = c & 7
    is_flag = (c >= Cell.FLAG) & (c < Cell.GEYSER) & (owner < players)
    m = np.arange(256)
    single = (m != 0) & ((m & (m - 1)) == 0)
    lowest = np.array([(int(v) & -int(v)).bit_length() - 1 if v else 0 for v in m])
    hittable = np.isin(c, [Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL]) | is_flag
    return {
        "photon": np.where(single, Cell.FLAG + lowest, Cell.CONDUCTOR).astype(np.uint8),
        "hittable": hittable,
    }


class BatchedRezzo:
    """B bounded Rezzo worlds of one shape, player count and agents per player, stepped together.

    World b's agent of player p with index k is agent ``p * K + k``. `step` does for every world that
    is not done what `RezzoEngine.apply` does: that world's agent phase, then the next transition and
    loss processing. `views` gives every agent's viewport as a bot would receive it.

    ``events``: whether each step's game events (`events`, as `RezzoEngine.apply` reports them) and
    the losers' causes are made.

    ``backend``: "numba" runs the transition, viewports and agent phase as compiled loops (`batched_kernel`),
    "numpy" as the array passes below; "auto" picks numba where it is installed, unless the
    environment variable CELLARENA_NO_NUMBA is 1. Both give the same results bit for bit.

    ``threads``: with numba, the worlds are split into this many runs stepped on as many threads at
    once (`batched_parallel`); the results are the same as on one. Starting them costs some tens of
    microseconds per loop, so it pays for large batches (`RezzoVectorEnv` decides); the match
    server's batches stay on its one thread.
    """

    def __init__(
        self, engines: Sequence[RezzoEngine], *, backend: str = "auto", events: bool = True, threads: int = 1
    ) -> None:
        #: "numpy" or "numba", as resolved from ``backend``.
        self.backend = resolve_backend(backend)
        if not engines:
            raise ValueError("a batch needs at least one world")
        if threads < 1:
            raise ValueError(f"threads must be 1 or more, got {threads}")
        #: The threads the numba loops run on (1 on numpy; at most one per world).
        self.threads = 1 if self.backend == "numpy" else min(threads, len(engines))
        self._parallel: batched_parallel.ParallelKernels | None = None
        first = engines[0]
        if first.torus:
            raise ValueError("only bounded worlds can be batched (torus is not supported)")
        self.batch = len(engines)
        self.height, self.width, self.players = first.height, first.width, first.players
        self.agents_per_player = max(1, *(e.agents_per_player for e in engines))
        self.n_agents = self.players * self.agents_per_player
        self.own_base_counts = first.world.own_base_counts
        b, n, p = self.batch, self.n_agents, self.players
        self.ph, self.pw = self.height + 2 * BORDER, self.width + 2 * BORDER
        self.plane = self.ph * self.pw
        self.vph, self.vpw = self.height + 2 * MARGIN, self.width + 2 * MARGIN
        self._t = _tables(p)
        self.codes = np.full((b, self.plane), Cell.OOB, np.uint8)
        self.dmg = np.zeros((b, self.plane), np.uint8)
        # Per-cell bits of the players against whose flags a base lies in the 3x3 block (static).
        self._near = np.zeros((b, self.plane), np.uint8)
        self._near_any = np.zeros((b, self.plane), bool)
        self.x = np.zeros((b, n), np.intp)
        self.y = np.zeros((b, n), np.intp)
        self.facing = np.zeros((b, n), np.intp)
        self.alive = np.zeros((b, n), bool)
        self.tick = np.zeros(b, np.int64)
        self.max_ticks = np.zeros(b, np.int64)
        self.player_alive = np.zeros((b, p), bool)
        self.lost_at = np.zeros((b, p), np.int64)
        #: Per world, its ranks once done (1 is best), else 0.
        self.ranks = np.zeros((b, p), np.int64)
        self.done = np.zeros(b, bool)
        #: Illegal moves per world and player since the last `clear_counts`.
        self.illegal = np.zeros((b, p), np.int64)
        #: Per world and player, the agents that could not move in the last `step` (an advance or build
        #: refused: the cell in front not blank), as `RezzoEngine.apply`'s ``blocked`` events count them.
        self.blocked = np.zeros((b, p), np.int64)
        #: Per world, the game events of its last `step` (`Events.log`, as `RezzoEngine.apply` gives
        #: them, bit for bit), and each loser's cause (`engine.loss_events`).
        #: Whether `step` makes them: building them costs about as much as the numba step itself in a
        #: busy duel (a training loop that does not read them turns them off).
        self.record_events = events
        self.events: list[list[dict[str, Any]]] = [[] for _ in range(b)]
        self.lost_causes: list[dict[int, dict[str, Any]]] = [{} for _ in range(b)]
        self._with_events: set[int] = set()
        # Per agent whose hit blanked a cell this step: the cell (flat, in its world's state) and the
        # code it held; -1 elsewhere. The transition's flags found: rows (world, cell, kind, owner).
        self.cuts = np.full((b, n, 2), -1, np.int64)
        self._found = np.zeros((2 * self.plane + 16 * b + 1, 4), np.int64)
        self._found_np: list[tuple[np.ndarray, int, np.ndarray]] = []
        # The transition runs on chunks of worlds whose scratch fits in the CPU caches. A chunk is one
        # flat run of its worlds' states ("span"), and its "inner" part leaves out the first and last
        # row, so that every inner cell has its 3x3 block in the span; contiguous 1-D arrays take
        # numpy's fastest loops. Inner cells include the border rows between two worlds: those are
        # OOB, which no rule changes, so what their blocks read across the seam does not matter.
        self.chunk = c = min(b, CHUNK)
        span, inner = c * self.plane, c * self.plane - 2 * self.pw
        self._v = np.zeros(span, np.uint8)
        self._hs = np.zeros(span, np.uint8)
        self._hf = np.zeros(span, bool)
        self._s = np.zeros(inner, np.uint8)
        self._es = np.zeros(inner, np.uint8)
        self._fm = np.zeros(inner, bool)
        # Per-cell masks over the span (electron, tail, flag-or-geyser); scratch for the rest.
        self._is_e = np.zeros(span, bool)
        self._is_t = np.zeros(span, bool)
        self._is_fg = np.zeros(span, bool)
        self._u1 = np.zeros(span, np.uint8)
        self._u2 = np.zeros(inner, np.uint8)
        self._m1 = np.zeros(inner, bool)
        self._m2 = np.zeros(inner, bool)
        self._is_flag = np.zeros(inner, bool)
        self._new = np.zeros(inner, np.uint8)
        self._loss_any = np.zeros(b, np.uint8)
        self._kernel_scratch = np.zeros((5, -(-self.plane // 8) * 8), np.uint8)
        # Per viewer player, every code as its bot sees it: `_relative` itself, so both backends agree.
        self._relative_table = np.tile(np.arange(256, dtype=np.uint8), (p, 1))
        for viewer in range(1, p):
            row = self._relative_table[viewer : viewer + 1]
            self._relative(
                row, viewer, (np.empty_like(row), np.empty(row.shape, bool), np.empty(row.shape, bool))
            )
        # The 8 neighbours of a cell, as flat offsets.
        self._around = np.array(
            [dy * self.pw + dx for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx], np.intp
        )
        self._rows = np.arange(b, dtype=np.intp)
        self._world_base = self._rows * self.plane
        self._codes_in = self.codes.reshape(b, self.ph, self.pw)[:, 1:-1, 1:-1]
        self._dmg_in = self.dmg.reshape(b, self.ph, self.pw)[:, 1:-1, 1:-1]
        if self.backend == "numpy":  # numba needs none of these index arrays (about 3 KB per agent)
            self._numpy_view_scratch()
        #: Every agent's viewport as (B, N, 2, 169): cell codes, then damage, as the wire sends them.
        self.observations = np.zeros((b, n, 2, VIEW_CELLS), np.uint8)
        self.view_codes = self.observations[:, :, 0]
        self.view_damage = self.observations[:, :, 1]
        if self.threads > 1:
            from cellarena.server.games.rezzo.batch import batched_parallel

            self._parallel = batched_parallel.ParallelKernels(b, self.plane, self.threads)
        for i, engine in enumerate(engines):
            self.load(i, engine)

    def _numpy_view_scratch(self) -> None:
        """The numpy backend's viewport index arrays, and its scratch for relative owners."""
        b, n = self.batch, self.n_agents
        self._vi = np.zeros((b, n, VIEW_CELLS), np.intp)
        self._vkey = np.zeros((b, n), np.intp)
        positions = self.height * self.width * 4
        if positions * VIEW_CELLS <= VIEW_TABLE_MAX:
            # One row of 169 flat cell indices (within a world's state) per position and facing; cells
            # off the world read the state's corner, which is OOB with no damage.
            self._view_table: np.ndarray | None = _view_table(self.height, self.width)
            # Rows of `_vi` are rebuilt only for agents whose position or facing changed.
            self._vkey_before = np.full((b, n), -1, np.intp)
            self._vchanged = np.zeros((b, n), bool)
            self._vrows = np.zeros((b * n, VIEW_CELLS), np.intp)
            self._vbase = np.repeat(self._world_base, n)
        else:
            # Too many positions for a table: a copy of the worlds inside a border a viewport wide.
            self._view_table = None
            self._view_offsets = _DY * self.vpw + _DX
            self._voff = np.zeros((b, n, VIEW_CELLS), np.intp)
            self._vgrid = np.full((b, self.vph, self.vpw), Cell.OOB, np.uint8)
            self._vdmg = np.zeros((b, self.vph, self.vpw), np.uint8)
            m = MARGIN
            self._vgrid_in = self._vgrid[:, m : m + self.height, m : m + self.width]
            self._vdmg_in = self._vdmg[:, m : m + self.height, m : m + self.width]
            self._vworld_base = self._rows * self.vph * self.vpw
        # Owners relative to the viewer, for the agents of one player at a time (player 0's need none).
        k = self.agents_per_player
        self._rel_o = np.zeros((b, k, VIEW_CELLS), np.uint8)
        self._rel_owned = np.zeros((b, k, VIEW_CELLS), bool)
        self._rel_wraps = np.zeros((b, k, VIEW_CELLS), bool)

    # ----------------------------------------------------------------- loading and reading
    def _interior(self, arr: np.ndarray, b: int) -> np.ndarray:
        m = BORDER
        return arr[b].reshape(self.ph, self.pw)[m : m + self.height, m : m + self.width]

    def load(self, b: int, engine: RezzoEngine) -> None:
        """Put ``engine``'s state (at its decision point, every player still in) into slot ``b``."""
        if (engine.height, engine.width, engine.players) != (self.height, self.width, self.players):
            raise ValueError("every world of a batch needs the same size and number of players")
        if engine.torus:
            raise ValueError("only bounded worlds can be batched (torus is not supported)")
        frame = engine.frame()
        if len(frame["alive"]) != self.players or engine.result() is not None:
            raise ValueError("only worlds in which every player is still in can be loaded")
        self._interior(self.codes, b)[:] = engine.world.codes_view()
        self._interior(self.dmg, b)[:] = engine.damage()
        self.alive[b] = False
        for a in engine.agents():
            if a.index >= self.agents_per_player:
                raise ValueError("every world of a batch needs the same number of agents per player")
            i = a.player * self.agents_per_player + a.index
            self.x[b, i], self.y[b, i], self.facing[b, i], self.alive[b, i] = a.x, a.y, int(a.facing), a.alive
        self.tick[b], self.max_ticks[b] = engine.tick, engine.max_ticks
        self.player_alive[b], self.lost_at[b], self.ranks[b] = True, 0, 0
        self.done[b] = False
        self.illegal[b] = 0
        self.events[b], self.lost_causes[b] = [], {}
        self._update_near(b)

    def restore(self, worlds: np.ndarray, template: BatchedRezzo) -> None:
        """Make each world in ``worlds`` (indices) a copy of ``template``'s world 0: an auto-reset."""
        if (template.plane, template.n_agents) != (self.plane, self.n_agents):
            raise ValueError("the template needs the batch's world size and agents")
        for name in (
            "codes",
            "dmg",
            "_near",
            "_near_any",
            "x",
            "y",
            "facing",
            "alive",
            "tick",
            "max_ticks",
            "done",
        ):
            getattr(self, name)[worlds] = getattr(template, name)[0]
        for name in ("player_alive", "lost_at", "ranks", "illegal"):
            getattr(self, name)[worlds] = getattr(template, name)[0]
        for b in np.arange(self.batch)[worlds].tolist():
            self.events[b], self.lost_causes[b] = [], {}

    def cells(self, b: int) -> np.ndarray:
        """World ``b`` as (H, W) public codes with absolute owners (a copy)."""
        return self._interior(self.codes, b).copy()

    def damage(self, b: int) -> np.ndarray:
        return self._interior(self.dmg, b).copy()

    def _update_near(self, b: int) -> None:
        """Bit o of a cell: a base that counts against player o's flags lies in its 3x3 block."""
        grid = self.codes[b].reshape(self.ph, self.pw)
        p = self.players
        bits = np.zeros((self.ph, self.pw), np.uint8)
        is_base = (grid >= Cell.BASE) & (grid < Cell.BASE + p)
        owner = grid & 7
        for o in range(p):
            counts = is_base if self.own_base_counts else is_base & (owner != o)
            bits |= counts.astype(np.uint8) << o
        near = bits.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                near[1:-1, 1:-1] |= bits[1 + dy : self.ph - 1 + dy, 1 + dx : self.pw - 1 + dx]
        self._near[b] = near.reshape(-1)
        np.not_equal(self._near[b], 0, out=self._near_any[b])

    # ----------------------------------------------------------------- viewports
    def views(self) -> tuple[np.ndarray, np.ndarray]:
        """Every agent's viewport in every world: cell codes (owners relative to the viewer) and damage.

        Two (B, N, 169) views of `observations` (B, N, 2, 169), refilled in place by each call; rows of
        dead agents hold stale data.
        """
        if self.backend == "numba":
            self._kernel_views(self._rows, self.observations)
            return self.view_codes, self.view_damage
        vi, codes, dmg = self._view_indices()
        np.take(codes, vi, out=self.view_codes, mode="clip")
        np.take(dmg, vi, out=self.view_damage, mode="clip")
        k = self.agents_per_player
        scratch = (self._rel_o, self._rel_owned, self._rel_wraps)
        for viewer in range(1, self.players):
            self._relative(self.view_codes[:, viewer * k : (viewer + 1) * k], viewer, scratch)
        return self.view_codes, self.view_damage

    def views_of(self, worlds: np.ndarray) -> np.ndarray:
        """The viewports of the worlds ``worlds`` (indices) only, as a new (len, N, 2, 169) array: the
        last observations of worlds that just ended, before they are reset."""
        if self.backend == "numba":
            rows = np.arange(self.batch)[worlds]  # indices, as numpy indexing reads them (or a mask)
            out = np.empty((len(rows), self.n_agents, 2, VIEW_CELLS), np.uint8)
            self._kernel_views(rows, out)
            return out
        vi, codes, dmg = self._view_indices()
        rows = vi[worlds]
        out = np.empty((len(rows), self.n_agents, 2, VIEW_CELLS), np.uint8)
        np.take(codes, rows, out=out[:, :, 0], mode="clip")
        np.take(dmg, rows, out=out[:, :, 1], mode="clip")
        k = self.agents_per_player
        for viewer in range(1, self.players):
            part = out[:, viewer * k : (viewer + 1) * k, 0]
            scratch = (np.empty(part.shape, np.uint8), np.empty(part.shape, bool), np.empty(part.shape, bool))
            self._relative(part, viewer, scratch)
        return out

    def _kernel_views(self, worlds: np.ndarray, out: np.ndarray) -> None:
        state = (self.codes, self.dmg, self.x, self.y, self.facing)
        size = (self.height, self.width)
        kernels = _kernels() if self._parallel is None else self._parallel
        kernels.views(state, worlds, size, self._relative_table, self.agents_per_player, out)

    def _view_indices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (B, N, 169) flat indices of every viewport's cells, and the code and damage arrays they
        index (the state itself, or its copy inside a viewport-wide border)."""
        key, vi = self._vkey, self._vi
        if self._view_table is not None:
            np.multiply(self.y, self.width, out=key)
            np.add(key, self.x, out=key)
            np.multiply(key, 4, out=key)
            np.add(key, self.facing, out=key)
            np.not_equal(key, self._vkey_before, out=self._vchanged)
            at = np.flatnonzero(self._vchanged)
            if at.size:
                rows = self._vrows[: at.size]
                np.take(self._view_table, key.reshape(-1)[at], axis=0, out=rows, mode="clip")
                np.add(rows, self._vbase[at, None], out=rows)
                vi.reshape(-1, VIEW_CELLS)[at] = rows
                np.copyto(self._vkey_before, key)
            return vi, self.codes.reshape(-1), self.dmg.reshape(-1)
        np.copyto(self._vgrid_in, self._codes_in)
        np.copyto(self._vdmg_in, self._dmg_in)
        np.add(self.y, MARGIN, out=key)
        np.multiply(key, self.vpw, out=key)
        np.add(key, self.x, out=key)
        np.add(key, MARGIN + self._vworld_base[:, None], out=key)
        np.take(self._view_offsets, self.facing, axis=0, out=self._voff, mode="clip")
        np.add(self._voff, key[:, :, None], out=vi)
        return vi, self._vgrid.reshape(-1), self._vdmg.reshape(-1)

    def _relative(
        self, codes: np.ndarray, viewer: int, scratch: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> None:
        """Owned codes (8 and up) in place with owner o made (o - viewer) mod players: arithmetic on
        bytes, as a lookup table costs several passes. ``scratch``: arrays of ``codes``' shape."""
        u8, (o, owned, wraps) = np.uint8, scratch
        np.greater_equal(codes, _AGENT, out=owned)
        if self.players == 2:  # the other player's owner bit flips
            np.bitwise_xor(codes, owned.view(u8), out=codes)
            return
        np.bitwise_and(codes, 7, out=o)
        np.less(o, viewer, out=wraps)
        np.bitwise_and(wraps, owned, out=wraps)
        np.multiply(owned.view(u8), viewer, out=o)
        np.subtract(codes, o, out=codes)
        np.multiply(wraps.view(u8), self.players, out=o)
        np.add(codes, o, out=codes)

    # ----------------------------------------------------------------- the step
    def step(self, moves: np.ndarray, worlds: np.ndarray | None = None) -> np.ndarray:
        """Every running world's agent phase with ``moves`` (B, N), then its next transition and losses.

        ``worlds``: a (B,) mask of the worlds to step (default: all); the others stay as they are.
        Move codes that are not moves are no-ops. Returns the (B,) mask of worlds that ended in this call.
        """
        running = ~self.done if worlds is None else worlds & ~self.done
        moves = np.asarray(moves)
        for world in self._with_events:
            self.events[world] = []
        self._with_events = set()
        self.cuts.fill(-1)
        self.blocked.fill(0)
        if self.backend == "numba" and moves.dtype.kind in "iu":
            # Any integer codes as int64 (one compiled loop; out-of-range codes stay no move).
            state = (self.codes, self.dmg, self.x, self.y, self.facing, self.alive, self.tick)
            shape = (self.players, self.agents_per_player, self.pw)
            codes = moves.astype(np.int64, copy=False)
            kernels = _kernels() if self._parallel is None else self._parallel
            counts = (self.illegal, self.blocked)
            kernels.agent_phase(state, codes, running, shape, self._t["hittable"], counts, self.cuts)
        else:
            self._agent_phase(moves, running)
        if self.record_events:
            self._hit_events()
            self._blocked_events()
        capped = running & (self.tick >= self.max_ticks)
        advancing = running & ~capped
        ended = capped.copy()
        for b in np.flatnonzero(capped):
            self._finish(int(b))
        self._transition(advancing)
        for b in np.flatnonzero(advancing & (self.tick > self.max_ticks)):
            if not self.done[b]:
                self._finish(int(b))
        ended |= advancing & self.done
        return ended

    def _agent_phase(self, moves: np.ndarray, running: np.ndarray) -> None:
        p, k_n = self.players, self.agents_per_player
        rows = self._rows
        flat, dmg = self.codes.reshape(-1), self.dmg.reshape(-1)
        hittable = self._t["hittable"]
        first = self.tick % p
        for k in range(k_n):
            for i in range(p):
                player = (first + i) % p
                a = player * k_n + k
                m = moves[rows, a]
                act = running & self.alive[rows, a] & (m != _NOOP)
                if not act.any():
                    continue
                f = self.facing[rows, a]
                f = np.where(act & (m == _LEFT), (f + 3) % 4, f)
                f = np.where(act & (m == _RIGHT), (f + 1) % 4, f)
                self.facing[rows, a] = f
                x, y = self.x[rows, a], self.y[rows, a]
                here = self._world_base + (y + BORDER) * self.pw + x + BORDER
                front = here + _FY[f] * self.pw + _FX[f]
                target = flat[front]
                walk = act & ((m == _ADVANCE) | (m == _BUILD))
                ok_walk = walk & (target == _BLANK)
                hit = act & (m == _HIT)
                ok_hit = hit & hittable[target]
                blocked = walk & ~ok_walk
                bad = blocked | (hit & ~ok_hit)
                if bad.any():
                    np.add.at(self.illegal, (rows[bad], player[bad]), 1)
                    np.add.at(self.blocked, (rows[blocked], player[blocked]), 1)
                if ok_walk.any():
                    w = np.flatnonzero(ok_walk)
                    flat[front[w]] = _AGENT + player[w]
                    flat[here[w]] = np.where(m[w] == _BUILD, _CONDUCTOR, _BLANK)
                    dmg[here[w]] = 0
                    aw = a[w]
                    self.x[w, aw] += _FX[f[w]]
                    self.y[w, aw] += _FY[f[w]]
                if ok_hit.any():
                    h = front[ok_hit]
                    cut = dmg[h] >= MAX_DAMAGE
                    if cut.any():
                        wc = np.flatnonzero(ok_hit)[cut]
                        self.cuts[wc, a[wc], 0] = front[wc] - self._world_base[wc]
                        self.cuts[wc, a[wc], 1] = target[wc]
                    flat[h[cut]] = _BLANK
                    dmg[h] = np.where(cut, 0, dmg[h] + 1)

    def last_events(self) -> dict[int, list[dict[str, Any]]]:
        """The events of the last `step`, by world, for the worlds that had any."""
        return {b: self.events[b] for b in sorted(self._with_events) if self.events[b]}

    def _cell(self, flat: int) -> tuple[int, int]:
        """(x, y) of a cell given by its index in a world's state."""
        y, x = divmod(flat, self.pw)
        return x - BORDER, y - BORDER

    def _hit_events(self) -> None:
        """The agent phase's events from `cuts`, in `RezzoEngine.apply`'s order (by cell)."""
        worlds, agents = np.nonzero(self.cuts[:, :, 0] >= 0)
        if not worlds.size:
            return
        k = self.agents_per_player
        for b, a in zip(worlds.tolist(), agents.tolist(), strict=True):
            flat, code = self.cuts[b, a].tolist()
            x, y = self._cell(flat)
            self.events[b].append(hit_event(int(self.tick[b]), a // k, x, y, code))
            self._with_events.add(b)
        for b in set(worlds.tolist()):
            self.events[b].sort(key=lambda e: (e["cell"][1], e["cell"][0]))

    def _blocked_events(self) -> None:
        """One ``blocked`` event per world and player whose agents could not move, by seat, after the
        agent phase's hits (as `RezzoEngine.apply` orders them)."""
        worlds, players = np.nonzero(self.blocked)
        for b, p, n in zip(
            worlds.tolist(), players.tolist(), self.blocked[worlds, players].tolist(), strict=True
        ):
            self.events[b].append(blocked_event(int(self.tick[b]), p, n))
            self._with_events.add(b)

    def _flag_events(self, rows: np.ndarray) -> None:
        """The transition's events from the flags it touched, ``rows`` of (world, cell, kind, owner)
        of the advancing worlds, and each new loser's ``out`` and cause; before loss conversion."""
        by_world: dict[int, list[tuple[int, int, int, int]]] = {}
        for b, flat, kind, owner in rows.tolist():
            x, y = self._cell(flat)
            by_world.setdefault(b, []).append((kind, owner, x, y))
        size = (self.width, self.height, False)
        p = self.players
        for b, found in by_world.items():
            tick = int(self.tick[b])
            bases: list[tuple[int, int, int]] = []
            if any(f[0] == AT_BASE for f in found):
                grid = self._interior(self.codes, b)
                ys, xs = np.nonzero((grid >= Cell.BASE) & (grid < Cell.BASE + p))
                bases = [(int(x), int(y), int(grid[y, x]) & 7) for y, x in zip(ys, xs, strict=True)]
            log = self.events[b]
            log.extend(transition_events(found, tick, bases, self.own_base_counts, size))
            self._with_events.add(b)
            mask = int(self._loss_any[b])
            if mask:
                losers = [o for o in range(p) if mask >> o & 1]
                loss_events(log, losers, tick, self.lost_causes[b])

    def _transition(self, advancing: np.ndarray) -> None:
        """The CA transition and loss processing of every world (those not advancing are put back).

        Only elementwise ufuncs on preallocated arrays (a table `take` costs ~20 of them): the next
        code is the old one plus per-rule differences, e.g. conductor 1 -> electron 2 adds 1.
        """
        if self._parallel is not None:
            rows = self._parallel.transition(
                self.codes, self._near, advancing, self.pw, self._t["photon"], self._loss_any
            )
        elif self.backend == "numba":
            photon, scratch = self._t["photon"], self._kernel_scratch
            found, start, parts = self._found, 0, []
            while True:
                found[0, 0] = 0
                start = _kernels().transition(
                    self.codes, self._near, advancing, self.pw, photon, self._loss_any, scratch, start, found
                )
                parts.append(found[1 : found[0, 0] + 1].copy())
                if start >= self.batch:
                    break
            rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
        else:
            self._found_np = []
            for c0 in range(0, self.batch, self.chunk):
                self._transition_chunk(c0, min(self.batch, c0 + self.chunk), advancing)
            rows = self._numpy_found(advancing)
        self.tick[advancing] += 1
        if rows.size and self.record_events:
            self._flag_events(rows)
        lost = advancing & (self._loss_any != 0)
        for b in np.flatnonzero(lost):
            self._process_losses(int(b), int(self._loss_any[b]))

    def _numpy_found(self, advancing: np.ndarray) -> np.ndarray:
        """The numpy chunks' flags found, as the kernel's rows (world, cell, kind, owner), of the
        advancing worlds only (a chunk computes every world of it)."""
        if not self._found_np:
            return np.zeros((0, 4), np.int64)
        flat = np.concatenate([f for f, _, _ in self._found_np])
        kind = np.concatenate([np.full(len(f), k, np.int64) for f, k, _ in self._found_np])
        owner = np.concatenate([o.astype(np.int64) for _, _, o in self._found_np])
        world = flat // self.plane
        keep = advancing[world]
        return np.stack([world, flat % self.plane, kind, owner], axis=1)[keep]

    def _transition_chunk(self, c0: int, c1: int, advancing: np.ndarray) -> None:
        """`_transition` for worlds c0..c1-1; losses are only detected here, into ``_loss_any``.

        About 39 passes over the chunk, none of them a variable shift or a table lookup (each costs
        several passes); photons and losses, which are rare, are resolved cell by cell.
        """
        u8, pw, plane = np.uint8, self.pw, self.plane
        band, bor, add, sub, eq, less = np.bitwise_and, np.bitwise_or, np.add, np.subtract, np.equal, np.less
        length = (c1 - c0) * plane
        n = length - 2 * pw
        base = c0 * plane
        span = self.codes.reshape(-1)[base : base + length]
        inner = span[pw : length - pw]
        is_e, is_t, is_fg, u1 = (
            self._is_e[:length],
            self._is_t[:length],
            self._is_fg[:length],
            self._u1[:length],
        )
        v, hs, hf = self._v[:length], self._hs[:length], self._hf[:length]
        s, fm, m1, m2, u2, es = (
            self._s[:n],
            self._fm[:n],
            self._m1[:n],
            self._m2[:n],
            self._u2[:n],
            self._es[:n],
        )
        is_flag, new = self._is_flag[:n], self._new[:n]
        # Per cell: electrons count 1 and tails 16 (one 3x3 sum gives both counts, at most 9 each), and
        # whether it is a flag or geyser (codes 16..31). OOB (7) and blank give nothing.
        eq(span, _ELECTRON, out=is_e)
        eq(span, _TAIL, out=is_t)
        np.multiply(is_t.view(u8), 16, out=v)
        add(v, is_e.view(u8), out=v)
        sub(span, _FLAG, out=u1)
        less(u1, 16, out=is_fg)
        # 3x3 sums and ORs: a row pass, then a column pass. Row ends fall in the OOB border.
        hs[0] = hs[-1] = 0
        hf[0] = hf[-1] = False
        add(v[:-2], v[1:-1], out=hs[1:-1])
        add(hs[1:-1], v[2:], out=hs[1:-1])
        bor(is_fg[:-2], is_fg[1:-1], out=hf[1:-1])
        bor(hf[1:-1], is_fg[2:], out=hf[1:-1])
        add(hs[:n], hs[pw : pw + n], out=s)
        add(s, hs[2 * pw :], out=s)
        bor(hf[:n], hf[pw : pw + n], out=fm)
        bor(fm, hf[2 * pw :], out=fm)
        band(s, 15, out=es)  # electron neighbours (the centre is no electron where it matters)
        # conductor -> electron with 1 or 2 electron neighbours: + 1
        sub(es, 1, out=u2)  # 0 electrons wraps to 255
        less(u2, 2, out=m1)
        eq(inner, _CONDUCTOR, out=m2)
        band(m1, m2, out=m1)
        add(inner, m1.view(u8), out=new)
        # electron -> tail (+1), or photon (+2) beside a tail and a flag or geyser
        e_in, t_in = is_e[pw : pw + n], is_t[pw : pw + n]
        add(new, e_in.view(u8), out=new)
        np.greater(s, 15, out=m1)
        band(m1, fm, out=m1)
        band(m1, e_in, out=m1)
        add(new, m1.view(u8), out=new)
        # tail 3 -> conductor 1
        sub(new, t_in.view(u8), out=new)
        sub(new, t_in.view(u8), out=new)
        # flag (codes 16..23) -> conductor next to an electron: minus (code - 1). Arithmetic, as a
        # masked copy (`copyto(where=)`) costs 2 to 60 passes, the more the more cells it writes.
        sub(inner, _FLAG, out=u2)
        less(u2, 8, out=is_flag)
        np.not_equal(es, 0, out=m1)
        band(m1, is_flag, out=m1)
        if m1.any():  # flags burnt by an electron (events)
            at = np.flatnonzero(m1)
            self._found_np.append((base + pw + at, BURNT, inner[at] & 7))
        add(u2, _FLAG - _CONDUCTOR, out=u2)
        np.multiply(u2, m1.view(u8), out=u2)
        sub(new, u2, out=new)
        # Losses are judged on the state before the transition: flags next to a base (rare).
        self._loss_any[c0:c1] = 0
        band(is_flag, self._near_any.reshape(-1)[base + pw : base + pw + n], out=m1)
        if m1.any():
            self._detect_losses(base + pw + np.flatnonzero(m1))
        # photon -> the flag of its single flag-or-geyser owner, else conductor (photons are few)
        eq(inner, _PHOTON, out=m1)
        if m1.any():
            at = np.flatnonzero(m1)
            new[at] = became = self._photons(base + pw + at)
            flags = became >= _FLAG
            if flags.any():
                self._found_np.append((base + pw + at[flags], FORMED, became[flags] & 7))
        moving = advancing[c0:c1]
        if moving.all():
            np.copyto(inner, new)
        else:
            # World j's rows 1..ph-2 lie at inner[j * plane : (j + 1) * plane - 2 * pw].
            for j in np.flatnonzero(moving):
                lo = int(j) * plane
                inner[lo : lo + plane - 2 * pw] = new[lo : lo + plane - 2 * pw]

    def _detect_losses(self, flat: np.ndarray) -> None:
        """Set each world's bit of every player with a flag at ``flat`` (indices into the flat codes)
        next to a base that counts against it."""
        owner = self.codes.reshape(-1)[flat] & 7
        counts = (self._near.reshape(-1)[flat] >> owner) & 1 != 0
        worlds = flat[counts] // self.plane
        np.bitwise_or.at(self._loss_any, worlds, (1 << owner[counts]).astype(np.uint8))
        if counts.any():
            self._found_np.append((flat[counts], AT_BASE, owner[counts]))

    def _photons(self, flat: np.ndarray) -> np.ndarray:
        """What the photons at ``flat`` (indices into the flat codes) become: the flag of their single
        flag-or-geyser owner, else conductors."""
        around = self.codes.reshape(-1)[flat[:, None] + self._around]
        fg = (around >= _FLAG) & (around < _BASE)
        bits = np.bitwise_or.reduce(np.where(fg, 1 << (around & 7), 0), axis=1)
        result: np.ndarray = self._t["photon"][bits]
        return result

    def _process_losses(self, b: int, mask: int) -> None:
        """Loss conversion of world ``b`` for the players in bit ``mask``, on the new state."""
        losers = [o for o in range(self.players) if mask >> o & 1]
        grid, dmg = self.codes[b], self.dmg[b]
        for o in losers:
            grid[grid == Cell.FLAG + o] = Cell.CONDUCTOR
            for kind in (Cell.AGENT, Cell.GEYSER, Cell.BASE):
                grid[grid == kind + o] = Cell.BLANK
            lo, hi = o * self.agents_per_player, (o + 1) * self.agents_per_player
            for i in range(lo, hi):
                if self.alive[b, i]:
                    dmg[(self.y[b, i] + BORDER) * self.pw + self.x[b, i] + BORDER] = 0
            self.alive[b, lo:hi] = False
            self.player_alive[b, o] = False
            self.lost_at[b, o] = self.tick[b]
        self._update_near(b)
        if self.player_alive[b].sum() <= 1:
            self._finish(b)

    def _finish(self, b: int) -> None:
        """Ranks of world ``b`` as `RezzoEngine` gives them: survivors first, then by how late they lost."""
        key = np.where(self.player_alive[b], self.tick[b] + 1, self.lost_at[b])
        self.ranks[b] = 1 + (key[None, :] > key[:, None]).sum(axis=1)
        self.done[b] = True

    def winner(self, b: int) -> int | None:
        """The winner of finished world ``b``, or None for a draw (or a world still running)."""
        firsts = np.flatnonzero(self.ranks[b] == 1)
        return int(firsts[0]) if self.done[b] and firsts.size == 1 else None
