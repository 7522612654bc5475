"""Owners' mail addresses (schema version 13): set, verified by a mailed link, used for a self-service
password reset, and whether the owner wants their bots' notices (docs/ladder.md "Mail").

The links are `mail_links`' (signed, expiring, single-use by what they sign); this module checks what
they sign against the database and makes the change, each in one short transaction. Messages are
`AccountError`s fit for a page; a link that does not work always says to ask for a new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from cellarena.arena.ladder.accounts.mail_links import LinkError, MailLinks, Purpose, fingerprint
from cellarena.arena.ladder.accounts.owners import (
    AccountError,
    Accounts,
    Owner,
    check_password,
    hash_password,
)
from cellarena.arena.ladder.store.database import now as db_now

#: RFC 5321's longest path; ASCII only (no SMTPUTF8), one @, no spaces, brackets or quotes.
EMAIL_MAX = 254
_ADDRESS = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*")
#: Owners mailed for one reset request at most (owners may share an address).
RESET_OWNERS_MAX = 5


def check_address(email: object) -> str:
    """The address as kept (trimmed); AccountError naming the field otherwise."""
    text = email.strip() if isinstance(email, str) else ""
    if not text or len(text) > EMAIL_MAX or not _ADDRESS.fullmatch(text):
        raise AccountError(
            f"the email address {text[:60]!r} is not one the ladder can mail: give name@example.org "
            f"(ASCII letters, at most {EMAIL_MAX} characters)"
        )
    return text


@dataclass(frozen=True)
class MailStatus:
    email: str | None
    verified: bool
    notify: bool


@dataclass(frozen=True)
class Link:
    """A link to mail: whom to, and its token (which only the mail carries)."""

    owner: str
    email: str
    token: str


class OwnerMail:
    """The owners' addresses in ``accounts``' database, and the links that work on them."""

    def __init__(self, accounts: Accounts, links: MailLinks) -> None:
        self.accounts = accounts
        self.database = accounts.store.database
        self.links = links

    def status(self, owner: Owner) -> MailStatus:
        with self.database.reading(f"read the address of {owner.name!r}") as db:
            rows = db.query("SELECT email, email_verified, notify FROM owners WHERE id = ?", (owner.id,))
        if not rows:
            return MailStatus(None, False, False)
        email, verified, notify = rows[0]
        return MailStatus(email, verified is not None, bool(notify))

    def set_address(self, owner: Owner, email: str) -> str:
        """Keep ``email`` as the owner's address; a new address is unverified until its link is followed."""
        email = check_address(email)
        with self.database.writing(f"set the address of {owner.name!r}") as db:
            db.execute(
                "UPDATE owners SET email_verified = NULL WHERE id = ? AND (email IS NULL OR email <> ?)",
                (owner.id, email),
            )
            db.execute("UPDATE owners SET email = ? WHERE id = ?", (email, owner.id))
        return email

    def set_notify(self, owner: Owner, on: bool) -> None:
        with self.database.writing(f"set the notices of {owner.name!r}") as db:
            db.execute("UPDATE owners SET notify = ? WHERE id = ?", (on, owner.id))

    def verify_link(self, owner: Owner, now: datetime) -> Link | None:
        """A link that verifies the owner's address (None: they have none, or it is verified)."""
        status = self.status(owner)
        if status.email is None or status.verified:
            return None
        token = self.links.make("verify", owner.id, fingerprint(status.email), now)
        return Link(owner.name, status.email, token)

    def verify(self, token: str, now: datetime) -> Owner:
        """Follow a verification link: the address it was sent to is verified, if still the owner's."""
        owner_id, print_ = self._read("verify", token, now)
        with self.database.writing("verify an address") as db:
            rows = db.query("SELECT name, email FROM owners WHERE id = ?", (owner_id,))
            if not rows or rows[0][1] is None or fingerprint(rows[0][1]) != print_:
                raise AccountError(
                    "this link is for an address that is no longer the account's: "
                    "ask for a new link on your account page"
                )
            db.execute(
                "UPDATE owners SET email_verified = ? WHERE id = ? AND email_verified IS NULL",
                (db_now(), owner_id),
            )
            name = str(rows[0][0])
        return self._owner(name)

    def reset_links(self, email: str, now: datetime) -> list[Link]:
        """Reset links for the owners whose address is ``email`` (none: an empty list, which the page
        does not reveal). Each signs its owner's password hash and address: used once, then dead."""
        try:
            email = check_address(email)
        except AccountError:
            return []
        with self.database.reading("find owners by address") as db:
            rows = db.query(
                "SELECT id, name, email, password_hash FROM owners WHERE LOWER(email) = LOWER(?)"
                " ORDER BY id LIMIT ?",
                (email, RESET_OWNERS_MAX),
            )
        return [
            Link(str(name), str(address), self.links.make("reset", int(i), fingerprint(h, address), now))
            for i, name, address, h in rows
        ]

    def reset_owner(self, token: str, now: datetime) -> Owner:
        """The owner a reset link may set a new password for; AccountError if it is used or expired."""
        owner_id, print_ = self._read("reset", token, now)
        with self.database.reading("check a reset link") as db:
            rows = db.query("SELECT name, email, password_hash FROM owners WHERE id = ?", (owner_id,))
        if not rows or fingerprint(rows[0][2], rows[0][1]) != print_:
            raise AccountError(_used())
        return self._owner(str(rows[0][0]))

    def reset_password(self, token: str, password: str, now: datetime) -> Owner:
        """Set a new password with a reset link: the link is then dead, every session of the owner ends,
        and the address is verified (the link reached it)."""
        check_password(password)
        owner_id, print_ = self._read("reset", token, now)
        hashed = hash_password(password)  # outside the write lock
        with self.database.writing("reset a password by mail") as db:
            rows = db.query("SELECT name, email, password_hash FROM owners WHERE id = ?", (owner_id,))
            if not rows or fingerprint(rows[0][2], rows[0][1]) != print_:
                raise AccountError(_used())
            at = db_now()
            db.execute(
                "UPDATE owners SET password_hash = ?, email_verified = COALESCE(email_verified, ?)"
                " WHERE id = ?",
                (hashed, at, owner_id),
            )
            db.execute(
                "UPDATE sessions SET revoked = ? WHERE owner_id = ? AND revoked IS NULL", (at, owner_id)
            )
            name = str(rows[0][0])
        return self._owner(name)

    def _read(self, purpose: Purpose, token: str, now: datetime) -> tuple[int, str]:
        try:
            return self.links.read(purpose, token, now)
        except LinkError as exc:
            raise AccountError(str(exc)) from None

    def _owner(self, name: str) -> Owner:
        owner = self.accounts.owner(name)
        if owner is None:
            raise AccountError(_used())
        return owner


def _used() -> str:
    return (
        "this link was used already (or the password or address changed since it was sent): "
        "ask for a new password mail"
    )
