"""Ratings: the ``ratings`` table's current ratings as a game's standings, and a bot's history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from cellarena.arena.ladder.records import RatingPoint, Standing
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.bot_tables import BotTable
from cellarena.arena.ladder.store.database import parse_time
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings


class RatingTable:
    """The ``ratings`` table, read (`match_tables` writes it with each result)."""

    def __init__(self, bots: BotTable) -> None:
        self.bots = bots
        self.database = bots.database

    def rating_history(self, name: str) -> list[RatingPoint]:
        """The bot's rating after each of its finished matches, in the order they were counted."""
        bot = self.bots.bot_or_raise(name)
        with self.database.reading(f"read the rating history of bot {name!r}") as db:
            rows = db.query(
                "SELECT m.id, m.ended, s.mu_after, s.sigma_after"
                " FROM seats s JOIN matches m ON m.id = s.match_id"
                " WHERE s.bot_id = ? AND m.status = 'finished' ORDER BY m.seq",
                (bot.id,),
            )
        return [RatingPoint(int(i), parse_time(ended), Rating(mu, sigma)) for i, ended, mu, sigma in rows]

    def standings(
        self, game: str, *, include_revoked: bool = False, now: datetime | None = None
    ) -> list[Standing]:
        """``game``'s table for the season being played: the ranked bots first, then the provisional
        ones (too few rated matches, `ratings.ladder.provisional`; matches of closed seasons that carried
        their ratings over count too), each by rating (`ratings.ladder.shown`), then name. A bot with
        no finished match has the initial rating; a rated one's sigma is widened by its whole days idle
        at ``now`` (the clock's time if None: `ratings.ladder.idle`). Late and invalid answers and the
        time bank count from the season's start."""
        with self.database.reading(f"read the {game} standings") as db:
            return current_standings(db, game, include_revoked=include_revoked, now=now)


def season_start(db: Backend, game: str) -> str | None:
    """When ``game``'s current season began: the last season's close (None before the first closes)."""
    rows = db.query("SELECT MAX(closed) FROM seasons WHERE game = ?", (game,))
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def current_standings(
    db: Backend, game: str, *, include_revoked: bool = False, now: datetime | None = None
) -> list[Standing]:
    """`RatingTable.standings`, in the caller's transaction (closing a season archives exactly this)."""
    now = now or datetime.now(UTC)
    since = season_start(db, game) or ""
    rows = db.query(
        # An outside bot with a live submitted version is shown as "submitted" (the ladder runs it).
        "SELECT b.name, CASE WHEN b.kind = 'outside' AND b.live_version IS NOT NULL THEN 'submitted'"
        " ELSE b.kind END, b.revoked, r.mu, r.sigma, r.matches, r.wins, r.draws, r.losses,"
        " t.late, t.invalid, t.bank, t.last_rated, r.carried"
        " FROM bots b LEFT JOIN ratings r ON r.bot_id = b.id"
        " LEFT JOIN (SELECT s.bot_id, SUM(CASE WHEN m.ended >= ? THEN s.late END) AS late,"
        " SUM(CASE WHEN m.ended >= ? THEN s.invalid END) AS invalid,"
        " SUM(CASE WHEN m.ended >= ? THEN s.bank_drawn_ms END) AS bank,"
        " MAX(CASE WHEN m.rated THEN m.ended END) AS last_rated"
        " FROM seats s JOIN matches m ON m.id = s.match_id"
        " WHERE m.status = 'finished' GROUP BY s.bot_id) t ON t.bot_id = b.id"
        " WHERE b.game = ?",
        (since, since, since, game),
    )
    start = ratings.initial()
    table = []
    for name, kind, revoked, mu, sigma, n, wins, draws, losses, late, invalid, bank, last, carried in rows:
        if revoked is not None and not include_revoked:
            continue
        r = start if mu is None else Rating(mu, sigma)
        if mu is not None and last is not None:
            r = ratings.idle(r, ratings.idle_days(parse_time(last), now))
        counts = (n or 0, wins or 0, draws or 0, losses or 0, int(late or 0), int(invalid or 0))
        provisional = ratings.provisional((n or 0) + (carried or 0))
        table.append(Standing(0, name, kind, r.mu, r.sigma, *counts, int(bank or 0), provisional))
    table.sort(key=lambda s: (s.provisional, -s.rating, s.bot))
    return [replace(s, rank=i) for i, s in enumerate(table, 1)]
