"""The ladder's database: tokens, bots, matches, ratings, schema upgrades and faults.

Every store test runs twice through the `ladder_db` fixture (tests/conftest.py): on a SQLite file and
on a real PostgreSQL server, because the store promises the same behaviour on both from one set of
queries. The kill -9 test is in test_ladder_crash.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ladder_checks import assert_consistent, raw
from postgres_server import PostgresServer

from cellarena.arena.ladder.identity import tokens as identity
from cellarena.arena.ladder.records import STANDINGS_COLUMNS
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store import backends, match_tables
from cellarena.arena.ladder.store.ladder_store import (
    BotRecord,
    LadderStore,
    LadderStoreError,
    MatchNotRunningError,
    SeatResult,
    UnknownBotError,
    cellarena_release,
)
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, MIGRATIONS, key_names
from cellarena.arena.ratings import ladder as ratings
from cellarena.arena.ratings.rating import Rating

GAME = "rezzo"


def is_postgres(target: str) -> bool:
    return target.startswith("postgresql://")


@pytest.fixture
def store(ladder_db: str) -> Iterator[LadderStore]:
    with LadderStore(ladder_db) as s:
        yield s


def add(store: LadderStore, *names: str, game: str = GAME) -> list[BotRecord]:
    return [store.add_bot(name, game)[0] for name in names]


def play(store: LadderStore, bots: list[BotRecord], ranks: list[int], **kw: object) -> int:
    match_id = store.begin_match(bots[0].game, "arena", 7, [b.id for b in bots])
    kw.setdefault("reason", "the game ended")
    kw.setdefault("ticks", 120)
    store.finish_match(match_id, [SeatResult(r) for r in ranks], **kw, settle=settle)  # type: ignore[arg-type]
    return match_id


# ------------------------------------------------------------------------------------ tokens
def test_tokens_are_long_random_and_recognisable() -> None:
    tokens = {identity.new_token().secret for _ in range(100)}
    assert len(tokens) == 100
    for t in tokens:
        assert t.startswith("cla_") and len(t) == identity.TOKEN_LENGTH == 47
        assert identity.looks_like_token(t)


def test_a_token_never_shows_itself() -> None:
    """repr, str, f-strings and logging formatting show a redacted form; pickling (into a file, a
    queue, a message) is refused; only `.secret` gives the text, on purpose."""
    token = identity.new_token()
    for shown in (repr(token), str(token), f"{token}", "%s" % token, repr([token]), repr((None, token))):  # noqa: UP031
        assert token.secret not in shown and token.secret[4:12] not in shown
    with pytest.raises(TypeError):
        pickle.dumps(token)
    assert token == identity.Token(token.secret) and token != identity.new_token()


def test_digest_is_sha256_and_compared_in_constant_time() -> None:
    token = identity.new_token().secret
    digest = identity.token_digest(token)
    assert len(digest) == 64 and token not in digest
    assert identity.digest_matches(token, digest)
    assert not identity.digest_matches(identity.new_token().secret, digest)


# ------------------------------------------------------------------------------------ bots
def test_add_bot_gives_a_token_once_that_identifies_the_bot(store: LadderStore) -> None:
    bot, token = store.add_bot("alice", GAME)
    assert (bot.name, bot.game, bot.kind, bot.house_command, bot.max_matches) == (
        "alice",
        GAME,
        "outside",
        None,
        1,
    )
    assert bot.active and bot.revoked is None
    assert store.authenticate(token.secret) == bot
    assert store.authenticate(token) == bot
    assert store.bot("alice") == bot and store.bot("nobody") is None


def test_house_bots_keep_the_command_the_ladder_runs(store: LadderStore) -> None:
    bot, token = store.add_bot("house-1", GAME, house_command="python example_bots/greedy.py")
    assert bot.kind == "house" and bot.house_command == "python example_bots/greedy.py"
    assert store.authenticate(token) == bot  # a house bot joins with a token like any other
    with pytest.raises(LadderStoreError, match="command"):
        store.add_bot("house-2", GAME, house_command="  ")


def test_unknown_revoked_and_malformed_tokens_identify_nobody(store: LadderStore) -> None:
    _, token = store.add_bot("alice", GAME)
    other = identity.new_token().secret  # well-formed, never issued
    junk: list[object] = [
        None,
        42,
        b"cla_",
        "",
        "cla_",
        token.secret[:-1],
        token.secret + "x",
        "x" * 10**6,
        other,
    ]
    junk += ["gho_" + token.secret[4:], token.secret.upper(), token.secret[:-1] + "!", f" {token.secret}"]
    for attempt in junk:
        assert store.authenticate(attempt) is None, repr(attempt)[:60]
    store.revoke("alice")
    assert store.authenticate(token) is None


def test_rotate_kills_the_old_token_at_once(store: LadderStore) -> None:
    bot, old = store.add_bot("alice", GAME)
    new = store.rotate("alice")
    assert new != old
    assert store.authenticate(old) is None
    assert store.authenticate(new) == bot
    with pytest.raises(UnknownBotError, match="'bob'"):
        store.rotate("bob")


def test_revoke_keeps_the_bots_matches_but_leaves_the_standings(store: LadderStore) -> None:
    alice, bob, _ = add(store, "alice", "bob", "carol")
    play(store, [alice, bob], [1, 2])
    revoked = store.revoke("bob")
    assert revoked.revoked is not None and not revoked.active
    assert store.revoke("bob").revoked == revoked.revoked  # revoking again changes nothing
    assert [s.bot for s in store.standings(GAME)] == ["alice", "carol"]
    assert "bob" in [s.bot for s in store.standings(GAME, include_revoked=True)]
    assert len(store.bot_history("bob")) == 1
    with pytest.raises(ValueError, match="revoked"):
        store.begin_match(GAME, None, 1, [alice.id, bob.id])
    with pytest.raises(UnknownBotError):
        store.revoke("dave")


@pytest.mark.parametrize("name", ["", "x" * 65, "tab\there", "new\nline", " alice", "alice ", "\x00"])
def test_bot_names_are_1_to_64_printable_characters(store: LadderStore, name: str) -> None:
    with pytest.raises(LadderStoreError, match="bot name"):
        store.add_bot(name, GAME)
    assert store.list_bots() == []


def test_bot_names_are_unique_and_may_be_any_printable_text(store: LadderStore) -> None:
    store.add_bot("x" * 64, GAME)
    store.add_bot("Zoë the 2nd ♞", GAME)
    with pytest.raises(LadderStoreError, match="already a bot named 'Zoë the 2nd ♞'"):
        store.add_bot("Zoë the 2nd ♞", "cata")
    assert [b.name for b in store.list_bots()] == sorted(["x" * 64, "Zoë the 2nd ♞"])


def test_bot_names_that_differ_only_in_case_are_one_name(store: LadderStore) -> None:
    """`Alice` and `alice` would read as one bot in every table; Unicode case too (SQLite's lower()
    folds only ASCII, so this is not left to the database)."""
    store.add_bot("Alice", GAME)
    store.add_bot("ZOË", GAME)
    for name in ("alice", "ALICE", "zoë", "Zoë"):
        with pytest.raises(LadderStoreError, match="differ only in case count as one"):
            store.add_bot(name, GAME)
    assert [b.name for b in store.list_bots()] == ["Alice", "ZOË"]


def test_list_bots_by_game_and_concurrency_limits(store: LadderStore) -> None:
    add(store, "b", "a")
    store.add_bot("c", "cata", max_matches=3)
    assert [b.name for b in store.list_bots()] == ["a", "b", "c"]
    assert [b.name for b in store.list_bots(GAME)] == ["a", "b"]
    assert [b.max_matches for b in store.list_bots()] == [1, 1, 3]
    assert store.set_max_matches("a", 2).max_matches == 2
    for bad in (0, -1, True):
        with pytest.raises(LadderStoreError, match="concurrent"):
            store.set_max_matches("a", bad)
    with pytest.raises(UnknownBotError):
        store.set_max_matches("nobody", 2)


def test_no_token_is_stored_logged_or_put_in_an_error(
    store: LadderStore, ladder_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The database holds only digests: a stolen backup or a log file gives no one a bot's seat."""
    caplog.set_level(logging.DEBUG)
    tokens = []
    bot, token = store.add_bot("alice", GAME)
    tokens.append(token.secret)
    tokens.append(store.rotate("alice").secret)
    tokens.append(store.add_bot("bob", GAME, house_command="run-bob")[1].secret)
    errors = []
    for attempt in tokens:
        store.authenticate(attempt)
        with pytest.raises(LadderStoreError) as info:
            store.add_bot("alice", GAME)
        errors.append(str(info.value))
    store.revoke("alice")
    store.authenticate(tokens[1])
    listed = repr(store.list_bots())
    with raw(ladder_db) as db:
        dump = repr([db.query(f"SELECT * FROM {table}") for table in sorted(db.table_names())])
    if not is_postgres(ladder_db):
        store.close()
        dump += "".join(p.read_bytes().decode("latin-1") for p in Path(ladder_db).parent.glob("ladder.db*"))
    shown = dump + caplog.text + "".join(errors) + listed + repr(bot)
    assert identity.token_digest(tokens[1]) in dump  # the dump really holds the bots table
    for t in tokens:
        assert t not in shown and t[4:20] not in shown


