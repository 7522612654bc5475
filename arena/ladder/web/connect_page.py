"""The connect page (``/connect``): where each game's bots connect, and the command of each kit.

Each game's ``ladder serve`` records what it exposes as it starts (`connect_commands.Endpoint`, in the
database's settings); this page reads it: the address and port (the serve's ``--public-host`` and
``--public-port``, else the address it listens on, else this site's own name: ``ladder web
--public-url``'s, or the request's), TLS, the certificate to download when no public CA signed it
(``/connect/GAME/ca.pem``: certificates only, never a key), and `connect_commands`' command for the
SDK and each kit. ``/api/connect`` says the same as JSON; the token page and the owners' API (which
`ladder register` prints from) use `Connect.address` too. Public: it shows nothing an owner's page
does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.connect_commands import KITS, Address, connect_commands, token_file
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.public_pages import LadderSite


class Connect:
    """Where bots connect to the games of a site: read from the store, named for a request."""

    def __init__(self, store: LadderStore, games: Sequence[str], public_url: str | None = None) -> None:
        self.store = store
        self.games = tuple(games)
        #: The site's address as its host states it (``ladder web --public-url``), or None.
        self.public_url = public_url.rstrip("/") if public_url else None

    def site_url(self, request: Request) -> str:
        """This site's address: the public URL, else the one the request came to."""
        return self.public_url or str(request.base_url).rstrip("/")

    def fallback_host(self, request: Request) -> str:
        """The name bots use when a serve listens on every address and was told none: the site's."""
        return urlsplit(self.site_url(request)).hostname or "localhost"

    def addresses(self, fallback_host: str) -> dict[str, Address | None]:
        """Each game's address (None: no serve of it has recorded one yet). Blocks: the store."""
        known = self.store.endpoints()
        return {g: known[g].address(fallback_host) if g in known else None for g in self.games}

    def address(self, game: str, fallback_host: str) -> Address | None:
        return self.addresses(fallback_host).get(game)

    def context(self, request: Request, bot: str | None = None, game: str | None = None) -> dict[str, Any]:
        """What the connect page's panels (``connect_panels.html``) show: every game's, or with
        ``game`` that one's, with ``bot``'s name in the commands. Blocks: the store."""
        addresses = self.addresses(self.fallback_host(request))
        if game is not None:
            addresses = {game: addresses.get(game)}
        return {
            "addresses": addresses,
            "commands": {g: connect_commands(a, bot) for g, a in addresses.items() if a is not None},
            "token_file": token_file(bot),
            "site_url": self.site_url(request),
            "kits": KITS,
        }

    def ca_pem(self, game: str) -> str:
        endpoint = self.store.endpoints().get(game)
        if endpoint is None or endpoint.ca_pem is None:
            raise HTTPException(
                404, f"{game[:64]!r} has no certificate of its own to trust here (a public CA's, or no TLS)"
            )
        return endpoint.ca_pem


def connect_routes(connect: Connect, site: LadderSite) -> list[BaseRoute]:
    """``/connect``, ``/api/connect`` and ``/connect/GAME/ca.pem``, in ``site``'s pages."""

    async def page(request: Request) -> Response:
        owner = None if site.who is None else await site.who(request)
        context = await trio.to_thread.run_sync(connect.context, request)
        return HTMLResponse(site.render_page("connect.html", "Connect your bot", owner=owner, **context))

    async def api(request: Request) -> Response:
        addresses = await trio.to_thread.run_sync(connect.addresses, connect.fallback_host(request))
        return JSONResponse({"games": [_address_json(connect, request, g, a) for g, a in addresses.items()]})

    async def ca(request: Request) -> Response:
        game = request.path_params["game"]
        pem = await trio.to_thread.run_sync(connect.ca_pem, game)
        disposition = f'attachment; filename="{quote(Address(game, "", 1).ca_file, safe="")}"'
        return Response(
            pem, media_type="application/x-pem-file", headers={"content-disposition": disposition}
        )

    return [
        Route("/connect", page),
        Route("/api/connect", api),
        Route("/connect/{game}/ca.pem", ca),
    ]


def address_json(connect: Connect, request: Request, address: Address) -> dict[str, Any]:
    """An address as the API says it, with where to download its certificate when it has its own."""
    data = address.to_json()
    data["ca"] = ca_url(connect.site_url(request), address) if address.own_ca else None
    return data


def _address_json(connect: Connect, request: Request, game: str, address: Address | None) -> dict[str, Any]:
    if address is None:
        return {"game": game, "host": None, "port": None, "tls": None, "own_ca": None, "ca": None}
    return address_json(connect, request, address)


def ca_url(site_url: str, address: Address) -> str:
    """Where the certificate of ``address``'s game downloads from the site at ``site_url``."""
    return f"{site_url}/connect/{quote(address.game, safe='')}/ca.pem"
