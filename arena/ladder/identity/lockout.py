"""Wrong tokens counted by address, and the lock-out they lead to: one rule for every door a token opens.

The bot port (`admission`) and the owner's replay endpoint of the pages (`public_pages.LadderSite`) both take
a bot's token; each counts the wrong ones an address sends with a `TokenLockout`, so that guessing
is as slow through one door as through the other. Past ``LadderRules.failed_tokens`` wrong tokens
an address is locked out for ``lockout`` seconds, doubled at each further lock-out up to
``max_lockout``. A lock-out refuses guesses, not good tokens: a valid token from a locked address
still works and takes back none of the wrong ones. Tokens are counted as they arrive (`arriving`),
before their check ends, so that wrong tokens sent at once are refused past the limit whatever order
their checks finish in.

Each process counts its own: ``ladder serve`` (the bot port) and ``ladder web`` (the pages) are
separate processes, so an address may send ``failed_tokens`` wrong tokens to each before either
locks it out.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from cellarena.arena.ladder.rules import LadderRules

log = logging.getLogger("cellarena.ladder")


@dataclass
class Failures:
    """Wrong tokens from one address, and its lock-out."""

    #: Wrong tokens since the last lock-out (a valid token does not take any back).
    count: int = 0
    #: Tokens from the address being checked now: counted before their check finishes.
    checking: int = 0
    lockouts: int = 0
    locked_until: float = -math.inf
    last: float = 0.0


class TokenLockout:
    """Wrong tokens and lock-outs, by client address. Times are the caller's clock (trio's)."""

    def __init__(self, rules: LadderRules, what: str = "wrong tokens") -> None:
        self.rules = rules
        #: For the log line of a lock-out ("wrong tokens", "wrong tokens on the owner's endpoint").
        self.what = what
        self.failures: dict[str, Failures] = {}

    def arriving(self, host: str) -> bool:
        """A token from ``host`` is about to be checked: whether it comes past the address's limit
        (counting those still being checked). Pair each call with one `checked`."""
        failures = self.failures.setdefault(host, Failures())
        over = failures.count + failures.checking >= self.rules.failed_tokens
        failures.checking += 1
        return over

    def checked(self, host: str) -> None:
        """A token from ``host`` that `arriving` counted has been checked (or its sender left)."""
        failures = self.failures.get(host)
        if failures is not None:
            failures.checking -= 1

    def failed(self, host: str, over_limit: bool, now: float) -> float | None:
        """Count a wrong token from ``host``; the seconds its lock-out has left if it came while the
        address was locked out, or past the limit (which starts the lock-out now); else None (the
        limit's own last token is still told it is wrong, not locked out)."""
        failures = self.failures.setdefault(host, Failures())
        failures.last = now
        if failures.locked_until > now:
            return failures.locked_until - now
        if over_limit:
            return self._lock_out(host, failures, now)
        failures.count += 1
        if failures.count >= self.rules.failed_tokens:
            self._lock_out(host, failures, now)
        return None

    def _lock_out(self, host: str, failures: Failures, now: float) -> float:
        seconds = min(self.rules.max_lockout, self.rules.lockout * 2**failures.lockouts)
        failures.locked_until = now + seconds
        failures.lockouts += 1
        failures.count = 0
        log.warning("%s sent %d %s: locked out for %g s", host, self.rules.failed_tokens, self.what, seconds)
        return seconds

    def forget_old(self, now: float) -> None:
        """Addresses that stopped sending wrong tokens an hour ago are forgotten (memory stays bounded)."""
        for host, f in list(self.failures.items()):
            if not f.checking and f.locked_until < now and now - f.last > self.rules.max_lockout:
                del self.failures[host]
