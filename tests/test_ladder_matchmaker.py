"""The ladder's matchmaker, on its own: one test per rule of `arena/ladder/matchmaking/matchmaker.py`, then
properties on random queues checked against a brute-force reading of the same rules."""

from __future__ import annotations

import math
import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy, Waiting, match_up
from cellarena.arena.ratings import Rating

TWO = Policy(seats=2, maps=("duel",))
NOW = 1000.0


def bot(
    name: str,
    mu: float,
    waited: float = 0.0,
    *,
    seat: int | None = None,
    met: tuple[str, ...] = (),
    sigma: float = 8.0,
) -> Waiting:
    return Waiting(name, NOW - waited, Rating(mu, sigma), last_seat=seat, last_opponents=met)


def groups(pairings: list[Pairing]) -> set[frozenset[str]]:
    return {frozenset(p.bots) for p in pairings}


# -- rule 1 and 2: wait, window, consent ------------------------------------------------------


def test_too_few_bots_make_no_match() -> None:
    assert match_up([], NOW, TWO, 1) == []
    assert match_up([bot("a", 25)], NOW, TWO, 1) == []


def test_close_ratings_meet_at_once() -> None:
    assert groups(match_up([bot("a", 25), bot("b", 26)], NOW, TWO, 1)) == {frozenset("ab")}


def test_far_ratings_wait_until_both_windows_reach() -> None:
    # 6 apart: a window of 2 at once, 2 + 0.5 * 8 = 6 after 8 s.
    assert match_up([bot("a", 20), bot("b", 26)], NOW, TWO, 1) == []
    assert match_up([bot("a", 20, 8), bot("b", 26, 1)], NOW, TWO, 1) == []  # b has not consented
    assert groups(match_up([bot("a", 20, 8), bot("b", 26, 8)], NOW, TWO, 1)) == {frozenset("ab")}


def test_the_window_stops_at_max_window() -> None:
    far = [bot("a", 0, 29), bot("b", 11, 29)]  # 11 apart; the window caps at 10
    assert match_up(far, NOW, TWO, 1) == []


def test_uncertain_bots_accept_a_wider_range_at_once() -> None:
    unsure = Policy(seats=2, maps=("duel",), uncertainty_window=0.5)
    # 5 apart at zero wait: two newcomers (window 2 + 0.5 * 8 = 6) meet; two settled bots
    # (2 + 0.5 * 1 = 2.5) wait, as do a newcomer and a settled bot (the settled one does not consent).
    assert groups(match_up([bot("a", 20), bot("b", 25)], NOW, unsure, 1)) == {frozenset("ab")}
    settled = [bot("a", 20, sigma=1.0), bot("b", 25, sigma=1.0)]
    assert match_up(settled, NOW, unsure, 1) == []
    assert match_up([bot("a", 20), bot("b", 25, sigma=1.0)], NOW, unsure, 1) == []
    # Without the setting, sigma changes nothing.
    assert match_up([bot("a", 20), bot("b", 25)], NOW, TWO, 1) == []
    assert unsure.window(0.0, 8.0) == 6.0 and unsure.window(1000.0, 8.0) == 14.0  # beyond max_window


def test_a_sigma_that_is_not_a_finite_non_negative_number_is_refused() -> None:
    unsure = Policy(seats=2, maps=("duel",), uncertainty_window=0.5)
    for sigma in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="sigmas must be finite"):
            match_up([bot("a", 25), bot("b", 26, sigma=sigma)], NOW, unsure, 1)


def test_closest_pairs_form_first() -> None:
    queue = [bot("a", 20), bot("b", 21.5), bot("c", 22), bot("d", 23.4)]
    # b-c (0.5) first; a-d are then 3.4 apart, outside both windows.
    assert groups(match_up(queue, NOW, TWO, 1)) == {frozenset("bc")}


def test_queue_order_does_not_matter() -> None:
    queue = [bot(f"b{i}", 20 + (i * 7919 % 13) / 3, i % 9) for i in range(30)]
    first = match_up(queue, NOW, TWO, 7)
    for shuffle_seed in range(5):
        shuffled = list(queue)
        random.Random(shuffle_seed).shuffle(shuffled)
        assert match_up(shuffled, NOW, TWO, 7) == first


# -- rule 3: starvation ------------------------------------------------------------------------


def test_a_starving_bot_meets_the_nearest_whatever_the_windows() -> None:
    queue = [bot("old", 0, 31), bot("near", 15), bot("far", 40)]
    assert groups(match_up(queue, NOW, TWO, 1)) == {frozenset({"old", "near"})}


def test_no_starvation_when_disabled() -> None:
    policy = Policy(seats=2, maps=("duel",), starve_after=None)
    assert match_up([bot("old", 0, 10_000), bot("near", 15)], NOW, policy, 1) == []


