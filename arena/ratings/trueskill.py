"""TrueSkill (the ``trueskill`` package's model), optionally widened on idle time and new versions.

Two seats use the closed form of the package's update (the same numbers, tested; the package's factor
graph costs about 0.25 ms a match, too slow for the bench's many thousands); more seats use the package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import trueskill

from cellarena.arena.ratings.rating import Rating, RatingSystem, normal_cdf, normal_pdf


@dataclass(frozen=True)
class TrueSkill(RatingSystem):
    name: str = "trueskill"
    mu: float = 25.0
    sigma: float = 25.0 / 3.0
    beta: float = 25.0 / 6.0
    #: Dynamics: sigma**2 grows by tau**2 before every match.
    tau: float = 25.0 / 300.0
    draw_probability: float = 0.10
    #: sigma**2 added per day without a match (0: none, as in TrueSkill itself).
    idle_per_day: float = 0.0
    #: A new version's sigma: at least this (the start's: Halite's hand reset of re-seeded bots).
    new_version_sigma: float = 25.0 / 3.0
    #: The shown value is mu - shown_sigmas * sigma.
    shown_sigmas: float = 3.0

    @property
    def draw_margin(self) -> float:
        """The package's margin for two one-bot teams."""
        return NormalDist().inv_cdf((self.draw_probability + 1.0) / 2.0) * math.sqrt(2.0) * self.beta

    def initial(self) -> Rating:
        return Rating(self.mu, self.sigma)

    def update(self, ratings: Sequence[Rating], ranks: Sequence[int]) -> list[Rating]:
        if len(ratings) == 2:
            return self._two(ratings[0], ratings[1], ranks[0], ranks[1])
        env = trueskill.TrueSkill(
            mu=self.mu,
            sigma=self.sigma,
            beta=self.beta,
            tau=self.tau,
            draw_probability=self.draw_probability,
            backend=None,
        )
        teams = [(env.create_rating(r.mu, r.sigma),) for r in ratings]
        rated = env.rate(teams, ranks=list(ranks))
        return [Rating(t[0].mu, t[0].sigma) for t in rated]

    def _two(self, a: Rating, b: Rating, rank_a: int, rank_b: int) -> list[Rating]:
        if rank_b < rank_a:
            return self._two(b, a, rank_b, rank_a)[::-1]
        tau2 = self.tau * self.tau
        var_a, var_b = a.sigma * a.sigma + tau2, b.sigma * b.sigma + tau2
        c = math.sqrt(2.0 * self.beta * self.beta + var_a + var_b)
        t = (a.mu - b.mu) / c
        eps = self.draw_margin / c
        if rank_a == rank_b:
            p = normal_cdf(eps - t) - normal_cdf(-eps - t)
            v = (normal_pdf(-eps - t) - normal_pdf(eps - t)) / p
            w = v * v + ((eps - t) * normal_pdf(eps - t) + (eps + t) * normal_pdf(eps + t)) / p
        else:
            x = t - eps
            v = normal_pdf(x) / normal_cdf(x)
            w = v * (v + x)
        return [
            Rating(a.mu + var_a / c * v, math.sqrt(var_a * (1.0 - var_a / (c * c) * w))),
            Rating(b.mu - var_b / c * v, math.sqrt(var_b * (1.0 - var_b / (c * c) * w))),
        ]

    def predict(self, a: Rating, b: Rating) -> tuple[float, float]:
        c = math.sqrt(2.0 * self.beta * self.beta + a.sigma * a.sigma + b.sigma * b.sigma)
        eps, d = self.draw_margin, a.mu - b.mu
        win = 1.0 - normal_cdf((eps - d) / c)
        loss = normal_cdf((-eps - d) / c)
        return (win, 1.0 - win - loss)

    def shown(self, r: Rating) -> float:
        return r.mu - self.shown_sigmas * r.sigma

    def idle(self, r: Rating, days: float) -> Rating:
        grown = math.sqrt(r.sigma * r.sigma + self.idle_per_day * days)
        return Rating(r.mu, min(grown, self.sigma))

    def new_version(self, r: Rating) -> Rating:
        return Rating(r.mu, max(r.sigma, self.new_version_sigma))

    def provisional(self, r: Rating) -> bool:
        return r.sigma >= 2.0 / 3.0 * self.sigma
