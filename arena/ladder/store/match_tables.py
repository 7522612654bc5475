"""Matches and their seats: the ``matches`` and ``seats`` tables, and the ratings a result writes.

A match is written when it starts (`begin_match`, ``running``), and its end in one transaction
(`finish_match`): the store reads the seats' bots (`MatchState`), the caller's ``settle`` decides what
changes (`scoring.settlement.settle`: ratings, failures, pauses), and the store writes that.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from cellarena.arena.ladder.errors import (
    ChallengeRefusedError,
    LadderStoreError,
    MatchNotRunningError,
    SeatRefusedError,
)
from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.records import BotMatch, MatchRecord, MatchState, SeatBot, SeatResult, Settlement
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.bot_tables import BotTable
from cellarena.arena.ladder.store.database import now, parse_time
from cellarena.arena.ladder.store.rows import MATCH_QUERY, match_records, rating
from cellarena.arena.ladder.store.settings import Settings
from cellarena.arena.ratings import ladder as ratings
from cellarena.sdk.protocol import is_int

log = logging.getLogger("cellarena.ladder")

#: Seeds are stored as BIGINT.
SEED_LIMIT = 2**63
#: The largest id a BIGINT column holds; a larger id names no match.
MAX_ID = 2**63 - 1
#: Above every match id: the first page of a match list.
_PAST_LAST_ID = MAX_ID
VOID_ON_START = "the ladder server stopped before the match ended"

#: Decides what a match's end changes (`scoring.settlement.settle`): the state, the results, the ticks.
Settle = Callable[[MatchState, Sequence[SeatResult], int], Settlement]

_FINISH_SEAT = (
    "UPDATE seats SET rank = ?, late = ?, invalid = ?, illegal = ?, forfeit = ?,"
    " mu_before = ?, sigma_before = ?, mu_after = ?, sigma_after = ?, cause = ?, bank_drawn_ms = ?"
    " WHERE match_id = ? AND seat = ?"
)
#: A bot's new rating and one more win, draw or loss (a bot's first match creates its row).
_ADD_RESULT = (
    "INSERT INTO ratings (bot_id, mu, sigma, matches, wins, draws, losses) VALUES (?, ?, ?, 1, ?, ?, ?)"
    " ON CONFLICT (bot_id) DO UPDATE SET mu = excluded.mu, sigma = excluded.sigma,"
    " matches = ratings.matches + 1, wins = ratings.wins + excluded.wins,"
    " draws = ratings.draws + excluded.draws, losses = ratings.losses + excluded.losses"
)
#: ``seq`` numbers results in the order they are counted, under the write lock.
_FINISH_MATCH = (
    "UPDATE matches SET status = 'finished', seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM matches),"
    " winner = ?, reason = ?, ticks = ?, replay = ?, ended = ? WHERE id = ? AND status = 'running'"
)
#: The version a bot played its last finished match under, other than this one.
_LAST_VERSION = (
    "SELECT s.version FROM seats s JOIN matches m ON m.id = s.match_id"
    " WHERE s.bot_id = ? AND m.status = 'finished' AND m.id <> ? ORDER BY m.seq DESC LIMIT 1"
)

#: When a bot's last rated match ended, other than this one (NULL: none).
_LAST_RATED = (
    "SELECT MAX(m.ended) FROM seats s JOIN matches m ON m.id = s.match_id"
    " WHERE s.bot_id = ? AND m.status = 'finished' AND m.rated AND m.id <> ?"
)


class MatchTable:
    """The ``matches`` and ``seats`` tables (and the ``ratings`` rows a result changes)."""

    def __init__(self, bots: BotTable) -> None:
        self.bots = bots
        self.database = bots.database

    def begin_match(
        self,
        game: str,
        map: str | None,
        seed: int,
        bot_ids: Sequence[int],
        digests: Sequence[str | None] | None = None,
        *,
        versions: Sequence[str | None] | None = None,
        challenge: int | None = None,
    ) -> int:
        """Record a match as ``running`` (committed at once, so a crash mid-match leaves a trace); its id.

        ``bot_ids`` are the seats in order: active bots of ``game``, at least two, each once. With
        ``digests`` (per seat, the digest of the token its connection gave, or None), a seat whose bot's
        token has been rotated since is refused too. A seat that cannot play raises `SeatRefusedError`
        (a ValueError) naming its bot, and nothing is written: the caller drops that pairing. A paused
        or banned bot is refused likewise (``why`` "paused").

        ``versions`` are per seat, the version each bot's hello carried (None: none). With
        ``challenge``, the match plays that pending challenge: it is marked played, in the same
        transaction, and the match is rated as the challenge says.
        """
        ids = list(bot_ids)
        if len(ids) < 2 or len(set(ids)) != len(ids):
            raise ValueError(f"a match needs two or more different bots, not {ids}")
        if not is_int(seed) or not 0 <= seed < SEED_LIMIT:
            raise ValueError(f"seed {seed!r}: give an int from 0 to 2**63 - 1")
        with self.database.writing(f"record the start of a {game} match") as db:
            given = list(digests) if digests is not None else [None] * len(ids)
            for bot_id, digest in zip(ids, given, strict=True):
                self._check_seat(db, game, bot_id, digest)
            rated = True
            if challenge is not None:
                found = db.query(
                    "SELECT rated FROM challenges WHERE id = ? AND status = 'pending'", (challenge,)
                )
                if not found:
                    where = self.database.where
                    raise ChallengeRefusedError(f"{where}: challenge {challenge} is no longer pending")
                rated = bool(found[0][0])
            match_id = int(
                db.query(
                    "INSERT INTO matches (game, map, seed, status, started, rated)"
                    " VALUES (?, ?, ?, 'running', ?, ?) RETURNING id",
                    (game, map, seed, now(), rated),
                )[0][0]
            )
            said = list(versions) if versions is not None else [None] * len(ids)
            for seat, (bot_id, version) in enumerate(zip(ids, said, strict=True)):
                db.execute(
                    "INSERT INTO seats (match_id, seat, bot_id, version) VALUES (?, ?, ?, ?)",
                    (match_id, seat, bot_id, version),
                )
            if challenge is not None:
                db.execute(
                    "UPDATE challenges SET status = 'played', match_id = ? WHERE id = ?",
                    (match_id, challenge),
                )
        return match_id

    @staticmethod
    def _check_seat(db: Backend, game: str, bot_id: int, digest: str | None) -> None:
        """`SeatRefusedError` if the bot cannot take a seat of a ``game`` match now."""
        rows = db.query(
            "SELECT name, game, revoked, token_digest, paused, banned FROM bots WHERE id = ?", (bot_id,)
        )
        if not rows:
            raise ValueError(f"there is no bot with id {bot_id}")
        name, bot_game, revoked, current, paused, banned = rows[0]
        if revoked is not None:
            why, text = "revoked", "is revoked"
        elif banned is not None or paused is not None:
            why, text = "paused", "is banned" if banned is not None else f"is paused ({paused})"
        elif bot_game != game:
            why, text = "game", f"plays {bot_game}"
        elif digest is not None and not tokens.digests_equal(digest, str(current)):
            why, text = "rotated", "has a new token since its connection identified itself"
        else:
            return
        raise SeatRefusedError(name, why, f"bot {name!r} cannot play this {game} match: it {text}")

    def finish_match(
        self,
        match_id: int,
        seats: Sequence[SeatResult],
        *,
        reason: str,
        ticks: int,
        replay: str | None = None,
        settle: Settle,
    ) -> MatchRecord:
        """Count a running match's result, all in one transaction: the match row, each seat's result and
        rating before/after, and the bots' new ratings. The finished match.

        What changes is ``settle``'s to decide (`scoring.settlement.settle`, the results service's),
        from the seats' bots as they are in this transaction and the host's policy as the server last
        wrote it (`MatchState`); the store writes it: seats, ratings, failures in a row, and a pause
        with its reason, logged to the change log for the server.

        ``seats`` are in seat order. A match that is not running (finished already, or void) raises
        `MatchNotRunningError` and nothing changes. A database fault raises `LadderStoreError` and
        nothing is written: the match stays running, to be finished again or voided at the next start.
        """
        results = list(seats)
        for r in results:
            if not is_int(r.rank) or r.rank < 1:
                raise ValueError(f"match {match_id}: rank {r.rank!r}: ranks are 1 for first place, 2, ...")
            if min(r.late, r.invalid, r.illegal) < 0:
                raise ValueError(f"match {match_id}: negative counts in {r}")
        after = "; the match stays running until its result is recorded (a restart of the server voids it)"
        with self.database.writing(f"record the result of match {match_id}", after) as db:
            self.check_running(db, match_id, "finish")
            ended = now()
            state = self._state(db, match_id, parse_time(ended))
            if len(state.seats) != len(results):
                raise ValueError(f"match {match_id} has {len(state.seats)} seats, not {len(results)}")
            settled = settle(state, results, ticks)
            for change, r in zip(settled.seats, results, strict=True):
                counts = (r.rank, r.late, r.invalid, r.illegal, bool(r.forfeit))
                moved = (change.before.mu, change.before.sigma, change.after.mu, change.after.sigma)
                cause = None if r.cause is None else json.dumps(r.cause, sort_keys=True)
                db.execute(_FINISH_SEAT, (*counts, *moved, cause, r.bank_drawn_ms, match_id, change.seat))
                self.bots.write_count(db, change.bot_id, change.name, change.count)
                if settled.rated:
                    won = tuple(int(change.outcome == o) for o in ("win", "draw", "loss"))
                    db.execute(_ADD_RESULT, (change.bot_id, change.after.mu, change.after.sigma, *won))
            # Last, so that a fault anywhere above (a full disk, say) is seen to undo the seats and ratings.
            if db.execute(_FINISH_MATCH, (settled.winner, reason, ticks, replay, ended, match_id)) != 1:
                # Cannot happen under the write lock; if it does, count nothing.
                raise MatchNotRunningError(
                    f"{self.database.where}: match {match_id} stopped running while being finished"
                )
        return self.match_or_raise(match_id)

    @staticmethod
    def _state(db: Backend, match_id: int, ended: datetime) -> MatchState:
        """The running match's seats' bots as they are now (their days idle at ``ended``), and the
        host's policy."""
        rated = bool(db.query("SELECT rated FROM matches WHERE id = ?", (match_id,))[0][0])
        rows = db.query(
            "SELECT s.seat, s.bot_id, b.name, r.mu, r.sigma, s.version, b.failures, b.paused FROM seats s"
            " JOIN bots b ON b.id = s.bot_id"
            " LEFT JOIN ratings r ON r.bot_id = s.bot_id WHERE s.match_id = ? ORDER BY s.seat",
            (match_id,),
        )
        seats = []
        for seat, bot_id, name, mu, sigma, version, failures, paused in rows:
            last = None
            if version is not None:
                found = db.query(_LAST_VERSION, (bot_id, match_id))
                last = found[0][0] if found else None
            last_rated = db.query(_LAST_RATED, (bot_id, match_id))[0][0]
            idle = ratings.idle_days(None if last_rated is None else parse_time(last_rated), ended)
            seats.append(
                SeatBot(
                    int(seat),
                    int(bot_id),
                    str(name),
                    rating(mu, sigma),
                    version,
                    last,
                    int(failures or 0),
                    paused,
                    idle,
                )
            )
        return MatchState(rated, Settings.read_policy(db), tuple(seats))

    def void_match(self, match_id: int, reason: str) -> MatchRecord:
        """Mark a running match void: it ended without a result that counts (no rating changes)."""
        with self.database.writing(f"void match {match_id}") as db:
            self.check_running(db, match_id, "void")
            db.execute(
                "UPDATE matches SET status = 'void', reason = ?, ended = ? WHERE id = ?",
                (reason, now(), match_id),
            )
        log.warning("ladder: match %d void: %s", match_id, reason)
        return self.match_or_raise(match_id)

    def void_running(self, reason: str = VOID_ON_START, *, game: str | None = None) -> list[MatchRecord]:
        """Claim the database as its one ladder server for ``game`` (every game if None), then void
        every match of that game still running; those matches.

        Call it once, when the ladder server starts, before it begins any match: matches running then
        were cut short by the previous server's death. The claim (a lock held until `close`) makes a second
        server of the same game on the same database fail here, instead of voiding the first one's live
        matches; a server of another game claims its own game and leaves these matches alone. Tools that
        only read, or add bots, never call it.
        """
        with self.database.lock:
            self.database.claim_server(game)
            which = "" if game is None else " AND game = ?"
            with self.database.writing("void the matches that the last server left running") as db:
                ids = [
                    int(i)
                    for (i,) in db.query(
                        "UPDATE matches SET status = 'void', reason = ?, ended = ? WHERE status = 'running'"
                        f"{which} RETURNING id",
                        (reason, now()) + (() if game is None else (game,)),
                    )
                ]
        for match_id in sorted(ids):
            log.warning("ladder: match %d void: %s", match_id, reason)
        return [self.match_or_raise(i) for i in sorted(ids)]

    def highest_match_id(self) -> int:
        """The highest match id handed out so far (0 for none): new matches get higher ids."""
        with self.database.reading("read the highest match id") as db:
            rows = db.query("SELECT MAX(id) FROM matches")
        return int(rows[0][0] or 0)

    def check_running(self, db: Backend, match_id: int, verb: str) -> None:
        where = self.database.where
        rows = db.query("SELECT status FROM matches WHERE id = ?", (match_id,))
        if not rows:
            raise LadderStoreError(f"{where}: there is no match {match_id}")
        if rows[0][0] != "running":
            raise MatchNotRunningError(
                f"{where}: match {match_id} is {rows[0][0]}, not running, so it cannot {verb}; "
                "nothing changed (a result is counted once)"
            )

    def match(self, match_id: int) -> MatchRecord | None:
        if not 0 < match_id <= MAX_ID:  # no such match; and a BIGINT column cannot hold the question
            return None
        found = self._where("m.id = ?", (match_id,), f"read match {match_id}")
        return found[0] if found else None

    def match_or_raise(self, match_id: int) -> MatchRecord:
        found = self.match(match_id)
        if found is None:
            raise LadderStoreError(f"{self.database.where}: there is no match {match_id}")
        return found

    def matches(self, game: str, limit: int = 50, before: int | None = None) -> list[MatchRecord]:
        """``game``'s matches, newest first, at most ``limit``; with ``before``, those older than that match
        id (pass the last id of one page to get the next)."""
        return self._where(
            "m.id IN (SELECT id FROM matches WHERE game = ? AND id < ? ORDER BY id DESC LIMIT ?)",
            (game, _PAST_LAST_ID if before is None else min(before, _PAST_LAST_ID), max(0, limit)),
            f"list the {game} matches",
        )

    def bot_history(self, name: str, limit: int = 20) -> list[BotMatch]:
        """The bot's most recent matches, newest first, each with its seat, opponents and results."""
        bot = self.bots.bot_or_raise(name)
        found = self._where(
            "m.id IN (SELECT match_id FROM seats WHERE bot_id = ? ORDER BY match_id DESC LIMIT ?)",
            (bot.id, max(0, limit)),
            f"read the matches of bot {name!r}",
        )
        return [BotMatch(m, next(s.seat for s in m.seats if s.bot_id == bot.id)) for m in found]

    def bot_seats(self, name: str) -> list[BotMatch]:
        """Every finished match of the bot, oldest first: what its statistics are made of."""
        bot = self.bots.bot_or_raise(name)
        found = self._where(
            "m.status = 'finished' AND m.id IN (SELECT match_id FROM seats WHERE bot_id = ?)",
            (bot.id,),
            f"read the matches of bot {name!r}",
        )
        found.sort(key=lambda m: m.seq or 0)
        return [BotMatch(m, next(s.seat for s in m.seats if s.bot_id == bot.id)) for m in found]

    def _where(self, condition: str, params: Sequence[object], action: str) -> list[MatchRecord]:
        with self.database.reading(action) as db:
            return match_records(
                db.query(f"{MATCH_QUERY} WHERE {condition} ORDER BY m.id DESC, s.seat", params)
            )
