"""The community ladder's store (schema version 5): versions, pauses, bans, challenges, the audit log,
statistics, on SQLite and on a real PostgreSQL server (the ``ladder_db`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ladder_checks import raw
from test_ladder_store import GAME, T0, V2, V3, V4, make_v1_database

from cellarena.arena.ladder.errors import ChallengeRefusedError, SeatRefusedError
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import BotRecord, SeatResult
from cellarena.arena.ladder.scoring.bot_stats import bot_stats
from cellarena.arena.ladder.scoring.failures import failure_of
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, cellarena_release
from cellarena.arena.ladder.store.schema import CURRENT_VERSION
from cellarena.arena.ratings import ladder as ratings

CRASH = {"cause": "exited", "tick": 3, "text": "x exited"}
WON = {"cause": "last_player_standing", "tick": 3}


@pytest.fixture
def store(ladder_db: str) -> Iterator[LadderStore]:
    with LadderStore(ladder_db) as s:
        yield s


def bots(store: LadderStore, *names: str) -> list[BotRecord]:
    return [store.add_bot(name, GAME)[0] for name in names]


def play(
    store: LadderStore,
    seated: list[BotRecord],
    ranks: list[int],
    *,
    causes: list[dict[str, Any] | None] | None = None,
    versions: list[str | None] | None = None,
    map: str = "arena",
    challenge: int | None = None,
) -> int:
    match_id = store.begin_match(GAME, map, 7, [b.id for b in seated], versions=versions, challenge=challenge)
    said = causes or [None] * len(seated)
    store.finish_match(
        match_id,
        [SeatResult(r, cause=c) for r, c in zip(ranks, said, strict=True)],
        reason="r",
        ticks=50,
        settle=settle,
    )
    return match_id


def test_a_v4_database_upgrades_to_version_5_and_keeps_everything(ladder_db: str) -> None:
    alice_token, _ = make_v1_database(ladder_db, extra=V2 + V3)
    with raw(ladder_db) as db:
        for statement in V4:
            db.execute(statement)
        for version in (2, 3, 4):
            db.execute("INSERT INTO schema_version VALUES (?, '0.1.0', ?)", (version, T0))
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        alice = store.authenticate(alice_token)
        assert alice is not None and alice.paused is None and alice.banned is None and alice.failures == 0
        assert not alice.refuses_challenges
        old = store.match(1)
        assert old is not None and old.rated and [s.version for s in old.seats] == [None, None]
        assert [s.to_json()["version"] for s in old.seats] == [None, None]
        assert store.policy() == CommunityPolicy()  # no server has written one yet
        stats = bot_stats("alice", store.bot_seats("alice"))
        assert stats["versions"] == {"unknown": {**stats["versions"]["unknown"], "matches": 1, "wins": 1}}
        assert stats["causes"] == {"unknown": 1} and stats["failures"] == {}
        carol = bots(store, "carol")[0]
        play(store, [carol, alice], [1, 2], versions=["v1", None])
        store.challenge("carol", "bob")
        store.pause("bob", "flaky", actor="host")
        assert [e.action for e in store.audit_log()] == ["pause"]
    with raw(ladder_db) as db:
        versions = db.query("SELECT version, cellarena FROM schema_version ORDER BY version")
    assert versions[4] == (5, cellarena_release())


def test_versions_are_recorded_per_seat_and_shown_per_version(store: LadderStore) -> None:
    a, b = bots(store, "a", "b")
    play(store, [a, b], [1, 2], versions=["1.0", "x"])
    play(store, [a, b], [2, 1], versions=["2.0", "x"])
    play(store, [b, a], [2, 1], versions=["x", "2.0"])
    history = store.bot_history("a")
    assert [bm.me.version for bm in history] == ["2.0", "2.0", "1.0"]
    stats = bot_stats("a", store.bot_seats("a"))
    assert stats["versions"]["1.0"]["wins"] == 1 and stats["versions"]["2.0"]["matches"] == 2
    assert [p["version"] for p in stats["rating"]] == ["1.0", "2.0", "2.0"]


def test_a_new_version_keeps_its_rating_or_starts_again_as_the_host_says(store: LadderStore) -> None:
    a, b = bots(store, "a", "b")
    for _ in range(3):
        play(store, [a, b], [1, 2], versions=["1", "1"])
    strong = store.standings(GAME)[0]
    assert strong.bot == "a" and strong.mu > 27
    play(store, [a, b], [2, 1], versions=["2", "1"])  # keep: from its earned rating
    kept = store.bot_history("a", 1)[0].me.before
    assert kept is not None and kept.mu == pytest.approx(strong.mu)
    store.set_policy(CommunityPolicy(new_version_rating="reset"))
    play(store, [a, b], [2, 1], versions=["3", "1"])
    restarted = store.bot_history("a", 1)[0].me.before
    assert restarted == ratings.initial()
    standing = next(s for s in store.standings(GAME) if s.bot == "a")
    assert standing.matches == 5  # its counts go on
    play(store, [a, b], [2, 1], versions=["3", "1"])  # the same version again: no second reset
    assert store.bot_history("a", 1)[0].me.before != ratings.initial()


def test_failed_matches_in_a_row_pause_a_bot_and_a_loss_does_not(store: LadderStore) -> None:
    store.set_policy(CommunityPolicy(pause_after=3))
    a, b = bots(store, "a", "b")
    play(store, [a, b], [2, 1], causes=[CRASH, WON])
    play(store, [a, b], [2, 1], causes=[CRASH, WON])
    play(store, [a, b], [2, 1], causes=[{"cause": "score"}, WON])  # a plain loss resets the count
    assert store.bot("a").failures == 0  # type: ignore[union-attr]
    last = store.last_change()
    for _ in range(3):
        play(store, [a, b], [2, 1], causes=[{"cause": "disconnected", "grace": 5}, WON])
    paused = store.bot("a")
    assert paused is not None and paused.paused == "3 failed matches in a row, the last one disconnected"
    assert paused.stopped is not None and "resume" in paused.stopped
    assert [(c.kind, c.bot) for c in store.changes_since(last)] == [("bot_paused", "a")]
    with pytest.raises(SeatRefusedError) as info:
        store.begin_match(GAME, "arena", 1, [a.id, b.id])
    assert info.value.why == "paused"
    resumed = store.resume("a", actor="alice (api)")
    assert resumed.paused is None and resumed.failures == 0
    assert store.changes_since(last)[-1].kind == "bot_resumed"
    entry = store.audit_log()[0]
    assert (entry.actor, entry.action, entry.bot) == ("alice (api)", "resume", "a")
    assert bot_stats("a", store.bot_seats("a"))["failures"] == {"exited": 2, "disconnected": 3}


def test_which_ends_are_failures() -> None:
    assert failure_of({"cause": "exited"}, 0, 0, 5) == "exited"
    assert failure_of({"cause": "unresponsive"}, 25, 0, 30) == "unresponsive"
    assert failure_of({"cause": "score"}, 0, 0, 100) is None
    assert failure_of(None, 0, 0, 100) is None  # unknown: not the bot's fault as far as we know
    assert failure_of({"cause": "score"}, 60, 35, 100) == "silent"
    assert failure_of({"cause": "score"}, 5, 3, 8) is None  # too short to tell


def test_ban_and_unban_are_audited_and_refuse_seats(store: LadderStore) -> None:
    a, b = bots(store, "a", "b")
    banned = store.ban("a", "cheating", actor="root")
    assert banned.banned == "cheating" and banned.stopped is not None and "banned" in banned.stopped
    with pytest.raises(SeatRefusedError):
        store.begin_match(GAME, None, 1, [a.id, b.id])
    store.unban("a", actor="root")
    store.begin_match(GAME, None, 1, [a.id, b.id])
    assert [(e.action, e.detail) for e in store.audit_log()] == [("unban", None), ("ban", "cheating")]


def test_challenges_have_a_daily_quota_and_a_storm_is_refused(store: LadderStore) -> None:
    store.set_policy(CommunityPolicy(challenges_per_day=3))
    bots(store, "a", "b", "c", "d", "e")
    for opponent in ("b", "c", "d"):
        store.challenge("a", opponent)
    refused = 0
    for _ in range(50):
        with pytest.raises(ChallengeRefusedError, match=r"quota \(its host's --challenges-per-day 3\)"):
            store.challenge("a", "e")
        refused += 1
    assert refused == 50 and len(store.pending_challenges(GAME)) == 3
    store.challenge("b", "a")  # another bot's quota is its own


def test_a_challenge_is_refused_with_a_reason(store: LadderStore) -> None:
    bots(store, "a", "b", "c")
    store.add_bot("other", "cata")
    cases = {
        ("a", "a"): "cannot challenge itself",
        ("a", "nobody"): "no bot named 'nobody'",
        ("a", "other"): "a plays rezzo and other plays cata",
    }
    for (me, them), why in cases.items():
        with pytest.raises(ChallengeRefusedError, match=why):
            store.challenge(me, them)
    store.challenge("a", "b")
    with pytest.raises(ChallengeRefusedError, match="already has a challenge against b"):
        store.challenge("a", "b")
    store.refuse_challenges("b", True)
    assert store.pending_challenges(GAME) == []  # the pending one is cancelled
    with pytest.raises(ChallengeRefusedError, match="b refuses challenges"):
        store.challenge("c", "b")
    store.pause("c", "by hand")
    with pytest.raises(ChallengeRefusedError, match="c cannot play now: c is paused"):
        store.challenge("c", "a")


def test_an_unrated_challenge_changes_no_rating_and_is_marked_played(store: LadderStore) -> None:
    a, b = bots(store, "a", "b")
    challenge = store.challenge("a", "b")
    assert not challenge.rated and challenge.status == "pending"
    match_id = play(store, [a, b], [1, 2], challenge=challenge.id)
    done = store.match(match_id)
    assert done is not None and not done.rated and done.winner == "a"
    assert all(s.before == s.after == ratings.initial() for s in done.seats)
    assert [s.matches for s in store.standings(GAME)] == [0, 0]
    played = store.challenges_of("a")[0]
    assert (played.status, played.match_id) == ("played", match_id)
    assert store.pending_challenges(GAME) == []
    store.set_policy(CommunityPolicy(challenges_rated=True))
    rated = store.challenge("b", "a")
    play(store, [b, a], [1, 2], challenge=rated.id)
    assert [s.matches for s in store.standings(GAME)] == [1, 1]


def test_statistics_head_to_head_maps_seats(store: LadderStore) -> None:
    a, b, c = bots(store, "a", "b", "c")
    play(store, [a, b], [1, 2], map="m1")
    play(store, [b, a], [1, 2], map="m1")
    play(store, [a, c], [1, 1], map="m2")
    play(store, [c, a], [2, 1], map="m2", causes=[CRASH, WON])
    stats = bot_stats("a", store.bot_seats("a"))
    assert stats["matches"] == 4
    assert stats["head_to_head"]["b"] == {"matches": 2, "wins": 1, "draws": 0, "losses": 1, "win_rate": 0.5}
    assert stats["head_to_head"]["c"]["draws"] == 1 and stats["head_to_head"]["c"]["wins"] == 1
    assert stats["maps"]["m2"]["win_rate"] == 0.5 and stats["maps"]["m1"]["matches"] == 2
    assert stats["seats"]["0"]["matches"] == 2 and stats["seats"]["1"]["wins"] == 1
    assert [round(p["sigma"], 3) for p in stats["rating"]] == sorted(
        (round(p["sigma"], 3) for p in stats["rating"]), reverse=True
    )  # the uncertainty shrinks as it plays
    assert bot_stats("c", store.bot_seats("c"))["failures"] == {"exited": 1}


def test_the_hosts_bot_commands_are_audited_and_nothing_secret_is(store: LadderStore) -> None:
    _, token = store.add_bot("a", GAME, actor="root (cli)")
    new = store.rotate("a", actor="root (cli)")
    store.revoke("a", actor="root (cli)")
    store.add_bot("b", GAME)  # a call without an actor (a test, a script) is not an admin action
    entries = store.audit_log()
    assert [(e.actor, e.action, e.bot, e.detail) for e in entries] == [
        ("root (cli)", "revoke", "a", None),
        ("root (cli)", "rotate", "a", None),
        ("root (cli)", "add", "a", "outside bot for rezzo"),
    ]
    shown = repr([e.to_json() for e in entries])
    assert token.secret not in shown and new.secret not in shown and new.digest not in shown
