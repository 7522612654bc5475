"""The per-owner upload quota's rule (arena/ladder/submissions/quotas.py), without a clock: "now" is
passed. The HTTP side (429 with Retry-After, `ladder web --uploads-per-day`) is in
test_ladder_submissions_web.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cellarena.arena.ladder.submissions.quotas import upload_refusal

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
