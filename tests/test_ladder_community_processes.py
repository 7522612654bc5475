"""The community ladder across real processes, on SQLite and on PostgreSQL: `ladder serve` (with
``/metrics`` on its health port), `ladder web` (stats, challenges and resume over its HTTP API with a
bot's token), the host's commands, and bots over TCP. What one process does reaches the others
through the database alone. The host's commands run in the test's process (click's runner): they
reach the served ladder through the database just the same, and tests/test_ladder_cli.py runs them
as processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio
from cellarena_cli import CLI, ROOT, here
from click.testing import Result
from game_servers import WITHOUT_NUMBA
from postgres_server import PostgresServer
from wire_client import Client

from cellarena.sdk import protocol


def start(args: list[str], pattern: str) -> tuple[subprocess.Popen[str], re.Match[str]]:
    """Start a `cellarena` process and read its stderr until ``pattern`` says it is ready."""
    env = {**os.environ, **WITHOUT_NUMBA}
    proc = subprocess.Popen(
        [*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if found := re.search(pattern, line):
            return proc, found
    raise AssertionError(f"{args[:6]} did not start: {''.join(lines)}")


def host(folder: Path, *args: str, db: str | None = None) -> Result:
    """`cellarena ladder --dir FOLDER [--db DB] ARGS` in this process: a child process would add a
    second of imports, and the command reaches the served ladder through the database either way."""
    where = ["--dir", str(folder)] + (["--db", db] if db else [])
    return here("ladder", *where, *args)


def stop(*procs: subprocess.Popen[Any], timeout: float = 30) -> None:
    """SIGTERM to each of ``procs`` still running, then wait for each, killing one that outlasts
    ``timeout`` seconds (all are told first, so their stops overlap)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def http(url: str, token: str | None = None, body: dict[str, Any] | None = None) -> tuple[int, str]:
    """(status, body text) of a GET, or of a POST of ``body`` as JSON, with the bot's token if given."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers=headers, method="POST" if body is not None else "GET"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"no {name} in /metrics:\n{text}"
    return float(found.group(1))


async def bot(port: int, name: str, token: str, ends: list[str], refusals: list[str]) -> None:
    """A ladder bot that plays on until the ladder stops it with a code that is not "not now"."""
    while True:
        client = await Client.connect(port)
        try:
            await client.hello(name, token=token)
            while (msg := await client.recv(timeout=30)) is not None:
                if msg["type"] == "tick":
                    await client.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
                elif msg["type"] == "end":
                    ends.append(name)
                    break
                elif msg["type"] == "error":
                    refusals.append(msg["message"])
                    if msg["code"] not in protocol.RETRY_LATER:
                        return
                    await trio.sleep(0.2)
                    break
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the server closed first (after its error frame, read on the next try): connect again
        finally:
            await client.stream.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """None (the folder's SQLite file), or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


async def wait_until(condition: Any, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not await trio.to_thread.run_sync(condition):
            await trio.sleep(0.1)


async def _metrics_show_it_all(health: str) -> None:
    """The host sees it all in /metrics."""
    status, text = await trio.to_thread.run_sync(http, f"{health}/metrics")
    assert status == 200 and metric(text, "cellarena_ladder_matches_ended_total") >= 2
    assert metric(text, "cellarena_ladder_database_up") == 1
    assert metric(text, "cellarena_ladder_bots_connected") >= 1
    assert 'cellarena_ladder_queue_wait_seconds{quantile="0.9"}' in text


async def _stats_as_page_and_json(site: str) -> None:
    """Statistics, as a page and as JSON. A bot has its `end` before the server has stored the
    match, and the pages are another process reading the database: they catch up."""

    def two_stored() -> bool:
        status, body = http(f"{site}/api/bots/alice/stats")
        assert status == 200, body
        return json.loads(body)["head_to_head"].get("bob", {}).get("matches", 0) >= 2

    await wait_until(two_stored)
    status, body = await trio.to_thread.run_sync(http, f"{site}/api/bots/alice/stats")
    stats = json.loads(body)
    assert status == 200 and stats["head_to_head"]["bob"]["matches"] >= 2
    assert stats["maps"] and stats["seats"] and stats["rating"][-1]["sigma"] > 0
    status, page = await trio.to_thread.run_sync(http, f"{site}/bots/alice/stats")
    assert status == 200 and "Head to head" in page and "bob" in page
    status, body = await trio.to_thread.run_sync(http, f"{site}/api/bots/alice")
    assert json.loads(body)["stats"] == "/api/bots/alice/stats" and json.loads(body)["paused"] is None
    status, page = await trio.to_thread.run_sync(http, f"{site}/bots/alice")
    assert 'href="/bots/alice/stats"' in page


async def _challenges_by_token(site: str, tokens: dict[str, str]) -> None:
    """Challenges over the API with alice's token, and the quota's refusals."""
    # A challenge over the API with alice's token; the server (another process) plays it.
    status, body = await trio.to_thread.run_sync(
        http, f"{site}/api/challenges", tokens["alice"], {"opponent": "bob"}
    )
    assert status == 201, body
    challenge = json.loads(body)["id"]

    def played() -> bool:
        listed = json.loads(http(f"{site}/api/bots/alice/challenges")[1])["challenges"]
        return any(c["id"] == challenge and c["status"] == "played" for c in listed)

    await wait_until(played)
    # A storm: the quota (3 a day) refuses it, saying so.
    answers = [
        await trio.to_thread.run_sync(http, f"{site}/api/challenges", tokens["alice"], {"opponent": o})
        for o in ("carol", "carol", "dave", "erin", "erin")
    ]
    assert [a[0] for a in answers] == [201, 409, 201, 429, 429]
    assert "already has a challenge against carol" in answers[1][1]
    assert "--challenges-per-day 3" in answers[3][1]


async def test_serve_web_and_commands_share_one_community_ladder(
    tmp_path: Path, database: str | None
) -> None:
    tokens = {}
    for name in ("alice", "bob", "carol", "dave", "erin"):
        added = host(tmp_path, "bot", "add", name, "--game", "rezzo", "--json", db=database)
        assert added.exit_code == 0, added.output
        tokens[name] = json.loads(added.stdout)["token"]
    where = ["ladder", "--dir", str(tmp_path)] + (["--db", database] if database else [])
    pacing = ["--max-ticks", "20", "--tick-rate", "40", "--budget-ms", "20", "--grace", "0"]
    serve, ready = start(
        [*where, "serve", "rezzo", "--port", "0", "--health-port", "0", *pacing, "--challenges-per-day", "3"],
        r"on 127\.0\.0\.1:(\d+).*health at (http://127\.0\.0\.1:\d+)/health",
    )
    port, health = int(ready.group(1)), ready.group(2)
    web, pages = start([*where, "web", "rezzo", "--port", "0"], r"pages at (http://127\.0\.0\.1:\d+)")
    site = pages.group(1)
    ends: list[str] = []
    refusals: dict[str, list[str]] = {"alice": [], "bob": []}
    try:
        async with trio.open_nursery() as nursery:
            for name in ("alice", "bob"):
                nursery.start_soon(bot, port, name, tokens[name], ends, refusals[name])
            await wait_until(lambda: ends.count("alice") >= 2)

            await _metrics_show_it_all(health)
            await _stats_as_page_and_json(site)
            await _challenges_by_token(site, tokens)

            # A token acts for its own bot only; bob paused by the host is stopped, then resumes himself.
            status, body = await trio.to_thread.run_sync(
                http, f"{site}/api/bots/bob/resume", tokens["alice"], {}
            )
            assert status == 403 and "a token acts for its own bot" in body
            paused = await trio.to_thread.run_sync(
                lambda: host(tmp_path, "pause", "bob", "--reason", "leaks sockets", db=database)
            )  # in a thread: the bots, tasks of this process, play on meanwhile
            assert paused.exit_code == 0, paused.output
            await wait_until(lambda: any("leaks sockets" in r for r in refusals["bob"]))

            def pauses() -> float:
                return metric(http(f"{health}/metrics")[1], "cellarena_ladder_pauses_total")

            await wait_until(lambda: pauses() == 1)
            status, body = await trio.to_thread.run_sync(
                http, f"{site}/api/bots/bob/resume", tokens["bob"], {}
            )
            assert status == 200 and json.loads(body)["resumed"] is True
            before = ends.count("bob")
            nursery.start_soon(bot, port, "bob", tokens["bob"], ends, refusals["bob"])
            await wait_until(lambda: ends.count("bob") > before)
            nursery.cancel_scope.cancel()
    finally:
        stop(web)
        stop(serve)
    log = host(tmp_path, "audit", "--json", db=database)
    entries = json.loads(log.stdout)["audit"]
    assert [(e["action"], e["bot"], e["actor"].endswith("(api)")) for e in entries[:2]] == [
        ("resume", "bob", True),
        ("pause", "bob", False),
    ]
