"""`batched_kernel`'s loops on every core: the worlds split into one run per thread (numba's prange).

Worlds are independent within a step, so each thread steps its own run of worlds with the serial
loops themselves, on slices of the batch's arrays: the results are those of one thread, bit for bit.
What is shared is split too: each thread has its own transition scratch and its own buffer of flags
found, whose world indices it makes absolute before returning.

Imported only by `batched` for a batch asked to use more than one thread, since it imports numba
at once (the ``[rl]`` extra). Starting the threads costs some tens of microseconds per loop, so it
pays for large batches only (`cellarena bench env` measures both).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from cellarena.server.games.rezzo.batch import batched_kernel
from cellarena.server.games.rezzo.batch.batched_kernel import AgentPhase, Views
from cellarena.server.games.rezzo.batch.cells import AgentArgs, TransitionArgs, ViewArgs

batched_kernel.compile_called(numba)  # the functions the loops call, compiled before the loops
_transition = numba.njit(cache=True)(batched_kernel._transition)
_views = numba.njit(cache=True)(batched_kernel._views)
_agent_phase = numba.njit(cache=True)(batched_kernel._agent_phase)


@numba.njit(parallel=True, cache=True)
def _transition_runs(
    args: TransitionArgs, scratch: np.ndarray, bounds: np.ndarray, at: np.ndarray, found: np.ndarray
) -> None:
    """`batched_kernel._transition` per run r of worlds ``bounds[r]``..``bounds[r + 1]``, from world
    ``at[r]`` on, with ``scratch[r]`` and ``found[r]``; ``at[r]`` becomes where it stopped (the end
    of its run when done)."""
    codes, near, advancing, pw, photon, loss_any = args
    for r in numba.prange(bounds.shape[0] - 1):
        lo, hi = bounds[r], bounds[r + 1]
        if at[r] >= hi:
            continue
        f = found[r]
        run = (codes[lo:hi], near[lo:hi], advancing[lo:hi], pw, photon, loss_any[lo:hi])
        stop = _transition(run, scratch[r], at[r] - lo, f)
        at[r] = lo + stop
        for k in range(1, f[0, 0] + 1):
            f[k, 0] += lo


@numba.njit(parallel=True, cache=True)
def _views_runs(most: int, args: ViewArgs) -> None:
    """`batched_kernel._views` over ``most`` runs (fewer for fewer rows) of the rows of ``worlds``
    and ``out``."""
    state, worlds, size, relative, per_player, out = args
    n = worlds.shape[0]
    runs = max(1, min(most, n))
    for r in numba.prange(runs):
        lo, hi = r * n // runs, (r + 1) * n // runs
        _views((state, worlds[lo:hi], size, relative, per_player, out[lo:hi]))


@numba.njit(parallel=True, cache=True)
def _agent_phase_runs(bounds: np.ndarray, args: AgentArgs) -> None:
    """`batched_kernel._agent_phase` per run of worlds ``bounds[r]``..``bounds[r + 1]``."""
    (codes, dmg, x, y, facing, alive, tick), moves, running, shape, hittable, counts, cuts = args
    illegal, blocked = counts
    for r in numba.prange(bounds.shape[0] - 1):
        lo, hi = bounds[r], bounds[r + 1]
        run = (codes[lo:hi], dmg[lo:hi], x[lo:hi], y[lo:hi], facing[lo:hi], alive[lo:hi], tick[lo:hi])
        own = (illegal[lo:hi], blocked[lo:hi])
        _agent_phase((run, moves[lo:hi], running[lo:hi], shape, hittable, own, cuts[lo:hi]))


def threads_available() -> int:
    """The threads numba runs a parallel loop on here (NUMBA_NUM_THREADS, the cores, unless
    `numba.set_num_threads` asked for fewer)."""
    return int(numba.get_num_threads())


class ParallelKernels:
    """`batched_kernel.Kernels`' three loops over ``runs`` runs of a batch of ``batch`` worlds of
    ``plane`` cells each; it holds each run's transition scratch and flags buffer."""

    def __init__(self, batch: int, plane: int, runs: int) -> None:
        self.runs = runs = max(1, min(runs, batch))
        self.bounds = np.array([r * batch // runs for r in range(runs + 1)], np.int64)
        longest = int(np.diff(self.bounds).max())
        self.scratch = np.zeros((runs, 5, -(-plane // 8) * 8), np.uint8)
        # As `BatchedRezzo._found`, per run: a world adds up to 2 rows per cell.
        self.found = np.zeros((runs, 2 * plane + 16 * longest + 1, 4), np.int64)
        self._at = np.zeros(runs, np.int64)
        #: `Kernels.views`, the rows of the worlds asked for split into runs.
        self.views: Views = functools.partial(_views_runs, runs)
        #: `Kernels.agent_phase`, the worlds split into runs.
        self.agent_phase: AgentPhase = functools.partial(_agent_phase_runs, self.bounds)

    def transition(self, args: TransitionArgs) -> np.ndarray:
        """`Kernels.transition` over every world; returns the flags found, rows (world, cell, kind,
        owner), as the serial loop finds them (a run whose buffer filled goes on from where it
        stopped)."""
        at, ends, found = self._at, self.bounds[1:], self.found
        at[:] = self.bounds[:-1]
        parts = []
        while True:
            found[:, 0, 0] = 0
            _transition_runs(args, self.scratch, self.bounds, at, found)
            for r in range(self.runs):
                count = int(found[r, 0, 0])
                if count:
                    parts.append(found[r, 1 : count + 1].copy())
            if (at >= ends).all():
                break
        return np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)
