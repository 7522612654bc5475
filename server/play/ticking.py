"""When the phases of a match's ticks run: the pacing of matches, apart from what a tick does.

A tick is two phases of `Match` (`begin_tick` sends the requests, `end_tick` collects and applies the
answers). This module decides when each runs:

- `play_fast`: the next tick begins as soon as every seat has answered or its budget has run out.
- `FixedRateDriver`: ticks begin on an absolute schedule (``start + n / tick_rate``, so they never
  drift), for every fixed-rate match of a server from one task, each match in one of a few phase
  slots of the period. The matches of one slot whose engines offer batches (`EngineBatch`) of one
  key are stepped together, as one array operation.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Hashable
from typing import cast

import trio

from cellarena.server.games.base import BATCH_CAPACITY, BatchedEngine, Engine, EngineBatch, Events
from cellarena.server.games.registry import batching_of
from cellarena.server.play.match import Match

log = logging.getLogger("cellarena.server")

#: Fixed-rate matches start their ticks in one of this many evenly spaced phases of the period.
PHASES = 16
_BITS = (PHASES - 1).bit_length()
#: Slots in bit-reversed order (0, 1/2, 1/4, 3/4, ...): each next one in the widest gap left.
_SLOT_ORDER = sorted(range(PHASES), key=lambda i: int(f"{i:0{_BITS}b}"[::-1], 2))
#: Seconds between looks at the seats a fixed-rate tick waits for on their time bank: their sockets
#: are read at each look, and each answer is charged by its kernel stamp, so this only bounds how
#: much longer than the answer itself the tick lasts.
BANK_POLL = 0.002
# At one moment, single matches run before batches, so that a match joining a batch joins before it begins.
_SINGLE, _BATCH = 0, 1


async def play_fast(match: Match) -> None:
    """Play ``match`` to its end, each tick as soon as every seat has answered or timed out."""
    while (deadline := match.begin_tick()) is not None:
        if match.outstanding:
            with trio.move_on_at(deadline):
                await match.answered.wait()
            # A seat with time bank left may answer later still; its answer wakes us (fast mode reads
            # as messages come), else the bank's end does.
            while not match.answered.is_set() and (until := match.waiting_on_bank()) is not None:
                with trio.move_on_at(until):
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

    def __init__(self, tick_rate: float, *, batch: bool = True) -> None:
        self.period = 1.0 / tick_rate
        #: Whether the matches of a slot are stepped in batches where their game offers them.
        self.batch = batch
        self._heap: list[tuple[float, int, int, _Driven | _Batch]] = []
        self._seq = itertools.count()
        self._wake = trio.Event()
        self._slots = [0] * PHASES
        self._epoch: float | None = None  # trio time the slots count from
        self._batches: dict[tuple[int, Hashable], list[_Batch]] = {}
        # Matches of a slot and key that wait, each on its own, for enough of them to make a batch pay.
        self._waiting: dict[tuple[int, Hashable], set[_Driven]] = {}
        #: Match ticks whose worlds were stepped in batches, and the most worlds one step took.
        self.batched_ticks = 0
        self.widest_batch = 0

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
                item = heapq.heappop(heap)[3]
                if isinstance(item, _Batch):
                    self._step_batch(item)
                else:
                    self._step(item)
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
        first = math.ceil((trio.current_time() - self._slot_time(slot, 0)) / self.period)
        driven = _Driven(match, slot, first)
        # A match with a time bank is never batched: a seat drawing on its bank stretches that tick,
        # which must stretch no other match's (docs/protocol.md#the-time-bank).
        driven.batchable = self.batch and match.settings.time_bank <= 0
        self._push(self._slot_time(slot, first), driven)
        try:
            await driven.done.wait()
        finally:
            driven.done.set()  # if cancelled, the driver drops it (and its batch, its world)
            self._slots[slot] -= 1
            if driven.waiting is not None:
                self._unwait(driven)
        if driven.error is not None:
            raise driven.error

    def _slot_time(self, slot: int, n: int) -> float:
        """The trio time of period ``n`` of phase slot ``slot``. Always computed here, from integers,
        so that a match and the batch of its slot get the very same float for the same moment."""
        assert self._epoch is not None
        return self._epoch + slot * self.period / PHASES + n * self.period

    def _push(self, when: float, item: _Driven | _Batch) -> None:
        earliest = self._heap[0][0] if self._heap else math.inf
        order = _BATCH if isinstance(item, _Batch) else _SINGLE
        heapq.heappush(self._heap, (when, order, next(self._seq), item))
        if when < earliest:
            self._wake.set()

    def _step(self, driven: _Driven) -> None:
        if driven.done.is_set():
            return  # its task was cancelled
        match = driven.match
        try:
            if driven.collecting:
                until = match.waiting_on_bank()
                if until is not None:  # a seat answers on its time bank: this match's tick waits
                    self._push(min(until, trio.current_time() + BANK_POLL), driven)
                    return
                driven.collecting = False
                match.end_tick()
                driven.ticks += 1
                following = self._slot_time(driven.slot, driven.first + driven.ticks)
                now = trio.current_time()
                if driven.ticks == 1 and following < now:
                    # A first-tick budget longer than the period (`--first-budget-ms`): the schedule
                    # moves on to the next slot of its phase instead of catching up with a burst.
                    driven.first += math.ceil((now - following) / self.period)
                    following = self._slot_time(driven.slot, driven.first + driven.ticks)
                self._push(following, driven)
            else:
                n = driven.first + driven.ticks
                # From its second tick on (the first may have a budget of its own), a match whose
                # world fits a batch of its slot is stepped with it.
                if driven.ticks and driven.batchable and self._join_batch(driven, n):
                    return
                behind = trio.current_time() - self._slot_time(driven.slot, n) > self.period / 4
                deadline = match.begin_tick(behind=behind)
                if deadline is None:
                    driven.done.set()
                    return
                driven.collecting = True
                self._push(deadline, driven)
        except Exception as exc:
            driven.error = exc
            driven.done.set()

    # ----------------------------------------------------------------- batches of a slot
    def _join_batch(self, driven: _Driven, n: int) -> bool:
        """Move the match's world into a batch of its slot for period ``n``, opening one if none has
        room. True: the batch begins the match's tick (now, or, if the batch is still collecting an
        earlier period, as soon as it has). False: it plays this tick on its own (for good if its
        world fits no batch; for now if the batch has begun period ``n`` already)."""
        engine = driven.match.engine
        batching = batching_of(engine)
        key = batching.key(engine) if batching is not None else None
        if batching is None or key is None:
            driven.batchable = False
            if driven.waiting is not None:
                self._unwait(driven)  # it no longer counts towards a batch of its slot
            return False
        # On time, the slot's batch begins period n right after this match's turn, and the match joins
        # it for this period. A batch that is collecting (an earlier period, on a server running
        # behind; or this one, when this match's last answer came after the slot's time, as a late
        # deadline on a busy host makes it) takes the match from its next period: joining now costs
        # the match at most one period's wait once, where waiting for an exact turn could miss the
        # batch period after period.
        ready = [b for b in self._batches.get((driven.slot, key), ()) if b.batch.room]
        if not ready:
            # A new batch only once it pays: the game says from how many worlds on (`batch_from`).
            waiting = self._waiting.setdefault((driven.slot, key), set())
            waiting.add(driven)
            driven.waiting = (driven.slot, key)
            if len(waiting) < batching.batch_from():
                return False
        if driven.waiting is not None:
            self._unwait(driven)
        try:
            if ready:
                batch = ready[0]
            else:
                made = batching.new_batch(engine, BATCH_CAPACITY)
                batch = _Batch(made, (driven.slot, key), n)
                self._batches.setdefault(batch.key, []).append(batch)
                self._push(self._slot_time(driven.slot, n), batch)  # after the single matches of then
            world = batch.batch.join(engine)
        except Exception:
            number = driven.match.number
            log.exception("match %d: its world cannot join a batch; it is stepped on its own", number)
            world = None
        if world is None:
            driven.batchable = False
            return False
        driven.match.engine = world
        # Members are collected at the batch's next collect: one joining mid-collect waits for it.
        (batch.joining if batch.collecting else batch.members).append(driven)
        return True

    def _step_batch(self, batch: _Batch) -> None:
        """Begin the tick of every match of ``batch``, or collect them all, step their worlds as one
        and finish their ticks. A step that raises ends its match alone (the batch step: all of them)."""
        members = batch.members
        for driven in [d for d in members if d.done.is_set()]:
            self._leave(batch, driven)  # its task was cancelled
        if not batch.collecting:
            self._begin_batch(batch)
            return
        batch.collecting = False
        staged: list[tuple[_Driven, Events]] = []
        for driven in list(members):
            try:
                actions = driven.match.collect_tick()
                staged.append((driven, cast(BatchedEngine, driven.match.engine).stage(actions)))
            except Exception as exc:
                driven.error = exc
                self._leave(batch, driven)
        try:
            batch.batch.step()
            self.batched_ticks += len(staged)
            self.widest_batch = max(self.widest_batch, len(staged))
        except Exception as exc:
            members.extend(batch.joining)  # their worlds are in the broken batch too
            batch.joining.clear()
            for driven in list(members):
                driven.error = exc
                self._leave(batch, driven)
            self._close(batch)
            return
        for driven, events in staged:
            try:
                driven.match.finish_tick(events)
            except Exception as exc:
                driven.error = exc
                self._leave(batch, driven)
        batch.n += 1
        members.extend(batch.joining)  # they begin period n with the batch
        batch.joining.clear()
        if not members:
            self._close(batch)
            return
        self._push(self._slot_time(batch.key[0], batch.n), batch)

    def _begin_batch(self, batch: _Batch) -> None:
        """Begin the tick of every match of ``batch``; the batch is collected at the last deadline."""
        members = batch.members
        slot_time = self._slot_time(batch.key[0], batch.n)
        behind = trio.current_time() - slot_time > self.period / 4
        deadline = -math.inf
        for driven in list(members):
            try:
                begun = driven.match.begin_tick(behind=behind)
            except Exception as exc:
                begun, driven.error = None, exc
            if begun is None:
                self._leave(batch, driven)
                continue
            deadline = max(deadline, begun)
        if not members:
            self._close(batch)
            return
        batch.collecting = True
        self._push(deadline, batch)  # the last seat's deadline of every match in the batch

    def _leave(self, batch: _Batch, driven: _Driven) -> None:
        """The match is over (or failed, or cancelled): its world leaves the batch, keeping its last
        state for the match's end, and its task learns it."""
        batch.members.remove(driven)
        driven.done.set()
        try:
            batch.batch.leave(cast(BatchedEngine, driven.match.engine))
        except Exception as exc:  # the match's end may lack its last frame; the driver goes on
            log.exception("match %d: its world did not leave its batch cleanly", driven.match.number)
            driven.error = driven.error or exc

    def _unwait(self, driven: _Driven) -> None:
        assert driven.waiting is not None
        waiting = self._waiting[driven.waiting]
        waiting.discard(driven)
        if not waiting:
            del self._waiting[driven.waiting]
        driven.waiting = None

    def _close(self, batch: _Batch) -> None:
        batches = self._batches[batch.key]
        batches.remove(batch)
        if not batches:
            del self._batches[batch.key]


