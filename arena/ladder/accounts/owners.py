"""Owners: people who sign up on a ladder, log in, and own bots (issue 29, docs/security.md#accounts).

An owner has a name (unique up to case and look-alike characters: `lookalikes.name_key`), a password
kept only as its argon2id hash (memory-hard, salted; at argon2-cffi's default cost unless the host set
another, `password_cost`, and re-hashed at a login when the cost changed), and a status: ``active``,
or ``pending`` while the host's approval is awaited (the ``approval`` sign-up policy). Under the
``invite`` policy a sign-up spends one invite code the host made (`Accounts.make_invite`); codes are
kept as SHA-256 digests, as bot tokens are.

Sessions: a login makes a random session id (256 bits) that only the owner's cookie carries; the
database keeps its SHA-256, its expiry and, after logout, when it was revoked, so a cookie copied
before logout is refused after it. A password reset (the host's one-time code) and deleting the
account revoke every session of the owner.

An owner's bots are ordinary ladder bots with ``bots.owner_id`` set: created, rotated and revoked
through the store's own methods, so each change reaches a running ``ladder serve`` by the change log
as the host's commands do.

Every method is one short transaction on the store (from any thread); refusals are `AccountError`
with a message that says what to do, fit to show on a page or a terminal.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, cast

from argon2.exceptions import InvalidHashError, VerificationError

from cellarena.arena.ladder.accounts.password_cost import DEFAULT as DEFAULT_COST
from cellarena.arena.ladder.accounts.password_cost import PasswordCost
from cellarena.arena.ladder.errors import BotLimitError, LadderStoreError, NameTakenError, UnknownBotError
from cellarena.arena.ladder.identity import names, tokens
from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store.ladder_store import LadderStore

log = logging.getLogger("cellarena.ladder")

Policy = Literal["open", "invite", "approval"]
POLICIES: tuple[Policy, ...] = ("open", "invite", "approval")
OwnerStatus = Literal["active", "pending"]

#: An owner's name: shown on pages beside their bots; shorter than a bot's.
OWNER_NAME_MAX = 32
#: Passwords: long enough to resist guessing, bounded so that a 10 KB "password" is refused before
#: it is hashed (argon2 hashes anything, but a page should say what it takes).
PASSWORD_MIN = 10
PASSWORD_MAX = 256
#: How long a login lasts, unless logout ends it sooner.
SESSION_LIFETIME = timedelta(days=14)
#: How long the host's password-reset code works.
RESET_LIFETIME = timedelta(hours=24)
DEFAULT_MAX_BOTS = 5
#: The ``settings`` rows that mark an owner an admin, by owner id.
_ADMIN = "admin_owner:"


class _Hashing:
    """This process's password hasher: argon2-cffi's defaults unless `use_password_cost` set another."""

    hasher = PasswordCost.parse(DEFAULT_COST).hasher()


#: Verified against when no owner has the name, so that a wrong name takes as long as a wrong password:
#: the hash of a random password nobody kept, made at the default cost. Written here rather than
#: hashed at import, which cost every process importing this module (`ladder web`, the account
#: commands) 0.3 s of CPU; `_dummy_hash` makes another at any other cost.
_DUMMY_HASH = (
    "$argon2id$v=19$m=65536,t=3,p=4$o0hC4Hwfh8PjczumJ6Oxwg$btVjUGpSBIUxVt20cDXkTBNvBZ8up9aTMwoEg8ynfq0"
)


def use_password_cost(cost: PasswordCost) -> None:
    """Hash passwords in this process at ``cost`` from now on (`ladder web --password-hash`): sign-ups,
    resets, and a login's re-hash of a password hashed at another cost."""
    _Hashing.hasher = cost.hasher()
    _dummy_hash.cache_clear()


def hash_password(password: str) -> str:
    """The argon2id hash of ``password`` at this process's cost: slow on purpose, so call it outside
    any write lock."""
    return _Hashing.hasher.hash(password)


@functools.cache
def _dummy_hash() -> str:
    """`_DUMMY_HASH`, or a fresh hash if it was made at another cost than this process's (then it
    would take another time to verify than an owner's)."""
    if _Hashing.hasher.check_needs_rehash(_DUMMY_HASH):
        return _Hashing.hasher.hash(secrets.token_urlsafe(32))
    return _DUMMY_HASH


