"""The ladder's way of seating bots, as the lobby sees it: one `Seating` over the ladder's services.

The ladder is four services with one lifecycle (`lifecycle`), each with its own state and task:

- `admission.Admission`: hellos, tokens, lock-outs and limits, and revokes or rotations made elsewhere;
- `queue.MatchQueue`: the bots that wait, and the pass timer that pairs them (`matchmaker`);
- `starter.MatchStarter`: each pairing written down and played, here or on the cluster;
- `match_results.Results`: results and voids written in order, kept on disk in an outage, and the ratings.

`LadderSeating` only connects them to the lobby (a hello goes to admission, the lobby's matches to the
starter) and to the database's change log (`changes.DatabaseWatch`, whose listener it is). Its `run`,
which the lobby starts, runs the services; `wiring.run_ladder` drives the rest of their lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from cellarena.arena.ladder.records import Change
from cellarena.arena.ladder.services.admission import Admission
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.lifecycle import Services
from cellarena.arena.ladder.services.match_results import Results
from cellarena.arena.ladder.services.queue import MatchQueue
from cellarena.arena.ladder.services.starter import MatchStarter
from cellarena.server.net.connection import Connection
from cellarena.server.play.seating import MatchHost, Seating

#: Changes after which the ratings and house bots are read again (a bot added, revoked, paused, banned,
#: back; a season closed).
_RATING_CHANGES = frozenset(
    {"bot_added", "bot_revoked", "bot_paused", "bot_resumed", "bot_banned", "bot_unbanned", "season_closed"}
)


class LadderSeating(Seating):
    """Seats identified bots from a rated queue, through the ladder's services (module docstring)."""

    def __init__(
        self,
        admission: Admission,
        queue: MatchQueue,
        starter: MatchStarter,
        results: Results,
        database: DatabaseWatch,
    ) -> None:
        self.admission = admission
        self.queue = queue
        self.starter = starter
        self.results = results
        #: The change log's poller and the database's state.
        self.database = database
        #: In dependency order: the queue pairs by the results' ratings, admission feeds the queue.
        self.services = Services([results, starter, queue, admission])
        #: Told of every accepted connection, and of every bot hello with its refusal (code, message)
        #: or None (`house.HouseBots.connected`, `.hello`, wired by `wiring.run_ladder`): a house
        #: bot's launch that never joins the queue is a failure with a cause, as a seat's would be.
        self.on_connected: Callable[[Connection], None] | None = None
        self.on_hello: Callable[[Connection, dict[str, Any], tuple[str, str] | None], None] | None = None
        #: The launch secret of a connection the ladder made and handed to a bot it started (an
        #: isolated submitted bot has no network to connect with: `handed.HandedConnections.secret`).
        self.handed_secret: Callable[[Connection], str | None] | None = None

    def bind(self, lobby: MatchHost) -> None:
        super().bind(lobby)
        self.starter.bind(lobby)

    # ----------------------------------------------------------------- the lobby's seating
    def connected(self, conn: Connection) -> None:
        if self.on_connected is not None:
            self.on_connected(conn)

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        return self.admission.check(conn, self._with_secret(conn, hello))

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        if self.on_hello is not None:
            self.on_hello(conn, self._with_secret(conn, hello), (code, message))

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        hello = self._with_secret(conn, hello)
        if self.on_hello is not None:
            self.on_hello(conn, hello, None)
        self.admission.admit(conn, hello)

    def _with_secret(self, conn: Connection, hello: dict[str, Any]) -> dict[str, Any]:
        """``hello``, with its launch's secret as its token if the ladder handed ``conn`` to the bot
        (which owns its seat by that, as a handed connection does in a match: docs/protocol.md), and
        without ``redirect`` in what it accepts: a bot with no network cannot follow one (its matches
        are played here)."""
        secret = None if self.handed_secret is None else self.handed_secret(conn)
        if secret is None:
            return hello
        accepts = hello.get("accepts", ())
        kept = [a for a in accepts if a != "redirect"] if isinstance(accepts, list | tuple) else accepts
        return {**hello, "token": secret, "accepts": kept}

    def waiting(self) -> list[Connection]:
        return self.admission.waiting()

    def spectate(self, conn: Connection, hello: dict[str, Any]) -> bool:
        return self.starter.spectate(conn, hello)

    async def run(self) -> None:
        """Run the services and the change log's poller, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.database.run, self)
            await self.services.run()

    # ----------------------------------------------------------------- changes made elsewhere
    async def on_changes(self, changes: list[Change]) -> None:
        """`DatabaseWatch`'s listener: act on what the ladder's commands (other processes) changed."""
        names = {c.bot for c in changes if c.bot is not None}
        await self.admission.check_bots(names)
        if any(c.kind in _RATING_CHANGES for c in changes):
            await self.results.load_ratings()  # house bots come and go with the table; a season resets it
        self.queue.stats.pauses += sum(1 for c in changes if c.kind == "bot_paused")
        if any(c.kind == "challenge" for c in changes):
            await self.queue.load_challenges()

    async def on_back(self) -> None:
        """The database answers again: write the results kept on disk, and check every session
        against the store (the change log may have moved on while it could not be read)."""
        await self.results.on_back()
        await self.admission.check_everyone()
