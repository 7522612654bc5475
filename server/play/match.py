"""One match: its seats, its spectators, and the two phases of a tick.

A tick has two phases, and a match knows only those, not when they run (`ticking` decides that):
`begin_tick` asks the engine who acts, encodes each seat's request once and hands it to the kernel
without an await per seat; `end_tick`, once every seat has answered or its own deadline has passed,
classifies each answer, applies them and records them.

Fairness: each seat's deadline is the moment its frame left plus the budget, in wall-clock time, and
an answer counts by its kernel arrival stamp (see `connection`). At the deadline every seat's socket
is drained synchronously, so an answer the kernel already holds is never late merely because the
server had not read it yet.

Ownership: a seat owns its bot's connection for the match and a match's `Spectators` own theirs
(`Connection.attach`). A seat whose bot comes back on a new connection takes it with `reattach`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from cellarena.sdk import protocol
from cellarena.server.games import causes
from cellarena.server.games.base import Engine, Events, Result
from cellarena.server.net.connection import Connection
from cellarena.server.play.referee import Referee
from cellarena.server.play.seat import Seat
from cellarena.server.play.start import Script

log = logging.getLogger("cellarena.server")


#: Milliseconds of each tick period the default budget leaves to the server (send the requests, read
#: and apply the answers, record, wake up on time), so that bots answering at the last moment still
#: keep the nominal rate. Measured with `cellarena bench server` (its "rate" table): see
#: docs/protocol.md#timing for the figures and how they were taken.
SERVER_MARGIN_MS = 3
#: Late (or missing) answers in a row after which `match` and tournaments forfeit a seat as
#: unresponsive (docs/protocol.md#timing): about 2 s at Rezzo's 15 ticks a second.
MISSED_IN_A_ROW = 25


def whole_ms(ms: float) -> int:
    """A budget in whole milliseconds, half up: the int the wire carries is the budget enforced."""
    return max(1, math.floor(ms + 0.5))


@dataclass(frozen=True)
class TickSettings:
    """How a match is paced. The budget defaults to one tick period less the server's margin."""

    tick_rate: float = 15.0
    budget_ms: float | None = None
    #: The first tick's budget (bots that load a model or warm up a JIT); None: the same as the others.
    first_budget_ms: float | None = None
    fast: bool = False
    #: Flood limits, as a token bucket: a seat may send this many messages per tick on average...
    messages_per_tick: float = 4.0
    #: ...and bursts of up to this many (a bot that fell behind answers several ticks at once).
    message_burst: float = 32.0
    #: A seat that misses this many ticks in a row (late or silent) is dropped as hung and forfeits.
    #: None: never (a slow bot just plays no-ops). Tournaments set it so a hung bot cannot slow them.
    max_missed_in_a_row: int | None = None
    #: Seconds a seat whose connection dropped keeps its seat, playing no-ops counted as late, for its
    #: bot to come back (`Match.reattach`). 0: a lost connection forfeits at the next tick.
    reconnect_grace: float = 0.0
    #: Each seat's time bank in ms (docs/protocol.md#the-time-bank): an answer after its budget is
    #: taken while the bank lasts, which shrinks by the time over budget. 0: none.
    time_bank_ms: float = 0.0
    #: Spectator frames carry the bots' debug drawings (docs/protocol.md#spectators): only where every
    #: spectator may see them (`cellarena match`, whose spectator is its user's live view). Off: a
    #: public server's spectators never get a bot's drawings.
    spectator_debug: bool = False

    @property
    def time_bank(self) -> float:
        """Each seat's time bank in seconds, exactly the whole ms the welcome says."""
        return whole_ms(self.time_bank_ms) / 1000.0 if self.time_bank_ms > 0 else 0.0

    @property
    def period(self) -> float:
        return 1.0 / self.tick_rate

    @property
    def tick_budget_ms(self) -> int:
        """Every tick's budget but the first, in whole ms: ``budget_ms`` rounded, or by default the
        period less `SERVER_MARGIN_MS` (at least 1 ms), so that a tick never outlasts its period."""
        if self.budget_ms is not None:
            return whole_ms(self.budget_ms)
        return max(1, math.floor(1000.0 / self.tick_rate) - SERVER_MARGIN_MS)

    @property
    def first_tick_budget_ms(self) -> int:
        """The first tick's budget in whole ms: ``first_budget_ms`` if given, else `tick_budget_ms`."""
        if self.first_budget_ms is not None:
            return whole_ms(self.first_budget_ms)
        return self.tick_budget_ms

    @property
    def budget(self) -> float:
        """Every tick's budget but the first, in seconds: exactly the ms the wire says."""
        return self.tick_budget_ms / 1000.0


