"""Glicko-2 (Glickman's paper) with Lichess's settings; N seats enter as pairwise games of one period.

Lichess: a new player at 1500 (this module's start: every simulated bot starts equal, so the start
only shifts the scale), RD 350, volatility 0.06, tau 0.75, an update after every game, RD growing with
idle time at ``ratingPeriodsPerDay = 0.21436`` (60 -> 110 in a year), provisional while RD >= 110.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cellarena.arena.ratings.rating import Rating, RatingSystem, pairwise

SCALE = 173.7178  # Glicko-2's internal unit in rating points


def _g(phi: float) -> float:
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


@dataclass(frozen=True)
class Glicko2(RatingSystem):
    name: str = "glicko2"
    start: float = 1500.0
    start_rd: float = 350.0
    start_volatility: float = 0.06
    tau: float = 0.75
    periods_per_day: float = 0.21436
    provisional_rd: float = 110.0
    #: A new version's RD: the start's (nothing between keep and reset in Lichess; this is reset).
    new_version_rd: float = 350.0

    def initial(self) -> Rating:
        return Rating(self.start, self.start_rd, self.start_volatility)

    def update(self, ratings: Sequence[Rating], ranks: Sequence[int]) -> list[Rating]:
        games: list[list[tuple[Rating, float]]] = [[] for _ in ratings]
        for i, j, score in pairwise(ranks):
            games[i].append((ratings[j], score))
            games[j].append((ratings[i], 1.0 - score))
        return [self.rate(r, g) for r, g in zip(ratings, games, strict=True)]

    def rate(self, r: Rating, games: Sequence[tuple[Rating, float]]) -> Rating:
        """``r`` after one rating period holding ``games`` ((opponent, score) each): the paper's steps."""
        mu, phi, sigma = (r.mu - self.start) / SCALE, r.sigma / SCALE, r.volatility
        if not games:
            return Rating(r.mu, min(math.sqrt(phi * phi + sigma * sigma) * SCALE, self.start_rd), sigma)
        v_inv = 0.0
        total = 0.0
        for opp, score in games:
            g = _g(opp.sigma / SCALE)
            e = 1.0 / (1.0 + math.exp(-g * (mu - (opp.mu - self.start) / SCALE)))
            v_inv += g * g * e * (1.0 - e)
            total += g * (score - e)
        v = 1.0 / v_inv
        delta = v * total
        sigma = self._volatility(phi, sigma, v, delta)
        phi_star = math.sqrt(phi * phi + sigma * sigma)
        phi = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + 1.0 / v)
        mu += phi * phi * total
        return Rating(self.start + SCALE * mu, SCALE * phi, sigma)

    def _volatility(self, phi: float, sigma: float, v: float, delta: float) -> float:
        """Step 5 of the paper: the Illinois algorithm, to 1e-6."""
        a = math.log(sigma * sigma)
        tau2 = self.tau * self.tau

        def f(x: float) -> float:
            ex = math.exp(x)
            d = phi * phi + v + ex
            return ex * (delta * delta - d) / (2.0 * d * d) - (x - a) / tau2

        big_a = a
        if delta * delta > phi * phi + v:
            big_b = math.log(delta * delta - phi * phi - v)
        else:
            k = 1
            while f(a - k * self.tau) < 0:
                k += 1
            big_b = a - k * self.tau
        fa, fb = f(big_a), f(big_b)
        while abs(big_b - big_a) > 1e-6:
            c = big_a + (big_a - big_b) * fa / (fb - fa)
            fc = f(c)
            if fc * fb <= 0:
                big_a, fa = big_b, fb
            else:
                fa /= 2.0
            big_b, fb = c, fc
        return math.exp(big_a / 2.0)

    def predict(self, a: Rating, b: Rating) -> tuple[float, float]:
        # Both deviations widen the logistic, as Lichess's expected score does; no draw model.
        phi = math.hypot(a.sigma, b.sigma) / SCALE
        return (1.0 / (1.0 + math.exp(-_g(phi) * (a.mu - b.mu) / SCALE)), 0.0)

    def shown(self, r: Rating) -> float:
        return r.mu  # Lichess shows the rating itself

    def idle(self, r: Rating, days: float) -> Rating:
        phi, sigma = r.sigma / SCALE, r.volatility
        grown = math.sqrt(phi * phi + sigma * sigma * days * self.periods_per_day) * SCALE
        return Rating(r.mu, min(grown, self.start_rd), r.volatility)

    def new_version(self, r: Rating) -> Rating:
        return Rating(r.mu, max(r.sigma, self.new_version_rd), r.volatility)

    def provisional(self, r: Rating) -> bool:
        return r.sigma >= self.provisional_rd
