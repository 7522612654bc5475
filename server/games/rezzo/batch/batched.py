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

Each of the three has its numpy module (`numpy_transition`, `numpy_agents`, `numpy_views`); this one
holds the worlds' state and drives them. Where numba is installed, they run as compiled loops instead
(`batched_kernel`, 3.5x the whole step at 1024 duels); the numpy code is the fallback and the
reference they are tested against.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell
from cellarena.server.games.rezzo import backends
from cellarena.server.games.rezzo.batch.cells import (
    BORDER,
    VIEW_CELLS,
)
from cellarena.server.games.rezzo.batch.numpy_agents import agent_phase
from cellarena.server.games.rezzo.batch.numpy_transition import NumpyTransition
from cellarena.server.games.rezzo.batch.numpy_views import NumpyViews, relative
from cellarena.server.games.rezzo.engine import (
    RezzoEngine,
    blocked_event,
    hit_event,
    loss_events,
    transition_events,
)
from cellarena.server.games.rezzo.planes import AT_BASE

if TYPE_CHECKING:
    from cellarena.server.games.rezzo.batch import batched_kernel, batched_parallel

#: Largest viewport index table (entries: positions x 4 facings x 169) kept per batch (16 MiB; a duel's
#: is 5.5 MiB); larger worlds copy themselves into a viewport-wide border every call instead.
VIEW_TABLE_MAX = 1 << 21


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


#: The arrays of a world's state, indexed by world first (what `BatchedRezzo.restore` copies).
_PER_WORLD = (
    *("codes", "dmg", "_near", "_near_any", "x", "y", "facing", "alive", "tick", "max_ticks", "done"),
    *("player_alive", "lost_at", "ranks", "illegal"),
)


def near_bases(grid: np.ndarray, players: int, own_base_counts: bool) -> np.ndarray:
    """Per cell of ``grid`` (a world's state in its border), bit o: a base that counts against player
    o's flags lies in its 3x3 block."""
    ph, pw = grid.shape
    bits = np.zeros((ph, pw), np.uint8)
    is_base = (grid >= Cell.BASE) & (grid < Cell.BASE + players)
    owner = grid & 7
    for o in range(players):
        counts = is_base if own_base_counts else is_base & (owner != o)
        bits |= counts.astype(np.uint8) << o
    near = bits.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            near[1:-1, 1:-1] |= bits[1 + dy : ph - 1 + dy, 1 + dx : pw - 1 + dx]
    return near