class Recorder(Protocol):
    """Where a match's moves go, tick by tick (a replay file)."""

    def record(
        self,
        tick: int,
        moves: dict[int, Any],
        engine: Engine,
        *,
        events: Sequence[Mapping[str, Any]] = (),
        debug: Mapping[int, Mapping[str, Any]] | None = None,
        bank: Mapping[int, int] | None = None,
        late: Mapping[int, int] | None = None,
        invalid: Mapping[int, int] | None = None,
    ) -> None: ...

    def finish(self, result: Result, extra: dict[str, Any]) -> None: ...


#: Makes a match's replay writer: (match number, engine, seat names, seed) -> writer, or None for none.
RecorderFactory = Callable[[int, Engine, list[str], int], Recorder | None]


class Spectators:
    """The spectators of a match: the owner of their connections, and the frames they are sent."""

    def __init__(self) -> None:
        self.conns: list[Connection] = []

    def add(self, conn: Connection, welcome: Mapping[str, Any]) -> None:
        if conn.attach(self) and conn.send_message(welcome):
            self.conns.append(conn)

    def broadcast(self, frame: bytes) -> None:
        self.conns = [c for c in self.conns if c.send(frame)]

    def __bool__(self) -> bool:
        return bool(self.conns)

    def __iter__(self) -> Any:
        return iter(self.conns)

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        refusal = protocol.client_refusal(protocol.State.WATCHING, message["type"])
        assert refusal is not None  # a spectator may send nothing after its hello
        conn.fail(*refusal)

    def on_closed(self, conn: Connection) -> None:
        if conn in self.conns:
            self.conns.remove(conn)


#: Seat index -> what the host knows of why its connection went (a cause map), or None. The launcher
#: gives one: a bot whose process exited is ``exited`` with its status and its log's last line.
ExplainGone = Callable[[int], Awaitable[dict[str, Any] | None]]
#: Seconds the end of a match waits, for all its seats, for `ExplainGone`'s answers.
EXPLAIN_WITHIN = 2.0
#: The causes a host may know more of than the match (it only saw the connection go).
_EXPLAINABLE = frozenset({causes.DISCONNECTED, causes.NEVER_CONNECTED})


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
    #: Per seat, the longest run of ticks in a row it was late for (a hung or slow bot), and the tick
    #: that run ended at.
    late_runs: list[tuple[int, int]] = field(default_factory=list)
    #: Ticks in which at least one connected seat's answer was late or missing.
    late_ticks: int = 0
    #: Fixed-rate ticks that started more than a quarter period after their slot (server overload).
    behind_ticks: int = 0
    #: Ticks that were late or behind (each counted once): 1 - bad_ticks / ticks is the on-time rate.
    bad_ticks: int = 0
    #: Per seat, debug entries dropped (malformed or past the caps; docs/protocol.md#debug).
    debug_dropped: list[int] = field(default_factory=list)
    #: Per seat, ms of time bank drawn; None when the match had no bank.
    bank_drawn_ms: list[int] | None = None

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
            "causes": {names[s]: c for s, c in causes.with_sentences(self.result.causes, names).items()},
            **(
                {"bank_drawn_ms": dict(zip(names, self.bank_drawn_ms, strict=True))}
                if self.bank_drawn_ms is not None
                else {}
            ),
        }


def _say_debug_dropped(number: int, seats: list[Seat]) -> None:
    """Log each seat's debug entries dropped in match ``number`` (its moves all counted)."""
    for seat in seats:
        if seat.debug_dropped:
            log.info(
                "match %d: %s: %d debug entries dropped (malformed, or past the caps of "
                "docs/protocol.md#debug); its moves were all taken",
                number, seat.name, seat.debug_dropped,
            )  # fmt: skip