# ------------------------------------------------------------------------------------ matches
def test_a_begun_match_is_committed_at_once(store: LadderStore, ladder_db: str) -> None:
    """Another connection (say, after the server died) sees the running match and its seats."""
    alice, bob = add(store, "alice", "bob")
    match_id = store.begin_match(GAME, "arena", 99, [bob.id, alice.id])
    with LadderStore(ladder_db) as other:
        seen = other.match(match_id)
    assert seen is not None and seen.status == "running" and seen.bots == ("bob", "alice")
    assert (seen.game, seen.map, seed := seen.seed, seen.ended, seen.seq) == (GAME, "arena", 99, None, None)
    assert seed == 99


def test_begin_match_refuses_seats_that_cannot_play(store: LadderStore) -> None:
    alice, bob = add(store, "alice", "bob")
    (carol,) = add(store, "carol", game="cata")
    for ids, why in (
        ([alice.id], "two or more"),
        ([alice.id, alice.id], "two or more"),
        ([alice.id, carol.id], "plays cata"),
        ([alice.id, 12345], "no bot"),
    ):
        with pytest.raises(ValueError, match=why):
            store.begin_match(GAME, None, 1, ids)
    for seed in (-1, 2**63, True):
        with pytest.raises(ValueError, match="seed"):
            store.begin_match(GAME, None, seed, [alice.id, bob.id])
    assert store.matches(GAME) == []


def test_finish_match_records_seats_ratings_and_history(store: LadderStore, ladder_db: str) -> None:
    alice, bob, carol = add(store, "alice", "bob", "carol")
    play(store, [alice, bob], [1, 2])
    before = {s.bot: Rating(s.mu, s.sigma) for s in store.standings(GAME)}
    match_id = store.begin_match(GAME, "field", 3, [carol.id, bob.id, alice.id])
    results = [SeatResult(2, late=4), SeatResult(1, invalid=2, illegal=1), SeatResult(3, forfeit=True)]
    done = store.finish_match(
        match_id,
        results,
        reason="bob held most cells",
        ticks=321,
        replay="replays/2.cellreplay",
        settle=settle,
    )
    expected = ratings.update(before, ["carol", "bob", "alice"], [2, 1, 3])
    assert (done.status, done.winner, done.reason, done.ticks, done.replay) == (
        "finished",
        "bob",
        "bob held most cells",
        321,
        "replays/2.cellreplay",
    )
    assert done.seq == 2 and done.ended is not None and done.ended >= done.started
    assert [(s.bot, s.rank, s.late, s.invalid, s.illegal, s.forfeit) for s in done.seats] == [
        ("carol", 2, 4, 0, 0, False),
        ("bob", 1, 0, 2, 1, False),
        ("alice", 3, 0, 0, 0, True),
    ]
    for seat in done.seats:
        assert seat.before == before[seat.bot] and seat.after == expected[seat.bot]
    assert store.match(match_id) == done
    table = {s.bot: s for s in store.standings(GAME)}
    assert Rating(table["bob"].mu, table["bob"].sigma) == expected["bob"]
    assert (table["bob"].matches, table["bob"].wins, table["bob"].losses) == (2, 1, 1)
    assert (table["alice"].matches, table["alice"].wins, table["alice"].losses) == (2, 1, 1)
    assert (table["carol"].matches, table["carol"].wins, table["carol"].losses) == (1, 0, 1)
    assert_consistent(ladder_db, GAME)


