"""Bot tokens: long random secrets that the ladder hands out once and then knows only by their hash.

A token is ``cla_`` followed by 43 URL-safe characters (`secrets.token_urlsafe(32)`, 256 random bits).
The prefix lets secret scanners (and people) recognise a leaked ladder token in a repository or a paste.

Why SHA-256 and no slow password hash (bcrypt, scrypt, argon2): a slow KDF exists to make guessing a
*low-entropy* secret from a stolen hash expensive. A token has 256 bits from the operating system's
CSPRNG, so even a stolen hash leaves 2^256 candidates, beyond any number of fast hashes. A plain,
unsalted digest also lets the database find a bot by the hash of what it presented (a unique index),
where a salted KDF would have to be run once per registered bot.

Why looking a hash up in an index is not a timing leak: the lookup's time can tell an attacker at most
how many leading bytes of *the hash of their guess* equal some stored hash, and knowing part of a
SHA-256 image gives nothing towards a preimage. The final comparison is `hmac.compare_digest` anyway.

A token's text never goes into a repr, a log line, an exception message or a stored row: `Token` shows
itself redacted, and only `Token.secret` (read it on purpose, to print it once) holds the text.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

#: What every ladder token starts with. Register it with your secret scanner.
TOKEN_PREFIX = "cla_"
_RANDOM_BYTES = 32
#: ``token_urlsafe(32)`` is base64url without padding: 43 characters.
_TOKEN = re.compile(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]{{43}}")
TOKEN_LENGTH = len(TOKEN_PREFIX) + 43


class Token:
    """A freshly made token. ``str()`` and ``repr()`` are redacted; ``.secret`` is the text to show once."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str) -> None:
        if not looks_like_token(secret):
            raise ValueError("not a ladder token")  # never echo what was passed: it may be a secret
        self._secret = secret

    @property
    def secret(self) -> str:
        """The token itself: print it to its owner once, never log it."""
        return self._secret

    @property
    def digest(self) -> str:
        """What the database keeps."""
        return token_digest(self._secret)

    def __repr__(self) -> str:
        return f"Token('{TOKEN_PREFIX}…')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Token):
            return NotImplemented
        return hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self.digest)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Token is not pickled: it would put the secret into a file or a message")


def new_token() -> Token:
    """A new random token."""
    return Token(TOKEN_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES))


def looks_like_token(text: object) -> bool:
    """Whether ``text`` has a token's form (prefix, length, alphabet). The form is public, so checking it
    first, in variable time, leaks nothing, and keeps a megabyte of junk from being hashed."""
    return isinstance(text, str) and len(text) == TOKEN_LENGTH and _TOKEN.fullmatch(text) is not None


def token_digest(token: str) -> str:
    """The hex SHA-256 of a token: the only form in which a token is stored (see the module docstring)."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def digest_matches(token: str, stored_digest: str) -> bool:
    """Whether ``token`` hashes to ``stored_digest``, compared in constant time."""
    return hmac.compare_digest(token_digest(token).encode("ascii"), stored_digest.encode("ascii"))


def digests_equal(a: str, b: str) -> bool:
    """Two token digests compared in constant time."""
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))
