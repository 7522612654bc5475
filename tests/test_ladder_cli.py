"""`cellarena ladder`: bots and their tokens from the command line, and a served ladder that survives
SIGKILL with its standings whole. `ladder serve` runs as a process (signals, ports, restarts); the
short commands and the refusals of `serve` run in this process (a child process costs a second of
imports for what only the command's output shows)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from cellarena_cli import CLI, ROOT, refused, run_here
from game_servers import WITHOUT_NUMBA
from postgres_server import PostgresServer
from wire_client import Client

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol


def ladder(folder: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    """`cellarena ladder --dir FOLDER ARGS` in this process (`run_here`)."""
    where = ["--dir", str(folder)] + (["--db", db] if db else [])
    return run_here("ladder", *where, *args)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """The ladder's database for a served ladder: None for the SQLite file in its folder, or a new
    PostgreSQL database (``--db``), so that the served ladder is tested on both, end to end."""
    if request.param == "sqlite":
        return None
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


def open_store(folder: Path, db: str | None) -> LadderStore:
    return LadderStore(db or folder / "ladder.sqlite")


def test_a_token_is_printed_once_and_stored_only_as_a_hash(tmp_path: Path) -> None:
    added = ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert re.fullmatch(r"cla_[A-Za-z0-9_-]{43}", token)  # stdout is the token alone: easy to pipe
    assert "shown once" in added.stderr
    listed = ladder(tmp_path, "bot", "list")
    assert "alice" in listed.stdout and "rezzo" in listed.stdout and token not in listed.stdout
    as_json = json.loads(ladder(tmp_path, "bot", "list", "--json").stdout)
    assert [b["name"] for b in as_json["bots"]] == ["alice"]
    assert token.encode() not in (tmp_path / "ladder.sqlite").read_bytes()
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        alice = store.authenticate(token)
        assert alice is not None and alice.name == "alice"


def test_rotate_and_revoke(tmp_path: Path) -> None:
    old = ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo").stdout.strip()
    new = ladder(tmp_path, "bot", "rotate", "alice").stdout.strip()
    assert new.startswith("cla_") and new != old
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        assert store.authenticate(old) is None and store.authenticate(new) is not None
    assert ladder(tmp_path, "bot", "revoke", "alice").returncode == 0
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        assert store.authenticate(new) is None
    assert "revoked" in ladder(tmp_path, "bot", "list").stdout


def test_bad_arguments_say_what_is_wrong(tmp_path: Path) -> None:
    # The refusals run in this process (see cellarena_cli.refused); the others as a process.
    wrong_game = refused("ladder", "--dir", str(tmp_path), "bot", "add", "alice", "--game", "chess")
    assert "unknown game 'chess'" in wrong_game.stderr
    assert "rezzo" in wrong_game.stderr  # names the known games
    nobody = refused("ladder", "--dir", str(tmp_path), "bot", "revoke", "nobody")
    assert "nobody" in nobody.stderr and "NAME" in nobody.stderr
    ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo")
    twice = ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo")
    assert twice.returncode == 1 and "already a bot named 'alice'" in twice.stderr
    bad_db = refused("ladder", "--db", "mysql://x", "bot", "list")
    assert "--db" in bad_db.stderr
    bad_map = refused(
        "ladder", "--dir", str(tmp_path), "serve", "rezzo", "--maps", "duel,nowhere", "--port", "0"
    )
    assert "nowhere" in bad_map.stderr


# ------------------------------------------------------------------------------------------ serve
LISTENING = r"on 127\.0\.0\.1:(\d+)"
HEALTH = r"health at (http://127\.0\.0\.1:\d+/health)"


def serve(folder: Path, *extra: str, db: str | None = None) -> tuple[subprocess.Popen[str], int]:
    """`cellarena ladder serve rezzo` on a free port: the process and its port."""
    proc, (port,) = serve_saying((LISTENING,), folder, *extra, db=db)
    return proc, int(port)


def serve_saying(
    said: tuple[str, ...], folder: Path, *extra: str, db: str | None = None
) -> tuple[subprocess.Popen[str], list[str]]:
    """`cellarena ladder serve rezzo` on a free port, once its stderr has matched each pattern of
    ``said``: the process and each pattern's first group."""
    pacing = ["--max-ticks", "30", "--tick-rate", "30", "--budget-ms", "25", "--grace", "0"]
    pacing += ["--starve-after", "0.1", *extra]  # paired again at once, whatever a win did to ratings
    where = ["--dir", str(folder)] + (["--db", db] if db else [])
    proc = subprocess.Popen(
        [*CLI, "ladder", *where, "serve", "rezzo", "--port", "0", *pacing],
        cwd=ROOT,
        env={**os.environ, **WITHOUT_NUMBA},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines = []
    found: dict[str, str] = {}
    for line in proc.stderr:
        lines.append(line)
        for pattern in said:
            if pattern not in found and (match := re.search(pattern, line)):
                found[pattern] = match.group(1)
        if len(found) == len(said):
            return proc, [found[p] for p in said]
    raise AssertionError(f"the ladder did not start: {''.join(lines)}")


async def keep_playing(port: int, name: str, token: str, ends: list[dict[str, Any]]) -> None:
    """A ladder bot: join, answer every tick, and join again after each end, until the server is gone
    (it no longer takes a connection). A match may end while an answer is on its way, its connection
    closed behind the ``end`` (a full run saw the answer's send fail): that is joined again too."""
    while True:
        try:
            client = await Client.connect(port)
        except OSError:
            return  # the server is gone
        try:
            await client.hello(name, token=token)
            while (msg := await client.recv(timeout=20)) is not None:
                if msg["type"] == "tick":
                    await client.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
                elif msg["type"] == "end":
                    ends.append(msg)
                    break
                elif msg["type"] == "error":
                    break
        except (OSError, trio.BrokenResourceError):
            pass  # closed under us: join again, or find the server gone


async def test_a_ladder_killed_mid_match_restarts_with_identical_standings(
    tmp_path: Path, database: str | None
) -> None:
    tokens = {
        n: ladder(tmp_path, "bot", "add", n, "--game", "rezzo", db=database).stdout.strip()
        for n in ("a", "b")
    }
    proc, port = serve(tmp_path, db=database)
    ends: list[dict[str, Any]] = []
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as bots:
                for name, token in tokens.items():
                    bots.start_soon(keep_playing, port, name, token, ends)
                while len(ends) < 4:  # two whole matches, each ended for both bots
                    await trio.sleep(0.01)
                await trio.sleep(0.3)  # the third is under way
                os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    with open_store(tmp_path, database) as store:
        before = [s.to_json() for s in store.standings("rezzo")]
        statuses = sorted(m.status for m in store.matches("rezzo"))
    assert statuses.count("finished") >= 2 and statuses.count("running") == 1
    table = ladder(tmp_path, "standings", "rezzo", "--json", db=database)
    assert json.loads(table.stdout)["standings"] == before
    if database:
        assert not (tmp_path / "ladder.sqlite").exists()  # the data went to PostgreSQL alone

    proc, port = serve(
        tmp_path, db=database
    )  # start again: the match cut short is void, nothing else changes
    try:
        with open_store(tmp_path, database) as store:
            after = [s.to_json() for s in store.standings("rezzo")]
            matches = store.matches("rezzo")
        assert after == before
        assert sorted(m.status for m in matches) == [s if s != "running" else "void" for s in statuses]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


async def test_a_bot_alone_plays_a_house_bot_and_serve_answers_health_on_its_own_port(tmp_path: Path) -> None:
    token = ladder(tmp_path, "bot", "add", "loner", "--game", "rezzo").stdout.strip()
    house = ladder(
        tmp_path, "house", "add", "builder", "python example_bots/rezzo/builder.py", "--game", "rezzo"
    )
    assert house.returncode == 0, house.stderr
    # The same process answers /health on its own port (one ladder process for both).
    proc, (port_text, health) = serve_saying(
        (LISTENING, HEALTH), tmp_path, "--house-after", "0.2", "--health-port", "0"
    )
    port = int(port_text)
    ends: list[dict[str, Any]] = []
    try:
        body = await trio.to_thread.run_sync(read_health, health)
        assert body["status"] == "ok" and body["database"]["state"] == "up"
        assert body["database"]["where"].endswith("ladder.sqlite") and body["pending_results"] == 0
        with trio.fail_after(60):
            async with trio.open_nursery() as bots:
                bots.start_soon(keep_playing, port, "loner", token, ends)
                while len(ends) < 2:  # two matches, each against a house bot started for it
                    await trio.sleep(0.01)
                bots.cancel_scope.cancel()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
        assert len(finished) >= 2
        assert all({s.bot for s in m.seats} == {"loner", "builder"} for m in finished)
        assert {s.bot: s.matches for s in store.standings("rezzo")}["builder"] >= 2
    assert (tmp_path / "logs" / "house-builder.log").exists()


def read_health(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        body: dict[str, Any] = json.loads(answer.read())
        return body


# ------------------------------------------------------------------------------------------ replays
def test_an_emptied_database_beside_old_replays_is_refused_and_nothing_is_overwritten(tmp_path: Path) -> None:
    """The issue's case: `: > ladder.sqlite` beside the replays of the ladder it was. Before, the empty
    file was taken for a new ladder and its first match overwrote ladder-000001.replay."""
    replays = tmp_path / "replays"
    replays.mkdir()
    old = {n: f"the old ladder's match {n}".encode() for n in (1, 2, 7)}
    for n, data in old.items():
        (replays / f"ladder-{n:06d}.replay").write_bytes(data)
    (tmp_path / "ladder.sqlite").write_bytes(b"")
    run = ladder(tmp_path, "serve", "rezzo", "--port", "0")
    assert run.returncode == 1, run.stderr
    assert "holds no match at all" in run.stderr and "ladder-000007.replay" in run.stderr
    assert "Restore the database" in run.stderr and "Traceback" not in run.stderr
    assert {n: (replays / f"ladder-{n:06d}.replay").read_bytes() for n in old} == old


def test_a_database_older_than_its_replays_is_refused(tmp_path: Path, database: str | None) -> None:
    with open_store(tmp_path, database) as store:
        bots = [store.add_bot(n, "rezzo")[0] for n in ("a", "b")]
        store.begin_match("rezzo", "duel", 1, [b.id for b in bots])  # a backup that knows match 1
    replays = tmp_path / "replays"
    replays.mkdir()
    for n in (1, 2, 3):
        (replays / f"ladder-{n:06d}.replay").write_bytes(b"x")
    run = ladder(tmp_path, "serve", "rezzo", "--port", "0", db=database)
    assert run.returncode == 1, run.stderr
    assert "goes up to match 1" in run.stderr and "ladder-000003.replay" in run.stderr
    with open_store(tmp_path, database) as store:
        match = store.match(1)
        assert match is not None and match.status == "running"  # refused before voiding anything


@pytest.mark.parametrize(
    "content",
    [b"\x00garbage that is no database" * 100, b"SQLite format 3\x00" + b"\x01" * 200],
    ids=["garbage", "half-written"],
)
def test_a_garbage_or_half_written_database_is_refused_and_left_as_it_is(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "ladder.sqlite").write_bytes(content)
    run = ladder(tmp_path, "serve", "rezzo", "--port", "0")
    assert run.returncode == 1 and "ladder.sqlite" in run.stderr and "Traceback" not in run.stderr
    assert (tmp_path / "ladder.sqlite").read_bytes() == content
