"""Ratings with openskill's Plackett-Luce model, computed in schedule order so they are reproducible.

Matches finish in whatever order the workers happen to finish them, but a rating update is not
commutative. Applying updates in **schedule order** (the order of `Scheduled.index`) instead makes the
ratings a function of the results alone: a tournament that was killed and resumed, or run with a
different number of jobs, ends with the same ratings as one run straight through.

The displayed rating is the conservative estimate mu - 3 sigma, as openskill's ``ordinal()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from openskill.models import PlackettLuce

_MODEL = PlackettLuce()


@dataclass(frozen=True)
class Rating:
    mu: float
    sigma: float

    @property
    def conservative(self) -> float:
        return self.mu - 3.0 * self.sigma


def initial() -> Rating:
    r = _MODEL.rating()
    return Rating(r.mu, r.sigma)


def update(ratings: Mapping[str, Rating], bots: Sequence[str], ranks: Sequence[int]) -> dict[str, Rating]:
    """The new ratings of ``bots`` (one per seat) after a match where seat i placed ``ranks[i]``."""
    teams = [[_MODEL.create_rating([ratings[b].mu, ratings[b].sigma], name=b)] for b in bots]
    rated = _MODEL.rate(teams, ranks=list(ranks))
    return {b: Rating(team[0].mu, team[0].sigma) for b, team in zip(bots, rated, strict=True)}


def replay(
    start: Mapping[str, Rating], results: Iterable[tuple[int, Sequence[str], Sequence[int]]]
) -> list[tuple[int, dict[str, Rating]]]:
    """Apply ``results`` ((index, bots, ranks), in index order) from ``start``; each match's new ratings."""
    current = dict(start)
    history = []
    for index, bots, ranks in results:
        for b in bots:
            current.setdefault(b, initial())
        new = update(current, bots, ranks)
        current.update(new)
        history.append((index, new))
    return history
