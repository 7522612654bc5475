"""The ladder's ratings: openskill's Plackett-Luce, as the ladder has rated since it began.

A ladder keeps its ratings in its database. Moving it to the default system (`default.DEFAULT`, which
tournaments use) means re-rating the stored history by migration, so that no bot carries a rating
made by one system into updates by another; until that lands the ladder stays on this one.

What the ladder shows around the system (docs/ladder.md, "Ratings"): a bot with fewer than
`PROVISIONAL_MATCHES` rated matches is provisional, marked and listed after the ranked bots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cellarena.arena.ratings.openskill import OpenSkill
from cellarena.arena.ratings.rating import Rating

SYSTEM = OpenSkill()

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
