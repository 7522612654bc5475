"""The app factory: one starlette app from the pieces a command wants to serve.

`cellarena replay view` mounts the replay player for one file; `cellarena web` (the arena) and the
ladder add their own pages and hand the player a `ReplayLibrary` that finds their replays. Every
error, from a missing page to a bug, becomes a readable page or a JSON message, never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.replay import ReplayError
from cellarena.server.web.hosts import AllowedHosts, HostCheck
from cellarena.server.web.pages import error_response

log = logging.getLogger("cellarena.web")

STATIC = files("cellarena.server.web") / "static"


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    hint = "Check the address." if exc.status_code == 404 else ""
    response = error_response(request, exc.status_code, f"{request.url.path}: {exc.detail}", hint)
    response.headers.update(exc.headers or {})  # e.g. a lock-out's Retry-After
    return response


async def _replay_error(request: Request, exc: Exception) -> Response:
    return error_response(
        request,
        422,
        str(exc),
        "The replay file is damaged or does not re-simulate; `cellarena replay verify` says more.",
    )


async def _any_error(request: Request, exc: Exception) -> Response:
    log.exception("error serving %s", request.url.path)
    return error_response(
        request,
        500,
        f"{request.url.path}: internal error ({type(exc).__name__})",
        "The server's log has the details.",
    )


def static_files(directory: Traversable) -> StaticFiles:
    """The viewer's assets. An editable install in strict mode (docs/sdk.md's) lays each file as a
    symlink into the checkout, which StaticFiles refuses by default: the player was a blank page.
    ``follow_symlink`` serves them; a path with ``..`` still cannot leave the folder."""
    return StaticFiles(directory=str(directory), follow_symlink=True)


class PlainTarget:
    """ASGI middleware: a request target (path and query) must be ASCII, as HTTP/1.1 has it (RFC 9112;
    h11 refuses anything else): a raw byte past 127 in the query string made starlette's URL raise
    UnicodeDecodeError while it built even the error page. Refused with a 400 before anything reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not (
            scope.get("query_string", b"").isascii() and scope.get("raw_path", b"").isascii()
        ):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            response = PlainTextResponse(
                "400: the address holds bytes that are not ASCII; percent-encode them", status_code=400
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(
    routes: Sequence[BaseRoute],
    *,
    allowed_hosts: AllowedHosts | None = None,
    trusted_proxies: TrustedProxies | None = None,
) -> Starlette:
    """An app serving ``routes`` and the viewer's static files under /static; with ``allowed_hosts``,
    only to requests that name one of them (`HostCheck`: the commands always give them)."""
    middleware = [Middleware(PlainTarget), Middleware(GZipMiddleware, minimum_size=1024)]
    if allowed_hosts is not None:
        middleware.insert(1, Middleware(HostCheck, allowed=allowed_hosts, trusted=trusted_proxies))
    return Starlette(
        debug=False,
        routes=[*routes, Mount("/static", app=static_files(STATIC), name="static")],
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, ReplayError: _replay_error, Exception: _any_error},
    )
