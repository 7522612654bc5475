"""How a ladder's next season starts from the ratings of the one that closed: pure, no I/O.

A host closes a season (`cellarena ladder season close`): its table is archived as it stands, and the
next season starts in one of two ways, the host's choice:

- ``reset``: every bot starts again from the system's initial rating, provisional, as aiarena resets
  each competition.
- ``carry``: every bot keeps its mu, and its sigma widens by half the starting sigma (added in
  quadrature, at most the start's): a settled bot's sigma 2 becomes about 4.6, so the new season
  re-measures it quickly without throwing away what the last one learned. Its rated matches still count
  towards leaving the provisional list.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

from cellarena.arena.ratings.rating import Rating

StartNext = Literal["reset", "carry"]
START_NEXT: tuple[StartNext, ...] = get_args(StartNext)


def next_season(rating: Rating, start: Rating, how: StartNext) -> Rating:
    """The rating a bot starts the next season with, from ``rating`` at the close; ``start`` is the
    system's initial rating."""
    if how == "reset":
        return start
    if how != "carry":
        raise ValueError(f"a season starts by {' or '.join(START_NEXT)}, not {how!r}")
    widened = math.sqrt(rating.sigma * rating.sigma + (start.sigma / 2.0) ** 2)
    return Rating(rating.mu, min(widened, max(start.sigma, rating.sigma)))
