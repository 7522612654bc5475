"""The links the ladder mails: a password reset and an address's verification, signed, expiring, and
single-use by what they sign (pure: the time is given).

A link's token is ``PURPOSE.OWNER_ID.EXPIRES.FINGERPRINT`` signed with the host's key (itsdangerous,
the key that signs the login cookies, under a salt of its own). The fingerprint is a digest of what the
link may change, read again when it is used: a reset link signs the owner's password hash and address,
so once the password is set (argon2 salts each hash anew) or the address changes the link stops
working; a verification link signs the address it was sent to. Nothing is stored, so nothing leaks
from the database, and a link the owner did not use simply expires.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Literal

from itsdangerous import BadSignature, Signer

Purpose = Literal["reset", "verify"]
#: How long each link works.
LIFETIMES: dict[Purpose, timedelta] = {"reset": timedelta(hours=1), "verify": timedelta(days=2)}
#: A token is short; anything far longer is refused unread.
MAX_TOKEN = 300


class LinkError(Exception):
    """A link that is not one the ladder made, or that expired or was used; the message says what to do."""


def fingerprint(*parts: str | None) -> str:
    """A short digest of what a link may change (the password hash, the address)."""
    joined = "\0".join(p or "" for p in parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]


class MailLinks:
    """Makes and reads the tokens of mailed links, with ``key`` (the host's session key)."""

    def __init__(self, key: bytes) -> None:
        self._signer = Signer(key, salt="cellarena-mail-link")

    def make(self, purpose: Purpose, owner_id: int, print_: str, now: datetime) -> str:
        expires = int((now + LIFETIMES[purpose]).timestamp())
        return self._signer.sign(f"{purpose}.{owner_id}.{expires}.{print_}").decode("ascii")

    def read(self, purpose: Purpose, token: object, now: datetime) -> tuple[int, str]:
        """The owner id and fingerprint a token of ``purpose`` carries; `LinkError` if it is not one the
        ladder made, or it expired at ``now``. Whether the fingerprint still holds is the caller's."""
        again = (
            "ask for a new password mail" if purpose == "reset" else "ask for a new link on your account page"
        )
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN:
            raise LinkError(f"this link is incomplete: copy the whole link from the mail, or {again}")
        try:
            payload = self._signer.unsign(token.encode("ascii", "replace")).decode("ascii")
        except (BadSignature, UnicodeDecodeError):
            raise LinkError(f"this link is not one the ladder made (mistyped?): {again}") from None
        kind, owner_id, expires, print_ = [*payload.split("."), "", "", ""][:4]
        if kind != purpose or not owner_id.isdigit() or not expires.isdigit():
            raise LinkError(f"this link is not for this page: {again}")
        if now.timestamp() >= int(expires):
            hours = LIFETIMES[purpose].total_seconds() / 3600
            raise LinkError(f"this link expired (it works for {hours:g} hours): {again}")
        return int(owner_id), print_
