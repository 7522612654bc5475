"""`cellarena`, the default rating system, as the bench chose it (docs/tournaments.md#ratings).

TrueSkill on openskill's scale (so the ladder's matchmaking windows in mu keep their meaning), with
the draw rate of real Rezzo matches, and uncertainty that grows back: a new version inherits its
parent's mu with sigma reset to the start's, and an idle bot's sigma grows with time.
"""

from __future__ import annotations

from cellarena.arena.ratings.trueskill import TrueSkill

DEFAULT = TrueSkill(
    name="cellarena",
    # Performance noise as wide as the starting uncertainty (TrueSkill's is half): the bench's best.
    beta=25.0 / 3.0,
    draw_probability=1.0 / 3.0,  # Rezzo's (bench.DRAW_RATE)
    # Back to the start's sigma after about 175 idle days (sigma 1 -> 8.3), or at once for a new version.
    idle_per_day=0.4,
    new_version_sigma=25.0 / 3.0,
    # Ranked by mu (as Lichess ranks by rating, provisional marked apart): mu - 3 sigma or mu - sigma
    # keep a widened bot low too long for half of openskill's recovery (the bench's figures).
    shown_sigmas=0.0,
)
