"""Rating systems side by side (`systems`) and the tournament's ratings through the default one.

`initial`, `update` and `replay` rate in schedule order with `default.DEFAULT` (see `tournament`);
`cellarena bench ratings` (`bench`) measures every system on simulated populations.
"""

from cellarena.arena.ratings.rating import Rating
from cellarena.arena.ratings.tournament import initial, interval, replay, update

__all__ = ["Rating", "initial", "interval", "replay", "update"]
