"""openskill's Plackett-Luce, as tournaments and the ladder used it (the ladder until schema version 11),
shown mu - 3 sigma; idle widening optional (sigma**2 per idle day; none by default, as openskill itself)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from openskill.models import PlackettLuce

from cellarena.arena.ratings.rating import Rating, RatingSystem, normal_cdf

_MODEL = PlackettLuce()


@dataclass(frozen=True)
class OpenSkill(RatingSystem):
    name: str = "openskill"
    #: sigma**2 added per day without a match, up to the start's sigma (0: none).
    idle_per_day: float = 0.0

    def initial(self) -> Rating:
        r = _MODEL.rating()
        return Rating(r.mu, r.sigma)

    def update(self, ratings: Sequence[Rating], ranks: Sequence[int]) -> list[Rating]:
        teams = [[_MODEL.create_rating([r.mu, r.sigma])] for r in ratings]
        rated = _MODEL.rate(teams, ranks=list(ranks))
        return [Rating(team[0].mu, team[0].sigma) for team in rated]

    def predict(self, a: Rating, b: Rating) -> tuple[float, float]:
        # The Gaussian win probability with openskill's beta; Plackett-Luce has no draw margin.
        c = math.sqrt(2.0 * _MODEL.beta**2 + a.sigma**2 + b.sigma**2)
        return (normal_cdf((a.mu - b.mu) / c), 0.0)

    def idle(self, r: Rating, days: float) -> Rating:
        start = _MODEL.rating().sigma
        if days <= 0 or self.idle_per_day <= 0 or r.sigma >= start:
            return r  # exactly: a rating read the day it was made is the stored one
        return Rating(r.mu, min(math.sqrt(r.sigma * r.sigma + self.idle_per_day * days), start))
