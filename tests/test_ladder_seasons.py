"""Seasons (docs/ladder.md "Seasons"): a host closes a game's season, its table is archived and stays
readable, and the next one starts reset or carried over with widened uncertainty. On SQLite and on a
real PostgreSQL server (the `ladder_db` fixture), through the store and through `cellarena ladder`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import web_apps
from asgi_calls import call
from click.testing import CliRunner

from cellarena.arena.cli.ladder import ladder
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import BotRecord, LadderStore, LadderStoreError, SeatResult
from cellarena.arena.ladder.store.schema import MIGRATIONS
from cellarena.arena.ratings import ladder as ratings
from cellarena.arena.ratings.rating import Rating
from cellarena.arena.ratings.seasons import next_season

GAME = "rezzo"

#: Migration 9 as released: it never changes.
V9 = (
    "CREATE TABLE seasons ( id {id}, game TEXT NOT NULL, number INTEGER NOT NULL CHECK (number >= 1),"
    " name TEXT NOT NULL, started TEXT NOT NULL, closed TEXT NOT NULL, start_next TEXT NOT NULL CHECK"
    " (start_next IN ('reset', 'carry')), last_seq BIGINT, UNIQUE (game, number))",
    "CREATE TABLE season_standings ( season_id BIGINT NOT NULL REFERENCES seasons (id), rank INTEGER NOT"
    " NULL, bot TEXT NOT NULL, kind TEXT NOT NULL, mu DOUBLE PRECISION NOT NULL, sigma DOUBLE PRECISION NOT"
    " NULL, matches INTEGER NOT NULL, wins INTEGER NOT NULL, draws INTEGER NOT NULL, losses INTEGER NOT"
    " NULL, late INTEGER NOT NULL, invalid INTEGER NOT NULL, bank_drawn_ms BIGINT NOT NULL, provisional"
    " BOOLEAN NOT NULL, PRIMARY KEY (season_id, rank))",
    "ALTER TABLE ratings ADD COLUMN carried INTEGER NOT NULL DEFAULT 0",
)


def test_the_released_seasons_migration_never_changes() -> None:
    season = next(m for m in MIGRATIONS if m.summary.startswith("seasons:"))
    assert [" ".join(s.split()) for s in season.statements] == [" ".join(s.split()) for s in V9]


@pytest.fixture
def store(ladder_db: str) -> Iterator[LadderStore]:
    with LadderStore(ladder_db) as s:
        yield s


def add(store: LadderStore, *names: str) -> list[BotRecord]:
    return [store.add_bot(name, GAME)[0] for name in names]


def play(store: LadderStore, bots: list[BotRecord], ranks: list[int], late: int = 0) -> None:
    match_id = store.begin_match(GAME, "arena", 7, [b.id for b in bots])
    seats = [SeatResult(r, late=late) for r in ranks]
    store.finish_match(match_id, seats, reason="the game ended", ticks=120, settle=settle)


def season_of_five(store: LadderStore) -> list[BotRecord]:
    """alice beats bob in five matches (both ranked), carol plays one (provisional), dave none."""
    alice, bob, carol, dave = add(store, "alice", "bob", "carol", "dave")
    for _ in range(ratings.PROVISIONAL_MATCHES):
        play(store, [alice, bob], [1, 2], late=1)
    play(store, [carol, bob], [1, 2])
    return [alice, bob, carol, dave]


def test_a_closed_season_keeps_its_table_and_the_next_starts_reset(store: LadderStore) -> None:
    bots = season_of_five(store)
    before = store.standings(GAME)
    closed = store.close_season(GAME, "reset", name="Autumn 2026")
    assert (closed.number, closed.name, closed.start_next) == (1, "Autumn 2026", "reset")
    assert closed.started <= closed.closed
    season, table = store.season_standings(GAME, 1)
    assert season == closed and store.seasons(GAME) == [closed]
    # The archive is the table as it stood, field for field (sigmas are not idle: same day).
    assert [s.to_json() for s in table] == [s.to_json() for s in before]
    # The new season: every bot from the initial rating, provisional, no matches, no late answers.
    start = ratings.initial()
    now = store.standings(GAME)
    assert {s.bot for s in now} == {"alice", "bob", "carol", "dave"}
    for s in now:
        assert (s.mu, s.sigma) == (start.mu, start.sigma) and s.provisional
        assert (s.matches, s.wins, s.draws, s.losses, s.late, s.invalid) == (0, 0, 0, 0, 0, 0)
    # Matches of the new season count in it alone; the archive does not move.
    alice, bob = bots[:2]
    play(store, [bob, alice], [1, 2])
    bob_now = next(s for s in store.standings(GAME) if s.bot == "bob")
    assert (bob_now.matches, bob_now.wins) == (1, 1)
    assert [s.to_json() for s in store.season_standings(GAME, 1)[1]] == [s.to_json() for s in before]
    # A second close is season 2, which began when season 1 closed.
    second = store.close_season(GAME, "reset")
    assert (second.number, second.name, second.started) == (2, "Season 2", closed.closed)
    assert [s.number for s in store.seasons(GAME)] == [1, 2]
    assert store.seasons("cata") == []


def test_a_carried_season_keeps_mu_widens_sigma_and_keeps_ranked_bots_ranked(store: LadderStore) -> None:
    season_of_five(store)
    before = {s.bot: s for s in store.standings(GAME)}
    store.close_season(GAME, "carry")
    start = ratings.initial()
    after = {s.bot: s for s in store.standings(GAME)}
    for name in ("alice", "bob", "carol"):
        expected = next_season(Rating(before[name].mu, before[name].sigma), start, "carry")
        assert after[name].mu == pytest.approx(before[name].mu)
        assert after[name].sigma == pytest.approx(expected.sigma) and after[name].sigma > before[name].sigma
        assert after[name].matches == 0
    # alice and bob played enough in the closed season to stay ranked; carol (one match) does not.
    assert [(s.bot, s.provisional) for s in store.standings(GAME)][:2] == [("alice", False), ("bob", False)]
    assert after["carol"].provisional and after["dave"].provisional
    assert (after["dave"].mu, after["dave"].sigma) == (start.mu, start.sigma)


def test_closing_a_season_tells_a_running_server_and_is_audited(store: LadderStore) -> None:
    season_of_five(store)
    last = store.last_change()
    store.close_season(GAME, "carry", actor="host")
    assert [c.kind for c in store.changes_since(last)] == ["season_closed"]
    assert store.audit_log(1)[0].action == "close_season"


def test_bad_seasons_are_refused_with_what_to_do(store: LadderStore) -> None:
    with pytest.raises(LadderStoreError, match="reset or carry, not 'keep'"):
        store.close_season(GAME, "keep")  # type: ignore[arg-type]
    for bad in ("", "   ", "x" * 81, "tab\there"):
        with pytest.raises(LadderStoreError, match="a season's name is 1 to 80 printable"):
            store.close_season(GAME, "reset", name=bad)
    with pytest.raises(LadderStoreError, match="no closed season 3; `cellarena ladder season list rezzo`"):
        store.season_standings(GAME, 3)
    assert store.seasons(GAME) == []  # nothing was closed by the refusals


def test_next_season_rule() -> None:
    start = Rating(25.0, 25.0 / 3.0)
    settled = Rating(31.0, 2.0)
    assert next_season(settled, start, "reset") == start
    carried = next_season(settled, start, "carry")
    assert carried.mu == 31.0 and carried.sigma == pytest.approx(math.hypot(2.0, 25.0 / 6.0))
    assert next_season(Rating(20.0, 8.0), start, "carry").sigma == start.sigma  # never beyond the start's
    with pytest.raises(ValueError, match="reset or carry"):
        next_season(settled, start, "keep")  # type: ignore[arg-type]


def test_the_commands_close_list_and_show_a_season(ladder_db: str, tmp_path: Path) -> None:
    if ladder_db.startswith("postgresql://"):
        target, base = ladder_db, ["--db", ladder_db]
    else:  # the folder the command is given holds its SQLite file
        target, base = str(tmp_path / "ladder.sqlite"), ["--dir", str(tmp_path)]
    with LadderStore(target) as store:
        season_of_five(store)
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(ladder, [*base, *args])
        return result.exit_code, result.output

    code, out = run("season", "close", GAME, "--next", "carry", "--name", "One", "--json")
    assert code == 0, out
    assert json.loads(out)["number"] == 1 and json.loads(out)["start_next"] == "carry"
    code, out = run("season", "list", GAME, "--json")
    assert code == 0 and [s["name"] for s in json.loads(out)["seasons"]] == ["One"]
    code, out = run("standings", GAME, "--season", "1", "--json")
    assert code == 0, out
    body = json.loads(out)
    assert body["season"]["name"] == "One" and [s["bot"] for s in body["standings"]][:2] == ["alice", "bob"]
    # The table keeps every cell whole however narrow the terminal (CliRunner's is 80 columns).
    code, out = run("standings", GAME, "--season", "1")
    assert code == 0 and "…" not in out and "Season" not in out and "One" in out
    assert all(f" {name} " in out for name in ("alice", "bob", "carol", "dave")), out
    code, out = run("standings", GAME, "--season", "2")
    assert code == 1 and "no closed season 2" in out
    code, out = run("season", "close", GAME, "--next", "keep")
    assert code == 2 and "'keep' is not one of 'reset', 'carry'" in out
    code, out = run("standings", GAME, "--season", "0")
    assert code == 2 and "--season" in out


async def test_the_site_lists_closed_seasons_and_shows_each_table(tmp_path: Path) -> None:
    """/seasons lists the closed seasons, /seasons/N shows a table as it stood (HTML, escaped, and JSON);
    a season that does not exist, or a number that is not one, is a 404."""
    site = web_apps.ladder(tmp_path)  # cloth: alice and bob, two finished matches
    try:
        answer = await call(site.app, "GET", "/seasons")
        assert answer.status == 200 and "No season has closed yet" in answer.text
        site.store.close_season(web_apps.GAME, "carry", name="<b>First</b>")
        answer = await call(site.app, "GET", "/seasons")
        assert (
            answer.status == 200
            and "&lt;b&gt;First&lt;/b&gt;" in answer.text
            and "<b>First" not in answer.text
        )
        page = await call(site.app, "GET", "/seasons/1")
        assert page.status == 200 and "final standings" in page.text
        assert all(f">{s.bot}</a>" in page.text for s in site.store.season_standings(web_apps.GAME, 1)[1])
        api = (await call(site.app, "GET", "/api/seasons/1")).json()
        archived = site.store.season_standings(web_apps.GAME, 1)[1]
        assert api["season"]["name"] == "<b>First</b>" and api["standings"] == [s.to_json() for s in archived]
        assert [s["number"] for s in (await call(site.app, "GET", "/api/seasons")).json()["seasons"]] == [1]
        for missing in ("/seasons/2", "/api/seasons/2", "/seasons/%C2%B2", "/seasons/" + "9" * 5000):
            assert (await call(site.app, "GET", missing)).status == 404, missing
        standings = await call(site.app, "GET", "/")
        assert "/seasons'>seasons</a>" in standings.text
    finally:
        site.store.close()