class _Driven:
    """One match under the driver: its phase slot, the period its schedule starts at (its first
    tick's), and which phase comes next."""

    __slots__ = ("batchable", "collecting", "done", "error", "first", "match", "slot", "ticks", "waiting")

    def __init__(self, match: Match, slot: int, first: int) -> None:
        self.match = match
        self.slot = slot
        self.first = first
        self.ticks = 0
        self.collecting = False
        #: Whether its world may still join a batch of its slot.
        self.batchable = False
        #: The (slot, key) whose batch it waits for, while too few matches would share it.
        self.waiting: tuple[int, Hashable] | None = None
        self.done = trio.Event()
        self.error: Exception | None = None


class _Batch:
    """The matches of one phase slot whose worlds share an `EngineBatch`: their ticks begin together
    (period ``n`` of the slot next), are collected together at the last of their deadlines (each
    answer is still judged by its own), and their worlds step as one."""

    __slots__ = ("batch", "collecting", "joining", "key", "members", "n")

    def __init__(self, batch: EngineBatch, key: tuple[int, Hashable], n: int) -> None:
        self.batch = batch
        self.key = key
        self.members: list[_Driven] = []
        #: Matches that joined while the batch collected: members from its next period on.
        self.joining: list[_Driven] = []
        self.n = n
        self.collecting = False


def warm_up_batches(engine: Engine) -> None:
    """Step a batch of ``engine``'s world once, if its game offers batches: compiled kernels (numba)
    compile, or load from their cache, now rather than in the middle of the first matches' ticks."""
    batching = batching_of(engine)
    if batching is None or batching.key(engine) is None:
        return
    batch = batching.new_batch(engine, 1)
    world = batch.join(engine)
    if world is not None:
        world.pending()
        world.stage({})
        batch.step()
        batch.leave(world)
