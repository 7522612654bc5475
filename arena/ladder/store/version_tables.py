"""Submitted bots' versions: the ``versions`` table and each bot's ``live_version``.

An upload adds a version in state ``received`` (`add_version`, within the uploader's daily quota);
the builder takes the oldest one (`next_to_build`, which moves it to ``building`` in the transaction
that finds it, so two builders never take one) and reports each step (`mark`, which keeps each build
that ran to its end, with its duration, in ``builds``: the build-minutes quota); a validated version
goes live at once, retiring the one before (`mark(..., "validated")`), and its owner may make any
validated or retired version live again (`make_live`: a roll back). Every change of state is checked
against the one table of moves, `submissions.versions.MOVES`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.store.backends import Backend, Row
from cellarena.arena.ladder.store.bot_tables import BotTable
from cellarena.arena.ladder.store.database import now, parse_time
from cellarena.arena.ladder.store.notices import Notices
from cellarena.arena.ladder.submissions.quotas import build_minutes_left as minutes_left
from cellarena.arena.ladder.submissions.quotas import build_minutes_refusal, upload_refusal
from cellarena.arena.ladder.submissions.versions import (
    MAX_REASON,
    Version,
    VersionMoveError,
    VersionState,
    capped_log,
    check_move,
)

log = logging.getLogger("cellarena.ladder")

_A_DAY = timedelta(days=1)
_COLUMNS = (
    "v.id, b.name, v.bot_id, v.number, v.sha256, v.size, v.archive_kind, v.state, v.uploaded_by,"
    " v.created, v.changed, v.reason, v.build_log, v.validation_log"
)
_FROM = "FROM versions v JOIN bots b ON b.id = v.bot_id"


class UploadQuotaError(LadderStoreError):
    """An owner (or an owner-less bot) has uploaded its quota of versions in the last 24 hours;
    ``retry_after``, the seconds until the next upload is possible."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RevokedBotError(LadderStoreError):
    """A revoked bot takes no new versions."""


class UnknownVersionError(LadderStoreError):
    """No version of that number (or id) for that bot."""


def _version(row: Row) -> Version:
    id_, bot, bot_id, number, sha256, size, kind, state, uploaded_by, created, changed = row[:11]
    reason, build_log, validation_log = row[11:]
    return Version(
        id=int(id_),
        bot=bot,
        bot_id=int(bot_id),
        number=int(number),
        sha256=sha256,
        size=int(size),
        kind=kind,
        state=state,
        uploaded_by=None if uploaded_by is None else int(uploaded_by),
        created=parse_time(created),
        changed=parse_time(changed),
        reason=reason,
        build_log=build_log,
        validation_log=validation_log,
    )


