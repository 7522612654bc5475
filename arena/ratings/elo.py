"""Elo as aiarena runs it: K = 8 from 1600, no uncertainty; N seats enter as pairwise games."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cellarena.arena.ratings.rating import Rating, RatingSystem, pairwise


@dataclass(frozen=True)
class Elo(RatingSystem):
    name: str = "elo"
    k: float = 8.0
    start: float = 1600.0

    def initial(self) -> Rating:
        return Rating(self.start, 0.0)

    def update(self, ratings: Sequence[Rating], ranks: Sequence[int]) -> list[Rating]:
        # Every pair is a game with K each, all from the ratings before the match.
        delta = [0.0] * len(ratings)
        for i, j, score in pairwise(ranks):
            change = self.k * (score - self.expected(ratings[i].mu, ratings[j].mu))
            delta[i] += change
            delta[j] -= change
        return [Rating(r.mu + d, 0.0) for r, d in zip(ratings, delta, strict=True)]

    @staticmethod
    def expected(a: float, b: float) -> float:
        """Elo's expected score of a player rated ``a`` against one rated ``b``."""
        return 1.0 / (1.0 + 10.0 ** ((b - a) / 400.0))

    def predict(self, a: Rating, b: Rating) -> tuple[float, float]:
        return (self.expected(a.mu, b.mu), 0.0)  # no draw model: the expected score is all it says

    def shown(self, r: Rating) -> float:
        return r.mu
