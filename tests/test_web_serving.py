"""What every HTTP server cellarena starts does with what one connection sends (server/web/serving.py).

hypercorn's HTTP/2 side raised KeyError on a request body that arrived after the app had answered
(a refused form: 403 before the body is read), and under the trio worker that fault ended the whole
process. The pages now speak HTTP/1.1 only (ALPN, prior knowledge and ``Upgrade: h2c`` all refused or
ignored), and a fault in one connection closes that connection only. Each test sends what used to end
the server, then checks that the pages still answer.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import pytest
import trio
from certificates import pem_files
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from cellarena.server.web import serving

#: Every wait of these tests: a loopback exchange takes milliseconds.
DEADLINE = 10.0


async def _refuse(request: Request) -> Response:
    """Like the pages' cross-site check: answer before reading the body."""
    return PlainTextResponse("refused", status_code=403)


async def _home(request: Request) -> Response:
    return PlainTextResponse("home")


def _app() -> Starlette:
    return Starlette(routes=[Route("/", _home), Route("/form", _refuse, methods=["POST"])])


@asynccontextmanager
async def _serving(tls: tuple[str, str] | None = None) -> AsyncIterator[int]:
    sock = serving.bind("127.0.0.1", 0)
    try:
        async with trio.open_nursery() as nursery:
            ready = trio.Event()
            nursery.start_soon(lambda: serving.run(_app(), sock, ready.set, tls=tls))
            with trio.fail_after(DEADLINE):
                await ready.wait()
            yield sock.getsockname()[1]
            nursery.cancel_scope.cancel()
    finally:
        sock.close()


async def _connect(port: int, ca: Path | None = None, alpn: list[str] | None = None) -> trio.abc.Stream:
    stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
    if ca is not None:
        context = ssl.create_default_context(cafile=str(ca))
        context.set_alpn_protocols(alpn or ["http/1.1"])
        tls = trio.SSLStream(stream, context, server_hostname="localhost")
        await tls.do_handshake()
        stream = tls
    return stream


async def _read_until_closed(stream: trio.abc.Stream) -> bytes:
    got = b""
    with trio.move_on_after(DEADLINE):
        while True:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break
            if not data:
                break
            got += data
    return got


async def _read_response(stream: trio.abc.Stream) -> bytes:
    """One HTTP/1.1 response with a content-length, however the bytes come in."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += await stream.receive_some(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head + b"\r\n\r\n" + body


async def _get_home(port: int, ca: Path | None = None) -> bytes:
    """A plain HTTP/1.1 GET of ``/``: what a reader's browser does next."""
    with trio.fail_after(DEADLINE):
        stream = await _connect(port, ca)
        await stream.send_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        return await _read_until_closed(stream)


async def _late_body_over_h2(stream: trio.abc.Stream) -> list[h2.events.Event]:
    """A POST whose body comes after the server answered: what ended hypercorn's HTTP/2 side."""
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    headers = [
        (":method", "POST"), (":path", "/form"), (":scheme", "https"), (":authority", "localhost"),
        ("content-length", "4"),
    ]  # fmt: skip
    conn.send_headers(1, headers)
    await stream.send_all(conn.data_to_send())
    events: list[h2.events.Event] = []
    with trio.move_on_after(DEADLINE), contextlib.suppress(trio.BrokenResourceError):
        while not any(isinstance(e, h2.events.StreamEnded | h2.events.ConnectionTerminated) for e in events):
            data = await stream.receive_some(65536)
            if not data:
                break
            events += conn.receive_data(data)
            await stream.send_all(conn.data_to_send())
    if any(isinstance(e, h2.events.ResponseReceived) for e in events):
        conn.send_data(1, b"late", end_stream=True)
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(conn.data_to_send())
    return events


