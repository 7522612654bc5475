"""`ladder serve --health-port`: one small HTTP endpoint that says how the ladder server is doing.

``GET /health`` answers JSON: the database's state (up or down, since when, the error), the results
kept on disk waiting for it, the bots queued and the matches under way. The status is 200 while the
database is up and 503 while it is down, so a load balancer or a monitor needs to read no body. It is
the one endpoint the server's figures grow on: ``GET /metrics`` serves them in the Prometheus text
format on the same port (`cellarena.arena.ladder.ops.metrics`). It serves on loopback by default and
shows no token, bot command or path beyond the database's redacted address.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from cellarena.arena.ladder.services.seating import LadderSeating


def health(seating: LadderSeating) -> dict[str, Any]:
    """What ``/health`` says (see the module docstring)."""
    spool = seating.results.spool
    return {
        "status": "ok" if seating.database.up else "degraded",
        "database": seating.database.to_json(),
        "pending_results": 0 if spool is None else len(spool),
        "queue": len(seating.queue.waiting),
        "matches": len(seating.starter.live) + len(seating.starter.remote),
    }


def health_routes(seating: LadderSeating) -> list[BaseRoute]:
    from starlette.responses import JSONResponse
    from starlette.responses import Response as PlainResponse
    from starlette.routing import Route

    from cellarena.arena.ladder.ops.metrics import CONTENT_TYPE, metrics_text

    async def endpoint(request: Request) -> Response:
        body = health(seating)
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    async def metrics(request: Request) -> Response:
        return PlainResponse(metrics_text(seating), media_type=CONTENT_TYPE)

    return [Route("/health", endpoint), Route("/metrics", metrics)]


async def serve_health(seating: LadderSeating, sock: socket.socket) -> None:
    """Serve ``/health`` on the bound ``sock`` until cancelled."""
    from starlette.applications import Starlette

    from cellarena.server.web.serving import run

    await run(Starlette(routes=health_routes(seating)), sock)
