"""The ladder rides out a database outage: a real PostgreSQL server stopped mid-match and started again.

While the database is down, bots are refused with `shutdown` (which every SDK retries), the match under
way plays to its end and its result waits on the ladder's disk; once the database is back the ladder
connects again, takes its one-server lock again, writes the result, and bots play within seconds.
`/health` says which state the database is in. Each test starts a PostgreSQL server of its own, since
it stops it (tests/postgres_server.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from ladder_checks import assert_consistent
from postgres_server import PostgresServer
from postgres_server import missing as postgres_missing
from test_ladder_server import Ladder, join, play_one, wait_for
from wire_client import Client

from cellarena.arena.ladder.errors import LadderStoreError, ServerClaimLostError
from cellarena.arena.ladder.ops.health import serve_health
from cellarena.arena.ladder.ops.wiring import LadderConfig, build, prepare
from cellarena.arena.ladder.records import Change, SeatResult
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.spool import ResultSpool
from cellarena.arena.ladder.store.backends import _GAME_LOCK_CLASS as GAME_LOCK_CLASS
from cellarena.arena.ladder.store.backends import _LOCK_CLASS as LOCK_CLASS
from cellarena.arena.ladder.store.backends import PostgresBackend, game_lock_key
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol
from cellarena.server.play.match import TickSettings
from cellarena.server.web.serving import bind

#: How soon after the database is back the ladder must be playing again: it tries every 2 s at most
#: (docs/ladder.md); the rest is margin for a busy machine.
BACK_WITHIN = 15.0


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone: the test stops and starts it."""
    why = postgres_missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; under CI the outage must be tested on a real PostgreSQL", pytrace=False)
        pytest.skip(f"{why}; the outage tests need it")
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def open_pg_ladder(nursery: trio.Nursery, tmp_path: Path, url: str, ticks: int) -> Ladder:
    store = LadderStore(url)
    tokens = {name: store.add_bot(name, "rezzo")[1].secret for name in ("alice", "bob", "carol")}
    config = LadderConfig(
        "rezzo",
        {"map": "duel", "max_ticks": ticks},
        map_key="map",
        maps=("duel",),
        settings=TickSettings(tick_rate=20.0, budget_ms=40, reconnect_grace=5.0),
        port=0,
        rules=LadderRules(match_every=0.02),
        replay_dir=tmp_path / "replays",
        spool_dir=tmp_path / "pending-results",
    )
    (tmp_path / "replays").mkdir()
    lobby, seating = build(store, config)
    prepare(store, config, seating.results.spool)
    await nursery.start(lobby.serve)
    return Ladder(lobby, seating, store, tokens)


async def get_health(port: int) -> tuple[int, dict[str, Any]]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /health HTTP/1.1\r\nHost: ladder\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := await stream.receive_some():
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def server_lock_holders(server: PostgresServer) -> list[str]:
    with server.admin() as admin:
        rows = admin.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.objid = 2 AND l.granted"
        ).fetchall()
    return [str(name) for (name,) in rows]