def test_a_shared_first_place_is_a_draw(store: LadderStore) -> None:
    alice, bob = add(store, "alice", "bob")
    match_id = play(store, [alice, bob], [1, 1])
    record = store.match(match_id)
    assert record is not None and record.winner is None
    assert [(s.draws, s.wins, s.losses) for s in store.standings(GAME)] == [(1, 0, 0), (1, 0, 0)]
    assert [m.outcome for m in store.bot_history("alice")] == ["draw"]


def test_a_result_is_never_counted_twice(store: LadderStore, ladder_db: str) -> None:
    alice, bob = add(store, "alice", "bob")
    match_id = play(store, [alice, bob], [1, 2])
    table = store.standings(GAME)
    record = store.match(match_id)
    with pytest.raises(MatchNotRunningError, match=f"match {match_id} is finished"):
        store.finish_match(match_id, [SeatResult(2), SeatResult(1)], reason="again", ticks=1, settle=settle)
    with pytest.raises(MatchNotRunningError):
        store.void_match(match_id, "too late")
    assert store.standings(GAME) == table and store.match(match_id) == record
    with pytest.raises(LadderStoreError, match="no match 999"):
        store.finish_match(999, [SeatResult(1), SeatResult(2)], reason="x", ticks=1, settle=settle)
    assert_consistent(ladder_db, GAME)


def test_a_void_match_changes_no_rating_and_cannot_be_finished(store: LadderStore) -> None:
    alice, bob = add(store, "alice", "bob")
    match_id = store.begin_match(GAME, None, 5, [alice.id, bob.id])
    void = store.void_match(match_id, "bob never connected")
    assert (void.status, void.reason, void.seq, void.winner) == ("void", "bob never connected", None, None)
    assert void.ended is not None and all(s.rank is None and s.after is None for s in void.seats)
    with pytest.raises(MatchNotRunningError, match="is void"):
        store.finish_match(match_id, [SeatResult(1), SeatResult(2)], reason="x", ticks=1, settle=settle)
    assert all(s.matches == 0 and s.mu == ratings.initial().mu for s in store.standings(GAME))


def test_void_running_voids_what_a_dead_server_left_running(ladder_db: str) -> None:
    with LadderStore(ladder_db) as first:
        alice, bob, carol = add(first, "alice", "bob", "carol")
        finished = play(first, [alice, bob], [2, 1])
        cut_short = [first.begin_match(GAME, None, s, [carol.id, alice.id]) for s in (1, 2)]
        table = first.standings(GAME)
    with LadderStore(ladder_db) as restarted:
        voided = restarted.void_running()
        assert [m.id for m in voided] == cut_short
        assert all(
            m.status == "void" and m.reason == "the ladder server stopped before the match ended"
            for m in voided
        )
        assert restarted.standings(GAME) == table
        match = restarted.match(finished)
        assert match is not None and match.status == "finished"
        assert restarted.void_running() == []  # the same server may call it again: nothing left
    assert_consistent(ladder_db, GAME)


