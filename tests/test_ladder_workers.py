"""A ladder that plays its matches in worker processes on this machine (`ladder serve --workers N`).

The in-process tests drive a ladder (`wiring.build`) whose starter hands matches to `LocalWorkers`
(two real worker processes) and bots written from docs/protocol.md; the last ones run `cellarena
ladder serve --workers 2` with the SDK's example bots, and check what the command refuses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from bot_processes import alive
from cellarena_cli import refused
from certificates import pem_files
from game_servers import PACING, Process, add_ladder_bot, ladder_matches, ladder_serve, start, wait_for
from wire_client import Client

from cellarena.arena.ladder.hosting.worker_pool import (
    LocalWorkers,
    WorkerStartError,
    parse_workers,
    usable_cores,
)
from cellarena.arena.ladder.hosting.worker_process import WorkerSetup
from cellarena.arena.ladder.ops.metrics import metrics_text
from cellarena.arena.ladder.ops.wiring import LadderConfig, build
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.seating import LadderSeating
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol
from cellarena.server.net.tls import server_context
from cellarena.server.play.lobby import Lobby
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import read_replay, verify

FAST = TickSettings(fast=True, budget_ms=1000, reconnect_grace=5.0)
#: Paced, so that a match is still under way when a test kills its worker.
PACED = TickSettings(tick_rate=15.0, budget_ms=60, reconnect_grace=5.0)
CONFIG = {"map": "duel", "max_ticks": 20}


class Ladder(SimpleNamespace):
    lobby: Lobby
    seating: LadderSeating
    store: LadderStore
    tokens: dict[str, str]
    workers: LocalWorkers


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def open_ladder(
    nursery: trio.Nursery,
    tmp_path: Path,
    *,
    settings: TickSettings = FAST,
    config: dict[str, Any] = CONFIG,
    tls: tuple[Path, Path] | None = None,
    time_limit: float = 3600.0,
    workers: int = 2,
) -> Ladder:
    """A ladder of two bots, alice and bob, whose matches go to ``workers`` worker processes (two,
    or one where a test is about a match, not about the pool: each costs a process's start); with
    ``tls`` (chain, key), the ladder and its workers serve TLS."""
    store = LadderStore(tmp_path / "ladder.sqlite")
    store.void_running()
    tokens = {name: store.add_bot(name, "rezzo")[1].secret for name in ("alice", "bob")}
    (tmp_path / "replays").mkdir()
    ladder_config = LadderConfig(
        "rezzo",
        config,
        map_key="map",
        maps=("duel",),
        settings=settings,
        port=0,
        rules=LadderRules(match_every=0.02),
        replay_dir=tmp_path / "replays",
        tls=None if tls is None else server_context(*tls),
    )
    setup = WorkerSetup(
        "rezzo",
        ladder_config.config_for("duel"),
        settings,
        bind_host="127.0.0.1",
        tls_cert=None if tls is None else str(tls[0]),
        tls_key=None if tls is None else str(tls[1]),
    )
    pool = LocalWorkers(workers, setup, public_host="127.0.0.1", connect_timeout=3.0, time_limit=time_limit)
    await nursery.start(pool.run)
    lobby, seating = build(store, ladder_config, pool)
    await nursery.start(lobby.serve)
    return Ladder(lobby=lobby, seating=seating, store=store, tokens=tokens, workers=pool)


async def join(ladder: Ladder, name: str, *, follows: bool = True) -> Client:
    assert ladder.lobby.port is not None
    client = await Client.connect(ladder.lobby.port)
    accepts = {"accepts": ["redirect"]} if follows else {}
    await client.hello(name, token=ladder.tokens[name], **accepts)
    return client


async def redirected(client: Client) -> dict[str, Any]:
    """The redirect the ladder sends, after which it hangs up."""
    message = await client.recv(timeout=40)
    assert message is not None and message["type"] == "redirect", message
    protocol.check_redirect(message)
    assert await client.recv(timeout=5) is None
    return message


async def go(target: dict[str, Any], name: str) -> Client:
    client = Client(await trio.open_tcp_stream(target["host"], target["port"]))
    await client.hello(name, token=target["token"])
    return client


async def settle(store: LadderStore, count: int, status: str = "finished") -> list[Any]:
    with trio.fail_after(40):
        while len(done := [m for m in store.matches("rezzo") if m.status == status]) < count:
            await trio.sleep(0.05)
    return done


async def play_redirected(ladder: Ladder) -> list[dict[str, Any]]:
    """alice and bob queue, are sent to a worker, and play their match there; their ends."""
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    assert (to_alice["host"], to_alice["port"]) == (to_bob["host"], to_bob["port"])
    ends: list[dict[str, Any]] = []
    async with trio.open_nursery() as n:
        for name, target in (("alice", to_alice), ("bob", to_bob)):

            async def play(name: str = name, target: dict[str, Any] = target) -> None:
                ends.append(await (await go(target, name)).play())

            n.start_soon(play)
    return ends


# ------------------------------------------------------------------------------------- the ladder
async def test_bots_that_follow_redirects_play_in_a_worker(
    nursery: trio.Nursery, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ladder = await open_ladder(nursery, tmp_path)
    pids = ladder.workers.pids()
    assert len(pids) == 2 and os.getpid() not in pids
    ends = await play_redirected(ladder)
    assert sorted(e["ticks"] for e in ends) == [20, 20]
    assert ladder.lobby.matches_started == 0  # nothing was played in the ladder's own lobby
    (match,) = await settle(ladder.store, 1)
    assert [s.bot for s in match.seats] == ["alice", "bob"] and match.ticks == 20
    assert match.replay is not None and verify(read_replay(Path(match.replay))).ok
    assert ladder.seating.starter.playing() == set()
    await play_redirected(ladder)  # and the next one the same way
    assert len(await settle(ladder.store, 2)) == 2
    for secret in ladder.tokens.values():
        assert secret not in caplog.text


async def test_a_bot_that_does_not_follow_redirects_plays_in_the_ladders_process(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ladder = await open_ladder(nursery, tmp_path, workers=1)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob", follows=False)
    async with trio.open_nursery() as n:
        n.start_soon(alice.play)
        n.start_soon(bob.play)
    (match,) = await settle(ladder.store, 1)
    assert match.ticks == 20 and ladder.lobby.matches_started == 1 and not ladder.seating.starter.remote


async def test_a_match_nobody_reaches_is_void(nursery: trio.Nursery, tmp_path: Path) -> None:
    ladder = await open_ladder(nursery, tmp_path, workers=1)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    await redirected(alice)
    await redirected(bob)
    (match,) = await settle(ladder.store, 1, "void")
    assert match.reason == "no bot reached the match host"
    assert ladder.seating.starter.playing() == set()


async def test_a_worker_killed_mid_match_costs_its_match_and_is_started_again(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """SIGKILL of the worker playing a match: that match is void, the bots may queue again at once,
    a new worker process takes the dead one's place, and the next match is played and recorded."""
    # Fast ticks with a 1 s budget: the bots hold the first match by not answering, and the next
    # one, answered at once, is over in a moment.
    ladder = await open_ladder(nursery, tmp_path, config={"map": "duel", "max_ticks": 150})
    before = set(ladder.workers.pids())
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    clients = [await go(to_alice, "alice"), await go(to_bob, "bob")]
    for client in clients:
        while (msg := await client.recv(timeout=10)) is not None and msg["type"] != "welcome":
            pass
    (playing,) = [w for w in ladder.workers.workers if w.pending]
    killed = playing.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    for client in clients:
        with trio.fail_after(10):
            while (await client.recv()) is not None:
                pass  # the worker is gone, and the bots' connections with it
    (match,) = await settle(ladder.store, 1, "void")
    assert "SIGKILL" in (match.reason or "") and "hosted the match" in (match.reason or "")
    assert ladder.seating.starter.playing() == set()
    with trio.fail_after(30):
        while len(ladder.workers.pids()) < 2:
            await trio.sleep(0.05)
    after = set(ladder.workers.pids())
    assert killed not in after and after - before == {playing.pid} and playing.restarts == 1
    assert ladder.workers.folder is not None  # the dead worker's files went with it
    assert sorted(p.name for p in ladder.workers.folder.iterdir()) == sorted(
        f"worker-{w.number}-{w.pid}" for w in ladder.workers.workers
    )
    # The ladder goes on: the next pairing is played in a worker and recorded.
    await play_redirected(ladder)
    (finished,) = await settle(ladder.store, 1, "finished")
    assert finished.replay is not None and verify(read_replay(Path(finished.replay))).ok


async def watch(ladder: Ladder) -> Client:
    assert ladder.lobby.port is not None
    viewer = await Client.connect(ladder.lobby.port)
    await viewer.hello("viewer", role="spectator")
    return viewer


async def watched(viewer: Client) -> list[dict[str, Any]]:
    """Everything a spectator is sent, until the server closes its connection."""
    seen = []
    while (message := await viewer.recv(timeout=30)) is not None:
        seen.append(message)
    return seen


async def test_spectators_of_the_ladders_port_watch_the_matches_in_workers(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A spectator that came before any match waits for the next one, and one that comes during it
    watches it: both on the ladder's own port, though the match is played in a worker."""
    ladder = await open_ladder(
        nursery, tmp_path, settings=PACED, config={"map": "duel", "max_ticks": 45}, workers=1
    )
    early = await watch(ladder)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    clients = [await go(to_alice, "alice"), await go(to_bob, "bob")]
    for client in clients:
        while (msg := await client.recv(timeout=10)) is not None and msg["type"] != "welcome":
            pass
    late = await watch(ladder)
    views: dict[str, list[dict[str, Any]]] = {}
    async with trio.open_nursery() as n:
        for client in clients:
            n.start_soon(client.play)

        async def see(name: str, viewer: Client) -> None:
            views[name] = await watched(viewer)

        n.start_soon(see, "early", early)
        n.start_soon(see, "late", late)
    for name, seen in views.items():
        kinds = [m["type"] for m in seen]
        assert kinds[0] == "welcome" and seen[0]["role"] == "spectator" and "seat" not in seen[0], name
        assert kinds[-1] == "end" and "frame" in kinds, (name, kinds)
        assert seen[-2]["type"] == "frame" and seen[-2]["final"] is True, name
    assert ladder.lobby.matches_started == 0
    (match,) = await settle(ladder.store, 1)
    assert match.ticks == 45


async def test_workers_leave_sigterm_to_their_ladder(nursery: trio.Nursery, tmp_path: Path) -> None:
    """A SIGTERM meant for the whole service (systemd signals every process of a unit) does not stop
    the workers: the ladder stops them once it has stopped taking matches."""
    ladder = await open_ladder(nursery, tmp_path)
    pids = ladder.workers.pids()
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    await play_redirected(ladder)  # in a worker that got the signal
    await settle(ladder.store, 1)
    assert ladder.workers.pids() == pids and all(w.restarts == 0 for w in ladder.workers.workers)


async def test_a_worker_that_cannot_start_stops_the_ladder_before_it_serves() -> None:
    """A worker that dies before it listens (here: a game it does not know) is the ladder's error at
    start-up, said plainly (`ladder serve` prints it and exits 1); no worker is left running."""
    setup = WorkerSetup("nosuchgame", {}, FAST, bind_host="127.0.0.1")
    workers = LocalWorkers(2, setup, public_host="127.0.0.1")
    with pytest.raises(BaseException) as caught:
        async with trio.open_nursery() as n:
            await n.start(workers.run)
    leaf = caught.value
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, WorkerStartError), caught.value
    assert str(leaf).startswith("worker 1 did not start (pid ") and "see the errors above" in str(leaf)
    assert workers.pids() == [] and all(w.process is None for w in workers.workers)


async def test_with_tls_the_workers_serve_the_ladders_certificate(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """The redirect says TLS, the worker serves the ladder's certificate (checked by the bots as the
    ladder's was), and a spectator on the ladder's TLS port watches the match in the worker."""
    ca_file, chain, key = pem_files(tmp_path, "127.0.0.1")
    client_tls = ssl.create_default_context(cafile=str(ca_file))
    ladder = await open_ladder(
        nursery,
        tmp_path,
        settings=PACED,
        config={"map": "duel", "max_ticks": 30},
        tls=(chain, key),
        workers=1,
    )
    assert ladder.lobby.port is not None

    async def open_tls(port: int) -> Client:
        stream = trio.SSLStream(
            await trio.open_tcp_stream("127.0.0.1", port), client_tls, server_hostname="127.0.0.1"
        )
        return Client(stream)  # type: ignore[arg-type]

    viewer = await open_tls(ladder.lobby.port)
    await viewer.hello("viewer", role="spectator")
    queued = {}
    for name in ("alice", "bob"):
        queued[name] = client = await open_tls(ladder.lobby.port)
        await client.hello(name, token=ladder.tokens[name], accepts=["redirect"])
    targets = []
    for name, client in queued.items():
        message = await client.recv(timeout=40)
        assert message is not None and message["type"] == "redirect" and message["tls"] is True, message
        targets.append((name, message))
    ends: list[dict[str, Any]] = []
    async with trio.open_nursery() as n:
        for name, target in targets:

            async def play(name: str = name, target: dict[str, Any] = target) -> None:
                client = await open_tls(target["port"])
                await client.hello(name, token=target["token"])
                ends.append(await client.play())

            n.start_soon(play)
        seen = await watched(viewer)
    assert [e["ticks"] for e in ends] == [30, 30]
    assert seen[0]["type"] == "welcome" and seen[-1]["type"] == "end"
    (match,) = await settle(ladder.store, 1)
    assert match.replay is not None and verify(read_replay(Path(match.replay))).ok


async def test_a_match_past_its_time_limit_is_given_up(nursery: trio.Nursery, tmp_path: Path) -> None:
    """Every match in a worker has a time limit (an hour, as on a cluster): past it, it ends there
    without a result and the ladder voids it. Here the limit is 1 s and the match 150 ticks at 15 Hz."""
    ladder = await open_ladder(
        nursery, tmp_path, settings=PACED, config={"map": "duel", "max_ticks": 150}, time_limit=1.0, workers=1
    )
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    clients = [await go(to_alice, "alice"), await go(to_bob, "bob")]
    # Issue 42: bots in workers were not counted (2 connected while 22 played); both hung up here.
    text = metrics_text(ladder.seating).decode()
    assert "\ncellarena_ladder_bots_connected 2.0\n" in text, text
    assert "\ncellarena_ladder_bots_playing 2.0\n" in text, text
    async with trio.open_nursery() as n:
        for client in clients:

            async def play(client: Client = client) -> None:
                with contextlib.suppress(AssertionError):  # closed mid-match, without an end
                    await client.play()

            n.start_soon(play)
    (match,) = await settle(ladder.store, 1, "void")
    assert match.reason == "it ended without a result"
    assert ladder.workers.pids() and all(w.restarts == 0 for w in ladder.workers.workers)


def test_workers_values() -> None:
    assert parse_workers("1") == 1 and parse_workers(" 4 ") == 4
    assert parse_workers("auto") == parse_workers("AUTO") == usable_cores() >= 1
    refused = (("0", "out of range"), ("-2", "out of range"), ("257", "out of range"), ("two", "auto"))
    for bad, said in refused:
        with pytest.raises(ValueError, match=said):
            parse_workers(bad)


# ------------------------------------------------------------------------------------- the command
def example_bot(name: str, port: int, token: Path, folder: Path) -> Process:
    script = [sys.executable, "example_bots/rezzo/random_walker.py", "--token-file", str(token)]
    return start([*script, "--port", str(port), "--name", name, "--matches", "2"], folder, name)


def test_ladder_serve_with_two_workers_and_example_bots(tmp_path: Path) -> None:
    """As a host runs it: `ladder serve --workers 2` and two SDK bots playing two matches, both
    in workers; each result and replay is recorded. Then a worker is killed: the ladder says so,
    starts another, and goes on."""
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    server = ladder_serve(tmp_path, "--workers", "2", numba=True)
    try:
        assert "matches played in 2 worker processes" in server.stderr()
        wait_for(lambda: server.stderr().count(" ready at 127.0.0.1:") == 2, "both workers", 60)
        bots = [example_bot(name, server.port, tokens[name], tmp_path) for name in ("alice", "bob")]
        for bot in bots:
            assert bot.wait(90) == 0, bot.stderr()
            assert bot.stderr().count("playing this match at 127.0.0.1:") == 2, bot.stderr()
        # The bots leave as their last match ends in the worker; its result follows (a worker
        # killed before it arrives would void that match).
        wait_for(lambda: not ladder_matches(tmp_path, "running"), "the last result to reach the ladder", 30)
        pid = int(server.stderr().split("worker 1 (pid ", 1)[1].split(")", 1)[0])
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: "worker 1 died (SIGKILL); starting it again" in server.stderr(), "the death", 30)
        wait_for(lambda: server.stderr().count(" ready at 127.0.0.1:") == 3, "the new worker", 60)
    finally:
        assert server.stop() == 0, server.stderr()
    rows = ladder_matches(tmp_path)
    assert [status for status, _, _ in rows] == ["finished"] * 2
    for _, _, replay in rows:  # in this process: `replay verify` the command is test_replay.py's
        assert replay is not None and verify(read_replay(Path(replay))).ok
    for token in tokens.values():
        assert token.read_text().strip() not in server.stderr() + server.stdout()
    for line in server.stderr().splitlines():  # every worker it started, it stopped
        if " ready at " in line:
            started = int(line.split("(pid ", 1)[1].split(")", 1)[0])
            assert not Path(f"/proc/{started}").exists()


def test_a_ladder_killed_with_sigkill_leaves_no_worker_behind(tmp_path: Path) -> None:
    """The workers' lifeline is their pipe from the ladder: a kill -9 of the ladder closes it, and
    they stop."""
    server = ladder_serve(tmp_path, "--workers", "2", numba=True)
    try:
        wait_for(lambda: server.stderr().count(" ready at 127.0.0.1:") == 2, "both workers", 60)
        pids = [int(part.split(")", 1)[0]) for part in server.stderr().split("(pid ")[1:]]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        folders = [
            f
            for pid in pids
            for f in Path(tempfile.gettempdir()).glob(f"cellarena-ladder-workers-*/worker-*-{pid}")
        ]
        assert len(folders) == 2 and folders[0].parent == folders[1].parent
        server.proc.kill()
        server.proc.wait()
        wait_for(lambda: not any(alive(pid) for pid in pids), "the workers to stop", 30)
        assert not folders[0].parent.exists()  # they removed their folder, which the ladder could not
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--workers", "0"], "0 is out of range"),
        (["--workers", "many"], "'many' is neither a number of worker processes nor 'auto'"),
        (["--workers", "300"], "give 1 (every match in the ladder's process) to 256, or auto"),
        (["--workers", "2", "--cluster", "local:1"], "--cluster or --workers, not both"),
        (["--workers-host", "example.org"], "give --workers 2 or more too"),
        (["--workers", "2", "--host", "0.0.0.0", "--insecure"], "give --workers-host"),
        (["--workers", "2", "--workers-host", "192.0.2.7"], "seat tokens in clear at 192.0.2.7"),
    ],
    ids=["zero", "word", "too-many", "cluster", "host-alone", "wildcard", "in-clear"],
)
def test_bad_workers_values_are_refused_before_serving(tmp_path: Path, args: list[str], said: str) -> None:
    # In this process (cellarena_cli.refused): the tests above run `ladder serve` as a process.
    done = refused("ladder", "--dir", str(tmp_path), "serve", "rezzo", "--port", "0", *PACING, *args)
    assert said in done.stderr and ("--workers" in done.stderr), done.stderr
