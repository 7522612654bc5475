"""One match: the trio loop that drives an engine at a fixed tick rate (or as fast as the bots allow).

Per tick: ask the engine who acts, encode each seat's request once and hand it to the kernel without
an await per seat, wait until every seat has answered or its own deadline has passed, classify each
answer, apply, record, and sleep to the next slot of an absolute schedule (so ticks never drift).

Fairness: each seat's deadline is the moment its frame left plus the budget, in wall-clock time, and
an answer counts by its kernel arrival stamp (see `connection`). At the deadline every seat's socket
is drained synchronously, so an answer the kernel already holds is never late merely because the
server had not read it yet.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from cellarena.sdk import protocol
from cellarena.server.connection import Connection
from cellarena.server.games.base import Engine, Result

log = logging.getLogger("cellarena.server")


@dataclass(frozen=True)
class TickSettings:
    """How a match is paced. The budget defaults to one tick period."""

    tick_rate: float = 15.0
    budget_ms: float | None = None
    fast: bool = False
    #: Flood limits, as a token bucket: a seat may send this many messages per tick on average...
    messages_per_tick: float = 4.0
    #: ...and bursts of up to this many (a bot that fell behind answers several ticks at once).
    message_burst: float = 32.0
    #: A seat that misses this many ticks in a row (late or silent) is dropped as hung and forfeits.
    #: None: never (a slow bot just plays no-ops). Tournaments set it so a hung bot cannot slow them.
    max_missed_in_a_row: int | None = None

    @property
    def period(self) -> float:
        return 1.0 / self.tick_rate

    @property
    def budget(self) -> float:
        return (self.budget_ms / 1000.0) if self.budget_ms is not None else self.period


class Recorder(Protocol):
    """Where a match's moves go, tick by tick (a replay file)."""

    def record(self, tick: int, moves: dict[int, Any], engine: Engine) -> None: ...

    def finish(self, result: Result, extra: dict[str, Any]) -> None: ...


@dataclass
class Seat:
    """One player's connection and its accounting for the match."""

    index: int
    name: str
    conn: Connection | None
    late: int = 0
    invalid: int = 0
    illegal: int = 0
    forfeit_tick: int | None = None
    missed_in_a_row: int = 0
    # the tick being answered, and what the seat was asked
    tick: int = -1
    request: dict[str, Any] | None = None
    sent_wall: float = 0.0
    answer: Any = None
    arrival: float = 0.0
    tokens: float = 0.0

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed


@dataclass
class MatchOutcome:
    number: int
    result: Result
    names: list[str]
    late: list[int]
    invalid: list[int]
    illegal: list[int]
    forfeits: list[int]
    ticks: int
    #: Ticks in which at least one connected seat's answer was late or missing.
    late_ticks: int = 0
    #: Fixed-rate ticks that started more than a quarter period after their slot (server overload).
    behind_ticks: int = 0
    #: Ticks that were late or behind (each counted once): 1 - bad_ticks / ticks is the on-time rate.
    bad_ticks: int = 0

    def to_json(self) -> dict[str, Any]:
        names = self.names
        return {
            "winner": None if self.result.winner is None else names[self.result.winner],
            "ranks": {names[s]: r for s, r in sorted(self.result.ranks.items())},
            "ticks": self.ticks,
            "reason": self.result.reason,
            "late": dict(zip(names, self.late, strict=True)),
            "invalid": dict(zip(names, self.invalid, strict=True)),
            "illegal": dict(zip(names, self.illegal, strict=True)),
            "forfeits": [names[s] for s in self.forfeits],
        }


