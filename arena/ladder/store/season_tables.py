"""Seasons: the ``seasons`` and ``season_standings`` tables; closing a season and reading it back."""

from __future__ import annotations

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.identity import names
from cellarena.arena.ladder.records import Season, Standing
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.change_log import ChangeLog
from cellarena.arena.ladder.store.database import Database, now, parse_time
from cellarena.arena.ladder.store.rating_tables import current_standings, season_start
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings
from cellarena.arena.ratings.seasons import START_NEXT, StartNext, next_season

#: The longest name a season may be given (it is shown as a page's title).
MAX_SEASON_NAME = 80

_SEASON_COLUMNS = "game, number, name, started, closed, start_next"


class SeasonTable:
    """Closed seasons and their archived tables, per game."""

    def __init__(self, database: Database, changes: ChangeLog) -> None:
        self.database = database
        self.changes = changes

    def close_season(
        self, game: str, how: StartNext, *, name: str | None = None, actor: str | None = None
    ) -> Season:
        """Close ``game``'s season: archive its table as `standings` shows it now, revoked bots too
        (their matches counted), and start the next one (``how``: `ratings.seasons.next_season`); the
        counts of matches, wins, draws and losses start again from 0. One transaction: a result
        counted at the same moment lands wholly in the closed season or wholly in the next."""
        names.check_name(game, "game")
        if how not in START_NEXT:
            raise LadderStoreError(f"a season starts by {' or '.join(START_NEXT)}, not {how!r}")
        if name is not None and not (0 < len(name.strip()) <= MAX_SEASON_NAME and name.isprintable()):
            raise LadderStoreError(
                f"a season's name is 1 to {MAX_SEASON_NAME} printable characters, got {name!r}"
            )
        with self.database.writing(f"close the {game} season") as db:
            closed = parse_time(now())
            number = self._closed_count(db, game) + 1
            started = season_start(db, game) or self._first_match(db, game) or closed.isoformat()
            title = name.strip() if name is not None else f"Season {number}"
            # Read before the season's row is written: the table counts from the season's start.
            table = current_standings(db, game, include_revoked=True, now=closed)
            season_id = int(
                db.query(
                    "INSERT INTO seasons (game, number, name, started, closed, start_next, last_seq)"
                    " VALUES (?, ?, ?, ?, ?, ?, (SELECT MAX(seq) FROM matches)) RETURNING id",
                    (game, number, title, started, closed.isoformat(timespec="microseconds"), how),
                )[0][0]
            )
            for s in table:
                db.execute(
                    "INSERT INTO season_standings (season_id, rank, bot, kind, mu, sigma, matches, wins,"
                    " draws, losses, late, invalid, bank_drawn_ms, provisional)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (season_id, s.rank, s.bot, s.kind, s.mu, s.sigma, s.matches, s.wins, s.draws, s.losses,
                     s.late, s.invalid, s.bank_drawn_ms, s.provisional),
                )  # fmt: skip
            self._start_next(db, game, how)
            self.changes.note(db, "season_closed", None)
            self.changes.audit(db, actor, "close_season", None, f"{game} {title}: next {how}")
        return Season(game, number, title, parse_time(started), closed, how)

    def seasons(self, game: str) -> list[Season]:
        """``game``'s closed seasons, oldest first."""
        with self.database.reading(f"read the {game} seasons") as db:
            rows = db.query(f"SELECT {_SEASON_COLUMNS} FROM seasons WHERE game = ? ORDER BY number", (game,))
        return [_season(row) for row in rows]

    def season_standings(self, game: str, number: int) -> tuple[Season, list[Standing]]:
        """Closed season ``number`` of ``game`` and its table as it stood at the close."""
        with self.database.reading(f"read season {number} of {game}") as db:
            found = db.query(
                f"SELECT id, {_SEASON_COLUMNS} FROM seasons WHERE game = ? AND number = ?", (game, number)
            )
            if not found:
                raise LadderStoreError(
                    f"{game} has no closed season {number}; `cellarena ladder season list {game}` lists them"
                )
            season_id, *season = found[0]
            rows = db.query(
                "SELECT rank, bot, kind, mu, sigma, matches, wins, draws, losses, late, invalid,"
                " bank_drawn_ms, provisional FROM season_standings WHERE season_id = ? ORDER BY rank",
                (season_id,),
            )
        table = [
            Standing(
                int(rank), bot, kind, mu, sigma, int(n), int(w), int(d), int(lost),
                late=int(late), invalid=int(invalid), bank_drawn_ms=int(bank), provisional=bool(provisional),
            )
            for rank, bot, kind, mu, sigma, n, w, d, lost, late, invalid, bank, provisional in rows
        ]  # fmt: skip
        return _season(tuple(season)), table

    @staticmethod
    def _closed_count(db: Backend, game: str) -> int:
        return int(db.query("SELECT COUNT(*) FROM seasons WHERE game = ?", (game,))[0][0])

    @staticmethod
    def _first_match(db: Backend, game: str) -> str | None:
        rows = db.query("SELECT MIN(started) FROM matches WHERE game = ?", (game,))
        return None if rows[0][0] is None else str(rows[0][0])

    @staticmethod
    def _start_next(db: Backend, game: str, how: StartNext) -> None:
        """Every rated bot of ``game`` starts the next season: its rating as ``how`` says, its counts at
        0, its rated matches kept towards leaving the provisional list when its rating carries over."""
        rows = db.query(
            "SELECT r.bot_id, r.mu, r.sigma, r.matches FROM ratings r JOIN bots b ON b.id = r.bot_id"
            " WHERE b.game = ?",
            (game,),
        )
        start = ratings.initial()
        for bot_id, mu, sigma, matches in rows:
            if how == "reset":
                db.execute("DELETE FROM ratings WHERE bot_id = ?", (bot_id,))
                continue
            r = next_season(Rating(mu, sigma), start, how)
            db.execute(
                "UPDATE ratings SET mu = ?, sigma = ?, carried = carried + ?, matches = 0, wins = 0,"
                " draws = 0, losses = 0 WHERE bot_id = ?",
                (r.mu, r.sigma, int(matches), bot_id),
            )


def _season(row: tuple[object, ...]) -> Season:
    game, number, name, started, closed, start_next = row
    times = parse_time(str(started)), parse_time(str(closed))
    return Season(str(game), int(str(number)), str(name), *times, str(start_next))