def _relative_table(players: int) -> np.ndarray:
    """Per viewer player, every code as its bot sees it: `relative` itself, so both backends agree."""
    table = np.tile(np.arange(256, dtype=np.uint8), (players, 1))
    for viewer in range(1, players):
        row = table[viewer : viewer + 1]
        relative(
            row, viewer, players, (np.empty_like(row), np.empty(row.shape, bool), np.empty(row.shape, bool))
        )
    return table


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
        self._allocate(engines, events)
        for i, engine in enumerate(engines):
            self.load(i, engine)

    def _allocate(self, engines: Sequence[RezzoEngine], events: bool) -> None:
        """Every array of the batch, and each backend's loops and scratch."""
        first = engines[0]
        self.batch = len(engines)
        self.height, self.width, self.players = first.height, first.width, first.players
        self.agents_per_player = max(1, *(e.agents_per_player for e in engines))
        self.n_agents = self.players * self.agents_per_player
        self.own_base_counts = first.world.own_base_counts
        b, n, p = self.batch, self.n_agents, self.players
        self.ph, self.pw = self.height + 2 * BORDER, self.width + 2 * BORDER
        self.plane = self.ph * self.pw
        self._t = _tables(p)
        self._world_arrays(b, n, p)
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
        self._loss_any = np.zeros(b, np.uint8)
        self._kernel_scratch = np.zeros((5, -(-self.plane // 8) * 8), np.uint8)
        self._numpy_transition = NumpyTransition(
            self.codes, self._near, self._near_any, self._t["photon"], self._loss_any, self.pw
        )
        self._relative_table = _relative_table(p)
        self._rows = np.arange(b, dtype=np.intp)
        self._numpy_views: NumpyViews | None = None
        if self.backend == "numpy":  # numba needs none of its index arrays (about 3 KB per agent)
            table = self.height * self.width * 4 * VIEW_CELLS <= VIEW_TABLE_MAX
            agents, size = (self.x, self.y, self.facing), (self.height, self.width, p)
            self._numpy_views = NumpyViews(self.codes, self.dmg, agents, size, self.agents_per_player, table)
        #: Every agent's viewport as (B, N, 2, 169): cell codes, then damage, as the wire sends them.
        self.observations = np.zeros((b, n, 2, VIEW_CELLS), np.uint8)
        self.view_codes = self.observations[:, :, 0]
        self.view_damage = self.observations[:, :, 1]
        if self.threads > 1:
            from cellarena.server.games.rezzo.batch import batched_parallel

            self._parallel = batched_parallel.ParallelKernels(b, self.plane, self.threads)

    def _world_arrays(self, b: int, n: int, p: int) -> None:
        """The state of ``b`` worlds of ``n`` agents and ``p`` players."""
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
        for name in _PER_WORLD:
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
        self._near[b] = near_bases(grid, self.players, self.own_base_counts).reshape(-1)
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
        assert self._numpy_views is not None
        self._numpy_views.fill(self.view_codes, self.view_damage)
        return self.view_codes, self.view_damage

    def views_of(self, worlds: np.ndarray) -> np.ndarray:
        """The viewports of the worlds ``worlds`` (indices) only, as a new (len, N, 2, 169) array: the
        last observations of worlds that just ended, before they are reset."""
        if self.backend == "numba":
            rows = np.arange(self.batch)[worlds]  # indices, as numpy indexing reads them (or a mask)
            out = np.empty((len(rows), self.n_agents, 2, VIEW_CELLS), np.uint8)
            self._kernel_views(rows, out)
            return out
        assert self._numpy_views is not None
        return self._numpy_views.of(worlds)

    def _kernel_views(self, worlds: np.ndarray, out: np.ndarray) -> None:
        state = (self.codes, self.dmg, self.x, self.y, self.facing)
        size = (self.height, self.width)
        kernels = _kernels() if self._parallel is None else self._parallel
        kernels.views((state, worlds, size, self._relative_table, self.agents_per_player, out))

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
        state = (self.codes, self.dmg, self.x, self.y, self.facing, self.alive, self.tick)
        shape = (self.players, self.agents_per_player, self.pw)
        counts = (self.illegal, self.blocked)
        if self.backend == "numba" and moves.dtype.kind in "iu":
            # Any integer codes as int64 (one compiled loop; out-of-range codes stay no move).
            codes = moves.astype(np.int64, copy=False)
            kernels = _kernels() if self._parallel is None else self._parallel
            kernels.agent_phase((state, codes, running, shape, self._t["hittable"], counts, self.cuts))
        else:
            agent_phase((state, moves, running, shape, self._t["hittable"], counts, self.cuts))
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
        """The CA transition and loss processing of every world (those not advancing are put back):
        compiled (`batched_kernel`, on one thread or several) or in numpy (`NumpyTransition`)."""
        args = (self.codes, self._near, advancing, self.pw, self._t["photon"], self._loss_any)
        if self._parallel is not None:
            rows = self._parallel.transition(args)
        elif self.backend == "numba":
            found, start, parts = self._found, 0, []
            while True:
                found[0, 0] = 0
                start = _kernels().transition(args, self._kernel_scratch, start, found)
                parts.append(found[1 : found[0, 0] + 1].copy())
                if start >= self.batch:
                    break
            rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
        else:
            rows = self._numpy_transition.run(advancing)
        self.tick[advancing] += 1
        if rows.size and self.record_events:
            self._flag_events(rows)
        lost = advancing & (self._loss_any != 0)
        for b in np.flatnonzero(lost):
            self._process_losses(int(b), int(self._loss_any[b]))

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
