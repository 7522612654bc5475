"""A ladder that plays its matches on a real Dask cluster (`ladder serve --cluster`).

The ladder pairs bots as always; for bots that said ``accepts: ["redirect"]`` a worker hosts the
match (`cellarena.server.play.hosted`), the ladder sends each bot a ``redirect`` with a fresh seat token,
and records what the worker sends back. The in-process tests drive a ladder (`wiring.build`) with
a `HandOff` over a local cluster of two worker processes and bots written from docs/protocol.md;
the last ones run `cellarena ladder serve --cluster local:1` with the SDK's example bots.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from cellarena_cli import cellarena, refused
from certificates import pem_files
from game_servers import (
    PACING,
    Process,
    add_ladder_bot,
    js_bot_folder,
    ladder_matches,
    ladder_serve,
    start,
    wait_for,
)
from wire_client import Client

from cellarena.arena.cluster import ClusterSpec
from cellarena.arena.ladder.hosting.cluster_hand_off import HandOff, HandOffConfig, open_hand_off, worker_host
from cellarena.arena.ladder.ops.wiring import LadderConfig, build
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.seating import LadderSeating
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import Bot, protocol
from cellarena.sdk.bot import _Log, _Series, parse_args
from cellarena.sdk.client import ClientError
from cellarena.server.play.hosted import HostedMatch, HostedResult, host_match, token_digest
from cellarena.server.play.lobby import Lobby
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import read_replay, verify

FAST = TickSettings(fast=True, budget_ms=1000, reconnect_grace=5.0)
CONFIG = {"map": "duel", "max_ticks": 20}


@pytest.fixture(scope="module")
def hand_off() -> Iterator[HandOff]:
    """Two worker processes on this machine, checked as `ladder serve --cluster local:2` checks them;
    the bots have 5 s to reach a match host."""
    with open_hand_off(ClusterSpec(local=2), "rezzo", [CONFIG], HandOffConfig(connect_timeout=5.0)) as opened:
        yield opened


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


class Ladder(SimpleNamespace):
    lobby: Lobby
    seating: LadderSeating
    store: LadderStore
    tokens: dict[str, str]


async def open_ladder(nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff) -> Ladder:
    store = LadderStore(tmp_path / "ladder.sqlite")
    store.void_running()
    tokens = {name: store.add_bot(name, "rezzo")[1].secret for name in ("alice", "bob")}
    (tmp_path / "replays").mkdir()
    config = LadderConfig(
        "rezzo",
        CONFIG,
        map_key="map",
        maps=("duel",),
        settings=FAST,
        port=0,
        rules=LadderRules(match_every=0.02),
        replay_dir=tmp_path / "replays",
    )
    lobby, seating = build(store, config, hand_off)
    await nursery.start(lobby.serve)
    return Ladder(lobby=lobby, seating=seating, store=store, tokens=tokens)


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


def finished(store: LadderStore) -> list[Any]:
    return [m for m in store.matches("rezzo") if m.status == "finished"]


async def settle(store: LadderStore, count: int, status: str = "finished") -> list[Any]:
    with trio.fail_after(40):
        while len(done := [m for m in store.matches("rezzo") if m.status == status]) < count:
            await trio.sleep(0.05)
    return done


# ------------------------------------------------------------------------------------- the match host
def test_the_match_host_seats_by_token_digest_and_returns_the_replay(tmp_path: Path) -> None:
    """`host_match` alone, without a cluster: the job holds only digests; the bots bring the tokens."""
    tokens = ["tok-alice-" + "x" * 30, "tok-bob-" + "y" * 30]
    job = HostedMatch(7, "rezzo", CONFIG, 11, ("alice", "bob"), tuple(map(token_digest, tokens)), FAST)
    assert not any(t.encode() in pickle.dumps(job) for t in tokens)  # what crosses the cluster
    listening: list[tuple[str, int]] = []
    ready = threading.Event()
    results: list[HostedResult] = []

    def publish(host: str, port: int) -> None:
        listening.append((host, port))
        ready.set()

    worker = threading.Thread(target=lambda: results.append(host_match(job, publish, host="127.0.0.1")))
    worker.start()
    assert ready.wait(20)

    async def bots() -> list[dict[str, Any]]:
        host, port = listening[0]
        stranger = Client(await trio.open_tcp_stream(host, port))
        await stranger.hello("mallory", token="not-a-seat-token")
        await stranger.expect_error(protocol.BAD_HELLO)
        ends = []
        async with trio.open_nursery() as n:
            for name, token in zip(("alice", "bob"), tokens, strict=True):

                async def play(name: str = name, token: str = token) -> None:
                    client = await go({"host": host, "port": port, "token": token}, name)
                    ends.append(await client.play())

                n.start_soon(play)
        return ends

    ends = trio.run(bots)
    worker.join(30)
    (result,) = results
    assert [e["ticks"] for e in ends] == [20, 20]
    assert result.ladder_id == 7 and result.connected == (True, True) and result.outcome is not None
    assert result.outcome.names == ["alice", "bob"] and result.outcome.ticks == 20
    assert result.replay is not None
    path = tmp_path / "m.replay"
    path.write_bytes(result.replay)
    assert verify(read_replay(path)).ok


def test_the_sdk_will_not_take_a_token_in_clear_to_another_machine(tmp_path: Path) -> None:
    """A bot that reached its ladder over TLS refuses a plain redirect to another address."""
    ca_file, _chain, _key = pem_files(tmp_path, "127.0.0.1")
    args = parse_args(["--tls-ca", str(ca_file), "--token", "t"], "me")
    series = _Series(Bot, args, _Log("me", quiet=True))
    target = protocol.redirect("192.0.2.9", 4000, "seat-token", tls=False)
    with pytest.raises(ClientError, match="in clear"):
        series.follow(Bot(), target)


def test_a_worker_address_is_its_host() -> None:
    assert worker_host("tcp://10.0.0.5:40123") == "10.0.0.5"
    assert worker_host("tls://[::1]:8786") == "::1"


# ------------------------------------------------------------------------------------- the ladder
async def test_bots_that_follow_redirects_play_on_the_cluster(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    assert (to_alice["host"], to_alice["port"]) == (to_bob["host"], to_bob["port"])
    assert to_alice["host"] == "127.0.0.1" and to_alice["tls"] is False
    assert to_alice["port"] != ladder.lobby.port and to_alice["token"] != to_bob["token"]
    assert not ladder.lobby.running  # nothing is played on the ladder's own host
    assert ladder.seating.starter.playing() == {"alice", "bob"}
    ends = []
    async with trio.open_nursery() as n:
        for name, target in (("alice", to_alice), ("bob", to_bob)):

            async def play(name: str = name, target: dict[str, Any] = target) -> None:
                ends.append(await (await go(target, name)).play())

            n.start_soon(play)
    assert sorted(e["ticks"] for e in ends) == [20, 20]
    (match,) = await settle(ladder.store, 1)
    assert [s.bot for s in match.seats] == ["alice", "bob"] and match.ticks == 20
    assert match.replay is not None and verify(read_replay(Path(match.replay))).ok
    assert ladder.seating.starter.playing() == set()
    # The seat tokens went to their bots only: not in the ladder's log, not in the store.
    for secret in (to_alice["token"], to_bob["token"], *ladder.tokens.values()):
        assert secret not in caplog.text
        assert secret.encode() not in (tmp_path / "ladder.sqlite").read_bytes()


async def test_a_bot_that_does_not_follow_redirects_plays_on_the_ladder(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    """Older clients never see a redirect: a pairing with one of them is played where they are."""
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob", follows=False)
    async with trio.open_nursery() as n:
        n.start_soon(alice.play)
        n.start_soon(bob.play)
    (match,) = await settle(ladder.store, 1)
    assert match.ticks == 20 and not ladder.seating.starter.remote


async def test_a_bot_that_never_reaches_the_match_host_forfeits(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    target = await redirected(alice)
    await redirected(bob)  # ...and bob stays away
    end = await (await go(target, "alice")).play()
    assert end["result"] == "win"
    (match,) = await settle(ladder.store, 1)
    by_bot = {s.bot: s for s in match.seats}
    assert by_bot["bob"].forfeit and not by_bot["alice"].forfeit and by_bot["alice"].rank == 1


async def test_a_match_nobody_reaches_is_void(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    await redirected(alice)
    await redirected(bob)
    (match,) = await settle(ladder.store, 1, "void")
    assert "no bot reached the match host" in (match.reason or "")
    assert ladder.seating.starter.playing() == set()


async def test_a_bot_that_drops_at_the_match_host_comes_back_to_its_seat(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    ends: list[dict[str, Any]] = []

    async def play(client: Client) -> None:
        ends.append(await client.play())

    async with trio.open_nursery() as n:
        n.start_soon(play, await go(to_bob, "bob"))
        first = await go(to_alice, "alice")
        while (msg := await first.recv(timeout=10)) is not None and msg["type"] != "tick":
            pass
        await first.stream.aclose()  # a network blip
        n.start_soon(play, await go(to_alice, "alice"))
    (match,) = await settle(ladder.store, 1)
    assert not any(s.forfeit for s in match.seats) and len(ends) == 2


async def test_a_tokens_newest_connection_takes_its_seat(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    """The bot came back before the match host noticed it had gone: the old connection is let go."""
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    async with trio.open_nursery() as n:
        n.start_soon((await go(to_bob, "bob")).play)
        stale = await go(to_alice, "alice")
        while (msg := await stale.recv(timeout=10)) is not None and msg["type"] != "welcome":
            pass  # the match is under way with this connection in alice's seat...
        fresh = await go(to_alice, "alice")
        with trio.fail_after(10):
            while (await stale.recv()) is not None:
                pass  # ...until the match host lets it go for the new one
        n.start_soon(fresh.play)
    (match,) = await settle(ladder.store, 1)
    assert not any(s.forfeit for s in match.seats)


async def test_a_match_whose_worker_dies_is_void(
    nursery: trio.Nursery, tmp_path: Path, hand_off: HandOff
) -> None:
    """kill -9 of the worker processes mid-match: Dask runs the match again elsewhere, where nobody
    is sent, so no result comes and the match is void; the bots are free to queue again.
    (Last of the tests on the shared cluster: its nannies start new workers meanwhile.)"""
    ladder = await open_ladder(nursery, tmp_path, hand_off)
    alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
    to_alice, to_bob = await redirected(alice), await redirected(bob)
    clients = [await go(to_alice, "alice"), await go(to_bob, "bob")]
    for client in clients:
        while (msg := await client.recv(timeout=10)) is not None and msg["type"] != "welcome":
            pass
    pids = hand_off.client.run(os.getpid)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    for client in clients:
        with trio.fail_after(10):
            while (await client.recv()) is not None:
                pass  # the match host is gone
    (match,) = await settle(ladder.store, 1, "void")
    assert match.reason in ("no bot reached the match host",) or "the worker failed" in (match.reason or "")
    assert ladder.seating.starter.playing() == set()
    back = await join(ladder, "alice")  # and queued at once, not refused as busy
    with trio.fail_after(10):
        while "alice" not in ladder.seating.queue.waiting:
            await trio.sleep(0.05)
    await back.stream.aclose()


# ------------------------------------------------------------------------------------- the command
def example_bot(language: str, name: str, port: int, token: Path, flags: list[str], folder: Path) -> Process:
    """The Python SDK's random walker or the JavaScript example bot, for two matches on the ladder."""
    if language == "python":
        script = [sys.executable, "example_bots/rezzo/random_walker.py", "--token-file", str(token)]
        return start([*script, "--port", str(port), "--name", name, "--matches", "2", *flags], folder, name)
    command = ["node", "bot.js", "--port", str(port), "--name", name, "--matches", "2", *flags]
    env = {"CELLARENA_TOKEN": token.read_text().strip()}
    return start(command, folder, name, cwd=js_bot_folder(), env=env)


