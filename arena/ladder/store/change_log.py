"""The ladder's two logs: the change log a running server polls, and the audit log of admin actions."""

from __future__ import annotations

from cellarena.arena.ladder.records import AuditEntry, Change, ChangeKind
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.database import Database, now, parse_time

#: How many rows of the ``changes`` log are kept: a server polls it twice a second, so it never falls
#: this far behind; a server that was away (a database outage) re-reads every bot it holds instead.
CHANGES_KEPT = 10_000


class ChangeLog:
    """The ``changes`` and ``audit`` tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    @staticmethod
    def note(db: Backend, kind: ChangeKind, bot: str | None) -> None:
        """Log a change for the running server, in the caller's write transaction (so it is seen exactly
        when the change is), and drop the rows far behind it."""
        bot_id = None
        if bot is not None:
            rows = db.query("SELECT id FROM bots WHERE name = ?", (bot,))
            bot_id = int(rows[0][0]) if rows else None
        change_id = int(
            db.query(
                "INSERT INTO changes (kind, bot_id, at) VALUES (?, ?, ?) RETURNING id", (kind, bot_id, now())
            )[0][0]
        )
        # An indexed delete of the row that just fell out of the window (ids may skip: PostgreSQL's
        # sequences do when a transaction rolls back), so the log stays at about CHANGES_KEPT rows.
        db.execute("DELETE FROM changes WHERE id <= ?", (change_id - CHANGES_KEPT,))

    def last_change(self) -> int:
        """The id of the newest change (0 if none): where a server that starts begins to watch."""
        with self.database.reading("read the change log") as db:
            rows = db.query("SELECT MAX(id) FROM changes")
        return int(rows[0][0] or 0)

    def changes_since(self, after: int, limit: int = 1000) -> list[Change]:
        """The changes newer than ``after``, oldest first: what a running server polls (its one channel
        from the ladder's commands and pages, docs/ladder.md)."""
        with self.database.reading("read the change log") as db:
            rows = db.query(
                "SELECT c.id, c.kind, b.name FROM changes c LEFT JOIN bots b ON b.id = c.bot_id"
                " WHERE c.id > ? ORDER BY c.id LIMIT ?",
                (after, limit),
            )
        return [Change(int(i), kind, name) for i, kind, name in rows]

    @staticmethod
    def audit(db: Backend, actor: str | None, action: str, bot: str | None, detail: str | None) -> None:
        """An admin action, in the caller's write transaction; nothing without an ``actor``."""
        if actor is not None:
            db.execute(
                "INSERT INTO audit (at, actor, action, bot, detail) VALUES (?, ?, ?, ?, ?)",
                (now(), actor, action, bot, detail),
            )

    def audit_log(self, limit: int = 100) -> list[AuditEntry]:
        """The newest admin actions first, at most ``limit``."""
        with self.database.reading("read the audit log") as db:
            rows = db.query(
                "SELECT id, at, actor, action, bot, detail FROM audit ORDER BY id DESC LIMIT ?",
                (max(0, limit),),
            )
        return [
            AuditEntry(int(i), parse_time(at), actor, action, bot, detail)
            for i, at, actor, action, bot, detail in rows
        ]
