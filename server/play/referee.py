"""The referee of a match: how each seat's answer counts, tick by tick, and what forfeits do to the result.

At a tick's deadline it judges every seat asked: on time, paid for by its time bank, late, invalid,
or gone (within the reconnect grace, or forfeiting); it keeps what may be kept of each seat's debug
drawing; and at the end it ranks the seats that forfeited below every seat that stayed. The match
(`match.Match`) sends the requests and owns the connections; what an answer is worth is decided here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, Protocol

import msgpack
import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol import debug as debug_layer
from cellarena.server import wall_clock
from cellarena.server.games import causes, words
from cellarena.server.games.base import Engine, Result, debug_placer, sole_first
from cellarena.server.play.seat import MISSING, Seat

log = logging.getLogger("cellarena.server")
_pack = msgpack.Packer(use_bin_type=True).pack


class Rules(Protocol):
    """What the referee reads of a match's settings (`match.TickSettings`)."""

    @property
    def max_missed_in_a_row(self) -> int | None: ...

    @property
    def reconnect_grace(self) -> float: ...

    @property
    def time_bank(self) -> float: ...


class Referee:
    """Judges the answers of one match's ``seats`` (the match's own list) as its ticks end."""

    def __init__(self, number: int, engine: Engine, settings: Rules, seats: list[Seat]) -> None:
        self.number = number
        self.engine = engine
        self.settings = settings
        self.seats = seats
        #: Ticks in which at least one connected seat's answer was late or missing.
        self.late_ticks = 0
        #: The debug drawings kept this tick, by seat (`keep_debug`).
        self.debug: dict[int, dict[str, Any]] = {}
        #: Ms of time bank each seat drew this tick.
        self.bank_drawn: dict[int, int] = {}

    def collect(self, requests: dict[int, dict[str, Any]], budget: float) -> dict[int, Any]:
        """Every seat's action for this tick; late, missing and invalid answers become no-ops."""
        actions: dict[int, Any] = {}
        any_late = False
        if self.debug:
            self.debug = {}
        if self.bank_drawn:
            self.bank_drawn = {}
        for seat in self.seats:
            if seat.index not in requests:
                continue
            conn = seat.conn
            if conn is not None and not conn.closed and not seat.answered:
                conn.drain()  # what the kernel holds now; each answer is judged by its arrival stamp
            if seat.debug is not None:
                self.keep_debug(seat, requests[seat.index])
            if (conn is None or conn.closed) and seat.forfeit_tick is None and not self._may_come_back(seat):
                self._forfeit_gone(seat)
                continue  # its forfeit is this tick's news, not one more late answer
            over = seat.arrival - (seat.sent_wall + budget) if seat.answered else math.inf
            over_ms = math.ceil(over * 1000) if over < math.inf else 0
            if over > 0 and 0 < over_ms <= seat.bank_ms:  # late, but the bank pays for it
                seat.bank_ms -= over_ms
                seat.bank_drawn_ms += over_ms
                self.bank_drawn[seat.index] = over_ms
            elif over > 0:
                self._charge_late(seat)
                any_late = any_late or seat.forfeit_tick is None
                continue
            seat.missed_in_a_row = 0
            answer = seat.answer
            action = (
                None if answer is MISSING else self.engine.decode(seat.index, requests[seat.index], answer)
            )
            if action is None:
                seat.invalid += 1
                continue
            actions[seat.index] = action
        self.late_ticks += any_late
        return actions

    def _forfeit_gone(self, seat: Seat) -> None:
        """A seat with no connection, past any grace, forfeits at its tick."""
        seat.forfeit_tick = seat.tick
        if seat.forfeit_cause is None:
            seat.forfeit_cause = self._gone_cause(seat)
        else:
            seat.forfeit_cause["tick"] = seat.tick
        log.info(
            "match %d: %s forfeits at tick %d (%s)",
            self.number, seat.name, seat.tick, seat.forfeit_cause["cause"],
        )  # fmt: skip

    def _charge_late(self, seat: Seat) -> None:
        """A late or missing answer: counted, its run measured, and a seat late too long in a row
        dropped as hung (``max_missed_in_a_row``)."""
        seat.late += 1
        seat.missed_in_a_row += 1
        if seat.forfeit_tick is None and seat.missed_in_a_row > seat.longest_late_run:
            seat.longest_late_run, seat.longest_late_run_end = seat.missed_in_a_row, seat.tick
        limit = self.settings.max_missed_in_a_row
        conn = seat.conn
        if limit is not None and seat.missed_in_a_row >= limit and conn is not None and not conn.closed:
            seat.forfeit_cause = causes.cause(causes.UNRESPONSIVE, seat.tick, ticks=limit)
            conn.fail(
                protocol.UNRESPONSIVE,
                f"no answer within the budget for {limit} ticks in a row; this seat forfeits",
            )

    def waiting_on_bank(self, budget: float) -> float | None:
        """At the budget's end: the trio time until which a seat asked this tick may still answer on
        its time bank (the latest such), or None when no seat can (all answered, no bank left,
        gone). Reads what the kernel holds for those seats first, so an answer already there is seen.
        The driver waits until then, or until they have answered, and asks again."""
        if self.settings.time_bank <= 0:
            return None
        wall, now = wall_clock.now(), trio.current_time()
        until: float | None = None
        for seat in self.seats:
            conn = seat.conn
            if seat.answered or not seat.sent_wall or conn is None or conn.closed or seat.bank_ms <= 0:
                continue
            conn.drain()
            if seat.answered or conn.closed:
                continue
            end = seat.sent_wall + budget + seat.bank_ms / 1000.0 - wall
            if end > 0:
                until = max(until or now, now + end)
        return until

    def keep_debug(self, seat: Seat, request: Mapping[str, Any]) -> None:
        """Keep what may be kept of the seat's debug drawing this tick (even with a late answer: why
        it was slow is what its author wants to see), placed on the board by the engine if it places
        cells (Rezzo: viewport cells); the rest, and all past the match's cap, dropped and counted."""
        raw, seat.debug = seat.debug, None
        try:
            cleaned = debug_layer.clean(raw, debug_placer(self.engine, seat.index, request))
        except Exception:  # a drawing must never cost the move, nor the match
            log.exception("match %d: %s's debug drawing could not be read; dropped", self.number, seat.name)
            seat.debug_dropped += 1
            return
        seat.debug_dropped += cleaned.dropped
        kept = cleaned.kept
        if kept is None:
            return
        size = len(_pack(kept))
        if seat.debug_bytes + size > debug_layer.MAX_MATCH_BYTES:
            seat.debug_dropped += sum(len(v) for v in kept.values())
            return
        seat.debug_bytes += size
        self.debug[seat.index] = kept

    def _gone_cause(self, seat: Seat) -> dict[str, Any]:
        """Why a seat with no connection forfeits: it never had one, or lost it past the grace."""
        if seat.conn is None:
            return causes.cause(causes.NEVER_CONNECTED, seat.tick)
        return causes.cause(causes.DISCONNECTED, seat.tick, grace=self.settings.reconnect_grace)

    def _may_come_back(self, seat: Seat) -> bool:
        """A seat that lost its connection within the reconnect grace keeps its seat for now."""
        grace = self.settings.reconnect_grace
        if grace <= 0 or seat.conn is None:  # never connected: nothing to come back to
            return False
        lost = seat.lost_at if seat.lost_at is not None else trio.current_time()
        return trio.current_time() - lost < grace

    def final_result(self) -> Result:
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
        winner = sole_first(ranks)
        if game is not None:
            reason = game.reason + (f"; forfeited: {', '.join(self.seats[i].name for i in forfeits)}")
        else:
            gone = (self.seats[i].forfeit_cause or {} for i in forfeits)
            how = {str(c.get("cause", causes.DISCONNECTED)) for c in gone}
            reason = words.all_forfeited(how, one_left=len(stayed) == 1)
        ends: dict[int, dict[str, Any]] = {}
        for seat in self.seats:
            i = seat.index
            if i in forfeits:
                ends[i] = dict(seat.forfeit_cause or causes.cause(causes.DISCONNECTED, forfeits[i]))
            elif game is not None and i in game.causes:
                ends[i] = dict(game.causes[i])
            else:
                text = f"{{{i}}} is the last seat still playing at tick {ticks}: every other seat forfeited"
                ends[i] = causes.cause(causes.LAST_STANDING, ticks, text=text)
        return Result(ranks=ranks, winner=winner, reason=reason, ticks=ticks, causes=ends)