def test_a_second_server_on_the_same_database_is_refused(
    ladder_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It would void the first server's live matches; tools that only read or add bots are welcome."""
    monkeypatch.setattr(backends, "SERVER_CLAIM_WAIT", 0.3)
    with LadderStore(ladder_db) as server:
        server.void_running()
        (alice, bob) = add(server, "alice", "bob")
        live = server.begin_match(GAME, None, 1, [alice.id, bob.id])
        with LadderStore(ladder_db) as second:
            with pytest.raises(LadderStoreError, match="another ladder server is running"):
                second.void_running()
            assert second.bot("alice") == alice  # reading alongside the server is fine
            second.add_bot("carol", GAME)  # and so is adding a bot
        record = server.match(live)
        assert record is not None and record.status == "running"
    with LadderStore(ladder_db) as next_server:
        assert [m.id for m in next_server.void_running()] == [live]


def test_servers_of_two_games_share_a_database_and_void_only_their_own(
    ladder_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server per game (docs/ladder.md, "Several games"): each claims its game, a second server of
    the same game is refused, and a restart voids only its own game's matches; a server of every
    game (no game: how a cellarena from before claimed it) excludes them all, and they it."""
    monkeypatch.setattr(backends, "SERVER_CLAIM_WAIT", 0.3)
    with LadderStore(ladder_db) as rezzo, LadderStore(ladder_db) as cata:
        rezzo.void_running(game=GAME)
        assert cata.void_running(game="cata") == []
        r1, r2 = add(rezzo, "r1", "r2")
        c1, c2 = add(cata, "c1", "c2", game="cata")
        rezzo_live = rezzo.begin_match(GAME, None, 1, [r1.id, r2.id])
        cata_live = cata.begin_match("cata", None, 1, [c1.id, c2.id])
        refused = pytest.raises(LadderStoreError, match="another ladder server for cata is running")
        with LadderStore(ladder_db) as second, refused:
            second.void_running(game="cata")
        refused = pytest.raises(LadderStoreError, match="another ladder server is running")
        with LadderStore(ladder_db) as every, refused:
            every.void_running()
        rezzo.close()  # rezzo's server dies with its match under way; its next start voids only it
        with LadderStore(ladder_db) as restarted:
            assert [m.id for m in restarted.void_running(game=GAME)] == [rezzo_live]
        still = cata.match(cata_live)
        assert still is not None and still.status == "running"
        cata.finish_match(cata_live, [SeatResult(1), SeatResult(2)], reason="score", ticks=3, settle=settle)
    with LadderStore(ladder_db) as every:
        assert every.void_running() == []
        with LadderStore(ladder_db) as late, pytest.raises(LadderStoreError, match="for every game"):
            late.void_running(game="cata")


def test_the_store_serves_several_threads(store: LadderStore, ladder_db: str) -> None:
    """A trio server calls it from worker threads; one lock keeps their transactions apart."""
    bots = add(store, *[f"b{i}" for i in range(6)])
    pairs = [(bots[i % 6], bots[(i + 1 + i // 6) % 6]) for i in range(24)]
    match_ids = [store.begin_match(GAME, None, i, [a.id, b.id]) for i, (a, b) in enumerate(pairs)]

    def finish(match_id: int) -> int:
        record = store.finish_match(
            match_id, [SeatResult(1), SeatResult(2)], reason="r", ticks=1, settle=settle
        )
        assert record.seq is not None
        return record.seq

    with ThreadPoolExecutor(4) as pool:
        seqs = list(pool.map(finish, match_ids))
    assert sorted(seqs) == list(range(1, 25))
    assert_consistent(ladder_db, GAME)


# ------------------------------------------------------------------------------------ reads
def test_standings_rank_by_rating_then_name(store: LadderStore) -> None:
    bots = {b.name: b for b in add(store, "dave", "bob", "alice", "carol")}
    add(store, "eve", game="cata")
    assert [s.bot for s in store.standings(GAME)] == ["alice", "bob", "carol", "dave"]  # all equal: by name
    play(store, [bots["dave"], bots["bob"]], [1, 2])
    play(store, [bots["carol"], bots["alice"]], [1, 1])  # a draw: equal ratings after it
    table = store.standings(GAME)
    assert [s.bot for s in table] == ["dave", "alice", "carol", "bob"]
    assert [s.rank for s in table] == [1, 2, 3, 4]
    assert [s.rating for s in table] == sorted((s.rating for s in table), reverse=True)
    assert table[1].rating == table[2].rating
    assert [s.bot for s in store.standings("cata")] == ["eve"]
    assert store.standings("nosuchgame") == []


def test_a_bot_without_enough_rated_matches_is_provisional_and_listed_after_the_ranked(
    store: LadderStore,
) -> None:
    """A bot with no rated match (the issue's house bot that sat 2nd of 3) or fewer than
    `PROVISIONAL_MATCHES` is marked provisional and listed after every ranked bot, whatever its rating."""
    alice, bob, carol, _ = add(store, "alice", "bob", "carol", "newbie")
    for _ in range(ratings.PROVISIONAL_MATCHES):
        play(store, [alice, bob], [2, 1])
    play(store, [carol, bob], [1, 2])
    newbie = next(s for s in store.standings(GAME) if s.bot == "newbie")
    alice_now = next(s for s in store.standings(GAME) if s.bot == "alice")
    assert newbie.rating > alice_now.rating  # the initial rating would rank above a bot that lost
    table = store.standings(GAME)
    assert [(s.bot, s.provisional) for s in table] == [
        ("bob", False),
        ("alice", False),
        ("carol", True),
        ("newbie", True),
    ]
    assert [s.rank for s in table] == [1, 2, 3, 4]
    shown_rating = STANDINGS_COLUMNS.index("rating")
    assert table[3].cells()[shown_rating] == f"{table[3].rating:.2f}?"
    assert table[0].cells()[shown_rating] == f"{table[0].rating:.2f}"
    assert [s.to_json()["provisional"] for s in table] == [False, False, True, True]
    # Each row's interval is mu +- 2 sigma: a newcomer's spans far more than a settled bot's.
    for row in table:
        low, high = row.to_json()["interval"]
        assert low == pytest.approx(row.mu - 2 * row.sigma) and high == pytest.approx(row.mu + 2 * row.sigma)
        # ... and the table (command and page) shows it beside sigma.
        shown = dict(zip(STANDINGS_COLUMNS, row.cells(), strict=True))["interval"]
        assert shown == f"{low:.1f}..{high:.1f}"
    widths = {s.bot: s.to_json()["interval"][1] - s.to_json()["interval"][0] for s in table}
    assert widths["newbie"] > widths["bob"]


def test_an_idle_bots_sigma_grows_when_read_and_when_it_next_plays(
    store: LadderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sigma grows with the whole days since a bot's last rated match (Lichess's rate), computed when
    the standings are read and when it next plays, never stored; on a fixed clock."""
    day0 = datetime(2026, 1, 1, tzinfo=UTC)
    monkeypatch.setattr(match_tables, "now", lambda: day0.isoformat(timespec="microseconds"))
    alice, bob, carol = add(store, "alice", "bob", "carol")
    play(store, [alice, bob], [1, 2])
    stored = {s.bot: Rating(s.mu, s.sigma) for s in store.standings(GAME, now=day0)}
    assert store.standings(GAME, now=day0 + timedelta(hours=23)) == store.standings(GAME, now=day0)
    year = day0 + timedelta(days=365)
    table = {s.bot: s for s in store.standings(GAME, now=year)}
    for name in ("alice", "bob"):
        assert Rating(table[name].mu, table[name].sigma) == ratings.idle(stored[name], 365)
        assert table[name].sigma > stored[name].sigma and table[name].mu == stored[name].mu
    assert table["carol"].sigma == ratings.initial().sigma  # no rated match: the start's, not more
    # The default system's rate: sigma**2 grows by 0.4 a day, a settled sigma of 1 back to the start's
    # 8.33 in about 171 days.
    settled = Rating(25.0, 1.0)
    assert ratings.idle(settled, 100).sigma ** 2 == pytest.approx(1.0 + 100 * 0.4)
    assert ratings.idle(settled, 171).sigma < ratings.initial().sigma == ratings.idle(settled, 172).sigma
    assert ratings.idle(settled, 100_000).sigma == ratings.initial().sigma  # never past the start's

    # alice plays again 30 days on: her rating before is the widened one; bob's stays stored.
    later = day0 + timedelta(days=30, hours=5)
    monkeypatch.setattr(match_tables, "now", lambda: later.isoformat(timespec="microseconds"))
    play(store, [alice, carol], [1, 2])
    before = store.bot_history("alice", 1)[0].me.before
    assert before == ratings.idle(stored["alice"], 30)
    now_table = {s.bot: s for s in store.standings(GAME, now=later)}
    assert Rating(now_table["bob"].mu, now_table["bob"].sigma) == ratings.idle(stored["bob"], 30)
    with raw(store.where) as db:  # what is stored is the match's after, not a drift
        assert db.query(
            "SELECT sigma FROM ratings r JOIN bots b ON b.id = r.bot_id WHERE b.name = 'bob'"
        ) == [(stored["bob"].sigma,)]


def test_bot_history_and_rating_history(store: LadderStore) -> None:
    alice, bob, carol = add(store, "alice", "bob", "carol")
    m1 = play(store, [alice, bob], [1, 2])
    m2 = play(store, [carol, alice], [1, 2])
    m3 = store.begin_match(GAME, None, 1, [alice.id, bob.id, carol.id])
    store.void_match(m3, "server shut down")
    play(store, [bob, carol], [1, 2])
    history = store.bot_history("alice")
    assert [h.match.id for h in history] == [m3, m2, m1]
    assert [h.seat for h in history] == [0, 1, 0]
    assert [h.opponents for h in history] == [("bob", "carol"), ("carol",), ("bob",)]
    assert [h.outcome for h in history] == [None, "loss", "win"]
    assert history[0].rating_after is None and history[1].rating_after == history[1].me.after
    assert [h.match.id for h in store.bot_history("alice", limit=2)] == [m3, m2]
    chart = store.rating_history("alice")
    assert [p.match_id for p in chart] == [m1, m2]
    assert [p.rating for p in chart] == [history[2].rating_after, history[1].rating_after]
    with pytest.raises(UnknownBotError):
        store.bot_history("nobody")


def test_matches_are_paged_newest_first(store: LadderStore) -> None:
    alice, bob = add(store, "alice", "bob")
    (carol, dave) = add(store, "carol", "dave", game="cata")
    ids = [play(store, [alice, bob], [1, 2]) for _ in range(5)]
    play(store, [carol, dave], [1, 2])
    first = store.matches(GAME, limit=2)
    assert [m.id for m in first] == ids[:-3:-1]
    second = store.matches(GAME, limit=2, before=first[-1].id)
    assert [m.id for m in second] == [ids[2], ids[1]]
    assert [m.id for m in store.matches(GAME, limit=10, before=second[-1].id)] == [ids[0]]
    assert store.matches(GAME, limit=10, before=ids[0]) == []
    assert len(store.matches("cata")) == 1
    assert store.match(12345) is None
    assert store.matches(GAME)[0].to_json()["seats"][0]["bot"] == "alice"


# ------------------------------------------------------------------------------------ schema
#: Schema version 1 as cellarena first released it, frozen here: a test makes a real v1 database
#: with it, and a released migration must never change (databases out there were made by it).
V1 = (
    "CREATE TABLE schema_version ( version INTEGER PRIMARY KEY, cellarena TEXT NOT NULL,"
    " applied TEXT NOT NULL)",
    "CREATE TABLE bots ( id {id}, name TEXT NOT NULL UNIQUE, game TEXT NOT NULL,"
    " token_digest TEXT NOT NULL UNIQUE, kind TEXT NOT NULL CHECK (kind IN ('outside', 'house')),"
    " house_command TEXT, created TEXT NOT NULL, revoked TEXT,"
    " CHECK ((kind = 'house') = (house_command IS NOT NULL)))",
    "CREATE TABLE matches ( id {id}, game TEXT NOT NULL, map TEXT, seed BIGINT NOT NULL,"
    " status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'void')), seq BIGINT UNIQUE,"
    " winner BIGINT REFERENCES bots (id), reason TEXT, ticks BIGINT, replay TEXT, started TEXT NOT NULL,"
    " ended TEXT)",
    "CREATE INDEX matches_by_game ON matches (game, id)",
    "CREATE INDEX matches_by_status ON matches (status)",
    "CREATE TABLE seats ( match_id BIGINT NOT NULL REFERENCES matches (id), seat INTEGER NOT NULL,"
    " bot_id BIGINT NOT NULL REFERENCES bots (id), rank INTEGER, late BIGINT, invalid BIGINT, illegal BIGINT,"
    " forfeit BOOLEAN, mu_before DOUBLE PRECISION, sigma_before DOUBLE PRECISION, mu_after DOUBLE PRECISION,"
    " sigma_after DOUBLE PRECISION, PRIMARY KEY (match_id, seat), UNIQUE (match_id, bot_id))",
    "CREATE TABLE ratings ( bot_id BIGINT PRIMARY KEY REFERENCES bots (id), mu DOUBLE PRECISION NOT NULL,"
    " sigma DOUBLE PRECISION NOT NULL, matches INTEGER NOT NULL, wins INTEGER NOT NULL,"
    " draws INTEGER NOT NULL, losses INTEGER NOT NULL)",
)
#: Versions 2 and 3 as released, frozen the same way.
V2 = (
    "ALTER TABLE bots ADD COLUMN max_matches INTEGER NOT NULL DEFAULT 1 CHECK (max_matches >= 1)",
    "CREATE INDEX seats_by_bot ON seats (bot_id, match_id)",
)
V3 = (
    "CREATE TABLE changes ( id {id}, kind TEXT NOT NULL, bot_id BIGINT REFERENCES bots (id),"
    " at TEXT NOT NULL)",
)
V4 = ("ALTER TABLE seats ADD COLUMN cause TEXT",)
#: Version 5: the community ladder (versions, pauses, bans, challenges, settings, audit).
V5 = (
    "ALTER TABLE seats ADD COLUMN version TEXT",
    "ALTER TABLE matches ADD COLUMN rated BOOLEAN NOT NULL DEFAULT TRUE",
    "ALTER TABLE bots ADD COLUMN paused TEXT",
    "ALTER TABLE bots ADD COLUMN paused_at TEXT",
    "ALTER TABLE bots ADD COLUMN banned TEXT",
    "ALTER TABLE bots ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE bots ADD COLUMN refuses_challenges BOOLEAN NOT NULL DEFAULT FALSE",
    "CREATE TABLE challenges ("
    " id {id},"
    " challenger BIGINT NOT NULL REFERENCES bots (id),"
    " opponent BIGINT NOT NULL REFERENCES bots (id),"
    " rated BOOLEAN NOT NULL,"
    " status TEXT NOT NULL CHECK (status IN ('pending', 'played', 'cancelled')),"
    " created TEXT NOT NULL,"
    " match_id BIGINT REFERENCES matches (id))",
    "CREATE INDEX challenges_by_challenger ON challenges (challenger, created)",
    "CREATE INDEX challenges_by_status ON challenges (status)",
    "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE audit ("
    " id {id},"
    " at TEXT NOT NULL,"
    " actor TEXT NOT NULL,"
    " action TEXT NOT NULL,"
    " bot TEXT,"
    " detail TEXT)",
)
V7 = ("ALTER TABLE seats ADD COLUMN bank_drawn_ms BIGINT",)
#: Version 8: bots' look-alike keys under a unique index (its Python step, `schema.key_names`, fills them).
V8 = (
    "ALTER TABLE bots ADD COLUMN name_key TEXT",
    "CREATE UNIQUE INDEX bots_by_name_key ON bots (name_key)",
)
T0 = "2026-01-02T03:04:05.000000+00:00"


def make_v1_database(target: str, *, extra: tuple[str, ...] = ()) -> tuple[str, str]:
    """A v1 ladder database with two bots, a finished match, a running one; the bots' tokens."""
    alice, bob = identity.new_token(), identity.new_token()
    a_after, b_after = ratings.update(
        {"a": ratings.initial(), "b": ratings.initial()}, ["a", "b"], [1, 2]
    ).values()
    init = ratings.initial()
    with raw(target) as db:
        db.begin_write()
        for statement in V1 + extra:
            db.execute(statement.replace("{id}", db.id_column))
        db.execute("INSERT INTO schema_version VALUES (1, '0.1.0', ?)", (T0,))
        ids = [
            db.query(
                "INSERT INTO bots (name, game, token_digest, kind, created)"
                " VALUES (?, ?, ?, 'outside', ?) RETURNING id",
                (name, GAME, token.digest, T0),
            )[0][0]
            for name, token in (("alice", alice), ("bob", bob))
        ]
        finished, running = (
            db.query(
                "INSERT INTO matches (game, map, seed, status, seq, winner, reason, ticks, started, ended)"
                " VALUES (?, 'arena', 7, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (GAME, status, seq, winner, reason, ticks, T0, ended),
            )[0][0]
            for status, seq, winner, reason, ticks, ended in (
                ("finished", 1, ids[0], "won", 50, T0),
                ("running", None, None, None, None, None),
            )
        )
        for seat, (bot, rank, after) in enumerate(((ids[0], 1, a_after), (ids[1], 2, b_after))):
            db.execute(
                "INSERT INTO seats VALUES (?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?)",
                (finished, seat, bot, rank, False, init.mu, init.sigma, after.mu, after.sigma),
            )
            db.execute("INSERT INTO seats (match_id, seat, bot_id) VALUES (?, ?, ?)", (running, seat, bot))
            db.execute(
                "INSERT INTO ratings VALUES (?, ?, ?, 1, ?, 0, ?)",
                (bot, after.mu, after.sigma, int(rank == 1), int(rank == 2)),
            )
        db.commit()
    return alice.secret, bob.secret


def test_released_migrations_never_change() -> None:
    assert [" ".join(s.split()) for s in MIGRATIONS[0].statements] == [" ".join(s.split()) for s in V1]
    assert [m.statements for m in MIGRATIONS[1:4]] == [V2, V3, V4]
    assert MIGRATIONS[4].statements == V5
    # Frozen elsewhere: version 6 (owners) in test_ladder_accounts.py, 9 (the dataset opt-out) in
    # test_ladder_export.py, 10 (seasons) in test_ladder_seasons.py, 11 (re-rating) in test_ladder_rerate.py.
    assert MIGRATIONS[6].statements == V7
    assert MIGRATIONS[7].statements == V8 and MIGRATIONS[7].then is key_names
    # Version 12 (submitted bots' versions) is frozen in test_ladder_submissions_store.py.
    # Version 13 (mail: owners' addresses, notices) is frozen in test_ladder_mail_store.py.
    # Version 14 (builds' durations, the notices' lease) is frozen in test_ladder_submissions_store.py.
    assert CURRENT_VERSION == len(MIGRATIONS) == 14


#: The ``ratings`` columns of schema version 1 (later versions add columns after them).
V1_RATINGS = "bot_id, mu, sigma, matches, wins, draws, losses"


def test_opening_a_v1_database_upgrades_it_and_keeps_everything(ladder_db: str) -> None:
    alice_token, _ = make_v1_database(ladder_db)
    with raw(ladder_db) as db:
        table_before = db.query(f"SELECT {V1_RATINGS} FROM ratings ORDER BY bot_id")
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        alice = store.authenticate(alice_token)
        assert (
            alice is not None and alice.name == "alice" and alice.max_matches == 1
        )  # v2's column, defaulted
        assert [(s.bot, s.matches, s.wins) for s in store.standings(GAME)] == [("alice", 1, 1), ("bob", 1, 0)]
        running = store.match(2)
        assert (
            running is not None and running.status == "running"
        )  # an upgrade voids nothing; the server does
        assert store.set_max_matches("bob", 2).max_matches == 2
        # v4: a match finished before causes were kept reads "unknown"; one running has none yet.
        old = store.match(1)
        assert old is not None and [s.to_json()["cause"] for s in old.seats] == [{"cause": "unknown"}] * 2
        assert [s.to_json()["cause"] for s in running.seats] == [None, None]
        # v5: no bank drawn is known of a match from before; the standings' counts are its seats'.
        assert [s.to_json()["bank_drawn_ms"] for s in old.seats] == [None, None]
        assert [(s.late, s.invalid, s.bank_drawn_ms) for s in store.standings(GAME)] == [(0, 0, 0)] * 2
        carol, _ = store.add_bot("carol", GAME)
        play(store, [carol, alice], [1, 2])
    with raw(ladder_db) as db:
        versions = db.query("SELECT version, cellarena FROM schema_version ORDER BY version")
        bob_now = db.query(f"SELECT {V1_RATINGS} FROM ratings WHERE bot_id = ?", (table_before[1][0],))
        assert bob_now == table_before[1:]
    assert versions == [(1, "0.1.0"), *((v, cellarena_release()) for v in range(2, CURRENT_VERSION + 1))]
    assert_consistent(ladder_db, GAME)


def test_a_seats_cause_is_kept_with_its_result(ladder_db: str) -> None:
    with LadderStore(ladder_db) as store:
        alice, _ = store.add_bot("alice", GAME)
        bob, _ = store.add_bot("bob", GAME)
        match_id = store.begin_match(GAME, "arena", 7, [alice.id, bob.id])
        lost = {
            "cause": "flag_at_base",
            "tick": 9,
            "flag": [1, 2],
            "base": [2, 2],
            "by": 0,
            "text": "bob is out",
        }
        won = {"cause": "last_player_standing", "tick": 9, "text": "alice is the last player standing"}
        store.finish_match(
            match_id,
            [SeatResult(1, cause=won), SeatResult(2, cause=lost)],
            reason="r",
            ticks=9,
            settle=settle,
        )
        done = store.match(match_id)
        assert done is not None and [s.cause for s in done.seats] == [won, lost]
        assert done.to_json()["seats"][1]["cause"] == lost


def test_standings_count_late_invalid_answers_and_the_bank_drawn(ladder_db: str) -> None:
    """The standings sum each bot's late and invalid answers and its time bank drawn over its finished
    matches (a bot whose every answer failed must not look fine there), and each seat keeps its own."""
    with LadderStore(ladder_db) as store:
        alice, _ = store.add_bot("alice", GAME)
        bob, _ = store.add_bot("bob", GAME)
        for late, invalid, bank in ((3, 0, 120), (1, 100, None)):
            match_id = store.begin_match(GAME, "arena", 7, [alice.id, bob.id])
            seats = [
                SeatResult(1, late=late, bank_drawn_ms=bank),
                SeatResult(2, invalid=invalid, bank_drawn_ms=None if bank is None else 7),
            ]
            store.finish_match(match_id, seats, reason="r", ticks=9, settle=settle)
        running = store.begin_match(GAME, "arena", 8, [alice.id, bob.id])  # counts nothing yet
        table = {s.bot: s for s in store.standings(GAME)}
        assert (table["alice"].late, table["alice"].invalid, table["alice"].bank_drawn_ms) == (4, 0, 120)
        assert (table["bob"].late, table["bob"].invalid, table["bob"].bank_drawn_ms) == (0, 100, 7)
        row = dict(zip(STANDINGS_COLUMNS, table["bob"].cells(), strict=True))
        assert (row["late"], row["invalid"], row["bank ms"]) == ("0", "100", "7")
        assert table["bob"].to_json()["invalid"] == 100
        first = store.match(match_id - 1)
        assert first is not None and [s.bank_drawn_ms for s in first.seats] == [120, 7]
        assert first.to_json()["seats"][0]["bank_drawn_ms"] == 120
        last = store.match(match_id)
        assert last is not None and [s.to_json()["bank_drawn_ms"] for s in last.seats] == [None, None]
        assert store.match(running) is not None


def test_an_upgrade_that_fails_half_way_leaves_the_old_version_whole(ladder_db: str) -> None:
    """The migration runs in one transaction: here its second statement fails (an index of that name is
    already there), and its first (a new column) must be undone with it."""
    make_v1_database(ladder_db, extra=("CREATE INDEX seats_by_bot ON seats (seat)",))
    upgrade = f"cannot upgrade the ladder database to schema version {CURRENT_VERSION}"
    with pytest.raises(LadderStoreError, match=upgrade):
        LadderStore(ladder_db)
    with raw(ladder_db) as db:
        assert db.query("SELECT MAX(version) FROM schema_version") == [(1,)]
        with pytest.raises(Exception, match="max_matches"):
            db.query("SELECT max_matches FROM bots")


def test_a_database_from_a_newer_cellarena_is_refused(ladder_db: str) -> None:
    LadderStore(ladder_db).close()
    with raw(ladder_db) as db:
        db.execute("INSERT INTO schema_version VALUES (99, '9.9.9', ?)", (T0,))
    with pytest.raises(LadderStoreError) as info:
        LadderStore(ladder_db)
    message = str(info.value)
    assert "schema version 99" in message and "Run cellarena 9.9.9 or newer" in message
    assert f"up to {CURRENT_VERSION}" in message
    with raw(ladder_db) as db:
        assert db.query("SELECT MAX(version) FROM schema_version") == [(99,)]


def test_another_database_is_not_taken_for_a_ladder(ladder_db: str) -> None:
    with raw(ladder_db) as db:
        db.execute("CREATE TABLE tournament (id INTEGER)")
    with pytest.raises(LadderStoreError, match=r"not a ladder database .* tournament"):
        LadderStore(ladder_db)


def test_create_false_refuses_an_empty_place(ladder_db: str) -> None:
    with pytest.raises(LadderStoreError, match="no ladder database there"):
        LadderStore(ladder_db, create=False)
    LadderStore(ladder_db).close()
    LadderStore(ladder_db, create=False).close()


def test_a_postgres_url_password_never_shows(free_port: int) -> None:
    url = f"postgresql://ladder:hunter2@127.0.0.1:{free_port}/ladder"
    assert backends.redact_url(url) == f"postgresql://ladder:***@127.0.0.1:{free_port}/ladder"
    with pytest.raises(LadderStoreError, match="cannot connect") as info:
        LadderStore(url)
    assert "hunter2" not in str(info.value) and "***" in str(info.value)


# ------------------------------------------------------------------------------------ faults
@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged user may write in (pytest's tmp_path is the invoking user's only)."""
    path = Path(tempfile.mkdtemp(prefix="cellarena-ladder-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


@contextlib.contextmanager
def database_read_only(target: str, server: PostgresServer | None) -> Iterator[None]:
    """The database refuses writes: a SQLite file without write permission (as root, who may write
    anything, the store is used as `nobody` meanwhile); PostgreSQL with read-only transactions."""
    if server is not None:
        name = target.rsplit("/", 1)[1]
        with server.admin() as admin:
            admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        try:
            yield
        finally:
            with server.admin() as admin:
                admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")
        return
    path = Path(target)
    path.chmod(0o444)
    root = os.geteuid() == 0
    if root:
        os.seteuid(65534)
    try:
        yield
    finally:
        if root:
            os.seteuid(0)
        path.chmod(0o644)


def test_a_read_only_database_refuses_the_result_clearly_and_writes_nothing(
    ladder_db: str, shared_dir: Path, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("postgres_server") if is_postgres(ladder_db) else None
    target = ladder_db if server else str(shared_dir / "ladder.db")
    with LadderStore(target) as store:
        alice, bob = add(store, "alice", "bob")
        play(store, [alice, bob], [1, 2])
        match_id = store.begin_match(GAME, None, 2, [alice.id, bob.id])
        table = store.standings(GAME)
    with database_read_only(target, server), LadderStore(target) as store:
        assert store.standings(GAME) == table  # reading still works: a copy can serve the pages
        with pytest.raises(LadderStoreError) as info:
            store.finish_match(
                match_id, [SeatResult(2), SeatResult(1)], reason="bob won", ticks=9, settle=settle
            )
        message = str(info.value)
        assert message.startswith(f"{store.where}: cannot record the result of match {match_id}: ")
        assert "read-only" in message and "nothing of it was written" in message
        assert ("default_transaction_read_only" if server else f"write to {target}") in message
    with LadderStore(target) as store:
        record = store.match(match_id)
        assert record is not None and record.status == "running" and record.seats[0].rank is None
        assert store.standings(GAME) == table
        store.finish_match(
            match_id, [SeatResult(2), SeatResult(1)], reason="bob won", ticks=9, settle=settle
        )  # now it can
    assert_consistent(target, GAME)


@contextlib.contextmanager
def disk_full(store: LadderStore, target: str, server: PostgresServer | None) -> Iterator[None]:
    """The disk fills up. SQLite: the store's connection may not grow the file past its size now
    (`max_page_count`, which is per connection, hence the private handle). PostgreSQL cannot be
    limited so, so a trigger fails the match row's update, the transaction's last statement, with the
    error a full disk gives (SQLSTATE 53100)."""
    if server is None:
        conn: sqlite3.Connection = store.database.backend._db  # type: ignore[attr-defined]
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        try:
            yield
        finally:
            conn.execute("PRAGMA max_page_count = 1073741823")
        return
    with raw(target) as db:
        db.execute(
            "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION"
            " 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$"
        )
        db.execute(
            "CREATE TRIGGER disk_full BEFORE UPDATE ON matches FOR EACH ROW EXECUTE FUNCTION disk_full()"
        )
    try:
        yield
    finally:
        with raw(target) as db:
            db.execute("DROP TRIGGER disk_full ON matches")


def test_a_full_disk_refuses_the_result_clearly_and_writes_nothing(
    store: LadderStore, ladder_db: str, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("postgres_server") if is_postgres(ladder_db) else None
    alice, bob = add(store, "alice", "bob")
    play(store, [alice, bob], [1, 2])  # both have ratings rows: finishing only updates rows
    match_id = store.begin_match(GAME, None, 2, [alice.id, bob.id])
    table = store.standings(GAME)
    # A long reason (a crash's traceback, say) needs new pages, in the match row: the last statement.
    reason = "bob crashed:\n" + "Traceback line\n" * 2000
    with disk_full(store, ladder_db, server), pytest.raises(LadderStoreError) as info:
        store.finish_match(match_id, [SeatResult(2), SeatResult(1)], reason=reason, ticks=9, settle=settle)
    message = str(info.value)
    assert message.startswith(f"{store.where}: cannot record the result of match {match_id}: ")
    assert "disk is full" in message and "free space" in message and "nothing of it was written" in message
    assert "stays running" in message
    record = store.match(match_id)
    assert record is not None and record.status == "running"
    assert all(s.rank is None and s.after is None for s in record.seats)  # the seat updates were undone
    assert store.standings(GAME) == table  # and so were the ratings
    store.finish_match(
        match_id, [SeatResult(2), SeatResult(1)], reason=reason, ticks=9, settle=settle
    )  # space again
    assert_consistent(ladder_db, GAME)


def test_opening_a_v2_database_adds_the_change_log(ladder_db: str) -> None:
    """Version 3 (the change log a running server polls) on a database that version 2 made."""
    alice_token, _ = make_v1_database(ladder_db, extra=V2)
    with raw(ladder_db) as db:
        db.execute("INSERT INTO schema_version VALUES (2, '0.1.0', ?)", (T0,))
        assert "changes" not in db.table_names()
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        assert store.last_change() == 0 and store.changes_since(0) == []
        alice = store.authenticate(alice_token)
        assert alice is not None and alice.name == "alice"
        store.rotate("bob")
        store.revoke("alice")
        store.revoke("alice")  # a second revoke changes nothing, and logs nothing
        changes = store.changes_since(0)
        assert [(c.kind, c.bot) for c in changes] == [("token_rotated", "bob"), ("bot_revoked", "alice")]
        assert store.changes_since(changes[0].id) == changes[1:]
        assert store.last_change() == changes[-1].id
    with raw(ladder_db) as db:
        versions = db.query("SELECT version, cellarena FROM schema_version ORDER BY version")
    assert versions == [
        (1, "0.1.0"),
        (2, "0.1.0"),
        *((v, cellarena_release()) for v in range(3, CURRENT_VERSION + 1)),
    ]
    assert_consistent(ladder_db, GAME)


def test_the_change_log_keeps_only_its_newest_rows(
    store: LadderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cellarena.arena.ladder.store import change_log

    monkeypatch.setattr(change_log, "CHANGES_KEPT", 3)
    add(store, "alice")
    for _ in range(5):
        store.rotate("alice")
    changes = store.changes_since(0)
    assert [c.kind for c in changes] == ["token_rotated"] * 3  # the bot_added and two rotations went
    assert changes[-1].id == store.last_change() == 6


def test_a_bool_is_no_seed_nor_rank(store: LadderStore) -> None:
    """The store's int fields are checked by the protocol's validator (`protocol.is_int`): True is an
    int to isinstance, and is refused as one, as seats and concurrency limits are."""
    alice, bob = add(store, "alice", "bob")
    with pytest.raises(ValueError, match="seed True: give an int"):
        store.begin_match(GAME, "arena", True, [alice.id, bob.id])
    match_id = store.begin_match(GAME, "arena", 7, [alice.id, bob.id])
    with pytest.raises(ValueError, match="rank True: ranks are 1"):
        store.finish_match(match_id, [SeatResult(True), SeatResult(2)], reason="x", ticks=1, settle=settle)
    store.finish_match(match_id, [SeatResult(1), SeatResult(2)], reason="x", ticks=1, settle=settle)
    assert [m.outcome for m in store.bot_history("alice")] == ["win"]
