"""The rating systems (arena/ratings/) on known cases, and `cellarena bench ratings` on tiny populations."""

from __future__ import annotations

import math

import pytest
import trueskill

from cellarena.arena import ratings
from cellarena.arena.ratings import bench
from cellarena.arena.ratings.elo import Elo
from cellarena.arena.ratings.glicko2 import Glicko2
from cellarena.arena.ratings.rating import Rating, pairwise
from cellarena.arena.ratings.systems import SYSTEMS
from cellarena.arena.ratings.trueskill import TrueSkill
from cellarena.arena.tournament_store import Standing


def test_elo_expected_score_and_update() -> None:
    elo = Elo()
    assert elo.expected(2000.0, 1600.0) == pytest.approx(10 / 11)
    a, b = elo.update([Rating(2000.0, 0.0), Rating(1600.0, 0.0)], [2, 1])
    assert a.mu == pytest.approx(2000.0 - 8 * 10 / 11) and b.mu == pytest.approx(1600.0 + 8 * 10 / 11)


def test_glicko2_matches_glickmans_example() -> None:
    r = Glicko2(tau=0.5).rate(
        Rating(1500.0, 200.0, 0.06),
        [(Rating(1400.0, 30.0), 1.0), (Rating(1550.0, 100.0), 0.0), (Rating(1700.0, 300.0), 0.0)],
    )
    assert r.mu == pytest.approx(1464.06, abs=0.01)
    assert r.sigma == pytest.approx(151.52, abs=0.01)
    assert r.volatility == pytest.approx(0.05999, abs=1e-5)


@pytest.mark.parametrize("ranks", [(0, 1), (1, 0), (0, 0)])
def test_trueskill_two_seats_is_the_package(ranks: tuple[int, int]) -> None:
    ts = TrueSkill()
    env = trueskill.TrueSkill(backend=None)
    a, b = Rating(30.0, 3.0), Rating(20.0, 5.0)
    mine = ts.update([a, b], list(ranks))
    theirs = env.rate([(env.create_rating(30.0, 3.0),), (env.create_rating(20.0, 5.0),)], ranks=list(ranks))
    for m, (t,) in zip(mine, theirs, strict=True):
        assert m.mu == pytest.approx(t.mu, abs=1e-6) and m.sigma == pytest.approx(t.sigma, abs=1e-6)


def test_a_four_seat_match_enters_as_its_six_pairs() -> None:
    assert pairwise([2, 1, 1, 4]) == [
        (0, 1, 0.0),
        (0, 2, 0.0),
        (0, 3, 1.0),
        (1, 2, 0.5),
        (1, 3, 1.0),
        (2, 3, 1.0),
    ]
    elo = Elo()
    new = elo.update([elo.initial()] * 4, [2, 1, 1, 4])
    assert [r.mu - 1600 for r in new] == pytest.approx([-4.0, 8.0, 8.0, -12.0])


def test_idle_widening_grows_at_lichess_rate() -> None:
    g = Glicko2()
    year = g.idle(Rating(1500.0, 60.0, 0.06), 365.0)
    assert year.sigma == pytest.approx(110.0, abs=1.0)  # Lichess: 60 -> 110 in a year
    assert g.provisional(year) and not g.provisional(Rating(1500.0, 109.0, 0.06))
    d = SYSTEMS["cellarena"]
    assert d.idle(Rating(25.0, 1.0), 30.0).sigma > 1.0


def test_the_bench_json_keys_on_a_tiny_population() -> None:
    result = bench.run(populations=2, bots=8, seed=3)
    assert set(result["systems"]) == {"cellarena", "openskill", "elo", "glicko2", "trueskill"}
    for s in result["systems"].values():
        assert set(s["tau"]) == {"10", "20", "50"}
        assert math.isfinite(s["log_loss"]) and 0 <= s["recovery_matches"] <= bench.CAP
        assert "idle_recovery_matches" in s


def test_the_default_claim_on_a_small_seeded_set() -> None:
    """docs/tournaments.md#ratings: the default's log-loss no worse than the best anchor's (paired)."""
    result = bench.run(populations=4, bots=20, seed=0)
    assert result["paired"]["log_loss"]["mean_difference"] <= 0.0


def test_tournament_ratings_are_a_function_of_the_results_alone() -> None:
    results = [(i, ["a", "b", "c"][i % 3 :] + ["a", "b", "c"][: i % 3], [1, 2, 2 + i % 2]) for i in range(12)]
    once = ratings.replay({}, results)
    # Resumed after 5 matches: the same final ratings.
    first = ratings.replay({}, results[:5])
    start: dict[str, Rating] = {}
    for _, new in first:
        start.update(new)
    assert ratings.replay(start, results[5:])[-1] == once[-1]


def test_a_tournament_standing_shows_its_interval_in_json() -> None:
    """`tournament --json` gives each bot mu +- 2 sigma, the default system's 95% belief."""
    row = Standing("a", 0.0, 30.0, 2.5, 4, 2, 1, 1, 0.0, 0).to_json()
    assert row["interval"] == [25.0, 35.0]
