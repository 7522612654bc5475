"""The live view: a match's spectator stream, relayed to any number of browsers over WebSocket.

One relay connects to the match server as an ordinary spectator (docs/protocol.md, "Spectators") and
keeps only the newest `welcome`, `frame` and `end`. Each browser's socket sends the newest of them
whenever it is ready for more, so a browser that cannot keep up skips frames: it never slows the
match (the relay reads at once), and memory is one frame per match, however many browsers watch.
Frames are turned into JSON once, on the first browser's request, and only while someone watches.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from cellarena.sdk.protocol import FrameReader, ProtocolError, encode, hello
from cellarena.server.web.hosts import AllowedHosts
from cellarena.server.web.jsonable import dumps
from cellarena.server.web.numbers import parse_number, path_number
from cellarena.server.web.replays import player_html
from cellarena.server.web.templating import render

log = logging.getLogger("cellarena.web")

#: The largest frame the relay accepts (the protocol's limit: a 4096x4096 world's frame).
FRAME_LIMIT = 64 * 1024 * 1024
#: What a browser is sent: the match's welcome, its newest frame, the spectators' end, and the match's
#: result as the server recorded it (`MatchOutcome.to_json()`, published by the command).
PARTS = ("welcome", "frame", "end", "result")


class LiveFeed:
    """The newest welcome, frame and end of the match being watched, each with a version number."""

    def __init__(self, game: str) -> None:
        self.game = game
        self.messages: dict[str, dict[str, Any] | None] = dict.fromkeys(PARTS)
        self.versions: dict[str, int] = dict.fromkeys(PARTS, 0)
        self._json: dict[str, tuple[int, bytes]] = {}
        self._changed = trio.Event()

    def publish(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind not in PARTS:
            return
        if kind == "welcome":  # a new match: forget the last one's frame, end and result
            for part in ("frame", "end", "result"):
                self.messages[part] = None
                self.versions[part] += 1
        self.messages[kind] = message
        self.versions[kind] += 1
        self._changed.set()
        self._changed = trio.Event()

    def publish_result(self, number: int, outcome: dict[str, Any]) -> None:
        """The result of match ``number``, if it is the one being watched."""
        welcome = self.messages["welcome"]
        if welcome is not None and welcome.get("match") == number:
            self.publish({"type": "result", **outcome})

    def encoded(self, part: str) -> bytes | None:
        """The part as JSON (cached per version), or None if there is none now."""
        message = self.messages[part]
        if message is None:
            return None
        version = self.versions[part]
        cached = self._json.get(part)
        if cached is None or cached[0] != version:
            cached = (version, dumps(message))
            self._json[part] = cached
        return cached[1]

    async def changed(self) -> None:
        await self._changed.wait()


#: Seconds between two tries to reach a bot port that refused the relay (the wrong transport, a
#: certificate it cannot check): doubled from the first to the last, so a mistake is no busy loop.
RETRY_FIRST = 0.2
RETRY_CAP = 10.0


@dataclass(frozen=True)
class RelayTarget:
    """Where a relay connects: ``host:port``, over TLS with the client context ``tls``, the server's
    certificate checked for ``server_hostname`` (None: ``host``; a context that checks no name, as
    `own_certificate`'s, ignores it)."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None
    server_hostname: str | None = None


#: Seconds at most between two looks for an address not known yet (a `ladder serve` not started).
UNKNOWN_CAP = 2.0


async def relay(
    host: str,
    port: int,
    feed: LiveFeed,
    *,
    follow: bool = True,
    match: int | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Watch the match server at ``host:port`` as a spectator (over TLS with ``tls``, its certificate
    checked for ``host``), feeding ``feed``; with ``follow``, reconnect after each match (and while
    the server is not up yet) to watch the next one. With ``match``, watch that running match
    (docs/protocol.md, "Spectators"). A transport that cannot work is logged once, with what to do."""
    target = RelayTarget(host, port, tls)

    async def fixed() -> RelayTarget:
        return target

    await relay_to(fixed, feed, follow=follow, match=match)


async def relay_to(
    where: Callable[[], Awaitable[RelayTarget | None]],
    feed: LiveFeed,
    *,
    follow: bool = True,
    match: int | None = None,
) -> None:
    """`relay`, asking ``where`` before each connection where the server is now (None: not known
    yet, asked again shortly): a server that restarts on another port is followed there."""
    said: set[str] = set()
    wait = RETRY_FIRST
    while True:
        target = await where()
        if target is None:
            if not follow:
                return
            wait = min(UNKNOWN_CAP, wait * 2)
            await trio.sleep(wait)
            continue
        problem = await _watch_once(target, feed, match)
        if problem is None:
            wait = RETRY_FIRST
        else:
            if problem not in said:
                said.add(problem)
                log.error("live view: %s", problem)
            wait = min(RETRY_CAP, wait * 2)
        if not follow:
            return
        await trio.sleep(wait if problem is not None else 0.1)


async def _watch_once(target: RelayTarget, feed: LiveFeed, match: int | None) -> str | None:
    """One spectator connection to its end; what stops the relay from working (said once), or None."""
    host, port, tls = target.host, target.port, target.tls
    where = f"{host}:{port}"
    try:
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
    except OSError:
        return None  # not up yet (or restarting): tried again shortly, nothing to fix
    if tls is not None:
        stream = trio.SSLStream(stream, tls, server_hostname=target.server_hostname or host)
    async with stream:
        try:
            if isinstance(stream, trio.SSLStream):
                await stream.do_handshake()
            await stream.send_all(encode(hello("web viewer", feed.game, role="spectator", match=match)))
            reader = FrameReader(FRAME_LIMIT)
            first = True
            while True:
                data = await stream.receive_some(1 << 20)
                if first and tls is None and (not data or data[:2] in (b"\x15\x03", b"\x16\x03")):
                    # A TLS server's alert, or its silent close: a plain one answers a hello.
                    what = "speaks TLS" if data else "closed the connection without a word: if it serves TLS"
                    return (
                        f"the bot port {where} {what}, give `ladder web` --live-tls (and "
                        "--live-tls-ca PATH if the system does not trust its certificate)"
                    )
                if not data:
                    return None
                first = False
                for message in reader.feed(bytes(data)):
                    feed.publish(message)
                    if message.get("type") in ("end", "error"):
                        return None
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            if tls is not None and isinstance(cause, ssl.SSLError):
                return (
                    f"the TLS handshake with the bot port {where} failed ({cause.reason or cause}): is "
                    "it serving TLS, is --live-host a name its certificate is for, and does "
                    "--live-tls-ca name the CA that signed it?"
                )
            log.warning("live view: the spectator stream from %s broke: %s", where, exc)
        except (OSError, ProtocolError) as exc:
            log.warning("live view: the spectator stream from %s broke: %s", where, exc)
    return None


def live_routes(feed: LiveFeed, prefix: str = "/live", title: str = "live match") -> list[BaseRoute]:
    """``/live/``: the player in live mode; ``/live/ws``: the WebSocket it reads (under ``prefix``)."""

    async def page(_request: Request) -> Response:
        return HTMLResponse(player_html(title, "", feed.game, live=f"{prefix}/ws"))

    async def socket(ws: WebSocket) -> None:
        await _stream(ws, feed)

    return [Route(f"{prefix}/", page), WebSocketRoute(f"{prefix}/ws", socket)]


async def _stream(ws: WebSocket, feed: LiveFeed) -> None:
    """Send a browser the feed's newest parts whenever it is ready for more: a slow one skips frames."""
    await ws.accept()
    seen = dict.fromkeys(PARTS, 0)
    try:
        while True:
            sent = False
            for part in PARTS:
                version = feed.versions[part]
                if version != seen[part]:
                    seen[part] = version
                    body = feed.encoded(part)
                    if body is not None:
                        await ws.send_text(body.decode())  # waits for a slow browser: it skips frames
                        sent = True
            if not sent:
                await feed.changed()
    except (WebSocketDisconnect, trio.BrokenResourceError, trio.ClosedResourceError):
        return


class LiveMatches:
    """Every running match of a server, each watchable on its own page (``/live/{n}/``).

    ``running()`` names the matches under way as (number, seat names). A match's feed and its relay
    (a spectator of that match alone) are made when a browser first asks for it, in `run`'s nursery;
    the feeds of ended matches are dropped beyond the newest `KEEP`, so memory stays bounded however
    long the server runs."""

    KEEP = 16

    def __init__(
        self,
        game: str,
        host: str,
        running: Callable[[], list[tuple[int, list[str]]]],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.game = game
        self.host = host
        #: The relays' client TLS context when the match server serves TLS (`own_certificate`).
        self.tls = tls
        #: The match server's port, once it listens (``serve --port 0`` learns it then).
        self.port: int | None = None
        self.running = running
        self.feeds: dict[int, LiveFeed] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the relays' nursery until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def feed(self, number: int) -> LiveFeed | None:
        """Match ``number``'s feed, its relay started now if it is running; None if it is unknown."""
        if number in self.feeds:
            return self.feeds[number]
        live = {n for n, _ in self.running()}
        if self._nursery is None or self.port is None or number not in live:
            return None
        feed = self.feeds[number] = LiveFeed(self.game)
        self._nursery.start_soon(
            partial(relay, self.host, self.port, feed, follow=False, match=number, tls=self.tls)
        )
        for old in [n for n in self.feeds if n not in live][: max(0, len(self.feeds) - self.KEEP)]:
            del self.feeds[old]
        return feed

    def routes(self) -> list[BaseRoute]:
        """``/live/all`` (the running matches, and JSON at ``/api/live``), ``/live/{n}/`` and its socket."""

        async def index(_request: Request) -> Response:
            running = list(reversed(self.running()))
            return HTMLResponse(render("running.html", title="matches under way", running=running))

        async def api(_request: Request) -> Response:
            return JSONResponse(
                [{"match": n, "names": names, "watch": f"/live/{n}/"} for n, names in self.running()]
            )

        def feed_of(number: int) -> LiveFeed:
            feed = self.feed(number)
            if feed is None:
                raise HTTPException(404, f"no match {number} is running; see /live/all")
            return feed

        async def one(request: Request) -> Response:
            number = path_number(request, "n", "running match")
            feed_of(number)
            return HTMLResponse(player_html(f"live match {number}", "", self.game, live=f"/live/{number}/ws"))

        async def socket(ws: WebSocket) -> None:
            number = parse_number(ws.path_params["n"])
            feed = None if number is None else self.feeds.get(number)
            if feed is None:
                await ws.close(code=1008)
                return
            await _stream(ws, feed)

        return [
            Route("/live/all", index),
            Route("/api/live", api),
            Route("/live/{n}/", one),
            WebSocketRoute("/live/{n}/ws", socket),
        ]


def live_app(
    feed: LiveFeed, matches: LiveMatches | None = None, allowed_hosts: AllowedHosts | None = None
) -> Starlette:
    """The live pages (``/`` leads to ``/live/``); with ``matches``, every running match's page too."""
    from cellarena.server.web.app import build_app

    async def home(_request: Request) -> Response:
        return RedirectResponse("/live/all" if matches is not None else "/live/")

    routes: list[BaseRoute] = [Route("/", home), *live_routes(feed)]
    if matches is not None:
        routes += matches.routes()
    return build_app(routes, allowed_hosts=allowed_hosts)


async def serve_live(sock: socket.socket, feed: LiveFeed, matches: LiveMatches | None = None) -> None:
    """`live_app` on the bound ``sock``, until cancelled: it answers to the names of the address it
    listens on (loopback: `AllowedHosts.for_server`)."""
    from cellarena.server.web.serving import run

    allowed, _ = AllowedHosts.for_server(sock.getsockname()[0], ())
    app = live_app(feed, matches, allowed)
    if matches is None:
        await run(app, sock)
        return
    async with trio.open_nursery() as nursery:
        await nursery.start(matches.run)
        await run(app, sock)


def own_certificate(cert: str) -> ssl.SSLContext:
    """A client context for a relay to this process's own TLS bot port (``--tls-cert``): it trusts
    only that certificate (pinned, whoever signed it) and checks no name, since the relay connects to
    a loopback address that the certificate, made for the public name, need not name."""
    context = ssl.create_default_context(cafile=cert)
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.check_hostname = False
    return context


def loopback_for(host: str) -> str:
    """Where the relay connects to reach a server listening on ``host`` (any address: loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