class Match:
    """One engine with its seats and spectators: `open()`, then ticks (`begin_tick`, `end_tick`) as a
    driver of `ticking` paces them, then `await close()` once."""

    def __init__(
        self,
        number: int,
        engine: Engine,
        seats: list[tuple[str, Connection | None]],
        settings: TickSettings,
        *,
        recorder: Recorder | None = None,
        on_tick: Callable[[Engine], None] | None = None,
        explain_gone: ExplainGone | None = None,
        scripted: Mapping[int, Script] | None = None,
    ) -> None:
        self.number = number
        #: Seats played in-process (`start.MatchStart.scripted`): no connection, never judged.
        self.scripted = dict(scripted or {})
        self.settings = settings
        self.seats = [Seat(i, name, self) for i, (name, _) in enumerate(seats)]
        self.spectators = Spectators()
        #: Set as `close` starts: a spectator added then would never hear the end (`Lobby.watch`).
        self.closing = False
        self.recorder = recorder
        self.on_tick = on_tick
        #: Asked at the end why a seat's connection went (`ExplainGone`), or None.
        self.explain_gone = explain_gone
        #: Set once every seat asked this tick has answered or can no longer answer.
        self.answered = trio.Event()
        #: Seats asked this tick that have not answered yet.
        self.outstanding = 0
        #: How each seat's answers count, and the drawings and bank drawn this tick.
        self.referee = Referee(number, engine, settings, self.seats)
        self.behind_ticks = 0
        self.bad_ticks = 0
        self._behind = False
        self._late_before = 0
        self._requests: dict[int, dict[str, Any]] = {}
        #: The tick being collected and its actions, between `collect_tick` and `finish_tick`.
        self._tick = 0
        #: Each seat's (late, invalid) before this tick's answers, for the tick's record.
        self._counts_before: list[tuple[int, int]] = []
        self._actions: dict[int, Any] = {}
        #: Ticks begun so far (the first may have its own budget), and the budget of the one under way.
        self._ticks_begun = 0
        self._budget = settings.budget
        for seat, (_, conn) in zip(self.seats, seats, strict=True):
            seat.bank_ms = round(settings.time_bank * 1000)
            if conn is not None and conn.attach(seat):
                seat.conn = conn

    @property
    def engine(self) -> Engine:
        """The match's world: the referee's too, also once a batch has taken it over (`ticking`)."""
        return self.referee.engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self.referee.engine = engine

    @property
    def over(self) -> bool:
        return self.engine.result() is not None or self._decided_by_forfeits()

    # ----------------------------------------------------------------- connections
    def add_spectator(self, conn: Connection) -> None:
        self.spectators.add(conn, self._welcome(None))

    def reattach(self, index: int, conn: Connection) -> None:
        """Seat ``index``'s bot is back on ``conn``: the seat owns it from now on, and a connection it
        still held is let go and closed. The bot gets its welcome again and plays from the next tick;
        until then its answers count as late. A seat that already forfeited cannot come back."""
        seat = self.seats[index]
        if seat.forfeit_tick is not None:
            raise ValueError(f"seat {index} ({seat.name}) forfeited at tick {seat.forfeit_tick}")
        old = seat.conn
        if not conn.attach(seat):
            return
        if old is not None and old is not conn:
            old.detach()  # its end is no longer the seat's business
            old.close("replaced by the bot's new connection")
        seat.conn, seat.lost_at = conn, None
        self._greet(seat)
        log.info("match %d: %s is back (%s)", self.number, seat.name, conn.peer)

    def expel(self, index: int, code: str, message: str) -> None:
        """Seat ``index`` forfeits now and its connection ends with ``code`` (a ladder revoked its bot):
        it may not come back, so the others need not wait out the reconnect grace."""
        seat = self.seats[index]
        if seat.forfeit_tick is None:
            seat.forfeit_tick = max(seat.tick, self.engine.tick)
            log.info("match %d: %s forfeits: %s", self.number, seat.name, message)
        if seat.conn is not None:
            seat.conn.fail(code, message)

    def _greet(self, seat: Seat) -> None:
        assert seat.conn is not None
        seat.conn.send_message(self._welcome(seat.index))
        seat.allowance = self.settings.message_burst
        if self.settings.fast:
            seat.conn.resume_reading()
        else:
            # The match drains every seat once at its deadline: no callback runs per message.
            seat.conn.pause_reading()

    def _welcome(self, seat: int | None) -> protocol.Welcome:
        bank = self.settings.time_bank
        return protocol.welcome(
            time_bank_ms=round(bank * 1000) if bank else None,
            seat=seat,
            game=self.engine.name,
            match=self.number,
            players=self.engine.players,
            names=[s.name for s in self.seats],
            tick_rate=0.0 if self.settings.fast else self.settings.tick_rate,
            budget_ms=self.settings.tick_budget_ms,
            config=self.engine.public_config(),
        )

    # ----------------------------------------------------------------- the phases of a tick
    def open(self) -> None:
        """Welcome every seat; the first tick may begin."""
        for seat in self.seats:
            if seat.connected:
                self._greet(seat)

    def answer_came(self) -> None:
        """One seat asked this tick answered, or can no longer answer."""
        self.outstanding -= 1
        if self.outstanding <= 0:
            self.answered.set()

    def begin_tick(self, *, behind: bool = False) -> float | None:
        """Send every seat its request for the tick; the trio time to collect the answers at (the last
        seat's deadline), or None when the match is over. ``behind``: the tick starts late for the
        server's own sake (its driver says so), which counts against the on-time rate."""
        if self.over:
            return None
        settings = self.settings
        now = trio.current_time()
        self.behind_ticks += behind
        self._behind = behind
        self._late_before = self.referee.late_ticks
        requests = self._requests = self.engine.pending()
        tick = self.engine.tick
        self._broadcast_frame()  # spectators see the world the seats are about to see
        self.outstanding = 0
        if settings.fast:
            self.answered = trio.Event()
        first = self._ticks_begun == 0
        self._ticks_begun += 1
        budget_ms = settings.first_tick_budget_ms if first else settings.tick_budget_ms
        budget = self._budget = budget_ms / 1000.0
        burst, refill = settings.message_burst, settings.messages_per_tick
        encode_tick = protocol.encode_tick
        banked = settings.time_bank > 0
        for seat in self.seats:
            seat.tick, seat.answer, seat.answered, seat.sent_wall, seat.debug = tick, None, False, 0.0, None
            seat.allowance = min(burst, seat.allowance + refill)
            request = seat.request = requests.get(seat.index)
            conn = seat.conn
            if request is None or conn is None or conn.closed:
                continue
            bank_ms = seat.bank_ms if banked else None
            if conn.send(encode_tick(tick, budget_ms, request, bank_ms=bank_ms)):
                seat.sent_wall = conn.last_send
                self.outstanding += 1
        # Read after the last send, so no seat's deadline comes before its budget has run out.
        return trio.current_time() + budget if self.outstanding else now

    def end_tick(self) -> None:
        """Collect the answers, apply them and record them."""
        self.finish_tick(self.engine.apply(self.collect_tick()))

    def collect_tick(self) -> dict[int, Any]:
        """`end_tick` up to the engine: every seat's action for this tick. A driver that steps the
        worlds of several matches as one (`ticking`) stages these, steps, then calls `finish_tick`."""
        self._tick = self.engine.tick
        if self.recorder is not None:  # the tick's own counts go into its record (`finish_tick`)
            self._counts_before = [(s.late, s.invalid) for s in self.seats]
        requests = self._requests
        if self.scripted:
            requests = {s: r for s, r in requests.items() if s not in self.scripted}
        actions = self._actions = self.referee.collect(requests, self._budget)
        if self.scripted:
            for seat, script in self.scripted.items():
                if seat in self._requests and (action := script(self._tick)) is not None:
                    actions[seat] = action
            actions = self._actions = dict(sorted(actions.items()))  # in seat order, as the referee's
        self.bad_ticks += self._behind or self.referee.late_ticks > self._late_before
        return actions

    def finish_tick(self, events: Events) -> None:
        """`end_tick` after the engine: count what it found, and record what it was given."""
        for s, count in events.illegal.items():
            self.seats[s].illegal += count
        for s, count in events.malformed.items():
            self.seats[s].invalid += count
        if self.recorder is not None:
            try:
                # Exactly what apply() got, the game's events, and this tick's late and invalid answers.
                happened = events.log
                late, invalid = {}, {}
                for seat, (late_before, invalid_before) in zip(self.seats, self._counts_before, strict=True):
                    if seat.late > late_before:
                        late[seat.index] = seat.late - late_before
                    if seat.invalid > invalid_before:
                        invalid[seat.index] = seat.invalid - invalid_before
                # Only then: a recorder from before these fields still records the ticks that need none.
                referee = self.referee
                if referee.debug or referee.bank_drawn or late or invalid:
                    self.recorder.record(
                        self._tick,
                        self._actions,
                        self.engine,
                        events=happened,
                        debug=referee.debug or None,
                        bank=referee.bank_drawn or None,
                        late=late or None,
                        invalid=invalid or None,
                    )
                else:
                    self.recorder.record(self._tick, self._actions, self.engine, events=happened)
            except OSError as exc:  # a full disk must not cost the match its result
                tick = self._tick
                log.error("match %d: its replay stops at tick %d (%s); play goes on", self.number, tick, exc)
                self.recorder = None
        if self.on_tick is not None:
            self.on_tick(self.engine)

    def waiting_on_bank(self) -> float | None:
        """At the budget's end: the trio time until which a seat asked this tick may still answer on
        its time bank, or None (`Referee.waiting_on_bank`). The driver waits until then, or until
        they have answered, and asks again."""
        return self.referee.waiting_on_bank(self._budget)

    def _broadcast_frame(self, *, final: bool = False) -> None:
        if self.spectators:
            # The drawings of the tick just played (a bot draws while it answers, after its tick's
            # frame went out), to spectators only where the host shows them (`TickSettings`).
            drawn = self.referee.debug if self.settings.spectator_debug else None
            message = protocol.frame(self.engine.frame(), final=final, debug=drawn, debug_tick=self._tick)
            self.spectators.broadcast(protocol.encode(message))

    def _decided_by_forfeits(self) -> bool:
        """A match with seats to spare ends once fewer than two seats are still connected."""
        if len(self.seats) < 2:
            return False
        return sum(1 for s in self.seats if s.forfeit_tick is None) < 2

    # ----------------------------------------------------------------- the end
    async def _explain_forfeits(self) -> None:
        """A seat whose connection went may have gone because its process exited: ask the host who
        started it (`explain_gone`), within `EXPLAIN_WITHIN` seconds for all, so that the replay
        and the result say why (``exited`` with its status) rather than ``disconnected``."""
        if self.explain_gone is None:
            return
        gone = [
            s for s in self.seats
            if s.forfeit_tick is not None
            and (s.forfeit_cause is None or s.forfeit_cause.get("cause") in _EXPLAINABLE)
        ]  # fmt: skip
        with trio.move_on_after(EXPLAIN_WITHIN):
            for seat in gone:
                found = await self.explain_gone(seat.index)
                if found is not None:
                    seat.forfeit_cause = {**found, "tick": seat.forfeit_tick}

    async def close(self) -> MatchOutcome:
        """Record the result, tell every seat and spectator, let their last frames leave, hang up."""
        self.closing = True
        await self._explain_forfeits()
        result = self.referee.final_result()
        late = [s.late for s in self.seats]
        invalid = [s.invalid for s in self.seats]
        illegal = [s.illegal for s in self.seats]
        names = [s.name for s in self.seats]
        forfeits = [s.index for s in self.seats if s.forfeit_tick is not None]
        extra: dict[str, Any] = {
            "late": late, "invalid": invalid, "illegal": illegal, "names": names, "forfeits": forfeits
        }  # fmt: skip
        debug_dropped = [s.debug_dropped for s in self.seats]
        bank_drawn_ms: list[int] | None = None
        if self.settings.time_bank:
            bank_drawn_ms = [s.bank_drawn_ms for s in self.seats]
            extra["bank_drawn_ms"] = bank_drawn_ms
        if any(debug_dropped):  # said only when it happened, so other replays stay as they were
            extra["debug_dropped"] = debug_dropped
            _say_debug_dropped(self.number, self.seats)
        if self.recorder is not None:
            try:
                self.recorder.finish(result, extra)
            except OSError as exc:
                log.error("match %d: its replay lacks the result (%s)", self.number, exc)
        ranks = [result.ranks[s.index] for s in self.seats]
        for seat in self.seats:
            if seat.conn is None or seat.conn.closed:
                continue
            seat.conn.send_message(
                protocol.end(
                    ticks=result.ticks,
                    result=protocol.outcome_of(ranks[seat.index], ranks),
                    rank=ranks[seat.index],
                    ranks=ranks,
                    winner=result.winner,
                    reason=result.reason,
                    late=seat.late,
                    invalid=seat.invalid,
                    illegal=seat.illegal,
                )
            )
        self._broadcast_frame(final=True)  # the world as the last moves and transition left it
        # Spectators are told how it ended, with no seat of their own: rank 0, no counts.
        spectator_end = protocol.end(
            ticks=result.ticks, result="draw", rank=0, ranks=ranks, winner=result.winner, reason=result.reason
        )
        for conn in self.spectators:
            conn.send_message(spectator_end)
        conns = self.connections()
        async with trio.open_nursery() as nursery:
            for conn in conns:
                nursery.start_soon(conn.flush, 2.0)
        for conn in conns:
            conn.close("match over")
        return MatchOutcome(
            self.number,
            result,
            names,
            late,
            invalid,
            illegal,
            forfeits,
            result.ticks,
            late_runs=[(s.longest_late_run, s.longest_late_run_end) for s in self.seats],
            late_ticks=self.referee.late_ticks,
            behind_ticks=self.behind_ticks,
            bad_ticks=self.bad_ticks,
            debug_dropped=debug_dropped,
            bank_drawn_ms=bank_drawn_ms,
        )

    def connections(self) -> list[Connection]:
        """Every open connection of the match: its seats' and its spectators'."""
        seated = [s.conn for s in self.seats if s.conn is not None and not s.conn.closed]
        return seated + [c for c in self.spectators if not c.closed]
