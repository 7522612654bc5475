"""Notices: what an owner may be told by mail (a bot paused, a version failed, a challenge), kept in the
``notices`` table (schema version 13) by the transaction that makes the event, in whichever process.

`ladder serve` pauses bots and fails versions, the pages and commands make challenges; one process
sends the mail: `ladder web`'s sender (`accounts.mailer`) reads the pending notices and mails the
owner, when they have a verified address and have not opted out. Delivery is at least once (schema
version 14): a sender claims a notice with a lease (``claimed_at``, renewed before each try), marks
it done only once the SMTP server took the mail (or it needs none), and a notice whose lease ran out
unsent (its sender died between claim and send) is claimed again by the next sender; a second
`web` on the database never claims one whose lease holds, and a done one is never sent again. Only
bots with an owner get notices; the table is kept short, as the change log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.database import Database, now, parse_time

NoticeKind = Literal["paused", "version_failed", "challenged"]
#: How many rows are kept: far more than a sender falls behind by.
NOTICES_KEPT = 10_000
#: How long a claim holds before another sender may take the notice: far longer than one try of a
#: mail (each SMTP step has 30 s), since the claim is renewed before each try.
LEASE = timedelta(minutes=15)


@dataclass(frozen=True)
class Notice:
    """A pending notice and the owner to tell: their address (None: none yet) and choices."""

    id: int
    kind: NoticeKind
    bot: str
    detail: str
    created: datetime
    owner: str
    email: str | None
    verified: bool
    notify: bool


class Notices:
    """The ``notices`` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    @staticmethod
    def note(db: Backend, kind: NoticeKind, bot: str, detail: str, actor: str | None = None) -> None:
        """A notice to ``bot``'s owner, in the caller's write transaction; none for the host's bots, nor
        for what the owner did themselves (``actor`` "NAME (owner)")."""
        if actor is not None and actor.endswith(" (owner)"):
            return
        rows = db.query(
            "INSERT INTO notices (kind, bot_id, detail, created)"
            " SELECT ?, id, ?, ? FROM bots WHERE name = ? AND owner_id IS NOT NULL RETURNING id",
            (kind, " ".join(detail.split())[:300], now(), bot),
        )
        if rows:
            db.execute("DELETE FROM notices WHERE id <= ?", (int(rows[0][0]) - NOTICES_KEPT,))

    def pending(self, at: datetime, lease: timedelta = LEASE, limit: int = 50) -> list[Notice]:
        """The oldest notices not done and not claimed (or whose claim's lease ran out) at ``at``, with
        their owners' addresses and choices."""
        with self.database.reading("read the pending notices") as db:
            rows = db.query(
                "SELECT n.id, n.kind, b.name, n.detail, n.created, o.name, o.email, o.email_verified,"
                " o.notify FROM notices n JOIN bots b ON b.id = n.bot_id JOIN owners o ON o.id = b.owner_id"
                " WHERE n.done IS NULL AND (n.claimed_at IS NULL OR n.claimed_at < ?) ORDER BY n.id LIMIT ?",
                (_stamp(at - lease), limit),
            )
        return [
            Notice(
                int(i),
                kind,
                str(bot),
                str(detail),
                parse_time(created),
                str(owner),
                email,
                verified is not None,
                bool(notify),
            )
            for i, kind, bot, detail, created, owner, email, verified, notify in rows
        ]

    def claim(self, notice_id: int, at: datetime, lease: timedelta = LEASE) -> str | None:
        """Claim the notice at ``at`` for ``lease``: the claim (its stamp, for `renew` and `finish`), or
        None if it is done or another sender's claim holds."""
        stamp = _stamp(at)
        with self.database.writing(f"claim notice {notice_id}") as db:
            taken = db.execute(
                "UPDATE notices SET claimed_at = ? WHERE id = ? AND done IS NULL"
                " AND (claimed_at IS NULL OR claimed_at < ?)",
                (stamp, notice_id, _stamp(at - lease)),
            )
        return stamp if taken == 1 else None

    def renew(self, notice_id: int, claim: str, at: datetime) -> str | None:
        """The claim renewed from ``at`` (before a try of its mail); None if it is no longer this
        sender's (its lease ran out and another took it, or it is done)."""
        stamp = _stamp(at)
        with self.database.writing(f"renew the claim of notice {notice_id}") as db:
            kept = db.execute(
                "UPDATE notices SET claimed_at = ? WHERE id = ? AND claimed_at = ? AND done IS NULL",
                (stamp, notice_id, claim),
            )
        return stamp if kept == 1 else None

    def finish(self, notice_id: int, outcome: str, claim: str) -> bool:
        """Mark the claimed notice done with ``outcome`` (``mailed``, ``no address``, ``opted out``...);
        False if the claim is no longer this sender's."""
        with self.database.writing(f"finish notice {notice_id}") as db:
            return (
                db.execute(
                    "UPDATE notices SET done = ?, outcome = ?"
                    " WHERE id = ? AND claimed_at = ? AND done IS NULL",
                    (now(), outcome[:100], notice_id, claim),
                )
                == 1
            )

    def outcomes(self, bot: str) -> list[tuple[NoticeKind, str | None]]:
        """Each notice of ``bot``, oldest first, and what became of it (None: pending)."""
        with self.database.reading(f"read the notices of {bot!r}") as db:
            rows = db.query(
                "SELECT n.kind, n.outcome FROM notices n JOIN bots b ON b.id = n.bot_id WHERE b.name = ?"
                " ORDER BY n.id",
                (bot,),
            )
        return [(kind, outcome) for kind, outcome in rows]


def _stamp(at: datetime) -> str:
    """A time as the table keeps it (as `database.now`: ISO 8601, UTC, microseconds): ordered as text."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def stale(notice: Notice, at: datetime, age: timedelta = timedelta(days=1)) -> bool:
    """A notice older than ``age`` at ``at``: news no longer (a sender that starts after days away, or a
    ladder that only now configures mail, does not send the backlog)."""
    return notice.created < at - age