class Match:
    """Runs one engine with its seats and spectators. Create, then `await run()` once."""

    def __init__(
        self,
        number: int,
        engine: Engine,
        seats: list[tuple[str, Connection | None]],
        settings: TickSettings,
        *,
        recorder: Recorder | None = None,
        on_tick: Callable[[Engine], None] | None = None,
    ) -> None:
        self.number = number
        self.engine = engine
        self.settings = settings
        self.seats = [Seat(i, name, conn) for i, (name, conn) in enumerate(seats)]
        self.spectators: list[Connection] = []
        self.recorder = recorder
        self.on_tick = on_tick
        self._answered = trio.Event()
        self._outstanding = 0
        self.late_ticks = 0
        self.behind_ticks = 0
        self.bad_ticks = 0
        #: Fixed-rate only: when set (a trio time), ticks start at ``phase_origin + k / tick_rate``.
        #: The lobby spreads its matches' phases over the period, so they do not all wake at once.
        self.phase_origin: float | None = None
        #: Fixed-rate only: when set, this shared driver runs the ticks instead of this match's task.
        self.driver: TickDriver | None = None
        self._start = 0.0
        self._n = 0
        self._behind = False
        self._late_before = 0
        self._requests: dict[int, dict[str, Any]] = {}
        for seat in self.seats:
            if seat.conn is not None:
                seat.conn.handler = self._handler_for(seat)
                seat.conn.on_close = self._closer_for(seat)

    # ----------------------------------------------------------------- messages from seats
    def _handler_for(self, seat: Seat) -> Callable[[Connection, dict[str, Any], float], None]:
        def handle(conn: Connection, message: dict[str, Any], arrival: float) -> None:
            seat.tokens -= 1
            if seat.tokens < 0:
                conn.fail(
                    protocol.FLOOD,
                    f"more than {self.settings.messages_per_tick:g} messages per tick on average "
                    f"(bursts up to {self.settings.message_burst:g}); send one answer per tick",
                )
                return
            kind = message["type"]
            if kind != "moves":
                if kind == "hello":
                    conn.fail(protocol.BAD_MESSAGE, "hello was already received; send moves")
                else:
                    conn.fail(protocol.UNKNOWN_TYPE, f"unknown message type {kind!r}; a bot sends 'moves'")
                return
            if message.get("tick") != seat.tick or seat.answer is not None:
                return  # an old tick's answer, or a second answer: only the first counts
            seat.answer = message.get("moves")
            seat.arrival = arrival
            self._outstanding -= 1
            if self._outstanding == 0:
                self._answered.set()

        return handle

    def _closer_for(self, seat: Seat) -> Callable[[Connection], None]:
        def closed(_conn: Connection) -> None:
            # Stop waiting for a seat that can no longer answer.
            if seat.answer is None and seat.tick == self.engine.tick and seat.sent_wall:
                self._outstanding -= 1
                if self._outstanding <= 0:
                    self._answered.set()

        return closed

    def add_spectator(self, conn: Connection) -> None:
        conn.handler = _spectator_handler
        conn.send_message(self._welcome(None))
        self.spectators.append(conn)

    # ----------------------------------------------------------------- the loop
    def _welcome(self, seat: int | None) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "welcome",
            "protocol": protocol.PROTOCOL_VERSION,
            "role": "bot" if seat is not None else "spectator",
            "game": self.engine.name,
            "match": self.number,
            "players": self.engine.players,
            "names": [s.name for s in self.seats],
            "tick_rate": 0.0 if self.settings.fast else self.settings.tick_rate,
            "budget_ms": round(self.settings.budget * 1000),
            "config": self.engine.public_config(),
        }
        if seat is not None:
            msg["seat"] = seat
        return msg

    async def run(self) -> MatchOutcome:
        fixed_rate = not self.settings.fast
        for seat in self.seats:
            if seat.connected:
                seat.conn.send_message(self._welcome(seat.index))
                seat.tokens = self.settings.message_burst
                if fixed_rate:
                    # The loop drains every seat once at its deadline: no task wakes per message.
                    seat.conn.pause_reading()
        start = trio.current_time()
        if fixed_rate and self.phase_origin is not None:
            # Start in this match's phase of the schedule (less than a period from now).
            start = self.phase_origin + math.ceil((start - self.phase_origin) / self.settings.period) * (
                self.settings.period
            )
        self._start, self._n = start, 0
        if fixed_rate and self.driver is not None:
            await self.driver.run(self, start)
        else:
            if fixed_rate:
                await trio.sleep_until(start)
            while (deadline := self._begin_tick()) is not None:
                if fixed_rate:
                    await trio.sleep_until(deadline)  # the next tick waits for its slot anyway
                elif self._outstanding:
                    with trio.move_on_at(deadline):
                        await self._answered.wait()
                next_start = self._end_tick()
                if fixed_rate:
                    await trio.sleep_until(next_start)
                else:
                    await trio.lowlevel.checkpoint()  # let readers and other matches run
        return await self._finish()

    def _begin_tick(self) -> float | None:
        """Send every seat its request for the tick; the time to collect the answers at (the last
        seat's deadline), or None when the match is over."""
        if self.engine.result() is not None or self._decided_by_forfeits():
            return None
        settings = self.settings
        fixed_rate = not settings.fast
        now = trio.current_time()
        behind = fixed_rate and now - (self._start + self._n * settings.period) > settings.period / 4
        self.behind_ticks += behind
        self._behind = behind
        self._late_before = self.late_ticks
        requests = self._requests = self.engine.pending()
        tick = self.engine.tick
        self._broadcast_frame()  # spectators see the world the seats are about to see
        self._outstanding = 0
        if not fixed_rate:
            self._answered = trio.Event()
        budget = settings.budget
        budget_ms = round(budget * 1000)
        burst, refill = settings.message_burst, settings.messages_per_tick
        encode = protocol.encode
        for seat in self.seats:
            seat.tick, seat.answer, seat.sent_wall = tick, None, 0.0
            seat.tokens = min(burst, seat.tokens + refill)
            request = seat.request = requests.get(seat.index)
            conn = seat.conn
            if request is None or conn is None or conn.closed:
                continue
            if conn.send(encode({"type": "tick", "tick": tick, "budget_ms": budget_ms, **request})):
                seat.sent_wall = conn.last_send
                self._outstanding += 1
        # Read after the last send, so no seat's deadline comes before its budget has run out.
        return trio.current_time() + budget if self._outstanding else now

    def _end_tick(self) -> float:
        """Collect the answers, apply them and record; when the next tick starts."""
        tick = self.engine.tick
        actions = self._collect(self._requests, self.settings.budget)
        self.bad_ticks += self._behind or self.late_ticks > self._late_before
        events = self.engine.apply(actions)
        for s, count in events.illegal.items():
            self.seats[s].illegal += count
        for s, count in events.malformed.items():
            self.seats[s].invalid += count
        if self.recorder is not None:
            try:
                self.recorder.record(tick, actions, self.engine)  # exactly what apply() got
            except OSError as exc:  # a full disk must not cost the match its result
                log.error("match %d: its replay stops at tick %d (%s); play goes on", self.number, tick, exc)
                self.recorder = None
        if self.on_tick is not None:
            self.on_tick(self.engine)
        self._n += 1
        return self._start + self._n * self.settings.period

    def _collect(self, requests: dict[int, dict[str, Any]], budget: float) -> dict[int, Any]:
        """Every seat's action for this tick; late, missing and invalid answers become no-ops."""
        actions: dict[int, Any] = {}
        any_late = False
        for seat in self.seats:
            if seat.index not in requests:
                continue
            if seat.connected and seat.answer is None:
                # Read what the kernel holds now; each answer is judged by its arrival stamp.
                seat.conn.drain()
            if not seat.connected and seat.forfeit_tick is None:
                seat.forfeit_tick = seat.tick
                log.info(
                    "match %d: %s disconnected at tick %d and forfeits", self.number, seat.name, seat.tick
                )
            if seat.answer is None or seat.arrival > seat.sent_wall + budget:
                seat.late += 1
                any_late = any_late or seat.forfeit_tick is None
                seat.missed_in_a_row += 1
                limit = self.settings.max_missed_in_a_row
                if limit is not None and seat.missed_in_a_row >= limit and seat.connected:
                    seat.conn.fail(
                        protocol.UNRESPONSIVE,
                        f"no answer within the budget for {limit} ticks in a row; this seat forfeits",
                    )
                continue
            seat.missed_in_a_row = 0
            action = self.engine.decode(seat.index, requests[seat.index], seat.answer)
            if action is None:
                seat.invalid += 1
                continue
            actions[seat.index] = action
        self.late_ticks += any_late
        return actions

    def _broadcast_frame(self, *, final: bool = False) -> None:
        if not self.spectators:
            return
        frame = protocol.encode({"type": "frame", **self.engine.frame(), "final": final})
        self.spectators = [c for c in self.spectators if c.send(frame)]

    def _decided_by_forfeits(self) -> bool:
        """A match with seats to spare ends once fewer than two seats are still connected."""
        if len(self.seats) < 2:
            return False
        return sum(1 for s in self.seats if s.forfeit_tick is None) < 2

    async def _finish(self) -> MatchOutcome:
        result = self._final_result()
        extra = {
            "late": [s.late for s in self.seats],
            "invalid": [s.invalid for s in self.seats],
            "illegal": [s.illegal for s in self.seats],
            "names": [s.name for s in self.seats],
            "forfeits": [s.index for s in self.seats if s.forfeit_tick is not None],
        }
        if self.recorder is not None:
            try:
                self.recorder.finish(result, extra)
            except OSError as exc:
                log.error("match %d: its replay lacks the result (%s)", self.number, exc)
        ranks = [result.ranks[s.index] for s in self.seats]
        for seat in self.seats:
            if not seat.connected:
                continue
            outcome = (
                "win"
                if result.winner == seat.index
                else "draw"
                if result.winner is None and ranks[seat.index] == 1
                else "loss"
            )
            seat.conn.send_message(
                {
                    "type": "end",
                    "ticks": result.ticks,
                    "result": outcome,
                    "rank": ranks[seat.index],
                    "ranks": ranks,
                    "winner": result.winner,
                    "reason": result.reason,
                    "late": seat.late,
                    "invalid": seat.invalid,
                    "illegal": seat.illegal,
                }
            )
        self._broadcast_frame(final=True)  # the world as the last moves and transition left it
        for conn in self.spectators:
            conn.send_message(
                {
                    "type": "end",
                    "ticks": result.ticks,
                    "result": "draw",
                    "rank": 0,
                    "ranks": ranks,
                    "winner": result.winner,
                    "reason": result.reason,
                    "late": 0,
                    "invalid": 0,
                    "illegal": 0,
                }
            )
        conns = [s.conn for s in self.seats if s.connected] + [c for c in self.spectators if not c.closed]
        async with trio.open_nursery() as nursery:
            for conn in conns:
                nursery.start_soon(conn.flush, 2.0)
        for conn in conns:
            conn.close("match over")
        return MatchOutcome(
            self.number,
            result,
            [s.name for s in self.seats],
            extra["late"],
            extra["invalid"],
            extra["illegal"],
            extra["forfeits"],
            result.ticks,
            late_ticks=self.late_ticks,
            behind_ticks=self.behind_ticks,
            bad_ticks=self.bad_ticks,
        )

    def _final_result(self) -> Result:
        """The engine's result, with seats that forfeited ranked below every seat that stayed."""
        game = self.engine.result()
        forfeits = {s.index: s.forfeit_tick for s in self.seats if s.forfeit_tick is not None}
        if not forfeits and game is not None:
            return game
        ticks = game.ticks if game is not None else self.engine.tick
        stayed = [s.index for s in self.seats if s.index not in forfeits]

        def key(i: int) -> tuple[int, int]:
            if i in forfeits:
                return (1, -forfeits[i])  # a later forfeit ranks above an earlier one
            return (0, game.ranks[i] if game is not None else 1)

        keys = {s.index: key(s.index) for s in self.seats}
        ranks = {i: 1 + sum(1 for j in keys if keys[j] < keys[i]) for i in keys}
        firsts = [i for i, r in ranks.items() if r == 1]
        winner = firsts[0] if len(firsts) == 1 else None
        if game is not None:
            reason = game.reason + (f"; forfeited: {', '.join(self.seats[i].name for i in forfeits)}")
        elif len(stayed) == 1:
            reason = "every other seat disconnected"
        else:
            reason = "every seat disconnected"
        return Result(ranks=ranks, winner=winner, reason=reason, ticks=ticks)


