"""How a running ladder server hears of what the ladder's commands and pages change, and of its database.

**One channel.** `ladder bot revoke`, `ladder bot rotate`, `ladder bot add` (and later sign-up,
pausing, challenges from the pages) are other processes: they write to the database, and in the same
transaction a row to its ``changes`` log (`LadderStore.changes_since`). `DatabaseWatch` polls that log
every ``every`` seconds (0.5) and hands new rows to its listener, the seating, which acts on them: a
revoked bot's sessions end, a rotated token's connections end. So a change takes effect within one
poll, plus the query's time. A feature that needs the server to act on something a command or a page
did adds a kind of change and a branch in the listener, not another channel.

**The database's state.** The same poll is the probe of the database: a poll that fails marks it
*down* (logged once, with the error), and from then on the watch tries to connect again with back-off
(0.25 s, doubling, at most 2 s apart) instead of polling. Once a connection succeeds (and the one-server
lock is taken again: `LadderStore.reconnect`) it is *up* again (logged with how long it was down), and
the listener's `on_back` runs: results kept on disk meanwhile are written, and every session is checked
against the store, since the change log may have moved on in the meantime. If another ladder server
took the database during the outage, `ServerClaimLostError` ends `run`, and with it the server.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime
from typing import Literal, Protocol

import trio

from cellarena.arena.ladder.errors import LadderStoreError, ServerClaimLostError
from cellarena.arena.ladder.records import Change
from cellarena.arena.ladder.rules import POLL_EVERY
from cellarena.arena.ladder.store.ladder_store import LadderStore

log = logging.getLogger("cellarena.ladder")

#: The first wait before connecting again, doubled after each failure up to `RECONNECT_CAP`.
RECONNECT_FIRST = 0.25
RECONNECT_CAP = 2.0
#: While the database stays down, a reminder in the log this often (seconds).
REMIND_EVERY = 60.0

State = Literal["up", "down"]


class WatchListener(Protocol):
    async def on_changes(self, changes: list[Change]) -> None:
        """New rows of the change log, oldest first."""

    async def on_back(self) -> None:
        """The database answers again after an outage."""


class DatabaseWatch:
    """Polls ``store``'s change log and tells its state (see the module docstring)."""

    def __init__(self, store: LadderStore, *, every: float = POLL_EVERY) -> None:
        self.store = store
        self.every = every
        self.state: State = "up"
        #: When the state last changed (UTC).
        self.since = datetime.now(UTC)
        #: Why it is down (the store's message, which names the database); None while up.
        self.error: str | None = None
        #: The newest change seen; None until `start`.
        self.last_change: int | None = None
        self._failures = 0
        self._reminded = -math.inf
        #: Failed polls and connection attempts since the server started (``/metrics``).
        self.errors = 0

    @property
    def up(self) -> bool:
        return self.state == "up"

    async def start(self) -> None:
        """Begin at the newest change: what happened before this server started is in the store."""
        try:
            self.last_change = await trio.to_thread.run_sync(self.store.last_change)
        except LadderStoreError as exc:
            self._down(exc)

    async def run(self, listener: WatchListener) -> None:
        """Poll until cancelled; `ServerClaimLostError` if another server took the database."""
        if self.last_change is None:
            await self.start()
        while True:
            await trio.sleep(self.every if self.up else self._backoff())
            was_up = self.up
            try:
                if not self.up or not self.store.connected:
                    await trio.to_thread.run_sync(self.store.reconnect)
                if self.last_change is None:
                    self.last_change = await trio.to_thread.run_sync(self.store.last_change)
                changes = await trio.to_thread.run_sync(self.store.changes_since, self.last_change)
            except ServerClaimLostError as exc:
                self._down(exc)
                raise
            except LadderStoreError as exc:
                self._down(exc)
                continue
            if not was_up:
                self._back()
                await listener.on_back()
            if changes:
                self.last_change = changes[-1].id
                await listener.on_changes(changes)

    def _backoff(self) -> float:
        self._failures += 1
        return min(RECONNECT_CAP, RECONNECT_FIRST * 2.0 ** min(self._failures - 1, 16))

    def _down(self, exc: LadderStoreError) -> None:
        now = trio.current_time()
        self.errors += 1
        self.error = str(exc)
        if self.up:
            self.state, self.since = "down", datetime.now(UTC)
            self._reminded = now
            log.error(
                "ladder database unreachable: %s; bots are refused with `shutdown` (come back later) and "
                "results are kept on disk until it answers again",
                exc,
            )
        elif now - self._reminded >= REMIND_EVERY:
            self._reminded = now
            down = (datetime.now(UTC) - self.since).total_seconds()
            log.error("ladder database still unreachable after %.0f s: %s", down, exc)

    def _back(self) -> None:
        down = (datetime.now(UTC) - self.since).total_seconds()
        self.state, self.since, self.error, self._failures = "up", datetime.now(UTC), None, 0
        log.warning("ladder database %s answers again after %.1f s down", self.store.where, down)

    def to_json(self) -> dict[str, object]:
        """The database's state, for the health endpoint."""
        return {
            "state": self.state,
            "since": self.since.isoformat(timespec="seconds"),
            "where": self.store.where,
            "error": self.error,
        }
