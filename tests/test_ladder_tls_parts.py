"""Every part of a ladder speaks its bot port's TLS (issue 42, point 1), as real processes: `ladder serve`
with a certificate made here, a house bot it starts (told the ladder's certificate in its environment),
an outside bot over TLS, and `ladder web --live-tls-ca` whose /live/ relays the match they play."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import socket
import ssl
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cellarena_cli import CLI, ROOT
from certificates import pem_files
from game_servers import Process, add_ladder_bot, ladder_serve, start, wait_for
from test_ladder_community_processes import host

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk.protocol import encode
from cellarena.server.net.tls import server_context
from cellarena.server.web.live import LiveFeed, own_certificate, relay

BOTS = ROOT / "example_bots" / "rezzo"


def finished_pairs(folder: Path) -> list[set[str]]:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return [set(m.bots) for m in store.matches("rezzo", limit=100) if m.status == "finished"]


def web_url(web: Process) -> str:
    """The URL `ladder web` prints once it serves."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if found := re.search(r"at (http://\S+)", web.stdout()):
            return found.group(1)
        assert web.proc.poll() is None, web.stderr()
        time.sleep(0.05)
    raise AssertionError(f"ladder web printed no URL:\n{web.stderr()}")


def live_messages(url: str, wanted: int, timeout: float = 60, path: str = "/live/ws") -> list[dict[str, Any]]:
    """The first ``wanted`` messages /live/ws (or ``path``) sends a browser (a WebSocket read by hand:
    text frames, unmasked from a server)."""
    host, port = url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        stream = sock.makefile("rb")
        status = stream.readline()
        assert b" 101 " in status, status
        while stream.readline() not in (b"\r\n", b""):
            pass
        out: list[dict[str, Any]] = []
        while len(out) < wanted:
            head = stream.read(2)
            size = head[1] & 0x7F
            if size == 126:
                size = int.from_bytes(stream.read(2), "big")
            elif size == 127:
                size = int.from_bytes(stream.read(8), "big")
            body = stream.read(size)
            if head[0] & 0x0F == 1:  # a text frame: one message as JSON
                out.append(json.loads(body))
        return out


def test_a_house_bot_plays_a_tls_bot_on_a_tls_ladder_and_live_shows_it(tmp_path: Path) -> None:
    """Before: the house bot spoke plain TCP to the TLS port (started 212 times in 120 s, no match)
    and /live/ waited forever while the ladder's log filled with WRONG_VERSION_NUMBER."""
    ca_file, chain, key = pem_files(tmp_path, "ladder.test", "127.0.0.1")
    token = add_ladder_bot(tmp_path, "alice")
    added = host(tmp_path, "house", "add", "builder", f"python {BOTS / 'builder.py'}", "--game", "rezzo")
    assert added.exit_code == 0, added.output
    server = ladder_serve(tmp_path, "--house-after", "0.3", "--tls-cert", str(chain), "--tls-key", str(key))
    alice = start(
        [sys.executable, str(BOTS / "random_walker.py"), "--port", str(server.port), "--name", "alice",
         "--token-file", str(token), "--tls-ca", str(ca_file), "--ladder"],
        tmp_path / "bots", "alice",
    )  # fmt: skip
    web = start(
        [*CLI, "ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0",
         "--live-port", str(server.port), "--live-tls-ca", str(ca_file)],
        tmp_path, "web",
    )  # fmt: skip
    try:
        url = web_url(web)
        seen = live_messages(url, 2)  # the first match, as it is played
        welcome = next(m for m in seen if m["type"] == "welcome")
        assert sorted(welcome["names"]) == ["alice", "builder"], welcome
        wait_for(lambda: {"alice", "builder"} in finished_pairs(tmp_path), "a house bot's match", timeout=120)
    finally:
        for proc in (web, alice):
            proc.stop()
        server.stop()
    log = server.stderr()
    assert "WRONG_VERSION_NUMBER" not in log and "failed to join" not in log, log
    assert "live view:" not in web.stderr(), web.stderr()
    # The log of its latest launch: one the stop cut short may say its handshake was reset (a fresh
    # clone's run caught it so); none may say TLS was refused or the ladder's certificate not trusted.
    house_log = (tmp_path / "logs" / "house-builder.log").read_text()
    for symptom in ("WRONG_VERSION_NUMBER", "certificate was refused", "is that port serving TLS? If"):
        assert symptom not in house_log, house_log


async def test_a_live_view_told_nothing_of_tls_says_once_what_to_give(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay (`ladder web --live-port` without --live-tls) at a bot port serving TLS, which closes
    a plain connection without a word (the ladder's TLS listener does): one line saying what to give,
    not one per try, and tries further apart (virtual time: the back-off passes at once)."""
    _, chain, key = pem_files(tmp_path, "127.0.0.1")
    context = server_context(chain, key)
    tries: list[float] = []

    async def tls_port(stream: trio.SocketStream) -> None:
        tries.append(trio.current_time())
        with contextlib.suppress(trio.BrokenResourceError):
            await trio.SSLStream(stream, context, server_side=True).do_handshake()
        await trio.aclose_forcefully(stream)

    caplog.set_level("INFO", logger="cellarena.web")
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, tls_port, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        with trio.move_on_after(60):
            await relay("127.0.0.1", port, LiveFeed("rezzo"))
        nursery.cancel_scope.cancel()
    lines = [r.getMessage() for r in caplog.records if r.name == "cellarena.web"]
    assert len(lines) == 1 and "--live-tls" in lines[0] and f"127.0.0.1:{port}" in lines[0], lines
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(tries)]
    assert gaps[:5] == [0.4, 0.8, 1.6, 3.2, 6.4] and set(gaps[5:]) == {10.0}, gaps  # not 10 a second


async def test_a_relay_to_its_own_tls_port_trusts_that_certificate_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`cellarena serve --tls-cert --web` (and `ladder web --live-tls-ca` with the ladder's own
    certificate): the relay reaches 127.0.0.1, which the certificate need not name, and trusts that
    certificate only; a port showing another certificate is refused, said once."""
    _, chain, key = pem_files(tmp_path, "ladder.example.org")  # not for 127.0.0.1
    (tmp_path / "other").mkdir()
    _, other_chain, other_key = pem_files(tmp_path / "other", "127.0.0.1")

    async def match_server(context: ssl.SSLContext, stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError):
            await tls.receive_some(1 << 16)  # the relay's hello
            welcome = {"type": "welcome", "match": 3, "names": ["alice", "bob"]}
            await tls.send_all(encode(welcome) + encode({"type": "end", "match": 3}))
            await tls.aclose()

    async def watched(context: ssl.SSLContext) -> LiveFeed:
        feed = LiveFeed("rezzo")
        async with trio.open_nursery() as nursery:
            handler = partial(match_server, context)
            (listener,) = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
            with trio.fail_after(30):
                await relay(
                    "127.0.0.1",
                    listener.socket.getsockname()[1],
                    feed,
                    follow=False,
                    tls=own_certificate(str(chain)),
                )
            nursery.cancel_scope.cancel()
        return feed

    feed = await watched(server_context(chain, key))
    assert feed.messages["welcome"] is not None and feed.messages["welcome"]["names"] == ["alice", "bob"]
    assert feed.messages["end"] is not None
    assert not [r for r in caplog.records if r.name == "cellarena.web"]
    feed = await watched(server_context(other_chain, other_key))
    assert feed.messages["welcome"] is None
    [line] = [r.getMessage() for r in caplog.records if r.name == "cellarena.web"]
    assert "the TLS handshake with the bot port 127.0.0.1:" in line and "CERTIFICATE_VERIFY_FAILED" in line, (
        line
    )
