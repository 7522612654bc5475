"""The ladder's database: bots and their tokens, matches, seats, ratings with their history.

SQLite by default (one file), PostgreSQL from a ``postgresql://`` URL, through the same queries (see
`backends`). The schema is versioned (`schema`): opening
an older database upgrades it in one transaction; one from a newer cellarena is refused.

How a match is recorded, and why it survives ``kill -9``:

1. `LadderStore.begin_match` commits a ``running`` row and its seats at once, so a match cut short by a
   crash leaves a trace.
2. `LadderStore.finish_match` counts the result in ONE transaction: the match row, every seat's result
   and rating before/after, and the new current ratings. It is refused for a match that is not
   running, so a result is never counted twice.
3. The process that serves the ladder calls `LadderStore.void_running` when it starts: it claims the
   database as its game's one server (a server per game may share a database), and marks every match
   of its game still ``running`` (cut short by the previous server's death) ``void``, with no rating
   change.

Ratings are openskill's Plackett-Luce (`cellarena.arena.ratings`), per game (a bot plays one game),
updated in the order results are counted (``matches.seq``), so they are a function of the results.

Every method may be called from any thread (one lock serialises them); each call is one short
transaction, so a trio server calls them through ``trio.to_thread.run_sync``. Database faults (a
read-only file, a full disk, a lost connection) are a `LadderStoreError` naming the database and
saying what to do; a write that fails leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from cellarena.arena import ratings
from cellarena.arena.ladder.errors import (
    BadNameError,
    BotLimitError,
    ChallengeRefusedError,
    LadderStoreError,
    MatchNotRunningError,
    NameTakenError,
    SeatRefusedError,
    UnknownBotError,
)
from cellarena.arena.ladder.identity import names, tokens
from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import (
    AuditEntry,
    BotKind,
    BotMatch,
    BotRecord,
    Challenge,
    Change,
    ChangeKind,
    MatchRecord,
    MatchStatus,
    RatingPoint,
    SeatRecord,
    SeatResult,
    Standing,
    outcome,
)
from cellarena.arena.ladder.scoring.failures import failure_of, pause_reason
from cellarena.arena.ladder.store.backends import Backend, Row, open_backend
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, MIGRATIONS
from cellarena.arena.ratings import Rating
from cellarena.sdk.protocol import is_int

__all__ = [
    "MAX_ID",
    "BadNameError",
    "BotMatch",
    "BotRecord",
    "LadderStore",
    "LadderStoreError",
    "MatchNotRunningError",
    "MatchRecord",
    "RatingPoint",
    "SeatRecord",
    "SeatRefusedError",
    "SeatResult",
    "Standing",
    "UnknownBotError",
]

log = logging.getLogger("cellarena.ladder")

NAME_MAX = names.NAME_MAX
#: Seeds are stored as BIGINT.
SEED_LIMIT = 2**63
#: The largest id a BIGINT column holds; a larger id names no match.
MAX_ID = 2**63 - 1
#: Above every match id: the first page of a match list.
_PAST_LAST_ID = MAX_ID
VOID_ON_START = "the ladder server stopped before the match ended"
#: How many rows of the ``changes`` log are kept: a server polls it twice a second, so it never falls
#: this far behind; a server that was away (a database outage) re-reads every bot it holds instead.
CHANGES_KEPT = 10_000

_BOT_COLUMNS = (
    "id, name, game, kind, house_command, max_matches, created, revoked,"
    " paused, paused_at, banned, failures, refuses_challenges"
)
_MATCH_QUERY = (
    "SELECT m.id, m.game, m.map, m.seed, m.status, m.seq, w.name, m.reason, m.ticks, m.replay,"
    " m.started, m.ended, s.seat, b.name, s.bot_id, s.rank, s.late, s.invalid, s.illegal, s.forfeit,"
    " s.mu_before, s.sigma_before, s.mu_after, s.sigma_after, s.cause, s.version, s.bank_drawn_ms, m.rated"
    " FROM matches m JOIN seats s ON s.match_id = m.id JOIN bots b ON b.id = s.bot_id"
    " LEFT JOIN bots w ON w.id = m.winner"
)

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


def cellarena_release() -> str:
    try:
        return metadata.version("cellarena")
    except metadata.PackageNotFoundError:
        return "unknown"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _maybe_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _rating(mu: float | None, sigma: float | None) -> Rating | None:
    return None if mu is None or sigma is None else Rating(mu, sigma)


def check_name(name: object, what: str = "bot name") -> str:
    """A bot's (or game's) name as the ladder keeps it (NFKC), under the ladder's one identifier profile
    (`cellarena.arena.ladder.identity.names`: 1-64 characters that print, no space at either end, not ``.`` or
    ``..``, one script); `BadNameError` saying which rule it breaks."""
    return names.check_name(name, what)


class LadderStore:
    """A ladder database. ``LadderStore(path_or_url)``; a context manager, or call `close()`.

    ``target`` is a SQLite file (created if missing, unless ``create=False``) or a ``postgresql://``
    URL (the database must exist; the tables are created in its current schema). With
    ``reconnect_every``, a call made while the connection is lost first tries to connect again, at
    most that often (seconds): for a process with no watch of its own, such as `ladder web`; the
    ladder server reconnects through `reconnect`, with back-off.
    """

    def __init__(
        self, target: str | Path, *, create: bool = True, reconnect_every: float | None = None
    ) -> None:
        self._lock = threading.RLock()
        self.reconnect_every = reconnect_every
        self._tried_at = -math.inf
        self._db: Backend = open_backend(target, create=create)
        self.where = self._db.where
        try:
            self.schema_version = self._upgrade(create=create)
        except BaseException:
            self._db.close()
            raise

    def __repr__(self) -> str:
        return f"LadderStore({self.where!r})"

    def __enter__(self) -> LadderStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ plumbing
    @contextlib.contextmanager
    def _writing(self, action: str, after: str = "") -> Iterator[Backend]:
        """One write transaction, holding the database's write lock: all of it is written, or none.

        A database fault becomes a LadderStoreError that says what ``action`` could not do and why.
        """
        with self._lock:
            self._revive()
            db = self._db
            committing = False
            try:
                db.begin_write()
                yield db
                committing = True
                db.commit()
            except BaseException as exc:
                with contextlib.suppress(Exception):  # a lost connection: the server rolls back itself
                    db.rollback()
                if not db.is_driver_error(exc):
                    raise
                fate = (
                    "the database failed while committing, so it may or may not have been written"
                    if committing
                    else "nothing of it was written"
                )
                raise LadderStoreError(
                    f"{self.where}: cannot {action}: {db.remedy(exc)}; {fate}{after}"
                ) from exc

    def _revive(self) -> None:
        """With ``reconnect_every``: connect again if the connection is lost (see the class docstring)."""
        if self.reconnect_every is None or self._db.connected:
            return
        now = time.monotonic()
        if now - self._tried_at < self.reconnect_every:
            return
        self._tried_at = now
        with contextlib.suppress(LadderStoreError):  # still down: the call itself says so
            self._db.reconnect()

    @contextlib.contextmanager
    def _reading(self, action: str) -> Iterator[Backend]:
        with self._lock:
            self._revive()
            try:
                yield self._db
            except Exception as exc:
                if not self._db.is_driver_error(exc):
                    raise
                raise LadderStoreError(f"{self.where}: cannot {action}: {self._db.remedy(exc)}") from exc

    def _upgrade(self, *, create: bool) -> int:
        """Bring the schema to `CURRENT_VERSION`; the version the database is at now."""
        with self._reading("read the schema version") as db:
            version, release = self._version(db, create=create)
        if version == CURRENT_VERSION:
            return version
        if version > CURRENT_VERSION:
            raise LadderStoreError(
                f"{self.where}: this ladder database is at schema version {version}, written by "
                f"cellarena {release}; this is cellarena {cellarena_release()}, which knows versions up to "
                f"{CURRENT_VERSION}. Run cellarena {release} or newer (pip install -U 'cellarena>={release}')"
            )
        with self._writing(f"upgrade the ladder database to schema version {CURRENT_VERSION}") as db:
            version, _ = self._version(db, create=create)  # another process may have upgraded it meanwhile
            for migration in MIGRATIONS[version:]:
                for statement in migration.statements:
                    db.execute(statement.replace("{id}", db.id_column))
                if migration.then is not None:
                    migration.then(db)
                db.execute(
                    "INSERT INTO schema_version (version, cellarena, applied) VALUES (?, ?, ?)",
                    (migration.version, cellarena_release(), _now()),
                )
                log.info(
                    "ladder database %s: schema version %d (%s)",
                    self.where,
                    migration.version,
                    migration.summary,
                )
        return CURRENT_VERSION

    def _version(self, db: Backend, *, create: bool) -> tuple[int, str | None]:
        tables = db.table_names()
        if "schema_version" not in tables:
            if tables:
                raise LadderStoreError(
                    f"{self.where}: not a ladder database (it has tables {', '.join(sorted(tables))} but no "
                    "schema_version); use another database"
                )
            if not create:
                raise LadderStoreError(
                    f"{self.where}: no ladder database there; check the name, or create one"
                )
            return 0, None
        rows = db.query("SELECT version, cellarena FROM schema_version ORDER BY version DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)

    # ------------------------------------------------------------------ bots
    def add_bot(
        self,
        name: str,
        game: str,
        *,
        house_command: str | None = None,
        max_matches: int = 1,
        actor: str | None = None,
        owner_id: int | None = None,
        owner_limit: int | None = None,
    ) -> tuple[BotRecord, tokens.Token]:
        """Register a bot; its token, which is shown this once and then known only by its hash.

        With ``house_command`` the bot is a house bot, which the ladder launches itself with that
        command; without, an outside bot that its owner runs and connects. ``owner_id``: the owner who
        made it on the pages (`cellarena.arena.ladder.accounts.owners`); None for the host's bots.

        The name is kept in its NFKC form (`names.normalise`). Refused, in the transaction that writes,
        so that requests at the same moment cannot all pass: a name taken up to case and look-alikes
        (`NameTakenError`, backed by the unique index on ``bots.name_key``), and with ``owner_limit`` an
        owner who has that many active bots already (`BotLimitError`; the owner's row is locked, so
        their requests are counted one after another).
        """
        given = name
        name = names.normalise(name)
        check_name(game, "game")
        if house_command is not None and not house_command.strip():
            raise LadderStoreError(f"house bot {name!r}: give the command that starts it")
        self._check_max_matches(name, max_matches)
        token = tokens.new_token()
        kind: BotKind = "outside" if house_command is None else "house"
        key = name_key(name)
        with self._writing(f"add bot {name!r}") as db:
            for (taken,) in db.query("SELECT name FROM bots WHERE name_key = ?", (key,)):
                raise self._taken(given, str(taken))
            names.check_scripts(name)  # after "taken": a copy of a taken name hears that first
            if owner_id is not None:
                self._check_owner_limit(db, owner_id, owner_limit)
            try:
                db.execute(
                    "INSERT INTO bots (name, name_key, game, token_digest, kind, house_command, created,"
                    " max_matches, owner_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, key, game, token.digest, kind, house_command, _now(), max_matches, owner_id),
                )
            except Exception as exc:
                # The index is the last word: a writer that skipped the look-up above is refused here.
                if db.is_unique_violation(exc):
                    raise self._taken(given, None) from None
                raise
            self._note_change(db, "bot_added", name)
            self._audit(db, actor, "add", name, f"{kind} bot for {game}")
        log.info("ladder: added %s bot %r for %s", kind, name, game)
        return self._bot_or_raise(name), token

    def _taken(self, name: str, taken: str | None) -> NameTakenError:
        if taken is None:
            message = f"{self.where}: a bot that looks like {name!r} was added just now; choose another name"
        else:
            also = (
                ""
                if taken == name
                else ", and names that differ only in case count as one, as do look-alike characters"
            )
            message = f"{self.where}: there is already a bot named {taken!r}{also}; choose another name"
        return NameTakenError(message, name, taken)

    @staticmethod
    def _check_owner_limit(db: Backend, owner_id: int, limit: int | None) -> None:
        """Lock the owner's row (PostgreSQL; SQLite's writer lock covers it), then count their bots."""
        if not db.query(f"SELECT id FROM owners WHERE id = ?{db.row_lock}", (owner_id,)):
            raise LadderStoreError(f"there is no owner with id {owner_id}")
        if limit is None:
            return
        rows = db.query("SELECT COUNT(*) FROM bots WHERE owner_id = ? AND revoked IS NULL", (owner_id,))
        count = int(rows[0][0])
        if count >= limit:
            raise BotLimitError(f"owner {owner_id} has {count} active bots, the limit", count, limit)

    def rotate(self, name: str, *, actor: str | None = None) -> tokens.Token:
        """Give the bot a new token; the old one stops working at once. The new one is shown this once."""
        token = tokens.new_token()
        with self._writing(f"rotate the token of bot {name!r}") as db:
            if db.execute("UPDATE bots SET token_digest = ? WHERE name = ?", (token.digest, name)) != 1:
                raise self._unknown(name)
            self._note_change(db, "token_rotated", name)
            self._audit(db, actor, "rotate", name, None)
        log.info("ladder: rotated the token of bot %r", name)
        return token

    def revoke(self, name: str, *, actor: str | None = None) -> BotRecord:
        """Revoke the bot: its token stops working and it leaves the standings; its matches stay.
        Revoking a revoked bot changes nothing."""
        with self._writing(f"revoke bot {name!r}") as db:
            if not db.query("SELECT 1 FROM bots WHERE name = ?", (name,)):
                raise self._unknown(name)
            if db.execute("UPDATE bots SET revoked = ? WHERE name = ? AND revoked IS NULL", (_now(), name)):
                self._note_change(db, "bot_revoked", name)
                self._audit(db, actor, "revoke", name, None)
        log.info("ladder: revoked bot %r", name)
        return self._bot_or_raise(name)

    def set_max_matches(self, name: str, max_matches: int) -> BotRecord:
        """How many matches the bot may play at once (the server enforces it when it seats bots)."""
        self._check_max_matches(name, max_matches)
        with self._writing(f"change bot {name!r}") as db:
            if db.execute("UPDATE bots SET max_matches = ? WHERE name = ?", (max_matches, name)) != 1:
                raise self._unknown(name)
            self._note_change(db, "bot_changed", name)
        return self._bot_or_raise(name)

    # ------------------------------------------------------------------ a community ladder
    def _policy(self, db: Backend) -> CommunityPolicy:
        return CommunityPolicy.from_settings(
            {str(k): str(v) for k, v in db.query("SELECT name, value FROM settings")}
        )

    def policy(self) -> CommunityPolicy:
        """The host's policy as ``ladder serve`` last wrote it (the defaults before it ever did)."""
        with self._reading("read the ladder's settings") as db:
            return self._policy(db)

    def set_policy(self, policy: CommunityPolicy) -> None:
        """Write the host's policy (``ladder serve`` does as it starts), for every process to read."""
        with self._writing("write the ladder's settings") as db:
            for name, value in policy.to_settings().items():
                db.execute(
                    "INSERT INTO settings (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (name, value),
                )

    def _audit(
        self, db: Backend, actor: str | None, action: str, bot: str | None, detail: str | None
    ) -> None:
        if actor is not None:
            db.execute(
                "INSERT INTO audit (at, actor, action, bot, detail) VALUES (?, ?, ?, ?, ?)",
                (_now(), actor, action, bot, detail),
            )

    def audit_log(self, limit: int = 100) -> list[AuditEntry]:
        """The newest admin actions first, at most ``limit``."""
        with self._reading("read the audit log") as db:
            rows = db.query(
                "SELECT id, at, actor, action, bot, detail FROM audit ORDER BY id DESC LIMIT ?",
                (max(0, limit),),
            )
        return [
            AuditEntry(int(i), _time(at), actor, action, bot, detail)
            for i, at, actor, action, bot, detail in rows
        ]

    def _set_bot(
        self,
        name: str,
        action: str,
        sql: str,
        params: tuple[object, ...],
        change: ChangeKind | None,
        actor: str | None,
        detail: str | None = None,
    ) -> BotRecord:
        """One change to one bot: its row, the change log (when the server must act), the audit log."""
        with self._writing(f"{action} bot {name!r}") as db:
            if db.execute(f"UPDATE bots SET {sql} WHERE name = ?", (*params, name)) != 1:
                raise self._unknown(name)
            if change is not None:
                self._note_change(db, change, name)
            self._audit(db, actor, action, name, detail)
        log.info("ladder: %s bot %r%s", action, name, f" ({detail})" if detail else "")
        return self._bot_or_raise(name)

    def pause(self, name: str, reason: str, *, actor: str | None = None) -> BotRecord:
        """Pause the bot (the host's hand; the ladder pauses one itself in `finish_match`): refused at
        hello with `paused` until resumed; a match it is playing plays on."""
        why = " ".join(reason.split())[:200] or "paused by the ladder's host"
        return self._set_bot(
            name, "pause", "paused = ?, paused_at = ?", (why, _now()), "bot_paused", actor, why
        )

    def resume(self, name: str, *, actor: str | None = None) -> BotRecord:
        """Resume a paused bot: it may queue again, with its failures in a row counted from 0."""
        return self._set_bot(
            name, "resume", "paused = NULL, paused_at = NULL, failures = 0", (), "bot_resumed", actor
        )

    def ban(self, name: str, reason: str, *, actor: str | None = None) -> BotRecord:
        """Ban the bot: refused at hello with `paused` (saying it is banned) until unbanned; its queued
        connection ends at the server's next poll, a match it is playing plays on."""
        why = " ".join(reason.split())[:200] or "no reason given"
        return self._set_bot(name, "ban", "banned = ?", (why,), "bot_banned", actor, why)

    def unban(self, name: str, *, actor: str | None = None) -> BotRecord:
        return self._set_bot(name, "unban", "banned = NULL", (), "bot_unbanned", actor)

    def refuse_challenges(self, name: str, refuse: bool, *, actor: str | None = None) -> BotRecord:
        """Whether ``name`` refuses challenges from now on (pending ones against it are cancelled)."""
        bot = self._set_bot(
            name,
            "refuse challenges" if refuse else "accept challenges",
            "refuses_challenges = ?",
            (refuse,),
            None,
            actor,
        )
        if refuse:
            with self._writing(f"cancel the challenges against {name!r}") as db:
                if db.execute(
                    "UPDATE challenges SET status = 'cancelled' WHERE opponent = ? AND status = 'pending'",
                    (bot.id,),
                ):
                    self._note_change(db, "challenge", name)
        return bot

    def challenge(self, challenger: str, opponent: str, *, actor: str | None = None) -> Challenge:
        """A pending challenge of ``challenger`` against ``opponent``, within the policy's quota;
        `ChallengeRefusedError` saying why not (unknown, revoked, paused or banned bots, another game,
        an opponent that refuses challenges, the quota used up, the same challenge pending)."""
        with self._writing(f"record a challenge of {challenger!r} against {opponent!r}") as db:
            policy = self._policy(db)
            found = {
                str(row[1]): self._bot_record(row)
                for row in db.query(
                    f"SELECT {_BOT_COLUMNS} FROM bots WHERE name IN (?, ?)", (challenger, opponent)
                )
            }
            if challenger == opponent:
                raise ChallengeRefusedError(f"{challenger} cannot challenge itself; name another bot")
            for name in (challenger, opponent):
                bot = found.get(name)
                if bot is None:
                    raise ChallengeRefusedError(f"there is no bot named {name!r}; check the name")
                if not bot.active:
                    raise ChallengeRefusedError(f"{name} is revoked and plays no more")
                if bot.stopped is not None:
                    raise ChallengeRefusedError(f"{name} cannot play now: {bot.stopped}")
            me, them = found[challenger], found[opponent]
            if me.game != them.game:
                raise ChallengeRefusedError(f"{challenger} plays {me.game} and {opponent} plays {them.game}")
            if them.refuses_challenges:
                raise ChallengeRefusedError(f"{opponent} refuses challenges (its owner's setting)")
            since = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="microseconds")
            made = db.query(
                "SELECT COUNT(*), MIN(created) FROM challenges WHERE challenger = ? AND created > ?",
                (me.id, since),
            )[0]
            if int(made[0]) >= policy.challenges_per_day:
                again = (
                    ""
                    if made[1] is None
                    else f"; next possible after {_time(made[1]) + timedelta(days=1):%Y-%m-%d %H:%M:%S} UTC"
                )
                raise ChallengeRefusedError(
                    f"{challenger} has made {made[0]} challenge(s) in the last 24 hours, this ladder's quota "
                    f"(its host's --challenges-per-day {policy.challenges_per_day}){again}"
                )
            if db.query(
                "SELECT 1 FROM challenges WHERE challenger = ? AND opponent = ? AND status = 'pending'",
                (me.id, them.id),
            ):
                raise ChallengeRefusedError(
                    f"{challenger} already has a challenge against {opponent} waiting to be played"
                )
            challenge_id = int(
                db.query(
                    "INSERT INTO challenges (challenger, opponent, rated, status, created)"
                    " VALUES (?, ?, ?, 'pending', ?) RETURNING id",
                    (me.id, them.id, policy.challenges_rated, _now()),
                )[0][0]
            )
            self._note_change(db, "challenge", challenger)
            self._audit(db, actor, "challenge", challenger, f"against {opponent}")
        log.info("ladder: %s challenges %s (challenge %d)", challenger, opponent, challenge_id)
        return self._challenges_where("c.id = ?", (challenge_id,))[0]

    def challenges_left(self, name: str) -> int:
        """How many more challenges ``name`` may make now: the host's quota less those it made in the
        last 24 hours (what `challenge` counts), for the owner's page to show."""
        bot = self._bot_or_raise(name)
        since = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="microseconds")
        with self._reading(f"count the challenges of {name!r}") as db:
            quota = self._policy(db).challenges_per_day
            made = db.query(
                "SELECT COUNT(*) FROM challenges WHERE challenger = ? AND created > ?", (bot.id, since)
            )[0][0]
        return max(0, quota - int(made))

    def pending_challenges(self, game: str) -> list[Challenge]:
        """``game``'s challenges waiting to be played, oldest first: what the queue plays first."""
        with self._reading(f"read the {game} challenges") as db:
            ids = [
                int(i)
                for (i,) in db.query(
                    "SELECT c.id FROM challenges c JOIN bots b ON b.id = c.challenger"
                    " WHERE c.status = 'pending' AND b.game = ? ORDER BY c.id",
                    (game,),
                )
            ]
        if not ids:
            return []
        return self._challenges_where(f"c.id IN ({', '.join('?' * len(ids))})", ids, oldest_first=True)

    def challenges_of(self, name: str, limit: int = 50) -> list[Challenge]:
        """The bot's challenges, made or received, newest first."""
        bot = self._bot_or_raise(name)
        return self._challenges_where("(c.challenger = ? OR c.opponent = ?)", (bot.id, bot.id), limit)

    def _challenges_where(
        self, condition: str, params: Sequence[object], limit: int = 1000, *, oldest_first: bool = False
    ) -> list[Challenge]:
        order = "ASC" if oldest_first else "DESC"
        with self._reading("read the challenges") as db:
            rows = db.query(
                "SELECT c.id, a.name, b.name, c.rated, c.status, c.created, c.match_id FROM challenges c"
                " JOIN bots a ON a.id = c.challenger JOIN bots b ON b.id = c.opponent"
                f" WHERE {condition} ORDER BY c.id {order} LIMIT ?",
                (*params, limit),
            )
        return [
            Challenge(int(i), a, b, bool(rated), status, _time(created), None if m is None else int(m))
            for i, a, b, rated, status, created, m in rows
        ]

    def bot_seats(self, name: str) -> list[BotMatch]:
        """Every finished match of the bot, oldest first: what its statistics are made of."""
        bot = self._bot_or_raise(name)
        found = self._matches_where(
            "m.status = 'finished' AND m.id IN (SELECT match_id FROM seats WHERE bot_id = ?)",
            (bot.id,),
            f"read the matches of bot {name!r}",
        )
        found.sort(key=lambda m: m.seq or 0)
        return [BotMatch(m, next(s.seat for s in m.seats if s.bot_id == bot.id)) for m in found]

    # ------------------------------------------------------------------ the change log
    def _note_change(self, db: Backend, kind: ChangeKind, bot: str | None) -> None:
        """Log a change for the running server, in the caller's write transaction (so it is seen exactly
        when the change is), and drop the rows far behind it."""
        bot_id = None
        if bot is not None:
            rows = db.query("SELECT id FROM bots WHERE name = ?", (bot,))
            bot_id = int(rows[0][0]) if rows else None
        change_id = int(
            db.query(
                "INSERT INTO changes (kind, bot_id, at) VALUES (?, ?, ?) RETURNING id", (kind, bot_id, _now())
            )[0][0]
        )
        # An indexed delete of the row that just fell out of the window (ids may skip: PostgreSQL's
        # sequences do when a transaction rolls back), so the log stays at about CHANGES_KEPT rows.
        db.execute("DELETE FROM changes WHERE id <= ?", (change_id - CHANGES_KEPT,))

    def last_change(self) -> int:
        """The id of the newest change (0 if none): where a server that starts begins to watch."""
        with self._reading("read the change log") as db:
            rows = db.query("SELECT MAX(id) FROM changes")
        return int(rows[0][0] or 0)

    def changes_since(self, after: int, limit: int = 1000) -> list[Change]:
        """The changes newer than ``after``, oldest first: what a running server polls (its one channel
        from the ladder's commands and pages, docs/ladder.md)."""
        with self._reading("read the change log") as db:
            rows = db.query(
                "SELECT c.id, c.kind, b.name FROM changes c LEFT JOIN bots b ON b.id = c.bot_id"
                " WHERE c.id > ? ORDER BY c.id LIMIT ?",
                (after, limit),
            )
        return [Change(int(i), kind, name) for i, kind, name in rows]

    def token_digests(self, names: Sequence[str]) -> dict[str, tuple[BotRecord, str]]:
        """Each named bot as it is now, with the digest of its current token (no secret: the token is
        256 random bits); a server compares it with the digest a connection identified itself with."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        with self._reading("read the bots' tokens") as db:
            rows = db.query(f"SELECT token_digest, {_BOT_COLUMNS} FROM bots WHERE name IN ({marks})", wanted)
        return {str(row[2]): (self._bot_record(row[1:]), str(row[0])) for row in rows}

    def _check_max_matches(self, name: str, max_matches: int) -> None:
        if not is_int(max_matches) or max_matches < 1:
            raise LadderStoreError(f"bot {name!r}: the number of concurrent matches must be 1 or more")

    def list_bots(self, game: str | None = None) -> list[BotRecord]:
        """Every bot (revoked ones too), by name; only ``game``'s if given."""
        with self._reading("list the bots") as db:
            if game is None:
                rows = db.query(f"SELECT {_BOT_COLUMNS} FROM bots ORDER BY name")
            else:
                rows = db.query(f"SELECT {_BOT_COLUMNS} FROM bots WHERE game = ? ORDER BY name", (game,))
        return [self._bot_record(r) for r in rows]

    def bot(self, name: str) -> BotRecord | None:
        with self._reading(f"read bot {name!r}") as db:
            rows = db.query(f"SELECT {_BOT_COLUMNS} FROM bots WHERE name = ?", (name,))
        return self._bot_record(rows[0]) if rows else None

    def authenticate(self, token: object) -> BotRecord | None:
        """The active bot whose token this is; None for an unknown, revoked or malformed token.

        The form is checked first (it is public); then the bot is found by the token's hash and the
        hashes compared in constant time (`cellarena.arena.ladder.identity.tokens` says why that is safe).
        """
        secret = token.secret if isinstance(token, tokens.Token) else token
        if not isinstance(secret, str) or not tokens.looks_like_token(secret):
            return None
        digest = tokens.token_digest(secret)
        with self._reading("check a bot's token") as db:
            rows = db.query(
                f"SELECT token_digest, {_BOT_COLUMNS} FROM bots WHERE token_digest = ?", (digest,)
            )
        if not rows or not tokens.digest_matches(secret, str(rows[0][0])):
            return None
        bot = self._bot_record(rows[0][1:])
        return bot if bot.active else None

    def _bot_or_raise(self, name: str) -> BotRecord:
        bot = self.bot(name)
        if bot is None:
            raise self._unknown(name)
        return bot

    def _unknown(self, name: str) -> UnknownBotError:
        return UnknownBotError(f"{self.where}: there is no bot named {name!r}; list them to see their names")

    @staticmethod
    def _bot_record(row: Row) -> BotRecord:
        id_, name, game, kind, house_command, max_matches, created, revoked = row[:8]
        paused, paused_at, banned, failures, refuses = row[8:]
        return BotRecord(
            id=int(id_),
            name=name,
            game=game,
            kind=kind,
            house_command=house_command,
            max_matches=int(max_matches),
            created=_time(created),
            revoked=_maybe_time(revoked),
            paused=paused,
            paused_at=_maybe_time(paused_at),
            banned=banned,
            failures=int(failures or 0),
            refuses_challenges=bool(refuses),
        )

    # ------------------------------------------------------------------ matches
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
        with self._writing(f"record the start of a {game} match") as db:
            given = list(digests) if digests is not None else [None] * len(ids)
            for bot_id, digest in zip(ids, given, strict=True):
                rows = db.query(
                    "SELECT name, game, revoked, token_digest, paused, banned FROM bots WHERE id = ?",
                    (bot_id,),
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
                    continue
                raise SeatRefusedError(name, why, f"bot {name!r} cannot play this {game} match: it {text}")
            rated = True
            if challenge is not None:
                found = db.query(
                    "SELECT rated FROM challenges WHERE id = ? AND status = 'pending'", (challenge,)
                )
                if not found:
                    raise ChallengeRefusedError(f"{self.where}: challenge {challenge} is no longer pending")
                rated = bool(found[0][0])
            match_id = int(
                db.query(
                    "INSERT INTO matches (game, map, seed, status, started, rated)"
                    " VALUES (?, ?, ?, 'running', ?, ?) RETURNING id",
                    (game, map, seed, _now(), rated),
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

    def finish_match(
        self,
        match_id: int,
        seats: Sequence[SeatResult],
        *,
        reason: str,
        ticks: int,
        replay: str | None = None,
    ) -> MatchRecord:
        """Count a running match's result, all in one transaction: the match row, each seat's result and
        rating before/after, and the bots' new ratings. The finished match.

        The host's policy (`policy`, as the server last wrote it) applies in the same transaction: an
        unrated match (a challenge) changes no rating (before = after); under ``reset`` a bot playing
        under a new version starts again from the initial rating; each seat's failure
        (`failures.failure_of`) adds to its bot's failures in a row, and a bot that reaches
        ``pause_after`` is paused with the reason, logged to the change log for the server.

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
        with self._writing(f"record the result of match {match_id}", after) as db:
            self._check_running(db, match_id, "finish")
            policy = self._policy(db)
            rated = bool(db.query("SELECT rated FROM matches WHERE id = ?", (match_id,))[0][0])
            rows = db.query(
                "SELECT s.seat, s.bot_id, b.name, r.mu, r.sigma, s.version FROM seats s"
                " JOIN bots b ON b.id = s.bot_id"
                " LEFT JOIN ratings r ON r.bot_id = s.bot_id WHERE s.match_id = ? ORDER BY s.seat",
                (match_id,),
            )
            if len(rows) != len(results):
                raise ValueError(f"match {match_id} has {len(rows)} seats, not {len(results)}")
            names = [str(name) for _, _, name, _, _, _ in rows]
            before = {
                str(name): ratings.initial() if mu is None else Rating(float(mu), float(sigma))
                for _, _, name, mu, sigma, _ in rows
            }
            if rated and policy.new_version_rating == "reset":
                for _, bot_id, name, _, _, version in rows:
                    if version is not None and self._new_version(db, int(bot_id), version, match_id):
                        before[str(name)] = ratings.initial()
            ranks = [r.rank for r in results]
            new = ratings.update(before, names, ranks) if rated else dict(before)
            winner = None
            for (seat, bot_id, name, _, _, _), r in zip(rows, results, strict=True):
                old, now = before[name], new[name]
                counts = (r.rank, r.late, r.invalid, r.illegal, bool(r.forfeit))
                change = (old.mu, old.sigma, now.mu, now.sigma)
                cause = None if r.cause is None else json.dumps(r.cause, sort_keys=True)
                db.execute(_FINISH_SEAT, (*counts, *change, cause, r.bank_drawn_ms, match_id, seat))
                result = outcome(r.rank, ranks)
                if result == "win":
                    winner = bot_id
                self._count_failure(db, str(name), failure_of(r.cause, r.late, r.invalid, ticks), policy)
                if not rated:
                    continue
                db.execute(
                    _ADD_RESULT,
                    (
                        bot_id,
                        now.mu,
                        now.sigma,
                        int(result == "win"),
                        int(result == "draw"),
                        int(result == "loss"),
                    ),
                )
            # Last, so that a fault anywhere above (a full disk, say) is seen to undo the seats and ratings.
            changed = db.execute(
                _FINISH_MATCH,
                (winner, reason, ticks, replay, _now(), match_id),
            )
            if changed != 1:  # cannot happen under the write lock; if it does, count nothing
                raise MatchNotRunningError(
                    f"{self.where}: match {match_id} stopped running while being finished"
                )
        return self._match_or_raise(match_id)

    def _new_version(self, db: Backend, bot_id: int, version: str, match_id: int) -> bool:
        """Whether ``version`` differs from the one the bot played its last finished match under (a
        bot's first versioned match after unversioned ones is no new version: nothing to compare)."""
        last = db.query(
            "SELECT s.version FROM seats s JOIN matches m ON m.id = s.match_id"
            " WHERE s.bot_id = ? AND m.status = 'finished' AND m.id <> ? ORDER BY m.seq DESC LIMIT 1",
            (bot_id, match_id),
        )
        return bool(last) and last[0][0] is not None and last[0][0] != version

    def count_failed_launch(self, name: str, cause: dict[str, Any]) -> BotRecord:
        """A launch of house bot ``name`` that never joined the queue (`house.HouseBots`), ended by
        ``cause`` (a seat's cause map: ``never_connected``, ``exited``, ``wrong_game``...): one more
        failure in a row, as a failed match is, pausing it at ``pause_after``. There is no match to
        keep the cause in, so the audit log keeps it (actor ``ladder``). The bot as it is now."""
        failure = failure_of(cause, 0, 0, 0) or str(cause.get("cause"))
        with self._writing(f"count a failed launch of house bot {name!r}") as db:
            if not db.query("SELECT 1 FROM bots WHERE name = ?", (name,)):
                raise self._unknown(name)
            self._count_failure(db, name, failure, self._policy(db), launch=True)
            self._audit(db, "ladder", "house launch failed", name, json.dumps(cause, sort_keys=True)[:500])
        return self._bot_or_raise(name)

    def _count_failure(
        self, db: Backend, name: str, failure: str | None, policy: CommunityPolicy, *, launch: bool = False
    ) -> None:
        """One more failure in a row for ``name`` (pausing it at the policy's count), or none: reset.
        ``launch``: the failure is a house bot's launch that never joined the queue, not a match."""
        if failure is None:
            db.execute("UPDATE bots SET failures = 0 WHERE name = ? AND failures <> 0", (name,))
            return
        db.execute("UPDATE bots SET failures = failures + 1 WHERE name = ?", (name,))
        count, paused = db.query("SELECT failures, paused FROM bots WHERE name = ?", (name,))[0]
        if paused is None and policy.pause_after and int(count) >= policy.pause_after:
            reason = pause_reason(failure, int(count), launch=launch)
            db.execute("UPDATE bots SET paused = ?, paused_at = ? WHERE name = ?", (reason, _now(), name))
            self._note_change(db, "bot_paused", name)
            log.warning("ladder: paused bot %r: %s", name, reason)

    def void_match(self, match_id: int, reason: str) -> MatchRecord:
        """Mark a running match void: it ended without a result that counts (no rating changes)."""
        with self._writing(f"void match {match_id}") as db:
            self._check_running(db, match_id, "void")
            db.execute(
                "UPDATE matches SET status = 'void', reason = ?, ended = ? WHERE id = ?",
                (reason, _now(), match_id),
            )
        log.warning("ladder: match %d void: %s", match_id, reason)
        return self._match_or_raise(match_id)

    def claim_server(self, game: str | None = None) -> None:
        """Hold, until `close`, the lock that says this process is the database's one ladder server for
        ``game`` (a server per game may share the database), or for every game (None); a
        `LadderStoreError` if another holds it. Taken again by `reconnect` after a lost connection."""
        with self._lock:
            try:
                self._db.claim_server(game)
            except LadderStoreError:
                raise
            except Exception as exc:
                if not self._db.is_driver_error(exc):
                    raise
                raise LadderStoreError(
                    f"{self.where}: cannot claim the database: {self._db.remedy(exc)}"
                ) from exc

    @property
    def connected(self) -> bool:
        """False while the connection to the database is lost (PostgreSQL); see `reconnect`."""
        return self._db.connected

    def reconnect(self) -> None:
        """Connect again if the connection was lost, and take the one-server lock again if this process
        held it. `LadderStoreError` while the database is still unreachable; `ServerClaimLostError` if
        another server took the database meanwhile (this one must stop)."""
        with self._reading("connect to the database again") as db:
            db.reconnect()

    def void_running(self, reason: str = VOID_ON_START, *, game: str | None = None) -> list[MatchRecord]:
        """Claim the database as its one ladder server for ``game`` (every game if None), then void
        every match of that game still running; those matches.

        Call it once, when the ladder server starts, before it begins any match: matches running then
        were cut short by the previous server's death. The claim (a lock held until `close`) makes a second
        server of the same game on the same database fail here, instead of voiding the first one's live
        matches; a server of another game claims its own game and leaves these matches alone. Tools that
        only read, or add bots, never call it.
        """
        with self._lock:
            self.claim_server(game)
            which = "" if game is None else " AND game = ?"
            with self._writing("void the matches that the last server left running") as db:
                ids = [
                    int(i)
                    for (i,) in db.query(
                        "UPDATE matches SET status = 'void', reason = ?, ended = ? WHERE status = 'running'"
                        f"{which} RETURNING id",
                        (reason, _now()) + (() if game is None else (game,)),
                    )
                ]
        for match_id in sorted(ids):
            log.warning("ladder: match %d void: %s", match_id, reason)
        return [self._match_or_raise(i) for i in sorted(ids)]

    def highest_match_id(self) -> int:
        """The highest match id handed out so far (0 for none): new matches get higher ids."""
        with self._reading("read the highest match id") as db:
            rows = db.query("SELECT MAX(id) FROM matches")
        return int(rows[0][0] or 0)

    def _check_running(self, db: Backend, match_id: int, verb: str) -> None:
        rows = db.query("SELECT status FROM matches WHERE id = ?", (match_id,))
        if not rows:
            raise LadderStoreError(f"{self.where}: there is no match {match_id}")
        if rows[0][0] != "running":
            raise MatchNotRunningError(
                f"{self.where}: match {match_id} is {rows[0][0]}, not running, so it cannot {verb}; "
                "nothing changed (a result is counted once)"
            )

    # ------------------------------------------------------------------ reading
    def match(self, match_id: int) -> MatchRecord | None:
        if not 0 < match_id <= MAX_ID:  # no such match; and a BIGINT column cannot hold the question
            return None
        found = self._matches_where("m.id = ?", (match_id,), f"read match {match_id}")
        return found[0] if found else None

    def _match_or_raise(self, match_id: int) -> MatchRecord:
        found = self.match(match_id)
        if found is None:
            raise LadderStoreError(f"{self.where}: there is no match {match_id}")
        return found

    def matches(self, game: str, limit: int = 50, before: int | None = None) -> list[MatchRecord]:
        """``game``'s matches, newest first, at most ``limit``; with ``before``, those older than that match
        id (pass the last id of one page to get the next)."""
        return self._matches_where(
            "m.id IN (SELECT id FROM matches WHERE game = ? AND id < ? ORDER BY id DESC LIMIT ?)",
            (game, _PAST_LAST_ID if before is None else min(before, _PAST_LAST_ID), max(0, limit)),
            f"list the {game} matches",
        )

    def bot_history(self, name: str, limit: int = 20) -> list[BotMatch]:
        """The bot's most recent matches, newest first, each with its seat, opponents and results."""
        bot = self._bot_or_raise(name)
        found = self._matches_where(
            "m.id IN (SELECT match_id FROM seats WHERE bot_id = ? ORDER BY match_id DESC LIMIT ?)",
            (bot.id, max(0, limit)),
            f"read the matches of bot {name!r}",
        )
        return [BotMatch(m, next(s.seat for s in m.seats if s.bot_id == bot.id)) for m in found]

    def rating_history(self, name: str) -> list[RatingPoint]:
        """The bot's rating after each of its finished matches, in the order they were counted."""
        bot = self._bot_or_raise(name)
        with self._reading(f"read the rating history of bot {name!r}") as db:
            rows = db.query(
                "SELECT m.id, m.ended, s.mu_after, s.sigma_after"
                " FROM seats s JOIN matches m ON m.id = s.match_id"
                " WHERE s.bot_id = ? AND m.status = 'finished' ORDER BY m.seq",
                (bot.id,),
            )
        return [RatingPoint(int(i), _time(ended), Rating(mu, sigma)) for i, ended, mu, sigma in rows]

    def standings(self, game: str, *, include_revoked: bool = False) -> list[Standing]:
        """``game``'s table, best first: by conservative rating (mu - 3 sigma), then name. A bot with no
        finished match has the initial rating."""
        with self._reading(f"read the {game} standings") as db:
            rows = db.query(
                "SELECT b.name, b.kind, b.revoked, r.mu, r.sigma, r.matches, r.wins, r.draws, r.losses,"
                " t.late, t.invalid, t.bank"
                " FROM bots b LEFT JOIN ratings r ON r.bot_id = b.id"
                " LEFT JOIN (SELECT s.bot_id, SUM(s.late) AS late, SUM(s.invalid) AS invalid,"
                " SUM(s.bank_drawn_ms) AS bank FROM seats s JOIN matches m ON m.id = s.match_id"
                " WHERE m.status = 'finished' GROUP BY s.bot_id) t ON t.bot_id = b.id"
                " WHERE b.game = ?",
                (game,),
            )
        start = ratings.initial()
        table = []
        for name, kind, revoked, mu, sigma, n, wins, draws, losses, late, invalid, bank in rows:
            if revoked is not None and not include_revoked:
                continue
            rating = start if mu is None else Rating(mu, sigma)
            counts = (n or 0, wins or 0, draws or 0, losses or 0, int(late or 0), int(invalid or 0))
            table.append((rating.conservative, name, kind, rating, *counts, int(bank or 0)))
        table.sort(key=lambda t: (-t[0], t[1]))
        return [
            Standing(i, name, kind, r.mu, r.sigma, n, wins, draws, losses, late, invalid, bank)
            for i, (_, name, kind, r, n, wins, draws, losses, late, invalid, bank) in enumerate(table, 1)
        ]

    def _matches_where(self, condition: str, params: Sequence[object], action: str) -> list[MatchRecord]:
        with self._reading(action) as db:
            rows = db.query(f"{_MATCH_QUERY} WHERE {condition} ORDER BY m.id DESC, s.seat", params)
        out: list[MatchRecord] = []
        seats: list[SeatRecord] = []
        for i, row in enumerate(rows):
            seats.append(self._seat_record(row[12:-1]))
            if i + 1 == len(rows) or rows[i + 1][0] != row[0]:
                out.append(self._match_record(row[:12], tuple(seats), rated=bool(row[-1])))
                seats = []
        return out

    @staticmethod
    def _match_record(row: Row, seats: tuple[SeatRecord, ...], *, rated: bool = True) -> MatchRecord:
        id_, game, map_, seed, status, seq, winner, reason, ticks, replay, started, ended = row
        return MatchRecord(
            id=int(id_),
            game=game,
            map=map_,
            seed=int(seed),
            status=cast(MatchStatus, status),
            seq=None if seq is None else int(seq),
            winner=winner,
            reason=reason,
            ticks=None if ticks is None else int(ticks),
            replay=replay,
            started=_time(started),
            ended=_maybe_time(ended),
            seats=seats,
            rated=rated,
        )

    @staticmethod
    def _seat_record(row: Row) -> SeatRecord:
        seat, name, bot_id, rank, late, invalid, illegal, forfeit, mu0, s0, mu1, s1, cause, version, bank = (
            row
        )
        return SeatRecord(
            seat=int(seat),
            bot=name,
            bot_id=int(bot_id),
            rank=rank,
            late=late,
            invalid=invalid,
            illegal=illegal,
            forfeit=None if forfeit is None else bool(forfeit),
            before=_rating(mu0, s0),
            after=_rating(mu1, s1),
            cause=None if cause is None else json.loads(cause),
            version=version,
            bank_drawn_ms=None if bank is None else int(bank),
        )
