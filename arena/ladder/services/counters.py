"""What a ladder counts while it runs: queue waits, the matchmaker's CPU, matches and their ticks.

Cheap enough to keep always on (a few additions per match, a bounded window of recent waits), so a
status page and `cellarena bench ladder` read the same figures.
"""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field

import trio

from cellarena.server.play.match import MatchOutcome

#: How many recent queue waits are kept for the percentiles (memory stays bounded on a busy ladder).
RECENT_WAITS = 10_000


@dataclass
class LadderStats:
    #: Seconds each bot waited in the queue before its match started, most recent last.
    waits: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=RECENT_WAITS))
    #: CPU seconds of the event loop's thread spent in the matchmaker, and its passes.
    matchmaking_cpu: float = 0.0
    matchmaking_passes: int = 0
    matches_started: int = 0
    matches_ended: int = 0
    #: Ticks of the ended matches, times their seats: the work the server did for the bots.
    agent_ticks: int = 0
    ticks: int = 0
    #: Ticks in which some seat's answer was late or missing, and ticks that started behind schedule.
    late_ticks: int = 0
    behind_ticks: int = 0
    #: Ticks late or behind, each counted once: 1 - bad_ticks / ticks is the on-time rate.
    bad_ticks: int = 0
    #: Bots the ladder paused (failed matches in a row) or its host paused, since the server started.
    pauses: int = 0
    #: Challenges whose match started, since the server started.
    challenges_played: int = 0
    #: When recent matches ended (trio's clock), for the matches per minute of ``/metrics``.
    recent_ends: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_WAITS)
    )

    def count_end(self, outcome: MatchOutcome) -> None:
        """A match ended with ``outcome`` (here or in a worker): its ticks and their lateness."""
        self.matches_ended += 1
        self.recent_ends.append(trio.current_time())
        self.ticks += outcome.ticks
        self.agent_ticks += outcome.ticks * len(outcome.names)
        self.late_ticks += outcome.late_ticks
        self.behind_ticks += outcome.behind_ticks
        self.bad_ticks += outcome.bad_ticks

    def matches_per_minute(self, now: float) -> int:
        """How many matches ended in the minute before ``now``."""
        while self.recent_ends and self.recent_ends[0] < now - 60.0:
            self.recent_ends.popleft()
        return len(self.recent_ends)

    def wait_percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (0-100) of the recent waits, or None before any match."""
        if not self.waits:
            return None
        if len(self.waits) == 1:
            return self.waits[0]
        return statistics.quantiles(self.waits, n=100, method="inclusive")[min(98, max(0, round(q) - 1))]
