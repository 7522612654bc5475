"""A rating, and the interface every rating system implements: pure functions of ratings, no I/O."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class Rating:
    """A skill estimate: ``mu`` and its uncertainty ``sigma`` (Elo's sigma is 0; Glicko-2's is RD)."""

    mu: float
    sigma: float
    #: Glicko-2's volatility; 0 for systems without one (so ``Rating(mu, sigma)`` compares equal).
    volatility: float = 0.0

    @property
    def conservative(self) -> float:
        """mu - 3 sigma, as openskill's ``ordinal()`` and TrueSkill's leaderboards show it."""
        return self.mu - 3.0 * self.sigma


class RatingSystem(ABC):
    """One rating system. ``ranks`` are competition ranks, lower is better, equal ranks a tie."""

    name: str

    @abstractmethod
    def initial(self) -> Rating:
        """A new bot's rating."""

    @abstractmethod
    def update(self, ratings: Sequence[Rating], ranks: Sequence[int]) -> list[Rating]:
        """The seats' new ratings after a match where seat i placed ``ranks[i]``."""

    @abstractmethod
    def predict(self, a: Rating, b: Rating) -> tuple[float, float]:
        """(P(a beats b), P(draw)) for a two-seat pairing."""

    def shown(self, r: Rating) -> float:
        """The value a table sorts by."""
        return r.conservative

    def interval(self, r: Rating) -> tuple[float, float]:
        """About 95% of the belief: mu +- 2 sigma."""
        return (r.mu - 2.0 * r.sigma, r.mu + 2.0 * r.sigma)

    def idle(self, r: Rating, days: float) -> Rating:
        """``r`` after ``days`` without a match (unchanged unless the system widens it)."""
        return r

    def new_version(self, r: Rating) -> Rating:
        """A new version's rating, inherited from ``r`` (unchanged unless the system widens it)."""
        return r

    def provisional(self, r: Rating) -> bool:
        """Whether ``r`` is too uncertain to be ranked."""
        return False

    def expected_score(self, a: Rating, b: Rating) -> float:
        """P(a wins) + P(draw) / 2: what the bench's log-loss scores."""
        win, draw = self.predict(a, b)
        return win + 0.5 * draw


def pairwise(ranks: Sequence[int]) -> list[tuple[int, int, float]]:
    """A match of N seats as its N(N-1)/2 two-player results (i, j, i's score: 1, 0.5 or 0), for the
    two-player systems (Elo, Glicko-2)."""
    out = []
    for i, j in combinations(range(len(ranks)), 2):
        out.append((i, j, 1.0 if ranks[i] < ranks[j] else 0.5 if ranks[i] == ranks[j] else 0.0))
    return out


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def normal_pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