# Real time: asserts play resumes within 15 s of real time of the database's return.
@pytest.mark.realtime
async def test_a_database_outage_mid_match_loses_no_result_and_bots_play_again(
    nursery: trio.Nursery, tmp_path: Path, own_postgres: PostgresServer
) -> None:
    url = own_postgres.create_database()
    # 6 s at 20 Hz: the ladder sees the outage within half a second of it (measured), so it begins
    # well inside the match; the realtime phase has the machine to itself.
    ladder = await open_pg_ladder(nursery, tmp_path, url, ticks=120)
    pages = LadderStore(url, reconnect_every=0.1)  # as `ladder web` opens it
    sock = bind("127.0.0.1", 0)
    health_port = sock.getsockname()[1]
    nursery.start_soon(serve_health, ladder.seating, sock)
    await wait_for(lambda: server_lock_holders(own_postgres) != [])
    assert (await get_health(health_port))[0] == 200

    ends: list[dict[str, Any]] = []

    async def play(client: Client) -> None:
        ends.append((await play_one(client))[-1])

    welcomed_again: list[dict[str, Any]] = []

    async def alice_drops_during_the_outage(client: Client) -> None:
        """Plays until the outage is seen, hangs up, and comes back to its seat with its token."""
        assert (await client.recv(timeout=30) or {}).get("type") == "welcome"
        while (msg := await client.recv(timeout=30)) is not None and msg["type"] == "tick":
            if not ladder.seating.database.up:
                await client.stream.aclose()
                break
            await client.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
        seen = await play_one(await join(ladder, "alice"))
        welcomed_again.append(seen[0])
        ends.append(seen[-1])

    nursery.start_soon(alice_drops_during_the_outage, await join(ladder, "alice"))
    nursery.start_soon(play, await join(ladder, "bob"))
    await wait_for(lambda: bool(ladder.seating.starter.live))
    await trio.to_thread.run_sync(own_postgres.pause)  # mid-match

    await _while_it_is_down(ladder, pages, health_port, ends, welcomed_again)

    await trio.to_thread.run_sync(own_postgres.resume)
    back = trio.current_time()
    await wait_for(lambda: ladder.seating.database.up, timeout=BACK_WITHIN)
    await wait_for(
        lambda: ladder.seating.results.spool is not None and len(ladder.seating.results.spool) == 0
    )
    (match,) = await trio.to_thread.run_sync(ladder.store.matches, "rezzo")
    assert match.status == "finished" and match.ticks == 120  # the result is there, whole
    assert not any(s.forfeit for s in match.seats)
    await wait_for(lambda: _answers(pages))  # and the pages read again
    status, body = await get_health(health_port)
    assert status == 200 and body["database"]["state"] == "up" and body["pending_results"] == 0
    # The one-server lock is this ladder's again, on its new session.
    holders = await trio.to_thread.run_sync(server_lock_holders, own_postgres)
    assert len(holders) == 1 and holders[0].startswith("cellarena-ladder")

    ends.clear()  # and the bots play again, within seconds of the database's return
    nursery.start_soon(play, await join(ladder, "alice"))
    nursery.start_soon(play, await join(ladder, "carol"))
    await wait_for(lambda: bool(ladder.seating.starter.live), timeout=BACK_WITHIN)
    assert trio.current_time() - back < BACK_WITHIN
    # Written down as running in the database (the match is under way; no need to play it out).
    assert [m.status for m in ladder.store.matches("rezzo")] == ["running", "finished"]
    await trio.to_thread.run_sync(assert_consistent, url, "rezzo")
    ladder.store.close()
    pages.close()


async def _while_it_is_down(
    ladder: Any,
    pages: LadderStore,
    health_port: int,
    ends: list[dict[str, Any]],
    welcomed_again: list[dict[str, Any]],
) -> None:
    """The outage as the pages, /health and a new bot see it; the match plays on to its end all the
    same, and its result waits on disk."""
    await wait_for(lambda: not ladder.seating.database.up)
    with pytest.raises(LadderStoreError):
        await trio.to_thread.run_sync(pages.standings, "rezzo")
    status, body = await get_health(health_port)
    assert status == 503 and body["database"]["state"] == "down" and body["status"] == "degraded"
    assert body["database"]["where"] == ladder.store.where and ladder.store.where in body["database"]["error"]
    refused = await join(ladder, "carol")
    msg = await refused.expect_error(protocol.SHUTDOWN)  # deployed SDKs come back later on it
    assert "database" in msg["message"] and protocol.SHUTDOWN in protocol.RETRY_LATER
    # The match plays to its end all the same; its result waits on disk.
    await wait_for(lambda: len(ends) == 2, timeout=60)
    assert sorted(e["type"] for e in ends) == ["end", "end"]
    assert [m["type"] for m in welcomed_again] == ["welcome"]  # back to its seat without the database
    await wait_for(
        lambda: ladder.seating.results.spool is not None and len(ladder.seating.results.spool) == 1
    )
    assert (await get_health(health_port))[1]["pending_results"] == 1


def _answers(store: LadderStore) -> bool:
    try:
        return len(store.standings("rezzo")) == 3
    except LadderStoreError:
        return False


class _Quiet:
    async def on_changes(self, changes: list[Change]) -> None:
        pass

    async def on_back(self) -> None:
        pass


def _backend(store: LadderStore) -> PostgresBackend:
    backend = store.database.backend
    assert isinstance(backend, PostgresBackend)
    return backend


def _kill_session(server: PostgresServer, application_name: str) -> None:
    with server.admin() as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        )