# One ladder with a cluster of its own, a Python and a JavaScript bot over TLS (which covers the
# Python SDK's TLS too). Its plain-TCP twin (two Python bots) is gone: `ladder serve --cluster`
# in plain TCP, with the Python SDK following a redirect to a worker, is what
# test_ladder_submitted_workers.py's cluster case runs; the hand-off's own paths are the tests above.
def test_ladder_serve_on_a_cluster_with_example_bots(tmp_path: Path) -> None:
    """As a host runs it: `ladder serve --cluster local:1` over TLS, and two example bots with
    --matches 2 (the Python SDK's and the JavaScript one). The workers serve the ladder's
    certificate, and the bots check it at both."""
    if shutil.which("node") is None:
        pytest.fail("node is needed to run the JavaScript example bot (apt-get install nodejs)")
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    ca_file, chain, key = pem_files(tmp_path, "127.0.0.1")
    bot_flags = ["--tls-ca", str(ca_file)]
    server = ladder_serve(
        tmp_path, "--cluster", "local:1", "--grace", "2", "--tls-cert", str(chain), "--tls-key", str(key)
    )
    try:
        assert "matches played on the cluster local:1" in server.stderr()
        assert "(TLS)" in server.stderr()
        bots = [
            example_bot("python", "alice", server.port, tokens["alice"], bot_flags, tmp_path),
            example_bot("js", "bob", server.port, tokens["bob"], bot_flags, tmp_path),
        ]
        for bot in bots:
            assert bot.wait(90) == 0, bot.stderr()
        # A bot leaves as soon as its last match ends at the match host; the result reaches the
        # ladder from the cluster a moment later, and a stop before then voids the match (as
        # documented). Seen on a busy machine: stop once no match is under way.
        wait_for(lambda: not ladder_matches(tmp_path, "running"), "the last result to reach the ladder", 30)
    finally:
        server.stop()
    rows = ladder_matches(tmp_path)
    # Each bot played its two matches at a match host. On a busy host a match may be void (no bot
    # reached its host in time), and the bots play another: the ladder's records say how many they
    # were sent to, and why any did not count.
    finished = [replay for status, _, replay in rows if status == "finished"]
    assert len(finished) == 2, rows
    voids = [reason for status, reason, _ in rows if status == "void"]
    assert set(voids) <= {"no bot reached the match host"}, rows
    for bot in bots:
        assert bot.stderr().count("playing this match at 127.0.0.1:") == len(rows), (rows, bot.stderr())
    for replay in finished:  # in this process: `replay verify` the command is test_replay.py's
        assert verify(read_replay(Path(replay))).ok
    for token in tokens.values():  # no ladder token in the ladder's output
        assert token.read_text().strip() not in server.stderr() + server.stdout()


def test_a_cluster_that_would_take_tokens_in_clear_is_refused_before_serving(tmp_path: Path) -> None:
    args = ["ladder", "--dir", str(tmp_path), "serve", "rezzo", "--port", "0", *PACING]
    done = cellarena(*args, "--cluster", "local:1", "--cluster-host", "192.0.2.7")
    assert done.returncode == 1
    assert "cannot host this ladder's matches" in done.stderr
    assert "seat tokens in clear at 192.0.2.7" in done.stderr and "--tls-cert" in done.stderr


def test_cluster_host_needs_a_cluster(tmp_path: Path) -> None:
    done = refused("ladder", "--dir", str(tmp_path), "serve", "rezzo", "--cluster-host", "example.org")
    assert "--cluster-host" in done.stderr and "--cluster" in done.stderr
