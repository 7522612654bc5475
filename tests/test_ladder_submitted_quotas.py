"""The per-owner quotas' rules (arena/ladder/submissions/quotas.py: uploads and build minutes), without
a clock: "now" is passed. The HTTP side (429 with Retry-After, `ladder web --uploads-per-day` and
`--build-minutes-per-day`) is in test_ladder_submissions_web.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cellarena.arena.ladder.submissions.quotas import (
    build_minutes_left,
    build_minutes_refusal,
    upload_refusal,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def test_uploads_under_the_quota_pass() -> None:
    assert upload_refusal("ann has", 0, 3, None, NOW) is None
    assert upload_refusal("ann has", 2, 3, NOW - timedelta(hours=5), NOW) is None


def test_the_quota_used_up_names_itself_and_when_it_resets() -> None:
    refusal = upload_refusal("its owner has", 3, 3, NOW - timedelta(hours=20), NOW)
    assert refusal is not None
    assert refusal.message == (
        "its owner has uploaded 3 version(s) in the last 24 hours, this ladder's quota of 3 "
        "(--uploads-per-day); the next is possible after 2026-11-29 16:00:00 UTC"
    )
    assert refusal.retry_after == 4 * 3600  # once the oldest upload is a day old


def test_the_wait_is_at_least_a_second() -> None:
    refusal = upload_refusal("bot has", 5, 3, NOW - timedelta(days=1, microseconds=-10), NOW)
    assert refusal is not None and refusal.retry_after == 1


# -- build minutes -------------------------------------------------------------------------------------
def test_builds_under_the_minutes_pass_and_old_ones_do_not_count() -> None:
    builds = [(NOW - timedelta(hours=2), 20 * 60.0), (NOW - timedelta(days=1, seconds=1), 600 * 60.0)]
    assert build_minutes_refusal("ann has", builds, 30, NOW) is None  # the 600 minutes ended a day ago
    assert build_minutes_left(builds, 30, NOW) == 10
    assert build_minutes_left([(NOW, 3600.0)], 30, NOW) == 0


def test_the_build_minutes_used_up_name_the_quota_and_when_an_upload_is_possible() -> None:
    builds = [
        (NOW - timedelta(hours=1), 10 * 60.0),
        (NOW - timedelta(hours=20), 15 * 60.0),  # the oldest: it leaves the window in 4 hours
        (NOW - timedelta(hours=10), 10 * 60.0),
    ]
    refusal = build_minutes_refusal("its owner has", builds, 30, NOW)
    assert refusal is not None
    assert refusal.message == (
        "its owner has used 35.0 build minutes in the last 24 hours, this ladder's quota of 30 "
        "(--build-minutes-per-day); the next upload is possible after 2026-11-29 16:00:00 UTC"
    )
    assert refusal.retry_after == 4 * 3600


def test_the_wait_is_until_enough_builds_have_left_the_window() -> None:
    # The oldest build was short: once it leaves, 30 minutes are still used; the next one must go too.
    builds = [(NOW - timedelta(hours=20), 60.0), (NOW - timedelta(hours=18), 30 * 60.0)]
    refusal = build_minutes_refusal("bot has", builds, 30, NOW)
    assert refusal is not None and refusal.retry_after == 6 * 3600
    assert "used 31.0 build minutes" in refusal.message