class AccountError(LadderStoreError):
    """A sign-up, login or bot change refused; the message says why and what to do."""


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Owner:
    id: int
    name: str
    status: OwnerStatus
    created: datetime

    @property
    def active(self) -> bool:
        return self.status == "active"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "created": self.created.isoformat()}


def check_owner_name(name: object) -> str:
    """The name as kept (NFKC) under the ladder's identifier profile (`names`), at most
    `OWNER_NAME_MAX` characters; scripts are checked after the look-alike look-up (`names.check_scripts`)."""
    return names.normalise(name, "owner name", OWNER_NAME_MAX)


def check_password(password: object) -> str:
    if not isinstance(password, str) or not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        size = len(password) if isinstance(password, str) else 0
        raise AccountError(
            f"the password has {size} characters: give {PASSWORD_MIN} to {PASSWORD_MAX} "
            "(a passphrase of a few words is easiest)"
        )
    return password


class Accounts:
    """The owners of the ladder in ``store``'s database."""

    def __init__(self, store: LadderStore, *, verified_for_bots: bool = False) -> None:
        self.store = store
        #: Bots are made only by owners whose address is verified (``ladder web --verify-email``).
        self.verified_for_bots = verified_for_bots

    # ------------------------------------------------------------------ sign-up and approval
    def sign_up(self, name: str, password: str, *, policy: Policy, invite: str | None = None) -> Owner:
        """A new owner under ``policy``: active at once (``open``, ``invite`` with an unused code) or
        ``pending`` until the host approves (``approval``)."""
        given = name
        name = check_owner_name(name)
        check_password(password)
        if policy == "invite" and not (isinstance(invite, str) and 0 < len(invite) <= 100):
            raise AccountError("this ladder signs up by invitation: give the invite code its host sent you")
        key = name_key(name)
        hashed = hash_password(password)  # outside the write lock
        status: OwnerStatus = "pending" if policy == "approval" else "active"
        with self.store.database.writing(f"sign up {name!r}") as db:
            for (taken,) in db.query("SELECT name FROM owners WHERE name_key = ?", (key,)):
                raise AccountError(_taken(given, taken))
            names.check_scripts(name, "owner name")  # after "taken": a copy of a taken name hears that
            try:
                owner_id = int(
                    db.query(
                        "INSERT INTO owners (name, name_key, password_hash, status, created)"
                        " VALUES (?, ?, ?, ?, ?) RETURNING id",
                        (name, key, hashed, status, _iso(_now())),
                    )[0][0]
                )
            except Exception as exc:
                # The unique index on name_key is the last word, for a writer that skipped the look-up.
                if db.is_unique_violation(exc):
                    raise AccountError(_taken(given, None)) from None
                raise
            if policy == "invite":
                assert invite is not None
                used = db.execute(
                    "UPDATE invites SET used_by = ?, used = ? WHERE digest = ? AND used_by IS NULL",
                    (owner_id, _iso(_now()), _digest(invite.strip())),
                )
                if used != 1:
                    raise AccountError(
                        "that invite code is not one this ladder made, or it was used already: "
                        "ask the ladder's host for a new one"
                    )
        log.info("ladder: %r signed up (%s, %s)", name, policy, status)
        return self._owner_or_raise(name)

    def make_invite(self) -> str:
        """A new one-time invite code (shown once; kept as its digest)."""
        code = "inv_" + secrets.token_urlsafe(18)
        with self.store.database.writing("make an invite code") as db:
            db.execute("INSERT INTO invites (digest, created) VALUES (?, ?)", (_digest(code), _iso(_now())))
        return code

    def approve(self, name: str, *, actor: str | None = None) -> Owner:
        with self.store.database.writing(f"approve owner {name!r}") as db:
            if db.execute("UPDATE owners SET status = 'active' WHERE name = ?", (name,)) != 1:
                raise AccountError(_no_owner(name))
            self.store.change_log.audit(db, actor, "approve owner", None, name)
        log.info("ladder: owner %r approved", name)
        return self._owner_or_raise(name)

    # ------------------------------------------------------------------ admins
    # Kept as ``settings`` rows ``admin_owner:ID`` (no schema step): removed with the owner, so an id
    # is never an admin for someone who signs up later.
    def set_admin(self, name: str, admin: bool, *, actor: str) -> Owner:
        """Make owner ``name`` one of the ladder's admins (its /admin pages), or no longer; audited."""
        owner = self._owner_or_raise(name)
        key = f"{_ADMIN}{owner.id}"
        with self.store.database.writing(f"change the admins ({name!r})") as db:
            db.execute("DELETE FROM settings WHERE name = ?", (key,))
            if admin:
                db.execute("INSERT INTO settings (name, value) VALUES (?, ?)", (key, owner.name))
            self.store.change_log.audit(db, actor, "make admin" if admin else "remove admin", None, name)
        log.info("ladder: owner %r is %s an admin", name, "now" if admin else "no longer")
        return owner

    def is_admin(self, owner: Owner) -> bool:
        with self.store.database.reading("read the admins") as db:
            return bool(db.query("SELECT 1 FROM settings WHERE name = ?", (f"{_ADMIN}{owner.id}",)))

    def admins(self) -> list[str]:
        with self.store.database.reading("read the admins") as db:
            rows = db.query("SELECT value FROM settings WHERE name LIKE ? ORDER BY value", (f"{_ADMIN}%",))
        return [str(v) for (v,) in rows]

    def owners(self) -> list[Owner]:
        with self.store.database.reading("list the owners") as db:
            rows = db.query("SELECT id, name, status, created FROM owners ORDER BY name")
        return [_owner(r) for r in rows]

    def owner(self, name: str) -> Owner | None:
        with self.store.database.reading(f"read owner {name!r}") as db:
            rows = db.query("SELECT id, name, status, created FROM owners WHERE name = ?", (name,))
        return _owner(rows[0]) if rows else None

    def _owner_or_raise(self, name: str) -> Owner:
        owner = self.owner(name)
        if owner is None:
            raise AccountError(_no_owner(name))
        return owner

    # ------------------------------------------------------------------ login, sessions
    def check_password(self, name: str, password: str) -> Owner:
        """The owner, if ``password`` is theirs and they may log in; AccountError saying why not.

        A wrong name and a wrong password get one answer and take one time (a dummy hash is verified)."""
        if not isinstance(password, str) or len(password) > PASSWORD_MAX or not isinstance(name, str):
            raise AccountError("wrong name or password")
        with self.store.database.reading("check a password") as db:
            rows = db.query(
                "SELECT id, name, status, created, password_hash FROM owners WHERE name = ?",
                (unicodedata.normalize("NFKC", name[:100]),),  # names are kept in NFKC
            )
        stored = str(rows[0][4]) if rows else _dummy_hash()
        try:
            _Hashing.hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            raise AccountError("wrong name or password") from None
        if not rows:
            raise AccountError("wrong name or password")
        owner = _owner(rows[0][:4])
        if not owner.active:
            raise AccountError(
                f"{owner.name} is waiting for the host's approval; you can log in once it is given"
            )
        if _Hashing.hasher.check_needs_rehash(stored):
            rehashed = hash_password(password)  # outside the write lock
            with self.store.database.writing("re-hash a password") as db:
                db.execute("UPDATE owners SET password_hash = ? WHERE id = ?", (rehashed, owner.id))
        return owner

    def new_session(self, owner: Owner, lifetime: timedelta = SESSION_LIFETIME) -> str:
        """A new session of ``owner``: its random id, for the cookie only (the database keeps its hash)."""
        session = secrets.token_urlsafe(32)
        now = _now()
        with self.store.database.writing("log in") as db:
            db.execute(
                "INSERT INTO sessions (digest, owner_id, created, expires) VALUES (?, ?, ?, ?)",
                (_digest(session), owner.id, _iso(now), _iso(now + lifetime)),
            )
            # Expired sessions go as new ones come, so the table holds about the live ones.
            db.execute("DELETE FROM sessions WHERE expires < ?", (_iso(now - timedelta(days=1)),))
        return session

    def session_owner(self, session: str) -> Owner | None:
        """The owner of a live session: not logged out, not expired, the owner still active."""
        if not isinstance(session, str) or not 20 <= len(session) <= 100:
            return None
        digest = _digest(session)
        with self.store.database.reading("read a session") as db:
            rows = db.query(
                "SELECT s.digest, s.expires, s.revoked, o.id, o.name, o.status, o.created"
                " FROM sessions s JOIN owners o ON o.id = s.owner_id WHERE s.digest = ?",
                (digest,),
            )
        if not rows or not hmac.compare_digest(str(rows[0][0]), digest):
            return None
        _, expires, revoked, *owner_row = rows[0]
        if revoked is not None or datetime.fromisoformat(expires) <= _now():
            return None
        owner = _owner(tuple(owner_row))
        return owner if owner.active else None

    def end_session(self, session: str) -> None:
        """Logout: the session is revoked in the database, so its cookie no longer works anywhere."""
        with self.store.database.writing("log out") as db:
            db.execute(
                "UPDATE sessions SET revoked = ? WHERE digest = ? AND revoked IS NULL",
                (_iso(_now()), _digest(session)),
            )

    # ------------------------------------------------------------------ lost passwords, deletion
    def make_reset_code(self, name: str) -> str:
        """A one-time code (24 h) with which ``name`` sets a new password at /reset; shown once."""
        code = "rst_" + secrets.token_urlsafe(18)
        expires = _iso(_now() + RESET_LIFETIME)
        with self.store.database.writing(f"make a reset code for {name!r}") as db:
            changed = db.execute(
                "UPDATE owners SET reset_digest = ?, reset_expires = ? WHERE name = ?",
                (_digest(code), expires, name),
            )
            if changed != 1:
                raise AccountError(_no_owner(name))
        log.info("ladder: a password reset code was made for %r", name)
        return code

    def reset_password(self, name: str, code: str, password: str) -> Owner:
        """Set a new password with the host's reset code; the code is spent, every session ends."""
        check_password(password)
        refused = AccountError(
            "that reset code is wrong, used or expired: ask the ladder's host for a new one"
        )
        if not isinstance(code, str) or not 0 < len(code) <= 100:
            raise refused
        hashed = hash_password(password)
        with self.store.database.writing(f"reset the password of {name!r}") as db:
            rows = db.query("SELECT id, reset_digest, reset_expires FROM owners WHERE name = ?", (name,))
            if not rows or rows[0][1] is None or rows[0][2] is None:
                raise refused
            owner_id, stored, expires = rows[0]
            if (
                not hmac.compare_digest(str(stored), _digest(code))
                or datetime.fromisoformat(expires) <= _now()
            ):
                raise refused
            db.execute(
                "UPDATE owners SET password_hash = ?, reset_digest = NULL, reset_expires = NULL WHERE id = ?",
                (hashed, owner_id),
            )
            db.execute(
                "UPDATE sessions SET revoked = ? WHERE owner_id = ? AND revoked IS NULL",
                (_iso(_now()), owner_id),
            )
        return self._owner_or_raise(name)

    def delete_owner(self, name: str) -> list[str]:
        """Delete the account: its bots are revoked (their matches stay, ownerless), its sessions and
        the owner's row go. The names of the bots revoked."""
        owner = self._owner_or_raise(name)
        bots = self.bots(owner)
        for bot in bots:
            self.store.revoke(bot.name)  # each through the change log, as the host's revoke
        with self.store.database.writing(f"delete owner {name!r}") as db:
            db.execute("UPDATE bots SET owner_id = NULL WHERE owner_id = ?", (owner.id,))
            db.execute("DELETE FROM sessions WHERE owner_id = ?", (owner.id,))
            db.execute("UPDATE invites SET used_by = NULL WHERE used_by = ?", (owner.id,))
            db.execute("DELETE FROM settings WHERE name = ?", (f"{_ADMIN}{owner.id}",))
            db.execute("DELETE FROM owners WHERE id = ?", (owner.id,))
        log.info("ladder: owner %r deleted, bots revoked: %s", name, [b.name for b in bots] or "none")
        return [b.name for b in bots if b.active]

    # ------------------------------------------------------------------ an owner's bots
    def bots(self, owner: Owner) -> list[BotRecord]:
        """The owner's bots, revoked ones too, by name."""
        with self.store.database.reading(f"list the bots of {owner.name!r}") as db:
            names = [
                str(n)
                for (n,) in db.query("SELECT name FROM bots WHERE owner_id = ? ORDER BY name", (owner.id,))
            ]
        return [b for b in (self.store.bot(n) for n in names) if b is not None]

    def bot_of(self, owner: Owner, name: str) -> BotRecord:
        """The owner's bot ``name``; AccountError if they have none of that name."""
        with self.store.database.reading(f"read bot {name!r}") as db:
            rows = db.query("SELECT 1 FROM bots WHERE name = ? AND owner_id = ?", (name, owner.id))
        bot = self.store.bot(name) if rows else None
        if bot is None:
            raise AccountError(f"you have no bot named {name!r}")
        return bot

    def create_bot(
        self, owner: Owner, name: str, game: str, *, max_bots: int
    ) -> tuple[BotRecord, tokens.Token]:
        """A new bot of ``owner`` for ``game`` and its token, shown once; refused past ``max_bots`` active
        bots, or when the name is taken (up to case and look-alikes). Both are checked in the transaction
        that adds the bot (`LadderStore.add_bot`), so requests made at once cannot pass them together."""
        if not owner.active:
            raise AccountError(f"{owner.name} is waiting for the host's approval")
        if self.verified_for_bots and not self._verified(owner):
            raise AccountError(
                "this ladder makes bots for owners whose address is verified: follow the link in the "
                "mail it sent you (your account page sends a new one, or sets another address)"
            )
        try:
            return self.store.add_bot(name, game, owner_id=owner.id, owner_limit=max_bots)
        except NameTakenError as exc:
            raise AccountError(_taken(exc.name, exc.taken, "bot")) from None
        except BotLimitError as exc:
            raise AccountError(
                f"you have {exc.count} active bots, this ladder's limit (--max-bots-per-owner {exc.limit}); "
                "revoke one to make another"
            ) from None

    def _verified(self, owner: Owner) -> bool:
        with self.store.database.reading(f"read the address of {owner.name!r}") as db:
            rows = db.query("SELECT email_verified FROM owners WHERE id = ?", (owner.id,))
        return bool(rows) and rows[0][0] is not None

    def rotate_bot(self, owner: Owner, name: str) -> tokens.Token:
        bot = self.bot_of(owner, name)
        if not bot.active:
            raise AccountError(f"{name} is revoked: its token cannot be renewed; make a new bot")
        try:
            return self.store.rotate(name, actor=f"{owner.name} (owner)")  # audited: the bot is told who
        except UnknownBotError:
            raise AccountError(f"you have no bot named {name!r}") from None

    def revoke_bot(self, owner: Owner, name: str) -> BotRecord:
        self.bot_of(owner, name)
        return self.store.revoke(name)

    def owner_of(self, bot_name: str) -> str | None:
        """The name of the bot's owner; None for the host's bots."""
        with self.store.database.reading(f"read the owner of {bot_name!r}") as db:
            rows = db.query(
                "SELECT o.name FROM bots b JOIN owners o ON o.id = b.owner_id WHERE b.name = ?", (bot_name,)
            )
        return str(rows[0][0]) if rows else None


def _owner(row: tuple[object, ...] | list[object]) -> Owner:
    id_, name, status, created = row
    return Owner(
        int(cast(int, id_)), str(name), cast(OwnerStatus, status), datetime.fromisoformat(str(created))
    )


def _no_owner(name: str) -> str:
    return f"there is no owner named {name!r}; `cellarena ladder owner list` shows them"


def _taken(name: str, taken: str | None, what: str = "name") -> str:
    if taken is None:
        return f"the {what} {name!r} is taken: a look-alike was made at the same moment; choose another"
    if taken == name:
        return f"the {what} {name!r} is taken; choose another"
    return (
        f"the {what} {name!r} is taken: it reads as {taken!r}, which exists (names that differ only in case "
        "or by look-alike characters count as one); choose another"
    )