class VersionTable:
    """The ``versions`` table, over the bots it belongs to."""

    def __init__(self, bots: BotTable) -> None:
        self.bots = bots
        self.database = bots.database

    # -- uploads --------------------------------------------------------------------------------------
    def add_version(
        self,
        bot: str,
        sha256: str,
        size: int,
        kind: str,
        *,
        uploaded_by: int | None = None,
        per_day: int | None = None,
        build_minutes: float | None = None,
        actor: str | None = None,
    ) -> Version:
        """A new version of ``bot`` (its next number), ``received``, uploaded by ``uploaded_by`` (by
        default the bot's owner). With ``per_day``, refused with `UploadQuotaError` once the uploader
        (the owner, or the bot when it has none) has added that many in the last 24 hours; with
        ``build_minutes``, once their builds that ended in the last 24 hours took that many minutes:
        counted in the transaction that writes (the bot's row is locked, so that uploads at the same
        moment are counted one after another)."""
        with self.database.writing(f"add a version of bot {bot!r}") as db:
            rows = db.query(f"SELECT id, revoked, owner_id FROM bots WHERE name = ?{db.row_lock}", (bot,))
            if not rows:
                raise self.bots.unknown(bot)
            bot_id, revoked = int(rows[0][0]), rows[0][1]
            if revoked is not None:
                raise RevokedBotError(f"{bot} is revoked: it takes no new versions")
            if uploaded_by is None and rows[0][2] is not None:
                uploaded_by = int(rows[0][2])
            self._check_quota(db, bot, bot_id, uploaded_by, per_day, build_minutes)
            number = int(
                db.query("SELECT COALESCE(MAX(number), 0) FROM versions WHERE bot_id = ?", (bot_id,))[0][0]
            )
            at = now()
            version_id = int(
                db.query(
                    "INSERT INTO versions (bot_id, number, sha256, size, archive_kind, state, uploaded_by,"
                    " created, changed) VALUES (?, ?, ?, ?, ?, 'received', ?, ?, ?) RETURNING id",
                    (bot_id, number + 1, sha256, size, kind, uploaded_by, at, at),
                )[0][0]
            )
            self.bots.changes.audit(
                db, actor, "upload", bot, f"version {number + 1} ({sha256[:12]}, {size} bytes)"
            )
        log.info("ladder: %s version %d received (%s, %d bytes)", bot, number + 1, sha256[:12], size)
        return self.version_by_id(version_id)

    @staticmethod
    def _check_quota(
        db: Backend,
        bot: str,
        bot_id: int,
        owner: int | None,
        per_day: int | None,
        build_minutes: float | None,
    ) -> None:
        moment = datetime.now(UTC)
        since = (moment - _A_DAY).isoformat(timespec="microseconds")
        who, params = _uploader(owner, bot_id)
        whose = "its owner has" if owner is not None else f"{bot} has"
        if per_day is not None:
            made = db.query(
                f"SELECT COUNT(*), MIN(created) FROM versions v WHERE {who} AND created > ?", (*params, since)
            )
            count, oldest = int(made[0][0]), made[0][1]
            oldest_at = None if oldest is None else parse_time(oldest)
            refusal = upload_refusal(whose, count, per_day, oldest_at, moment)
            if refusal is not None:
                raise UploadQuotaError(refusal.message, retry_after=refusal.retry_after)
        if build_minutes is not None:
            builds = _builds_since(db, who, params, since)
            refusal = build_minutes_refusal(whose, builds, build_minutes, moment)
            if refusal is not None:
                raise UploadQuotaError(refusal.message, retry_after=refusal.retry_after)

    def _uploader_of(self, db: Backend, bot: str) -> tuple[int, int | None]:
        rows = db.query("SELECT id, owner_id FROM bots WHERE name = ?", (bot,))
        if not rows:
            raise self.bots.unknown(bot)
        return int(rows[0][0]), None if rows[0][1] is None else int(rows[0][1])

    def uploads_left(self, bot: str, per_day: int) -> int:
        """How many more versions of ``bot`` may be uploaded now (what `add_version` counts for its
        owner, or for the bot when it has none), for the page and to refuse early."""
        with self.database.reading(f"count the uploads of {bot!r}") as db:
            bot_id, owner = self._uploader_of(db, bot)
            since = (datetime.now(UTC) - _A_DAY).isoformat(timespec="microseconds")
            who, params = _uploader(owner, bot_id)
            made = db.query(f"SELECT COUNT(*) FROM versions v WHERE {who} AND created > ?", (*params, since))
        return max(0, per_day - int(made[0][0]))

    def build_minutes_left(self, bot: str, build_minutes: float) -> float:
        """The build minutes ``bot``'s uploader (its owner, or the bot) has left of ``build_minutes``:
        what their builds of the last 24 hours did not use."""
        moment = datetime.now(UTC)
        with self.database.reading(f"count the build minutes of {bot!r}") as db:
            bot_id, owner = self._uploader_of(db, bot)
            who, params = _uploader(owner, bot_id)
            builds = _builds_since(db, who, params, (moment - _A_DAY).isoformat(timespec="microseconds"))
        return minutes_left(builds, build_minutes, moment)

    def check_quota(self, bot: str, per_day: int | None, build_minutes: float | None = None) -> None:
        """`UploadQuotaError` now if ``bot``'s uploader has no upload or build minutes left (before an
        archive is unpacked: `add_version` counts again as it writes)."""
        with self.database.reading(f"count the uploads of {bot!r}") as db:
            bot_id, owner = self._uploader_of(db, bot)
            self._check_quota(db, bot, bot_id, owner, per_day, build_minutes)

    # -- reading --------------------------------------------------------------------------------------
    def _where(self, condition: str, params: Sequence[object], limit: int = 1000) -> list[Version]:
        with self.database.reading("read the versions") as db:
            rows = db.query(
                f"SELECT {_COLUMNS} {_FROM} WHERE {condition} ORDER BY v.id DESC LIMIT ?", (*params, limit)
            )
        return [_version(r) for r in rows]

    def versions_of(self, bot: str, limit: int = 50) -> list[Version]:
        """The bot's versions, newest first."""
        return self._where("b.name = ?", (bot,), limit)

    def version(self, bot: str, number: int) -> Version | None:
        found = self._where("b.name = ? AND v.number = ?", (bot, number), 1)
        return found[0] if found else None

    def version_by_id(self, version_id: int) -> Version:
        found = self._where("v.id = ?", (version_id,), 1)
        if not found:
            raise UnknownVersionError(f"{self.database.where}: there is no version with id {version_id}")
        return found[0]

    def live_version(self, bot: str) -> Version | None:
        """The version the ladder plays for ``bot``; None if it has none live."""
        found = self._where("v.id = b.live_version AND b.name = ?", (bot,), 1)
        return found[0] if found else None

    # -- the builder's side ---------------------------------------------------------------------------
    def next_to_build(self, games: Sequence[str] | None = None) -> Version | None:
        """The oldest ``received`` version (of a bot of ``games``, or any), moved to ``building`` in the
        transaction that finds it; None when none waits."""
        games_sql = "" if games is None else f" AND b.game IN ({', '.join('?' * len(games))})"
        with self.database.reading("look for a version to build") as db:  # the idle poll: no write lock
            if not db.query(
                f"SELECT v.id {_FROM} WHERE v.state = 'received'{games_sql} LIMIT 1", tuple(games or ())
            ):
                return None
        with self.database.writing("take a version to build") as db:
            rows = db.query(
                f"SELECT v.id {_FROM} WHERE v.state = 'received' AND b.revoked IS NULL{games_sql}"
                # PostgreSQL: a version another builder holds is passed over, not waited for.
                f" ORDER BY v.id LIMIT 1{db.row_lock}{' OF v SKIP LOCKED' if db.row_lock else ''}",
                tuple(games or ()),
            )
            if not rows:
                return None
            version_id = int(rows[0][0])
            db.execute(
                "UPDATE versions SET state = 'building', changed = ? WHERE id = ?", (now(), version_id)
            )
        return self.version_by_id(version_id)

    def mark(
        self,
        version_id: int,
        state: VersionState,
        *,
        reason: str | None = None,
        log_text: str | None = None,
        go_live: bool = True,
    ) -> Version:
        """Move a version to ``state`` (as `MOVES` allows; `VersionMoveError` otherwise), with the
        reason and the log of the step that ends: a log given while ``building`` is the build log,
        while ``validating`` the validation log (each its capped tail). A version ``validated`` with
        ``go_live`` goes live at once, in the same transaction, and the live one before is retired."""
        with self.database.writing(f"change the state of version {version_id}") as db:
            version = self._locked(db, version_id)
            check_move(version.label, version.state, state)
            column = {"building": "build_log", "validating": "validation_log"}.get(version.state)
            at = now()
            if version.state == "building" and state != "received":  # a build that ran to its end
                _record_build(db, version, at)
            sets, params = ["state = ?", "changed = ?", "reason = ?"], [state, at, _reason(reason)]
            if column is not None and log_text is not None:
                sets.append(f"{column} = ?")
                params.append(capped_log(log_text))
            db.execute(f"UPDATE versions SET {', '.join(sets)} WHERE id = ?", (*params, version_id))
            if state == "live" or (state == "validated" and go_live):
                self._go_live(db, self._locked(db, version_id), None)
            if state == "failed":
                Notices.note(db, "version_failed", version.bot, f"{version.label}: {reason or 'failed'}")
        log.info("ladder: %s is %s%s", version.label, state, f" ({reason})" if reason else "")
        return self.version_by_id(version_id)

    def requeue_unfinished(self, games: Sequence[str] | None = None) -> int:
        """Versions (of bots of ``games``, or any) left ``building`` or ``validating`` by a server that
        stopped go back to ``received`` (a server calls this as it starts, for its own game: another
        game's server on the database may be building one); how many."""
        games_sql = (
            ""
            if games is None
            else f" AND bot_id IN (SELECT id FROM bots WHERE game IN ({', '.join('?' * len(games))}))"
        )
        with self.database.writing("put unfinished builds back in the queue") as db:
            return db.execute(
                "UPDATE versions SET state = 'received', changed = ?, reason = ?"
                f" WHERE state IN ('building', 'validating'){games_sql}",
                (
                    now(),
                    "the ladder stopped during its build or validation; it will be built again",
                    *(games or ()),
                ),
            )

    # -- the owner's side -----------------------------------------------------------------------------
    def make_live(self, bot: str, number: int, *, actor: str | None = None) -> Version:
        """Make version ``number`` of ``bot`` live (it must be validated, or retired: a roll back); the
        live one before is retired, in the same transaction."""
        with self.database.writing(f"make version {number} of {bot!r} live") as db:
            rows = db.query(
                f"SELECT v.id {_FROM} WHERE b.name = ? AND v.number = ?{db.row_lock}", (bot, number)
            )
            if not rows:
                raise UnknownVersionError(f"{bot} has no version {number}; its page lists its versions")
            version = self._locked(db, int(rows[0][0]))
            self._go_live(db, version, actor)
        return self.version_by_id(version.id)

    def _locked(self, db: Backend, version_id: int) -> Version:
        rows = db.query(f"SELECT {_COLUMNS} {_FROM} WHERE v.id = ?", (version_id,))
        if not rows:
            raise UnknownVersionError(f"{self.database.where}: there is no version with id {version_id}")
        return _version(rows[0])

    def _go_live(self, db: Backend, version: Version, actor: str | None) -> None:
        """Retire the bot's live version and put ``version`` in its place (the caller's transaction)."""
        if version.state != "live":
            check_move(version.label, version.state, "live")
        at = now()
        db.execute(
            "UPDATE versions SET state = 'retired', changed = ?, reason = ?"
            " WHERE bot_id = ? AND state = 'live' AND id <> ?",
            (at, f"replaced by version {version.number}", version.bot_id, version.id),
        )
        db.execute(
            "UPDATE versions SET state = 'live', changed = ?, reason = NULL WHERE id = ?", (at, version.id)
        )
        db.execute("UPDATE bots SET live_version = ? WHERE id = ?", (version.id, version.bot_id))
        self.bots.changes.note(db, "bot_changed", version.bot)
        self.bots.changes.audit(db, actor, "make live", version.bot, f"version {version.number}")


