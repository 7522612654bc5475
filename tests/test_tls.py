"""The server's own TLS (`--tls-cert/--tls-key`): bots play over it, and every way a peer can get TLS
wrong costs that peer alone. Certificates come from a throwaway `trustme` CA."""

from __future__ import annotations

import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme
from cellarena_cli import refused
from certificates import pem_files
from game_servers import Process, serve, start
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.net.tls import TlsConfigError, server_context
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "example_bots" / "rezzo" / "random_walker.py"


def bot(folder: Path, name: str, port: int, *flags: str) -> Process:
    return start([sys.executable, str(BOT), "--port", str(port), "--name", name, *flags], folder, name)


def client_context(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


async def tls_client(port: int, ca_file: Path) -> trio.SSLStream[trio.SocketStream]:
    stream = trio.SSLStream(
        await trio.open_tcp_stream("127.0.0.1", port), client_context(ca_file), server_hostname="127.0.0.1"
    )
    await stream.do_handshake()
    return stream


async def read_frame(stream: trio.abc.Stream, reader: protocol.FrameReader) -> dict[str, Any] | None:
    with trio.fail_after(10):
        while True:
            data = await stream.receive_some(1 << 16)
            if not data:
                return None
            messages = reader.feed(data)
            if messages:
                return messages[0]


# ------------------------------------------------------------------------------------------ the CLI
def test_two_sdk_bots_play_a_match_over_the_servers_tls(tmp_path: Path) -> None:
    ca_file, chain, key = pem_files(tmp_path, "127.0.0.1")
    server = serve(tmp_path, "--tls-cert", str(chain), "--tls-key", str(key), "--matches", "1")
    try:
        assert "(TLS)" in server.stderr()
        bots = [bot(tmp_path / "bots", n, server.port, "--tls-ca", str(ca_file)) for n in ("one", "two")]
        codes = [b.wait(60) for b in bots]
        assert codes == [0, 0], [b.stderr() for b in bots]
        assert server.wait(30) == 0
    finally:
        server.stop()
    results = [line for line in server.stdout().splitlines() if line.startswith("{")]
    assert len(results) == 1 and '"ticks": 30' in results[0]


def test_tls_options_say_what_is_wrong(tmp_path: Path) -> None:
    """In this process: the refusals of the options (an exception would not pass for exit status 2);
    the tests above serve TLS as a process."""
    _, chain, _ = pem_files(tmp_path, "127.0.0.1")
    only_cert = refused("serve", "rezzo", "--port", "0", "--tls-cert", str(chain))
    assert "--tls-cert needs --tls-key too" in only_cert.stderr
    missing = refused("serve", "rezzo", "--port", "0", "--tls-cert", str(chain), "--tls-key", "nowhere.pem")
    assert "nowhere.pem: no such file" in missing.stderr
    other_key = tmp_path / "other.pem"
    trustme.CA().issue_cert("x").private_key_pem.write_to_path(str(other_key))
    wrong = refused("ladder", "--dir", str(tmp_path / "l"), "serve", "rezzo", "--port", "0",
                    "--tls-cert", str(chain), "--tls-key", str(other_key))  # fmt: skip
    assert "does not belong to the certificate" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM")
    garbage = refused("serve", "rezzo", "--port", "0", "--tls-cert", str(junk), "--tls-key", str(junk))
    assert "junk.pem" in garbage.stderr and "not a PEM" in garbage.stderr


def test_server_context_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match=r"missing\.pem: no such file"):
        server_context(tmp_path / "missing.pem", tmp_path / "missing.pem")


