"""Moving the ladder to the default rating system (schema version 11): the stored history is rated
again, so that no rating made by one system is updated by another. On SQLite and on a real PostgreSQL
server (the `ladder_db` fixture).

The test plays a history on today's ladder (idle days, a new version under ``inherit``, an unrated
challenge, a closed season, two games), then writes other numbers over every stored rating (as an
older system would have left them) and runs the migration's step (`rerate_history`, which version 11
runs in its transaction): it must re-rate the history to exactly what the live ladder computed, seat by
seat and bot by bot."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from ladder_checks import raw

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store import match_tables, season_tables
from cellarena.arena.ladder.store.ladder_store import BotRecord, LadderStore, SeatResult
from cellarena.arena.ladder.store.rerate import rerate_history
from cellarena.arena.ladder.store.schema import MIGRATIONS

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_released_rerating_migration_never_changes() -> None:
    assert MIGRATIONS[10].statements == () and MIGRATIONS[10].then is rerate_history


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[datetime]]:
    """The store's clock, moved by the test (results' end times, so idle days)."""
    now = [DAY0]
    for module in (match_tables, season_tables):
        monkeypatch.setattr(module, "now", lambda: now[0].isoformat(timespec="microseconds"))
    yield now


def play(
    store: LadderStore,
    bots: list[BotRecord],
    ranks: list[int],
    versions: list[str | None] | None = None,
    challenge: int | None = None,
) -> None:
    match_id = store.begin_match(
        bots[0].game, "arena", 7, [b.id for b in bots], versions=versions, challenge=challenge
    )
    store.finish_match(
        match_id, [SeatResult(r) for r in ranks], reason="the game ended", ticks=50, settle=settle
    )


def ratings_stored(target: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with raw(target) as db:
        seats = db.query(
            "SELECT match_id, seat, mu_before, sigma_before, mu_after, sigma_after FROM seats"
            " ORDER BY match_id, seat"
        )
        table = db.query(
            "SELECT bot_id, mu, sigma, matches, wins, draws, losses, carried FROM ratings ORDER BY bot_id"
        )
    return seats, table


def test_the_rerating_step_rates_the_history_as_the_live_ladder_rated_it(
    ladder_db: str, clock: list[datetime]
) -> None:
    with LadderStore(ladder_db) as store:
        store.set_policy(CommunityPolicy(new_version_rating="inherit", challenges_rated=False))
        alice, bob, carol = (store.add_bot(n, "rezzo")[0] for n in ("alice", "bob", "carol"))
        eve, fay = (store.add_bot(n, "cata")[0] for n in ("eve", "fay"))
        for day, (pair, ranks) in enumerate(
            [((alice, bob), [1, 2]), ((bob, carol), [1, 1]), ((alice, carol), [2, 1]), ((eve, fay), [1, 2])]
        ):
            clock[0] = DAY0 + timedelta(days=day)
            play(store, list(pair), ranks, versions=["1", "1"])
        clock[0] = DAY0 + timedelta(days=40)  # idle: alice comes back with a new version
        play(store, [alice, bob], [1, 2], versions=["2", "1"])
        challenge = store.challenge("carol", "alice")  # unrated (the policy): before = after
        play(store, [carol, alice], [1, 2], versions=["1", "2"], challenge=challenge.id)
        store.close_season("rezzo", "carry")
        clock[0] = DAY0 + timedelta(days=41)
        play(store, [bob, carol], [2, 1])
        play(store, [fay, eve], [1, 2])
        store.close_season("cata", "reset")
        clock[0] = DAY0 + timedelta(days=42)
        play(store, [eve, fay], [1, 2])
        standings = {g: [s.to_json() for s in store.standings(g, now=clock[0])] for g in ("rezzo", "cata")}
    live = ratings_stored(ladder_db)
    with raw(ladder_db) as db:  # what an older system would have left; then the migration's step
        db.begin_write()
        db.execute("UPDATE seats SET mu_before = 1.5, sigma_before = 0.5, mu_after = 2.5, sigma_after = 0.25")
        db.execute("UPDATE ratings SET mu = 3.5, sigma = 0.75")
        db.commit()
        assert ratings_stored(ladder_db) != live
        db.begin_write()
        rerate_history(db)
        db.commit()
    seats, table = ratings_stored(ladder_db)
    assert [(a, b) for a, b in zip(seats, live[0], strict=True) if a != b] == []
    assert table == live[1]
    with LadderStore(ladder_db) as store:
        assert {
            g: [s.to_json() for s in store.standings(g, now=clock[0])] for g in ("rezzo", "cata")
        } == standings