def _uploader(owner: int | None, bot_id: int) -> tuple[str, tuple[int]]:
    """Whose uploads a quota counts (versions as ``v``): the owner's, or an owner-less bot's."""
    return ("v.uploaded_by = ?", (owner,)) if owner is not None else ("v.bot_id = ?", (bot_id,))


def _builds_since(db: Backend, who: str, params: tuple[int], since: str) -> list[tuple[datetime, float]]:
    """The uploader's builds (their end, their seconds) that ended after ``since``."""
    rows = db.query(
        f"SELECT b.ended, b.seconds FROM builds b JOIN versions v ON v.id = b.version_id WHERE {who}"
        " AND b.ended > ?",
        (*params, since),
    )
    return [(parse_time(ended), float(seconds)) for ended, seconds in rows]


def _record_build(db: Backend, version: Version, at: str) -> None:
    """A build that ends now (``at``): from when its version became ``building`` (`changed`)."""
    seconds = max(0.0, (parse_time(at) - version.changed).total_seconds())
    db.execute(
        "INSERT INTO builds (version_id, started, ended, seconds) VALUES (?, ?, ?, ?)",
        (version.id, version.changed.isoformat(timespec="microseconds"), at, seconds),
    )


def _reason(text: str | None) -> str | None:
    return None if text is None else text[:MAX_REASON]


__all__ = ["RevokedBotError", "UnknownVersionError", "UploadQuotaError", "VersionMoveError", "VersionTable"]
