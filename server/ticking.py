"""When the phases of a match's ticks run: the pacing of matches, apart from what a tick does.

A tick is two phases of `Match` (`begin_tick` sends the requests, `end_tick` collects and applies the
answers). This module decides when each runs:

- `play_fast`: the next tick begins as soon as every seat has answered or its budget has run out.
- `FixedRateDriver`: ticks begin on an absolute schedule (``start + n / tick_rate``, so they never
  drift), for every fixed-rate match of a server from one task, each match in one of a few phase
  slots of the period.
"""

from __future__ import annotations

import heapq
import itertools
import math

import trio

from cellarena.server.match import Match

#: Fixed-rate matches start their ticks in one of this many evenly spaced phases of the period.
PHASES = 16
_BITS = (PHASES - 1).bit_length()
#: Slots in bit-reversed order (0, 1/2, 1/4, 3/4, ...): each next one in the widest gap left.
_SLOT_ORDER = sorted(range(PHASES), key=lambda i: int(f"{i:0{_BITS}b}"[::-1], 2))


async def play_fast(match: Match) -> None:
    """Play ``match`` to its end, each tick as soon as every seat has answered or timed out."""
    while (deadline := match.begin_tick()) is not None:
        if match.outstanding:
            with trio.move_on_at(deadline):
                await match.answered.wait()
        match.end_tick()
        await trio.lowlevel.checkpoint()  # let the poller and other matches run


class FixedRateDriver:
    """Runs the ticks of many fixed-rate matches from one task.

    A tick has two steps that each take no time to wait: send every seat its request, and, at the
    last seat's deadline, collect the answers and apply them. With a task per match, every step costs
    a trio sleep and a task switch, which cost more than a small match's tick itself. Here one task
    (`serve`) sleeps until the earliest step due and runs every step due then, in time order; the
    match's own task only waits in `play` for its match to end. A step that raises ends its match
    alone: the error is raised in that match's task.

    Matches whose ticks start at the same moment queue behind each other on the one thread, so each
    new match takes the least used of PHASES slots of the period. A few slots rather than any phase:
    the matches of one slot share one wake-up of the driver.
    """

    def __init__(self, tick_rate: float) -> None:
        self.period = 1.0 / tick_rate
        self._heap: list[tuple[float, int, _Driven]] = []
        self._seq = itertools.count()
        self._wake = trio.Event()
        self._slots = [0] * PHASES
        self._epoch: float | None = None  # trio time the slots count from

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The driving task; run it in the nursery that runs the matches, and cancel it at the end."""
        self._epoch = trio.current_time()
        task_status.started()
        heap = self._heap
        while True:
            if heap:
                with trio.move_on_at(heap[0][0]):
                    await self._wake.wait()
            else:
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = trio.Event()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                _, _, driven = heapq.heappop(heap)
                self._step(driven)
                now = trio.current_time()

    def take_slot(self) -> int:
        """The least used phase slot (ties: the one farthest from the used ones), now one more used."""
        slot = min(_SLOT_ORDER, key=lambda i: self._slots[i])
        self._slots[slot] += 1
        return slot

    async def play(self, match: Match) -> None:
        """Play ``match`` to its end in the least used phase slot, starting less than a period from now."""
        if self._epoch is None:
            raise RuntimeError("FixedRateDriver.play before its serve task started")
        slot = self.take_slot()
        period = self.period
        origin = self._epoch + slot * period / PHASES
        start = origin + math.ceil((trio.current_time() - origin) / period) * period
        driven = _Driven(match, start)
        self._push(start, driven)
        try:
            await driven.done.wait()
        finally:
            driven.done.set()  # if cancelled, the driver drops it
            self._slots[slot] -= 1
        if driven.error is not None:
            raise driven.error

    def _push(self, when: float, driven: _Driven) -> None:
        earliest = self._heap[0][0] if self._heap else math.inf
        heapq.heappush(self._heap, (when, next(self._seq), driven))
        if when < earliest:
            self._wake.set()

    def _step(self, driven: _Driven) -> None:
        if driven.done.is_set():
            return  # its task was cancelled
        match = driven.match
        try:
            if driven.collecting:
                driven.collecting = False
                match.end_tick()
                driven.ticks += 1
                following = driven.start + driven.ticks * self.period
                now = trio.current_time()
                if driven.ticks == 1 and following < now:
                    # A first-tick budget longer than the period (`--first-budget-ms`): the schedule
                    # moves on to the next slot of its phase instead of catching up with a burst.
                    driven.start += math.ceil((now - following) / self.period) * self.period
                    following = driven.start + self.period
                self._push(following, driven)
            else:
                slot_time = driven.start + driven.ticks * self.period
                behind = trio.current_time() - slot_time > self.period / 4
                deadline = match.begin_tick(behind=behind)
                if deadline is None:
                    driven.done.set()
                    return
                driven.collecting = True
                self._push(deadline, driven)
        except Exception as exc:
            driven.error = exc
            driven.done.set()


class _Driven:
    """One match under the driver: where its schedule starts, and which phase comes next."""

    __slots__ = ("collecting", "done", "error", "match", "start", "ticks")

    def __init__(self, match: Match, start: float) -> None:
        self.match = match
        self.start = start
        self.ticks = 0
        self.collecting = False
        self.done = trio.Event()
        self.error: Exception | None = None