class TickDriver:
    """Runs the ticks of many fixed-rate matches from one task.

    A match's tick has two steps that each take no time to wait: send every seat its request, and,
    at the last seat's deadline, collect the answers and apply them. With a task per match, every
    step costs a trio sleep and a task switch, which cost more than a small match's tick itself. Here
    one task sleeps until the earliest step due and runs every step due then, in time order; the
    match's own task only waits for its match to end. A step that raises ends its match alone: the
    error is raised in that match's task.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Driven]] = []
        self._seq = itertools.count()
        self._wake = trio.Event()

    async def serve(self) -> None:
        """The driving task; run it in the nursery that runs the matches, and cancel it at the end."""
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
                self._push(match._end_tick(), driven)
            else:
                deadline = match._begin_tick()
                if deadline is None:
                    driven.done.set()
                    return
                driven.collecting = True
                self._push(deadline, driven)
        except Exception as exc:
            driven.error = exc
            driven.done.set()

    async def run(self, match: Match, start: float) -> None:
        """Run ``match``'s ticks from ``start`` until it is over (called by `Match.run`)."""
        driven = _Driven(match)
        self._push(start, driven)
        try:
            await driven.done.wait()
        finally:
            driven.done.set()  # if cancelled, the driver drops it
        if driven.error is not None:
            raise driven.error


class _Driven:
    __slots__ = ("collecting", "done", "error", "match")

    def __init__(self, match: Match) -> None:
        self.match = match
        self.collecting = False
        self.done = trio.Event()
        self.error: Exception | None = None


def _spectator_handler(conn: Connection, message: dict[str, Any], _arrival: float) -> None:
    conn.fail(protocol.UNKNOWN_TYPE, f"spectators send nothing after hello, got {message['type']!r}")