async def test_h2_by_tls_alpn_is_not_offered_and_the_pages_answer(tmp_path: Path) -> None:
    ca, chain, key = pem_files(tmp_path, "localhost", "127.0.0.1")
    async with _serving(tls=(str(chain), str(key))) as port:
        with trio.fail_after(DEADLINE):
            stream = await _connect(port, ca, alpn=["h2", "http/1.1"])
            assert isinstance(stream, trio.SSLStream)
            # A browser that offers h2 first is answered in HTTP/1.1.
            assert stream.selected_alpn_protocol() == "http/1.1"
            await stream.aclose()
        with trio.fail_after(DEADLINE):
            stream = await _connect(port, ca, alpn=["h2"])  # a client that speaks HTTP/2 only
            await _late_body_over_h2(stream)
            await _read_until_closed(stream)
        assert b"HTTP/1.1 200" in await _get_home(port, ca)


async def test_h2_by_prior_knowledge_is_refused_with_505_and_the_pages_answer() -> None:
    async with _serving() as port:
        with trio.fail_after(DEADLINE):
            stream = await _connect(port)
            events = await _late_body_over_h2(stream)
            rest = await _read_until_closed(stream)
        # No HTTP/2 frame came back: the preface was answered in HTTP/1.1 and the connection closed.
        assert not any(isinstance(e, h2.events.ResponseReceived) for e in events)
        assert b"505 HTTP Version Not Supported" in rest or events == []
        assert b"HTTP/1.1 200" in await _get_home(port)


async def test_upgrade_to_h2c_is_ignored_and_answered_in_http1() -> None:
    async with _serving() as port:
        with trio.fail_after(DEADLINE):
            stream = await _connect(port)
            await stream.send_all(
                b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: Upgrade, HTTP2-Settings\r\n"
                b"upgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
            )
            reply = await _read_response(stream)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:80]
        assert b"101" not in reply.split(b"\r\n")[0]
        with trio.fail_after(DEADLINE):
            await stream.send_all(b"POST /form HTTP/1.1\r\nhost: localhost\r\ncontent-length: 4\r\n\r\n")
            reply = await _read_response(stream)
            await stream.send_all(b"late")
            await stream.aclose()
        assert reply.startswith(b"HTTP/1.1 403"), reply
        assert b"HTTP/1.1 200" in await _get_home(port)


async def test_the_prior_knowledge_preface_alone_cannot_reach_the_app() -> None:
    async with _serving() as port:
        with trio.fail_after(DEADLINE):
            stream = await _connect(port)
            await stream.send_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            reply = await _read_until_closed(stream)
        assert reply.startswith(b"HTTP/1.1 505"), reply[:80]
        assert b"HTTP/1.1 only" in reply


async def test_a_fault_in_one_connection_closes_that_connection_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever raises in the HTTP server's handling of one connection (here: a fault made to happen
    in the protocol handler, as hypercorn's KeyError did) is logged once, in one line, and the server
    goes on serving the others."""
    from hypercorn.protocol.h11 import H11Protocol

    handle = H11Protocol.handle

    async def faulty(self: H11Protocol, event: object) -> None:
        from hypercorn.events import RawData

        if isinstance(event, RawData) and b"/boom" in event.data:
            raise KeyError(3)
        await handle(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(H11Protocol, "handle", faulty)
    caplog.set_level(logging.WARNING, logger="cellarena.web")
    async with _serving() as port:
        with trio.fail_after(DEADLINE):
            stream = await _connect(port)
            await stream.send_all(b"GET /boom HTTP/1.1\r\nhost: localhost\r\n\r\n")
            assert await _read_until_closed(stream) == b""
        assert b"HTTP/1.1 200" in await _get_home(port)
    faults = [r for r in caplog.records if "closed" in r.getMessage() and "KeyError" in r.getMessage()]
    assert len(faults) == 1, [r.getMessage() for r in caplog.records]
    assert faults[0].exc_info is None  # one line; the traceback is at debug level
    assert "127.0.0.1" in faults[0].getMessage()
