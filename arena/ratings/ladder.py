"""The ladder's ratings: openskill's Plackett-Luce, as the ladder has rated since it began.

A ladder keeps its ratings in its database. Moving it to the default system (`default.DEFAULT`, which
tournaments use) means re-rating the stored history by migration, so that no bot carries a rating
made by one system into updates by another; until that lands the ladder stays on this one.

What the ladder shows around the system (docs/ladder.md, "Ratings"): a bot with fewer than
`PROVISIONAL_MATCHES` rated matches is provisional, marked and listed after the ranked bots; a bot's
sigma grows with the whole days since its last rated match (`idle`, at Lichess's rate), computed when
it is read and when it next plays, never stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from cellarena.arena.ratings.openskill import OpenSkill
from cellarena.arena.ratings.rating import Rating

#: Lichess's idle widening: Glicko-2's phi**2 grows by volatility**2 (0.06**2) per rating period, at
#: ``ratingPeriodsPerDay = 0.21436``: a typical player's RD goes from 60 to 110 in a year. In Glicko
#: points**2 a day (173.7178 points a Glicko-2 unit): about 23.3.
LICHESS_RD2_PER_DAY = (0.06 * 173.7178) ** 2 * 0.21436
#: openskill's mu per Glicko point: 400 points are 10:1 odds, as is a gap of sqrt(2) beta ln 10 in
#: openskill's two-seat logistic (beta 25/6, settled sigmas): about 0.034.
MU_PER_GLICKO_POINT = math.sqrt(2.0) * (25.0 / 6.0) * math.log(10.0) / 400.0
#: sigma**2 added per idle day on openskill's scale (about 0.027: sigma 2.0 -> 3.7 in a year).
IDLE_PER_DAY = LICHESS_RD2_PER_DAY * MU_PER_GLICKO_POINT**2

SYSTEM = OpenSkill(idle_per_day=IDLE_PER_DAY)

#: Rated matches a bot needs to be ranked. openskill's sigma falls too slowly in two-seat matches for
#: Lichess's "RD >= 110" to serve (about 40 matches on this scale), so a count, as Battlecode's.
PROVISIONAL_MATCHES = 5


def initial() -> Rating:
    return SYSTEM.initial()


def update(ratings: Mapping[str, Rating], bots: Sequence[str], ranks: Sequence[int]) -> dict[str, Rating]:
    """The new ratings of ``bots`` (one per seat) after a match where seat i placed ``ranks[i]``."""
    return dict(zip(bots, SYSTEM.update([ratings[b] for b in bots], ranks), strict=True))


def provisional(rated_matches: int) -> bool:
    """Whether a bot with ``rated_matches`` is marked provisional and listed after the ranked bots."""
    return rated_matches < PROVISIONAL_MATCHES


def idle_days(last_rated: datetime | None, now: datetime) -> int:
    """Whole days from a bot's last rated match to ``now`` (0 without one): whole, so that reads within
    a day of a match show the stored rating exactly."""
    if last_rated is None:
        return 0
    return max(0, (now - last_rated) // timedelta(days=1))


def new_version(rating: Rating) -> Rating:
    """A new version's rating under ``--new-version-rating inherit``: its parent's mu, its sigma back to
    the start's (as the default system's `new_version` does), so its next matches move it fast."""
    return Rating(rating.mu, max(rating.sigma, SYSTEM.initial().sigma))


def idle(rating: Rating, days: int) -> Rating:
    """``rating`` after ``days`` without a rated match: sigma grows, up to the start's."""
    return SYSTEM.idle(rating, days)
