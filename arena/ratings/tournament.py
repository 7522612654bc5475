"""Tournament ratings with the default system, computed in schedule order so they are reproducible.

Matches finish in whatever order the workers happen to finish them, but a rating update is not
commutative. Applying updates in **schedule order** (the order of `Scheduled.index`) instead makes the
ratings a function of the results alone: a tournament that was killed and resumed, or run with a
different number of jobs, ends with the same ratings as one run straight through.

The displayed rating is the conservative estimate mu - 3 sigma (`Rating.conservative`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cellarena.arena.ratings.default import DEFAULT
from cellarena.arena.ratings.rating import Rating


def initial() -> Rating:
    return DEFAULT.initial()


def update(ratings: Mapping[str, Rating], bots: Sequence[str], ranks: Sequence[int]) -> dict[str, Rating]:
    """The new ratings of ``bots`` (one per seat) after a match where seat i placed ``ranks[i]``."""
    rated = DEFAULT.update([ratings[b] for b in bots], ranks)
    return dict(zip(bots, rated, strict=True))


def interval(r: Rating) -> tuple[float, float]:
    """About 95% of the default system's belief about ``r``'s strength, as JSON shows it."""
    return DEFAULT.interval(r)


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