# ------------------------------------------------------------------------------------------ in-process
@pytest.fixture
async def tls_lobby(tmp_path: Path) -> Any:
    ca_file, chain, key = pem_files(tmp_path, "127.0.0.1")
    config = LobbyConfig(
        "rezzo",
        {"map": "duel", "max_ticks": 10},
        TickSettings(fast=True, budget_ms=1000),
        port=0,
        hello_timeout=1.0,
        tls=server_context(chain, key),
    )
    lobby = Lobby(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(lobby.serve)
        yield lobby, ca_file, tmp_path
        nursery.cancel_scope.cancel()


async def play(stream: trio.SSLStream[trio.SocketStream], name: str) -> list[str]:
    await stream.send_all(protocol.encode(protocol.hello(name, "rezzo")))
    reader = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
    seen = []
    while (msg := await read_frame(stream, reader)) is not None:
        seen.append(msg["type"])
        if msg["type"] == "tick":
            await stream.send_all(protocol.encode(protocol.moves(msg["tick"], [0] * len(msg["agents"]))))
        elif msg["type"] in ("end", "error"):
            break
    return seen


@pytest.mark.usefixtures("virtual_wall")
async def test_bad_peers_on_a_tls_port_cost_only_themselves(
    tls_lobby: Any, autojump_clock: MockClock
) -> None:
    lobby, ca_file, folder = tls_lobby
    port = lobby.port
    # A plain client speaking the protocol in clear: dropped (its bytes are no TLS record).
    plain = await Client.connect(port)
    await plain.hello("plain")
    assert await plain.recv(timeout=5) is None
    # A client that trusts another CA: its handshake fails, on its side.
    other = folder / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(trio.BrokenResourceError):
        await tls_client(port, other)
    # Garbage, and a client that stops half-way through its handshake: dropped at the hello timeout.
    junk = trio.socket.socket()
    await junk.connect(("127.0.0.1", port))
    await junk.send(b"\x16\x03\x01\x00\xff" + b"\x01" * 20)  # a record header, then too little
    with trio.fail_after(5):
        assert await junk.recv(100) == b""  # closed by the server after hello_timeout (1 s)
    junk.close()
    # And two good TLS bots still play a whole match.
    a, b = await tls_client(port, ca_file), await tls_client(port, ca_file)
    seen: dict[str, list[str]] = {}

    async def one(stream: trio.SSLStream[trio.SocketStream], name: str) -> None:
        seen[name] = await play(stream, name)

    async with trio.open_nursery() as both:
        both.start_soon(one, a, "a")
        both.start_soon(one, b, "b")
    assert seen["a"][0] == seen["b"][0] == "welcome"
    assert seen["a"][-1] == seen["b"][-1] == "end"
    assert seen["a"].count("tick") == 10


@pytest.mark.usefixtures("virtual_wall")
async def test_a_tls_error_frame_is_delivered_encrypted(tls_lobby: Any, autojump_clock: MockClock) -> None:
    lobby, ca_file, _ = tls_lobby
    stream = await tls_client(lobby.port, ca_file)
    await stream.send_all(protocol.encode({"type": "hello", "protocol": 99}))
    msg = await read_frame(stream, protocol.FrameReader(protocol.MAX_SERVER_FRAME))
    assert msg is not None and msg["type"] == "error" and msg["code"] == protocol.BAD_VERSION


# ------------------------------------------------------------------------------------------ the ladder
def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback, to connect to it as another machine would."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


# On the real clock: the ladder checks tokens in a worker thread (`trio.to_thread`), and while it
# works autojump would leap virtual time ahead to the next deadline.
async def test_a_ladder_takes_tokens_over_tls_from_another_address_and_refuses_them_in_clear(
    tmp_path: Path,
) -> None:
    from cellarena.arena.ladder.ops.wiring import LadderConfig, build
    from cellarena.arena.ladder.store.ladder_store import LadderStore

    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect through")
    ca_file, chain, key = pem_files(tmp_path, address)
    store = LadderStore(tmp_path / "ladder.sqlite")
    token = store.add_bot("alice", "rezzo")[1].secret
    contexts = {"tls": server_context(chain, key), "plain": None}
    async with trio.open_nursery() as nursery:
        ladders = {}
        for kind, context in contexts.items():
            config = LadderConfig(
                "rezzo", {"map": "duel", "max_ticks": 10}, map_key="map", maps=("duel",),
                host="0.0.0.0", port=0, tls=context,
            )  # fmt: skip
            lobby, seating = build(store, config)
            await nursery.start(lobby.serve)
            ladders[kind] = (lobby, seating)
        hello = protocol.encode(protocol.hello("alice", "rezzo", token=token))
        # In clear from another address: refused before the token is even looked at.
        plain = await trio.open_tcp_stream(address, ladders["plain"][0].port)
        await plain.send_all(hello)
        refusal = await read_frame(plain, protocol.FrameReader(protocol.MAX_SERVER_FRAME))
        assert refusal is not None and refusal["code"] == protocol.TLS_REQUIRED
        # Over TLS from the same address: alice joins the queue.
        raw = await trio.open_tcp_stream(address, ladders["tls"][0].port)
        stream = trio.SSLStream(raw, client_context(ca_file), server_hostname=address)
        await stream.send_all(hello)
        seating = ladders["tls"][1]
        with trio.fail_after(10):
            while "alice" not in seating.queue.waiting:
                await trio.sleep(0.02)
        assert seating.queue.waiting["alice"].conn.tls
        nursery.cancel_scope.cancel()
    store.close()