async def test_a_ladder_stops_if_another_server_took_the_database_meanwhile(
    postgres_server: PostgresServer,
) -> None:
    import psycopg

    own_postgres = postgres_server  # this test ends sessions, never the server
    url = own_postgres.create_database()
    store = LadderStore(url)
    store.claim_server()
    name = _backend(store)._session_name
    _kill_session(own_postgres, name)  # a network drop: the lock goes with the session
    other = psycopg.connect(url, autocommit=True, application_name="another ladder")
    other.execute("SELECT pg_advisory_lock(%s, 2)", (LOCK_CLASS,))  # another server claims it meanwhile
    watch = DatabaseWatch(store, every=0.05)
    with pytest.raises(ServerClaimLostError, match="another ladder server took the database"):
        with trio.fail_after(30):
            await watch.run(_Quiet())
    other.close()
    store.close()


async def test_after_a_reconnect_the_lock_of_its_own_dead_session_is_taken_back(
    postgres_server: PostgresServer,
) -> None:
    """A network drop that PostgreSQL has not noticed yet leaves the old session holding the lock: the
    ladder recognises its own session by name, ends it, and takes the lock again."""
    import psycopg

    own_postgres = postgres_server
    url = own_postgres.create_database()
    store = LadderStore(url)
    store.claim_server()
    name = _backend(store)._session_name
    _kill_session(own_postgres, name)
    ghost = psycopg.connect(url, autocommit=True, application_name=name)  # the session not yet gone
    ghost.execute("SELECT pg_advisory_lock(%s, 2)", (LOCK_CLASS,))
    with pytest.raises(LadderStoreError):
        store.last_change()  # the first call finds the connection lost...
    with pytest.raises(LadderStoreError, match="reconnects by itself"):
        store.last_change()  # ...and the next fail fast until it reconnects
    store.reconnect()
    assert ghost.closed or ghost.broken or _is_dead(ghost)
    assert server_lock_holders(own_postgres) == [name]
    assert store.last_change() == 0
    store.close()


async def test_a_server_per_game_takes_its_locks_back_beside_another_games_server(
    postgres_server: PostgresServer,
) -> None:
    """After a reconnect a game's server takes back the database's lock, shared with another game's
    server (another process), and its game's lock from its own dead session; a server of its game
    that claimed it meanwhile stops it."""
    import psycopg

    own_postgres = postgres_server
    url = own_postgres.create_database()
    cata = psycopg.connect(url, autocommit=True, application_name="cata's ladder server")
    cata.execute("SELECT pg_advisory_lock_shared(%s, 2)", (LOCK_CLASS,))
    cata.execute("SELECT pg_advisory_lock(%s, %s)", (GAME_LOCK_CLASS, game_lock_key("cata")))
    store = LadderStore(url)
    store.claim_server("rezzo")
    name = _backend(store)._session_name
    _kill_session(own_postgres, name)
    ghost = psycopg.connect(url, autocommit=True, application_name=name)  # the session not yet gone
    ghost.execute("SELECT pg_advisory_lock(%s, %s)", (GAME_LOCK_CLASS, game_lock_key("rezzo")))
    with pytest.raises(LadderStoreError):
        store.last_change()
    store.reconnect()
    assert _is_dead(ghost) and not _is_dead(cata)
    assert sorted(server_lock_holders(own_postgres)) == sorted([name, "cata's ladder server"])
    store.close()

    store = LadderStore(url)
    store.claim_server("rezzo")
    _kill_session(own_postgres, _backend(store)._session_name)
    other = psycopg.connect(url, autocommit=True, application_name="another rezzo server")
    other.execute("SELECT pg_advisory_lock(%s, %s)", (GAME_LOCK_CLASS, game_lock_key("rezzo")))
    with pytest.raises(LadderStoreError):
        store.last_change()
    with pytest.raises(ServerClaimLostError, match="another ladder server took the database"):
        store.reconnect()
    other.close()
    cata.close()
    store.close()


