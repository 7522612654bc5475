"""Simulated ladders for the bench: bots of known strength, a model of match outcomes with draws, and
the ladder's own matchmaker (`arena.ladder.matchmaking.matchmaker.match_up`) choosing who meets whom.

Outcome model: each seat performs its strength plus Gaussian noise (sd 1); seats place by
performance, and two seats whose performances are within the draw margin tie (chained down the
order). The margin is set so that two equal bots draw at ``draw_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from cellarena.arena.ladder.matchmaking.matchmaker import Policy, Waiting, match_up
from cellarena.arena.ratings.rating import Rating

#: Seconds of the simulated clock between two matchmaking passes (waits widen the windows).
PASS_SECONDS = 5.0


@dataclass(frozen=True)
class Outcomes:
    """How matches between bots of known strength end."""

    draw_rate: float
    noise: float = 1.0

    @property
    def margin(self) -> float:
        return self.noise * math.sqrt(2.0) * NormalDist().inv_cdf((1.0 + self.draw_rate) / 2.0)

    def play(self, strengths: np.ndarray, rng: np.random.Generator) -> list[int]:
        """Competition ranks (1 best, ties equal) of one match between bots of these strengths."""
        perf = strengths + self.noise * rng.standard_normal(len(strengths))
        order = np.argsort(-perf, kind="stable")
        ranks = [0] * len(perf)
        place = 1
        for pos, seat in enumerate(order):
            if pos and perf[order[pos - 1]] - perf[seat] >= self.margin:
                place = pos + 1
            ranks[int(seat)] = place
        return ranks


@dataclass
class SimulatedQueue:
    """The ladder's queue for bots numbered 0..n-1, all always queued between their matches."""

    n: int
    seed: int
    now: float = 0.0
    since: list[float] = field(default_factory=list)
    last_seat: list[int | None] = field(default_factory=list)
    last_opponents: list[tuple[str, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.since = [0.0] * self.n
        self.last_seat = [None] * self.n
        self.last_opponents = [()] * self.n

    def pass_(self, mu: Sequence[float], seats: int) -> list[tuple[int, ...]]:
        """One matchmaking pass over the whole population by ``mu``: the groups (seat order) to play."""
        queue = [
            Waiting(str(i), self.since[i], Rating(mu[i], 0.0), self.last_seat[i], self.last_opponents[i])
            for i in range(self.n)
        ]
        self.seed += 1
        pairings = match_up(queue, self.now, Policy(seats=seats, maps=(None,)), self.seed)
        self.now += PASS_SECONDS
        groups = []
        for p in pairings:
            group = tuple(int(b) for b in p.bots)
            for seat, b in enumerate(group):
                self.since[b] = self.now
                self.last_seat[b] = seat
                self.last_opponents[b] = tuple(str(o) for o in group if o != b)
            groups.append(group)
        return groups
