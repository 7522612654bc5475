"""What an owner's password hash costs: argon2id's memory, passes and lanes, as `ladder web
--password-hash` takes them, in the notation argon2 writes into each hash (``m=65536,t=3,p=4``).

The default is argon2-cffi's (RFC 9106's second recommendation): 64 MiB, three passes, four lanes,
some 0.2 s of CPU for each sign-up and login. A host on a small machine may lower it; below every one
of OWASP's least settings for argon2id the ladder warns, since a stolen database's passwords are then
quick to guess. Each hash keeps its own parameters, so a change applies to new hashes at once and to
an owner's old one at their next login (`owners.Accounts.check_password` re-hashes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher

#: argon2-cffi's own parameters (tests/test_ladder_accounts.py checks that they still are).
DEFAULT = "m=65536,t=3,p=4"
#: Where `ladder web` also reads ``--password-hash`` from: the command line wins over it, and it over
#: the config file (click's order, as for ``CELLARENA_LADDER_DB``).
VARIABLE = "CELLARENA_PASSWORD_HASH"
#: OWASP's Password Storage Cheat Sheet: argon2id's least (memory in KiB, passes), with one lane.
OWASP_LEAST = ((47104, 1), (19456, 2), (12288, 3), (9216, 4), (7168, 5))
MEMORY_MAX_KIB = 4 * 1024 * 1024
PASSES_MAX = 64
LANES_MAX = 64
_PART = re.compile(r"([mtp])=([0-9]{1,8})")


class PasswordCostError(ValueError):
    """A cost argon2id cannot use, or is not written as one; the message says what to give."""


@dataclass(frozen=True)
class PasswordCost:
    """argon2id's memory (KiB), passes over it, and lanes (threads) for each password hash."""

    memory_kib: int
    passes: int
    lanes: int

    def __post_init__(self) -> None:
        if not (1 <= self.passes <= PASSES_MAX and 1 <= self.lanes <= LANES_MAX):
            raise PasswordCostError(
                f"{self}: give 1 to {PASSES_MAX} passes (t) and 1 to {LANES_MAX} lanes (p)"
            )
        if not 8 * self.lanes <= self.memory_kib <= MEMORY_MAX_KIB:
            raise PasswordCostError(
                f"{self}: argon2id takes at least 8 KiB of memory a lane and at most "
                f"{MEMORY_MAX_KIB} (4 GiB); give m between {8 * self.lanes} and {MEMORY_MAX_KIB}"
            )

    @classmethod
    def parse(cls, text: str) -> PasswordCost:
        """``m=KIB,t=PASSES,p=LANES``, each once, in any order; `PasswordCostError` otherwise."""
        parts: dict[str, int] = {}
        for item in text.split(","):
            found = _PART.fullmatch(item.strip())
            if found is None or found.group(1) in parts:
                parts = {}
                break
            parts[found.group(1)] = int(found.group(2))
        if set(parts) != {"m", "t", "p"}:
            raise PasswordCostError(
                f"{text[:60]!r} is no argon2id cost: give m=KIB,t=PASSES,p=LANES, each once "
                f"(the default is {DEFAULT}; OWASP's least is m=19456,t=2,p=1)"
            )
        return cls(parts["m"], parts["t"], parts["p"])

    @property
    def weak(self) -> bool:
        """Cheaper than every one of OWASP's least settings."""
        return not any(self.memory_kib >= m and self.passes >= t for m, t in OWASP_LEAST)

    def hasher(self) -> PasswordHasher:
        from argon2 import PasswordHasher, Type

        return PasswordHasher(
            time_cost=self.passes, memory_cost=self.memory_kib, parallelism=self.lanes, type=Type.ID
        )

    def __str__(self) -> str:
        return f"m={self.memory_kib},t={self.passes},p={self.lanes}"