def _is_dead(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1")
    except Exception:
        return True
    return False


def test_results_kept_on_disk_are_written_at_start_before_anything_is_voided(
    ladder_db: str, tmp_path: Path
) -> None:
    store = LadderStore(ladder_db)
    bots = [store.add_bot(name, "rezzo")[0] for name in ("alice", "bob")]
    kept = store.begin_match("rezzo", "duel", 1, [b.id for b in bots])
    cut = store.begin_match("rezzo", "duel", 2, [b.id for b in bots])
    spool = ResultSpool(tmp_path / "pending-results")
    spool.put(kept, [SeatResult(rank=2), SeatResult(rank=1)], reason="won", ticks=50, replay=None)
    (tmp_path / "pending-results" / "000000099-garbage.json").write_text("{not json")
    store.close()

    store = LadderStore(ladder_db)  # the next start
    config = LadderConfig("rezzo", {"map": "duel"}, map_key="map", maps=("duel",), spool_dir=spool.folder)
    prepare(store, config, ResultSpool(spool.folder))
    kept_match, cut_match = store.match(kept), store.match(cut)
    assert kept_match is not None and kept_match.status == "finished" and kept_match.winner == "bob"
    assert cut_match is not None and cut_match.status == "void"
    assert spool.pending() == []  # written, and the garbage moved aside, named
    assert (tmp_path / "pending-results" / "000000099-garbage.json.unreadable").exists()
    store.close()
    assert_consistent(ladder_db, "rezzo")


def test_a_servers_start_writes_its_own_games_results_kept_by_a_ladder_from_before_games(
    ladder_db: str, tmp_path: Path
) -> None:
    """Before a server per game, results waited in pending-results/ itself; now each game's wait in
    pending-results/GAME. A start writes its game's from both, and leaves the other game's matches
    (and their kept results) to that game's server."""
    store = LadderStore(ladder_db)
    rezzo = [store.add_bot(name, "rezzo")[0] for name in ("alice", "bob")]
    cata = [store.add_bot(name, "cata")[0] for name in ("carol", "dave")]
    old_rezzo = store.begin_match("rezzo", "duel", 1, [b.id for b in rezzo])
    old_cata = store.begin_match("cata", None, 1, [b.id for b in cata])
    new_rezzo = store.begin_match("rezzo", "duel", 2, [b.id for b in rezzo])
    cut_cata = store.begin_match("cata", None, 2, [b.id for b in cata])
    legacy = ResultSpool(tmp_path / "pending-results")
    for match in (old_rezzo, old_cata):
        legacy.put(match, [SeatResult(rank=2), SeatResult(rank=1)], reason="won", ticks=5, replay=None)
    own = ResultSpool(tmp_path / "pending-results" / "rezzo")
    own.put(new_rezzo, [SeatResult(rank=1), SeatResult(rank=2)], reason="won", ticks=5, replay=None)
    store.close()

    store = LadderStore(ladder_db)  # rezzo's server starts
    config = LadderConfig(
        "rezzo",
        {"map": "duel"},
        map_key="map",
        maps=("duel",),
        spool_dir=own.folder,
        legacy_spool_dir=legacy.folder,
    )
    prepare(store, config, ResultSpool(own.folder))
    status = {m: (found.status if (found := store.match(m)) else None) for m in (old_rezzo, new_rezzo)}
    assert status == {old_rezzo: "finished", new_rezzo: "finished"}
    assert own.pending() == [] and [p.name for p in legacy.pending()] == [f"000000002-match-{old_cata}.json"]
    for untouched in (old_cata, cut_cata):  # cata's server writes its result and voids its match
        found = store.match(untouched)
        assert found is not None and found.status == "running"
    store.close()


def test_a_start_that_cannot_write_the_kept_results_voids_nothing(
    ladder_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LadderStore(ladder_db)
    bots = [store.add_bot(name, "rezzo")[0] for name in ("alice", "bob")]
    kept = store.begin_match("rezzo", "duel", 1, [b.id for b in bots])
    spool = ResultSpool(tmp_path / "pending-results")
    spool.put(kept, [SeatResult(rank=1), SeatResult(rank=2)], reason="won", ticks=50, replay=None)

    def down(*_args: Any, **_kw: Any) -> Any:
        raise LadderStoreError(f"{ladder_db}: the database cannot be reached")

    monkeypatch.setattr(store, "finish_match", down)
    config = LadderConfig("rezzo", {"map": "duel"}, map_key="map", maps=("duel",), spool_dir=spool.folder)
    with pytest.raises(LadderStoreError, match="must be written before anything is voided"):
        prepare(store, config, spool)
    match = store.match(kept)
    assert match is not None and match.status == "running" and len(spool) == 1
    store.close()
