"""A seat of a match: the owner of its bot's connection for the match, and its accounting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol.fields import is_int
from cellarena.server.games.base import Engine
from cellarena.server.net.connection import Connection

#: The `moves` of an answer without that field: no game reads it as an action, so it is invalid.
MISSING: Any = object()
#: What a seated bot may send (the protocol's state table): its answers.
_PLAYING_SENDS = protocol.client_sends(protocol.State.PLAYING)


class FloodLimits(Protocol):
    """The flood limits a seat holds its bot to (`match.TickSettings`)."""

    @property
    def messages_per_tick(self) -> float: ...

    @property
    def message_burst(self) -> float: ...


class SeatsMatch(Protocol):
    """What a seat needs of its match (`match.Match`): its limits, its world's tick, and a word when
    the seat has answered or can no longer answer."""

    @property
    def settings(self) -> FloodLimits: ...

    @property
    def engine(self) -> Engine: ...

    def answer_came(self) -> None: ...


@dataclass(eq=False)
class Seat:
    """One player of a match: the owner of its bot's connection, and its accounting.

    As the connection's owner it takes the bot's answers (`on_message`) and hears when the
    connection ends (`on_closed`).
    """

    index: int
    name: str
    match: SeatsMatch = field(repr=False)
    conn: Connection | None = None
    late: int = 0
    invalid: int = 0
    illegal: int = 0
    forfeit_tick: int | None = None
    #: Why the seat forfeits (or will, once its connection is gone): a cause map (`causes`).
    forfeit_cause: dict[str, Any] | None = None
    missed_in_a_row: int = 0
    #: The longest run of late ticks so far, and the tick it ended (or goes on) at.
    longest_late_run: int = 0
    longest_late_run_end: int = 0
    #: trio time the connection was lost, while the seat waits for its bot to come back.
    lost_at: float | None = None
    # the tick being answered, and what the seat was asked
    tick: int = -1
    request: dict[str, Any] | None = None
    sent_wall: float = 0.0
    answer: Any = None
    #: The seat answered this tick (its answer may be nil: drop2df's pass).
    answered: bool = False
    arrival: float = 0.0
    #: Messages the seat may still send: the flood limit's token bucket.
    allowance: float = 0.0
    #: The ``debug`` map of this tick's answer, as sent (None: none).
    debug: Any = None
    #: Bytes of debug kept so far (against `debug_layer.MAX_MATCH_BYTES`), and entries dropped.
    debug_bytes: int = 0
    debug_dropped: int = 0
    #: Whole ms of time bank left, and drawn so far (each late answer charged its ms over, rounded
    #: up, so that the replay's per-tick figures add up to the total).
    bank_ms: int = 0
    bank_drawn_ms: int = 0

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        match = self.match
        self.allowance -= 1
        if self.allowance < 0:
            settings = match.settings
            conn.fail(
                protocol.FLOOD,
                f"more than {settings.messages_per_tick:g} messages per tick on average "
                f"(bursts up to {settings.message_burst:g}); send one answer per tick",
            )
            return
        kind = message["type"]
        if kind not in _PLAYING_SENDS:  # one set lookup per answer: the table is asked only then
            refusal = protocol.client_refusal(protocol.State.PLAYING, kind)
            assert refusal is not None
            conn.fail(*refusal)
            return
        tick = message.get("tick")
        if not is_int(tick):  # no request to place it with: a protocol error, not a bad answer
            got = "is missing" if tick is None else f"must be an int (got {type(tick).__name__} {tick!r:.40})"
            conn.fail(protocol.BAD_MESSAGE, f"moves: the field 'tick' {got}; echo the tick you answer")
            return
        if tick != self.tick or self.answered:
            return  # an old tick's answer, or a second: only the first counts
        # A missing `moves` is a malformed answer (invalid), never a silent one (late): `decode` judges.
        self.answer = message.get("moves", MISSING)
        if "debug" in message:  # one lookup: a bot that never draws pays nothing more
            self.debug = message["debug"]
        self.answered = True
        self.arrival = arrival
        match.answer_came()

    def on_closed(self, conn: Connection) -> None:
        self.lost_at = trio.current_time()
        # Stop waiting for a seat that can no longer answer this tick.
        if not self.answered and self.tick == self.match.engine.tick and self.sent_wall:
            self.match.answer_came()
