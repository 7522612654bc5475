"""What a match's end changes, decided without a database (`scoring.settlement`): ratings, failures in
a row, pauses; the store only writes it (tests/test_ladder_store.py checks the writing)."""

from __future__ import annotations

from datetime import UTC, datetime

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import BotRecord, MatchState, SeatBot, SeatResult
from cellarena.arena.ladder.scoring.settlement import count_failure, launch_failure, settle
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings

EXITED = {"cause": "exited", "tick": 3, "text": "bob exited"}


def seat(seat: int, name: str, **kw: object) -> SeatBot:
    fields: dict[str, object] = {"rating": None, "version": None, "last_version": None, "failures": 0}
    fields.update(kw)
    return SeatBot(seat, seat + 10, name, paused=None, **fields)  # type: ignore[arg-type]


def test_a_rated_match_moves_ratings_and_names_its_winner() -> None:
    state = MatchState(True, CommunityPolicy(), (seat(0, "alice"), seat(1, "bob")))
    done = settle(state, [SeatResult(1), SeatResult(2)], 30)
    assert done.winner == 10 and done.rated
    alice, bob = done.seats
    assert alice.before == bob.before == ratings.initial()
    assert alice.after.mu > alice.before.mu > bob.after.mu
    assert (alice.outcome, bob.outcome) == ("win", "loss")


def test_an_unrated_match_keeps_every_rating() -> None:
    state = MatchState(False, CommunityPolicy(), (seat(0, "alice", rating=Rating(30, 5)), seat(1, "bob")))
    done = settle(state, [SeatResult(1), SeatResult(1)], 30)
    kept = [(Rating(30, 5), Rating(30, 5)), (ratings.initial(), ratings.initial())]
    assert [(s.before, s.after) for s in done.seats] == kept
    assert done.winner is None and [s.outcome for s in done.seats] == ["draw", "draw"]


def test_an_idle_bot_plays_a_rated_match_from_its_widened_rating() -> None:
    settled = Rating(30, 2)
    idle = seat(0, "alice", rating=settled, idle_days=90)
    rated = settle(
        MatchState(True, CommunityPolicy(), (idle, seat(1, "bob"))), [SeatResult(1), SeatResult(2)], 30
    )
    assert rated.seats[0].before == ratings.idle(settled, 90) and rated.seats[0].before.sigma > 2
    unrated = settle(
        MatchState(False, CommunityPolicy(), (idle, seat(1, "bob"))), [SeatResult(1), SeatResult(2)], 30
    )
    assert unrated.seats[0].before == unrated.seats[0].after == settled  # an unrated match changes nothing


def test_a_new_version_starts_again_under_reset_and_inherits_under_inherit() -> None:
    old = Rating(40, 2)
    bots = (seat(0, "alice", rating=old, version="2", last_version="1"), seat(1, "bob"))
    keep = settle(MatchState(True, CommunityPolicy(), bots), [SeatResult(1), SeatResult(2)], 30)
    reset = settle(
        MatchState(True, CommunityPolicy(new_version_rating="reset"), bots),
        [SeatResult(1), SeatResult(2)],
        30,
    )
    assert keep.seats[0].before == old and reset.seats[0].before == ratings.initial()
    inherit = settle(
        MatchState(True, CommunityPolicy(new_version_rating="inherit"), bots),
        [SeatResult(1), SeatResult(2)],
        30,
    )
    assert inherit.seats[0].before == Rating(40, ratings.initial().sigma)  # mu kept, sigma widened
    assert inherit.seats[0].after.sigma < inherit.seats[0].before.sigma
    policy = CommunityPolicy(new_version_rating="inherit")
    same = (seat(0, "alice", rating=old, version="1", last_version="1"), seat(1, "bob"))
    assert settle(MatchState(True, policy, same), [SeatResult(1), SeatResult(2)], 30).seats[0].before == old
    assert CommunityPolicy.from_settings(policy.to_settings()) == policy
    first = (seat(0, "alice", rating=old, version="2"), seat(1, "bob"))  # nothing to compare with
    policy = CommunityPolicy(new_version_rating="reset")
    assert settle(MatchState(True, policy, first), [SeatResult(1), SeatResult(2)], 30).seats[0].before == old


def test_failures_count_in_a_row_and_pause_at_the_policy() -> None:
    policy = CommunityPolicy(pause_after=3)
    bots = (seat(0, "alice"), seat(1, "bob", failures=2))
    done = settle(MatchState(True, policy, bots), [SeatResult(1), SeatResult(2, cause=EXITED)], 30)
    assert done.seats[0].count.failures == 0 and done.seats[0].count.pause is None
    assert done.seats[1].count.failures == 3
    assert done.seats[1].count.pause == "3 failed matches in a row, the last one exited"
    assert count_failure(5, "paused already", "exited", policy).pause is None
    assert count_failure(9, None, "exited", CommunityPolicy(pause_after=0)).pause is None


def test_a_failed_launch_counts_as_a_failure() -> None:
    now = datetime.now(UTC)
    bot = BotRecord(1, "builder", "rezzo", "house", "run", 1, now, None, None, None, None, 4, False)
    count = launch_failure({"cause": "never_connected"}, bot, CommunityPolicy(pause_after=5))
    assert count.failures == 5 and count.pause is not None and "launch" in count.pause
