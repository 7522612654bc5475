"""The matches under way in the ladder's own lobby, and their seats: who may take one back.

A bot whose connection went comes back within the grace on a new one and takes its seat again
(`reattach`); while the database is down it is known by the digest of the token it played with
(`seat_of`, `reattach_known`). The starter (`starter.MatchStarter.live`) keeps one of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.records import BotRecord
from cellarena.server.net.connection import Connection
from cellarena.server.play.match import Match


@dataclass
class Live:
    """A ladder match under way here: its match in the lobby, its id in the store, its bots by seat."""

    match: Match
    ladder_id: int
    bots: tuple[BotRecord, ...]
    #: Per seat, the digest of the token its connection identified itself with.
    digests: list[str | None] = field(default_factory=list)


class LiveMatches(dict[Match, Live]):
    """The matches under way here, by their match in the lobby."""

    def reattach(self, conn: Connection, bot: BotRecord, digest: str | None = None) -> bool:
        """A bot back on a new connection while its seat waits for it: it takes the seat again."""
        for live in self.values():
            for index, seated in enumerate(live.bots):
                seat = live.match.seats[index]
                if seated.id != bot.id or seat.connected or seat.forfeit_tick is not None:
                    continue
                if live.match.over:
                    continue
                live.match.reattach(index, conn)
                if index < len(live.digests):
                    live.digests[index] = digest
                return True
        return False

    def seat_of(self, token: str) -> tuple[BotRecord, str] | None:
        """The bot of a match under way here that identified itself with ``token``, and its digest."""
        if not tokens.looks_like_token(token):
            return None
        digest = tokens.token_digest(token)
        for live in self.values():
            for index, known in enumerate(live.digests):
                if known is not None and tokens.digests_equal(known, digest):
                    return live.bots[index], digest
        return None

    def reattach_known(self, conn: Connection, token: str) -> bool:
        """Without the database (an outage), a bot may still take back its seat in a match under way
        here: the token it played with is known by its digest. A seat whose old connection the server
        has not yet seen close is taken too (the bot, which cannot queue now, is back on a new one);
        one that lost its connection first."""
        if not tokens.looks_like_token(token):
            return False
        digest = tokens.token_digest(token)
        seats = [
            (live.match.seats[index].connected, live, index)
            for live in self.values()
            if not live.match.over
            for index, known in enumerate(live.digests)
            if known is not None
            and tokens.digests_equal(known, digest)
            and live.match.seats[index].forfeit_tick is None
        ]
        if not seats:
            return False
        _, live, index = min(seats, key=lambda s: s[0])
        conn.name = live.bots[index].name
        live.match.reattach(index, conn)
        return True

    def matches_here(self, bot: BotRecord) -> int:
        """How many matches under way here ``bot`` plays."""
        return sum(1 for live in self.values() if any(b.id == bot.id for b in live.bots))
