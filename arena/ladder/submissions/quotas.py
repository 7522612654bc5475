"""Per-owner quotas on submissions, as pure logic: the caller counts what was used in the last 24
hours and passes "now", so the rule is tested without a clock (docs/ladder.md, "Submitting a bot")."""

from __future__ import annotations

import math
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
