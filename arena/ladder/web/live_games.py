"""The live view of each game `ladder web` serves (``--live-port [GAME=]PORT``, docs/ladder.md): one
relay and one feed per game, each game's match in the player at ``/live/GAME/``.

A one-game site keeps its first addresses (``/live/`` and ``/live/ws``) beside ``/live/GAME/``; a site
of several games lists at ``/live/`` the games it relays. A game's bot port is a number the host gives,
or ``auto``: the port, TLS and certificate its `ladder serve` recorded in the database (the connect
page's `Endpoint`), read again before each connection, so a server restarted on another port is
followed there."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.connect_commands import Endpoint
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.public_pages import LadderSite
from cellarena.server.web.live import LiveFeed, RelayTarget, live_routes, relay_to

log = logging.getLogger("cellarena.ladder.web")

#: ``--live-port GAME=auto``: the port its `ladder serve` recorded.
AUTO = "auto"


@dataclass(frozen=True)
class LiveSource:
    """Where one game's relay watches: ``port`` (or `AUTO`) at ``host``, over TLS with ``tls`` (a
    number's; an ``auto`` port follows what its server recorded)."""

    game: str
    port: int | str
    host: str = "127.0.0.1"
    tls: ssl.SSLContext | None = None


class LiveGames:
    """The feeds of the games with a live view, their pages and their relays."""

    def __init__(self, site: LadderSite, games: Sequence[str]) -> None:
        self.site = site
        #: Each relayed game's feed, in the site's order of games.
        self.feeds = {game: LiveFeed(game) for game in site.games if game in games}

    def routes(self) -> list[BaseRoute]:
        """``/live/GAME/`` and its socket for each game; ``/live/`` the one game's match, or the list."""
        routes: list[BaseRoute] = []
        if not self.site.several:
            routes += live_routes(self.feeds[self.site.game])  # the one game's first addresses
        else:
            routes.append(Route("/live/", self.index))
        for game, feed in self.feeds.items():
            routes += live_routes(feed, f"/live/{game}", f"{game}: live match")
        routes.append(Route("/live/{game}/", self.unknown))  # after the games': only others reach it
        return routes

    async def index(self, _request: Request) -> Response:
        return HTMLResponse(self.site.render_page("live.html", "watch live", "", relayed=list(self.feeds)))

    async def unknown(self, request: Request) -> Response:
        shown = ", ".join(f"/live/{g}/" for g in self.feeds)
        raise HTTPException(404, f"no live view of {request.path_params['game'][:40]!r} here; see {shown}")

    def relays(
        self, sources: Sequence[LiveSource], store: LadderStore
    ) -> list[Callable[[], Awaitable[None]]]:
        """One task per source, relaying its game's match to its feed until cancelled."""
        return [partial(relay_to, _where(source, store), self.feeds[source.game]) for source in sources]


def _where(source: LiveSource, store: LadderStore) -> Callable[[], Awaitable[RelayTarget | None]]:
    """Where ``source``'s server is, asked before each connection."""
    if isinstance(source.port, int):
        fixed = RelayTarget(source.host, source.port, source.tls)

        async def given() -> RelayTarget:
            return fixed

        return given
    contexts: dict[tuple[str | None, bool], ssl.SSLContext] = {}

    async def recorded() -> RelayTarget | None:
        try:
            endpoint = (await trio.to_thread.run_sync(store.endpoints)).get(source.game)
        except Exception as exc:  # the database away: the pages say so; asked again shortly
            log.debug("live view of %s: its address could not be read: %s", source.game, exc)
            return None
        if endpoint is None:
            return None  # its `ladder serve` has not started yet
        return recorded_target(source.host, endpoint, contexts)

    return recorded


def recorded_target(
    host: str, endpoint: Endpoint, contexts: dict[tuple[str | None, bool], ssl.SSLContext] | None = None
) -> RelayTarget:
    """Where to watch a server that recorded ``endpoint``, reached at ``host``: its port, and over
    TLS its certificate trusted as bots are told to (the PEM it recorded, pinned, or the system's
    CAs), checked for its public name. ``contexts`` keeps the contexts made."""
    if not endpoint.tls:
        return RelayTarget(host, endpoint.port)
    contexts = {} if contexts is None else contexts
    key = (endpoint.ca_pem, endpoint.host is not None)
    context = contexts.get(key)
    if context is None:
        context = ssl.create_default_context(cadata=endpoint.ca_pem)
        if endpoint.ca_pem is not None:
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the server's own, pinned
        # No public name recorded (a server on every address): the certificate alone is checked;
        # the relay connects to this machine, which no one else answers for.
        context.check_hostname = endpoint.host is not None
        contexts[key] = context
    return RelayTarget(host, endpoint.port, context, server_hostname=endpoint.host)
