"""Every rating system the bench compares, by name: the default first, then the anchors."""

from __future__ import annotations

from cellarena.arena.ratings.default import DEFAULT
from cellarena.arena.ratings.elo import Elo
from cellarena.arena.ratings.glicko2 import Glicko2
from cellarena.arena.ratings.openskill import OpenSkill
from cellarena.arena.ratings.rating import RatingSystem
from cellarena.arena.ratings.trueskill import TrueSkill

SYSTEMS: dict[str, RatingSystem] = {
    "cellarena": DEFAULT,
    "openskill": OpenSkill(),
    "elo": Elo(),
    "glicko2": Glicko2(),
    "trueskill": TrueSkill(),
}
