"""How long a bot that keeps playing waits before it connects again: exponential back-off with jitter.

A ladder bot connects again after every match, and after every refusal that means "not now"
(`protocol.RETRY_LATER`) or connection failure. Waiting longer after each failure in a row keeps a
server that is down or full from being hammered; the jitter keeps bots that were all turned away at
the same moment (a ladder restarting) from all coming back at the same moment.

The n-th failure in a row waits a random time between half of and the whole of
``min(cap, first * 2 ** (n - 1))``: 0.5-1 s, then 1-2 s, 2-4 s, ... up to 30-60 s. A match played to
its end starts the count again, and the next connection is made at once.
"""

from __future__ import annotations

import random
import re

#: The longest wait in the first round, in seconds.
FIRST = 1.0
#: No wait is longer than this, in seconds, unless the server asks for longer (see `Backoff.next`).
CAP = 60.0
#: A ladder's ``locked_out`` message says how long the lock-out lasts: "... refused for another 42 s".
_WAIT_HINT = re.compile(r"for (?:another )?(\d+(?:\.\d+)?) ?s\b")


class Backoff:
    """The waits between attempts: ``next()`` after each failure, ``reset()`` after a success."""

    def __init__(self, first: float = FIRST, cap: float = CAP, rng: random.Random | None = None) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"the back-off needs 0 < first <= cap, got first={first}, cap={cap}")
        self.first = first
        self.cap = cap
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self, server_message: str = "") -> float:
        """The seconds to wait after one more failure. When the server's refusal says how long it
        refuses ("for another 42 s"), the wait is at least that, even past the cap: coming back
        sooner would only be refused again."""
        self.failures += 1
        ceiling = min(self.cap, self.first * 2.0 ** min(self.failures - 1, 32))
        wait = self._rng.uniform(ceiling / 2, ceiling)
        if found := _WAIT_HINT.search(server_message):
            wait = max(wait, float(found.group(1)) + self._rng.uniform(0, 1))
        return wait

    def reset(self) -> None:
        """A match was played: the next failure waits the shortest time again."""
        self.failures = 0
