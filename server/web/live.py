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
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from cellarena.sdk.protocol import FrameReader, ProtocolError, encode, hello
from cellarena.server.web.jsonable import dumps
from cellarena.server.web.replays import player_html

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


async def relay(host: str, port: int, feed: LiveFeed, *, follow: bool = True) -> None:
    """Watch the match server at ``host:port`` as a spectator, feeding ``feed``; with ``follow``,
    reconnect after each match (and while the server is not up yet) to watch the next one."""
    while True:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:
            await trio.sleep(0.2)
            continue
        async with stream:
            try:
                await stream.send_all(encode(hello("web viewer", feed.game, role="spectator")))
                reader = FrameReader(FRAME_LIMIT)
                ended = False
                while not ended:
                    data = await stream.receive_some(1 << 20)
                    if not data:
                        break
                    for message in reader.feed(data):
                        feed.publish(message)
                        ended = ended or message.get("type") in ("end", "error")
            except (OSError, trio.BrokenResourceError, ProtocolError) as exc:
                log.warning("live view: the spectator stream from %s:%d broke: %s", host, port, exc)
        if not follow:
            return
        await trio.sleep(0.1)


def live_routes(feed: LiveFeed) -> list[BaseRoute]:
    """``/live/``: the player in live mode; ``/live/ws``: the WebSocket it reads."""

    async def page(_request: Request) -> Response:
        return HTMLResponse(player_html("live match", "", feed.game, live="/live/ws"))

    async def socket(ws: WebSocket) -> None:
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

    return [Route("/live/", page), WebSocketRoute("/live/ws", socket)]


async def serve_live(sock: socket.socket, feed: LiveFeed) -> None:
    """The live pages (``/`` leads to ``/live/``) on the bound ``sock``, until cancelled."""
    from starlette.responses import RedirectResponse

    from cellarena.server.web.app import build_app
    from cellarena.server.web.serving import run

    async def home(_request: Request) -> Response:
        return RedirectResponse("/live/")

    await run(build_app([Route("/", home), *live_routes(feed)]), sock)


def loopback_for(host: str) -> str:
    """Where the relay connects to reach a server listening on ``host`` (any address: loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