# -- rule 5: no immediate rematch --------------------------------------------------------------


def test_no_rematch_while_another_opponent_is_in_window() -> None:
    queue = [bot("a", 25, met=("b",)), bot("b", 25.1, met=("a",)), bot("c", 25.2), bot("d", 25.3)]
    pairs = groups(match_up(queue, NOW, TWO, 1))
    assert frozenset("ab") not in pairs
    assert len(pairs) == 2


def test_two_bots_alone_play_again() -> None:
    queue = [bot("a", 25, met=("b",)), bot("b", 25.1, met=("a",))]
    assert groups(match_up(queue, NOW, TWO, 1)) == {frozenset("ab")}


def test_a_starving_bot_avoids_a_rematch_when_it_can() -> None:
    queue = [bot("old", 25, 40, met=("x",)), bot("x", 25.1), bot("y", 27)]
    assert groups(match_up(queue, NOW, TWO, 1)) == {frozenset({"old", "y"})}


# -- rule 6: seats -----------------------------------------------------------------------------


def test_sides_swap_after_each_match() -> None:
    for a_seat in (0, 1):
        queue = [bot("a", 25, seat=a_seat), bot("b", 25.5, seat=1 - a_seat)]
        (pairing,) = match_up(queue, NOW, TWO, 3)
        assert pairing.bots.index("a") == 1 - a_seat
        assert pairing.bots.index("b") == a_seat


def test_one_bot_with_history_takes_the_other_side() -> None:
    for seed in range(20):
        (pairing,) = match_up([bot("a", 25, seat=0), bot("new", 25.5)], NOW, TWO, seed)
        assert pairing.bots == ("new", "a")


def test_newcomers_sides_come_from_the_seed_not_the_ratings() -> None:
    firsts = {match_up([bot("a", 25), bot("b", 25.5)], NOW, TWO, seed)[0].bots[0] for seed in range(40)}
    assert firsts == {"a", "b"}


def test_three_seats_rotate() -> None:
    policy = Policy(seats=3, maps=("m",))
    queue = [bot("a", 25, seat=0), bot("b", 25.2, seat=1), bot("c", 25.4, seat=2)]
    for seed in range(10):
        (pairing,) = match_up(queue, NOW, policy, seed)
        assert pairing.bots == ("c", "a", "b")  # each in the seat after its last


def test_three_seats_same_last_seat_only_one_keeps_it() -> None:
    policy = Policy(seats=3, maps=("m",))
    queue = [bot(n, 25 + i / 10, seat=0) for i, n in enumerate("abc")]
    for seed in range(10):
        (pairing,) = match_up(queue, NOW, policy, seed)
        assert sorted(pairing.bots) == ["a", "b", "c"]


# -- rule 7: maps and seeds --------------------------------------------------------------------


def test_maps_come_from_the_pool_and_seeds_from_the_seed() -> None:
    policy = Policy(seats=2, maps=("duel", "duel2", None))
    queue = [bot(f"b{i}", 25 + i / 100) for i in range(40)]
    seen = set()
    for seed in range(10):
        pairings = match_up(queue, NOW, policy, seed)
        assert pairings == match_up(queue, NOW, policy, seed)
        for p in pairings:
            assert p.map in policy.maps
            assert 0 <= p.seed < 2**31
            seen.add(p.map)
    assert seen == set(policy.maps)
    assert match_up(queue, NOW, policy, 1) != match_up(queue, NOW, policy, 2)


# -- clocks and bad input ----------------------------------------------------------------------


@pytest.mark.parametrize("now", [-1e18, 0.0, math.nan, math.inf, -math.inf, 1e300])
def test_clock_jumps_break_nothing(now: float) -> None:
    queue = [bot("a", 20, 5), bot("b", 20.5), bot("c", 30)]
    pairings = match_up(queue, now, TWO, 1)
    assert all(len(p.bots) == 2 for p in pairings)
    assert frozenset("ab") in groups(pairings)  # the close pair meets whatever the clock says


def test_a_bot_queued_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="queued twice"):
        match_up([bot("a", 25), bot("a", 26)], NOW, TWO, 1)


def test_a_rating_that_is_not_finite_is_refused() -> None:
    with pytest.raises(ValueError, match="must be finite"):
        match_up([bot("a", 25), bot("b", math.nan)], NOW, TWO, 1)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"seats": 1}, "seats"),
        ({"seats": True}, "seats"),
        ({"maps": ()}, "maps"),
        ({"base_window": -1.0}, "base_window"),
        ({"widen_per_second": math.inf}, "widen_per_second"),
        ({"max_window": 1.0}, "max_window"),
        ({"starve_after": -5.0}, "starve_after"),
        ({"uncertainty_window": -0.5}, "uncertainty_window"),
        ({"uncertainty_window": math.nan}, "uncertainty_window"),
    ],
)
def test_a_bad_policy_is_refused_when_made(fields: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"seats": 2, "maps": ("duel",), **fields}
    with pytest.raises(ValueError, match=message):
        Policy(**args)  # type: ignore[arg-type]


