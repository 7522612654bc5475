"""The ladder's ratings: the default system (`default.DEFAULT`), as tournaments rate, since schema
version 11 re-rated the stored history with it (openskill's Plackett-Luce before).

What the ladder shows around the system (docs/ladder.md, "Ratings"): a bot with fewer than
`PROVISIONAL_MATCHES` rated matches is provisional, marked and listed after the ranked bots; the others
are ranked by the system's shown value (mu: see `default`). A bot's sigma grows with the whole days
since its last rated match (`idle`), computed when it is read and when it next plays, never stored.
What a new version plays from is the host's choice (`rating_before`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from cellarena.arena.ratings.default import DEFAULT
from cellarena.arena.ratings.rating import Rating

SYSTEM = DEFAULT

#: Rated matches a bot needs to be ranked: a count, as Battlecode's penalty until enough games (the
#: system's own "too uncertain" would keep a two-seat bot provisional for tens of matches).
PROVISIONAL_MATCHES = 5


def initial() -> Rating:
    return SYSTEM.initial()


def update(ratings: Mapping[str, Rating], bots: Sequence[str], ranks: Sequence[int]) -> dict[str, Rating]:
    """The new ratings of ``bots`` (one per seat) after a match where seat i placed ``ranks[i]``."""
    return dict(zip(bots, SYSTEM.update([ratings[b] for b in bots], ranks), strict=True))


def shown(rating: Rating) -> float:
    """The value a ranked table sorts by and shows as "rating" (the default system's: mu)."""
    return SYSTEM.shown(rating)


def provisional(rated_matches: int) -> bool:
    """Whether a bot with ``rated_matches`` is marked provisional and listed after the ranked bots."""
    return rated_matches < PROVISIONAL_MATCHES


def idle_days(last_rated: datetime | None, now: datetime) -> int:
    """Whole days from a bot's last rated match to ``now`` (0 without one): whole, so that reads within
    a day of a match show the stored rating exactly."""
    if last_rated is None:
        return 0
    return max(0, (now - last_rated) // timedelta(days=1))


def idle(rating: Rating, days: int) -> Rating:
    """``rating`` after ``days`` without a rated match: sigma grows, up to the start's."""
    if days <= 0:
        return rating  # exactly: a rating read the day it was made is the stored one
    return SYSTEM.idle(rating, days)


def new_version(rating: Rating) -> Rating:
    """A new version's rating under ``--new-version-rating inherit``: its parent's mu, its sigma back to
    the start's (`RatingSystem.new_version`), so its next matches move it fast."""
    return SYSTEM.new_version(rating)


def rating_before(
    current: Rating | None, *, rated: bool, new_version_rule: str, is_new_version: bool, days_idle: int
) -> Rating:
    """The rating a seat plays a match from: the initial one for a bot's first match; for a rated match
    under a new version, the initial one (``reset``) or the inherited one (``inherit``); else its
    current one, widened by its whole days idle for a rated match (an unrated one changes nothing).
    The one rule of the live ladder (`scoring.settlement`) and of the re-rating of its history."""
    if current is None or (rated and new_version_rule == "reset" and is_new_version):
        return initial()
    if rated and new_version_rule == "inherit" and is_new_version:
        return new_version(current)
    return idle(current, days_idle) if rated else current
