"""What the results pages read: the `ResultsSource` interface, which a tournament
(`cellarena.arena.results.TournamentResults`, the one reader of ``results.sqlite``, also behind
`cellarena results`) and the ladder each provide. The row types are re-exported for the pages.
"""

from __future__ import annotations

from typing import Protocol

from cellarena.arena.results import (
    RESULTS,
    MatchRow,
    RatingPoint,
    ResultsError,
    SeatRow,
    TournamentResults,
    find_tournaments,
)
from cellarena.arena.tournament_store import Standing

__all__ = [
    "RESULTS",
    "MatchRow",
    "RatingPoint",
    "ResultsError",
    "ResultsSource",
    "SeatRow",
    "TournamentResults",
    "find_tournaments",
]


class ResultsSource(Protocol):
    """What the results pages read; a tournament and the ladder each provide one."""

    title: str
    game: str

    def standings(self) -> list[Standing]: ...

    def matches(self) -> list[MatchRow]: ...

    def match(self, index: int) -> MatchRow | None: ...

    def rating_history(self) -> list[RatingPoint]: ...
