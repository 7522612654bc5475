"""The host's policy for a community ladder: pausing, versions and challenges (docs/ladder.md).

``ladder serve`` is started with it (``--pause-after``, ``--new-version-rating``,
``--challenges-per-day``, ``--challenges-rated``) and writes it to the database's ``settings`` table
as it starts (`LadderStore.set_policy`), so that the other processes that act on the ladder - the
pages' API and ``ladder challenge`` - apply the same quota, and the store applies the same pause rule
and rating rule whichever process counts a result (the server, or its spool after an outage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NewVersionRating = Literal["keep", "reset", "inherit"]
NEW_VERSION_RATINGS: tuple[NewVersionRating, ...] = ("keep", "reset", "inherit")


@dataclass(frozen=True)
class CommunityPolicy:
    #: Failed matches in a row (`failures.failure_of`) after which a bot is paused; 0: never.
    pause_after: int = 5
    #: What a bot's rating does when it plays under a new version: ``keep`` it, ``reset`` it to the
    #: initial rating, or ``inherit`` its mu with its uncertainty widened back to the start's
    #: (`ratings.ladder.new_version`: re-measured fast, from where it was). Its match counts go on.
    new_version_rating: NewVersionRating = "keep"
    #: Challenges a bot may make in any 24 hours.
    challenges_per_day: int = 10
    #: Whether a challenge's match changes ratings.
    challenges_rated: bool = False

    def to_settings(self) -> dict[str, str]:
        return {
            "pause_after": str(self.pause_after),
            "new_version_rating": self.new_version_rating,
            "challenges_per_day": str(self.challenges_per_day),
            "challenges_rated": "1" if self.challenges_rated else "0",
        }

    @classmethod
    def from_settings(cls, settings: dict[str, str]) -> CommunityPolicy:
        """The policy from the ``settings`` rows; a missing or unreadable one keeps its default (a
        database no server has started on yet has none)."""
        base = cls()

        def number(name: str, default: int) -> int:
            try:
                return max(0, int(settings.get(name, default)))
            except ValueError:
                return default

        rating = settings.get("new_version_rating", base.new_version_rating)
        return cls(
            pause_after=number("pause_after", base.pause_after),
            new_version_rating=next((r for r in NEW_VERSION_RATINGS if r == rating), "keep"),
            challenges_per_day=number("challenges_per_day", base.challenges_per_day),
            challenges_rated=settings.get("challenges_rated", "0") == "1",
        )
