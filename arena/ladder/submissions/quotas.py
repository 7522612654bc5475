"""Per-owner quotas on submissions, as pure logic: the caller counts what was used in the last 24
hours (uploads; builds, each with its duration) and passes "now", so the rules are tested without a
clock (docs/ladder.md, "Submitting a bot")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

#: The window every daily quota counts over.
A_DAY = timedelta(days=1)


@dataclass(frozen=True)
class QuotaRefusal:
    """A quota used up: the sentence for the owner (naming the quota and when it resets) and the
    seconds until the next use is possible (an HTTP answer's Retry-After)."""

    message: str
    retry_after: int


def upload_refusal(
    whose: str, count: int, per_day: int, oldest: datetime | None, now: datetime
) -> QuotaRefusal | None:
    """None while ``count`` uploads in the 24 hours before ``now`` (the oldest at ``oldest``) are
    under ``per_day``; else the refusal: the next upload is possible once the oldest is a day old."""
    if count < per_day:
        return None
    again = now + A_DAY if oldest is None else oldest + A_DAY
    wait = max(1, math.ceil((again - now).total_seconds()))
    return QuotaRefusal(
        f"{whose} uploaded {count} version(s) in the last 24 hours, this ladder's quota of {per_day} "
        f"(--uploads-per-day); the next is possible after {again:%Y-%m-%d %H:%M:%S} UTC",
        wait,
    )


def build_minutes_refusal(
    whose: str, builds: Sequence[tuple[datetime, float]], minutes_per_day: float, now: datetime
) -> QuotaRefusal | None:
    """None while the ``builds`` (each its end and its seconds) that ended in the 24 hours before
    ``now`` took less than ``minutes_per_day`` in all; else the refusal: the next upload is possible
    once enough of the oldest have left the window for the rest to be under the quota."""
    counted = sorted((end, seconds) for end, seconds in builds if end > now - A_DAY)
    quota = minutes_per_day * 60
    used = sum(seconds for _, seconds in counted)
    if used < quota:
        return None
    left = used
    again = now + A_DAY
    for end, seconds in counted:  # oldest first: the moment each leaves the window
        left -= seconds
        if left < quota:
            again = end + A_DAY
            break
    wait = max(1, math.ceil((again - now).total_seconds()))
    return QuotaRefusal(
        f"{whose} used {used / 60:.1f} build minutes in the last 24 hours, this ladder's quota of "
        f"{minutes_per_day:g} (--build-minutes-per-day); the next upload is possible after "
        f"{again:%Y-%m-%d %H:%M:%S} UTC",
        wait,
    )


def build_minutes_left(
    builds: Sequence[tuple[datetime, float]], minutes_per_day: float, now: datetime
) -> float:
    """The build minutes left of ``minutes_per_day`` at ``now``, given the ``builds`` (end, seconds)."""
    used = sum(seconds for end, seconds in builds if end > now - A_DAY)
    return max(0.0, minutes_per_day - used / 60)
