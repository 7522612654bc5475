"""The timer and report shared by every `cellarena bench GAME` command."""

from __future__ import annotations

import pytest

from cellarena.server.bench.harness import calls_per_second, report


# Real time: measures a real rate of calls per second on the real clock.
@pytest.mark.realtime
def test_calls_per_second_counts_every_call_and_reports_the_best_batch() -> None:
    calls = []
    rate = calls_per_second(lambda: calls.append(1), 0.05)
    # Untimed warm-up, the doubling batches and the timed batches all ran the function...
    assert len(calls) > 1000
    # ...and the rate is a plausible figure for appending to a list: neither 0 nor infinite.
    assert 1e4 < rate < 1e10


def test_the_rate_is_that_of_the_least_disturbed_batch(monkeypatch) -> None:
    """On a fake clock each call takes 1 ms, and one batch is disturbed by 50 ms: the rate is 1000/s."""
    from cellarena.server.bench import harness

    now = [0.0]
    calls = [0]

    def work() -> None:
        calls[0] += 1
        now[0] += 0.001 + (0.05 if calls[0] == 40 else 0.0)

    monkeypatch.setattr(harness.time, "perf_counter", lambda: now[0])
    assert harness.calls_per_second(work, 1.0) == pytest.approx(1000.0)


def test_report_prints_the_table_goals_and_notes(capsys) -> None:
    report("T", ("a", "b"), [("1", "2")], [("fast enough", True), ("small enough", False)], ["note"])
    out = capsys.readouterr().out
    assert "goal: fast enough: met" in out
    assert "goal: small enough: missed" in out
    assert out.rstrip().endswith("note")