# -- properties against a brute-force reading of the rules -------------------------------------


def reference(queue: list[Waiting], now: float, policy: Policy) -> list[frozenset[str]]:
    """Rules 1-5 by brute force over all groups: starving bots first, then smallest spread first
    (ties to the lower-rated lowest member, then by name), rematches only among the leftovers."""
    k = policy.seats
    order = sorted(queue, key=lambda w: (w.rating.mu, w.bot))
    free = set(range(len(order)))
    out: list[frozenset[str]] = []

    def window(i: int) -> float:
        return policy.window(order[i].waited(now), order[i].rating.sigma)

    def rematch(group: tuple[int, ...]) -> bool:
        names = {order[i].bot for i in group}
        return any(set(order[i].last_opponents) == names - {order[i].bot} for i in group)

    starving = [i for i in free if policy.starving(order[i].waited(now))]
    for s in sorted(starving, key=lambda i: (-order[i].waited(now), i)):
        if s not in free or len(free) < k:
            continue
        mu = order[s].rating.mu
        # Nearest first, ties to the lower rating: the first non-rematch group as candidates grow.
        # Among equal ratings, the nearest in (mu, name) order.
        others = sorted(free - {s}, key=lambda i: (abs(order[i].rating.mu - mu), i > s, i if i > s else -i))
        chosen = None
        for m in range(k - 1, len(others) + 1):
            for rest in combinations(others[: m - 1], k - 2):
                group = tuple(sorted((s, *rest, others[m - 1])))
                if not rematch(group):
                    chosen = group
                    break
            if chosen:
                break
        group = chosen or tuple(sorted((s, *others[: k - 1])))
        free -= set(group)
        out.append(frozenset(order[i].bot for i in group))

    for allow in (False, True):
        while True:
            best = None
            for group in combinations(sorted(free), k):
                spread = order[group[-1]].rating.mu - order[group[0]].rating.mu
                if any(spread > window(i) for i in group) or (not allow and rematch(group)):
                    continue
                key = (spread, group[0])
                if best is None or key < best[0]:
                    best = (key, group)
            if best is None:
                break
            free -= set(best[1])
            out.append(frozenset(order[i].bot for i in best[1]))
    return out


names = st.sampled_from([f"bot{i}" for i in range(12)])
waiting = st.builds(
    lambda mu, waited, seat, met, sigma: (mu, waited, seat, met, sigma),
    st.integers(0, 40).map(lambda x: x / 4),  # quarter steps: spreads tie often
    st.sampled_from([0.0, 2.0, 5.0, 12.0, 29.0, 40.0]),
    st.one_of(st.none(), st.integers(0, 3)),
    st.lists(names, max_size=2, unique=True).map(tuple),
    st.sampled_from([0.0, 1.0, 4.0, 8.0]),
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[Waiting], int, float]:
    seats = draw(st.sampled_from([2, 2, 3]))
    bots = draw(st.lists(names, min_size=0, max_size=9, unique=True))
    queue = []
    for name in bots:
        mu, waited, seat, met, sigma = draw(waiting)
        met = tuple(m for m in met if m != name)[: seats - 1]
        queue.append(bot(name, mu, waited, seat=seat, met=met, sigma=sigma))
    return queue, seats, draw(st.sampled_from([0.0, 0.0, 0.5, 1.0]))


@settings(max_examples=300, deadline=None)
@given(queues(), st.integers(0, 2**31 - 1))
def test_random_queues_follow_the_rules(case: tuple[list[Waiting], int, float], seed: int) -> None:
    queue, seats, unsure = case
    policy = Policy(seats=seats, maps=("m1", "m2"), uncertainty_window=unsure)
    pairings = match_up(queue, NOW, policy, seed)
    seated = [b for p in pairings for b in p.bots]
    assert len(seated) == len(set(seated)) and set(seated) <= {w.bot for w in queue}
    assert all(len(p.bots) == seats and p.map in policy.maps and 0 <= p.seed < 2**31 for p in pairings)
    assert sorted(map(sorted, groups(pairings))) == sorted(map(sorted, reference(queue, NOW, policy)))
    # Nobody sits where it sat last time unless the whole group sat there.
    by_name = {w.bot: w for w in queue}
    for p in pairings:
        lasts = [by_name[b].last_seat for b in p.bots]
        lasts = [s if s is not None and s < seats else None for s in lasts]
        kept = [s for s, last in enumerate(lasts) if last == s]
        if kept:
            assert len(set(lasts)) == 1 and len(kept) == 1
    # Deterministic, and blind to the queue's order.
    assert match_up(list(reversed(queue)), NOW, policy, seed) == pairings
