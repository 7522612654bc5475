"""The results pages: a list of tournaments, each one's standings, rating chart and matches, from
the Jinja2 templates in ``templates/`` (autoescaped: a bot's name is data, never markup).

`results_routes` takes the `ResultsSource`s by id and serves them; the matches' replays play in the
server's replay player (`replay_routes`, mounted by the caller with `replay_library`). The ladder can
mount the same routes over its own source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import trio
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.web.charts import color_of, rating_chart
from cellarena.arena.web.results_source import ResultsSource
from cellarena.server.web.app import build_app
from cellarena.server.web.hosts import AllowedHosts
from cellarena.server.web.numbers import parse_number
from cellarena.server.web.replays import ReplayLibrary, replay_routes
from cellarena.server.web.templating import render

#: Where this module's templates are (``templates/``, beside the viewer's base.html).
PACKAGE = "cellarena.arena.web"


def replay_id(tid: str, index: int) -> str:
    return f"{tid}.{index}"


def replay_library(sources: Mapping[str, ResultsSource]) -> ReplayLibrary:
    """The player's library over the sources' matches: id ``TID.INDEX``."""

    def find(rid: str) -> Path | None:
        tid, _, index = rid.rpartition(".")
        source = sources.get(tid)
        number = parse_number(index)
        if source is None or number is None:
            return None
        row = source.match(number)
        return None if row is None else row.replay

    def label(rid: str) -> str:
        tid, _, index = rid.rpartition(".")
        return f"{tid}, match {index}"

    def file_name(rid: str) -> str:
        # A header value: the tournament's folder name may hold any character.
        return re.sub(r"[^A-Za-z0-9._-]", "_", rid) + ".replay"

    return ReplayLibrary(find, label=label, file_name=file_name)


def _source(sources: Mapping[str, ResultsSource], tid: str) -> ResultsSource:
    source = sources.get(tid)
    if source is None:
        raise HTTPException(404, f"no tournament {tid!r} here")
    return source


def tournament_html(tid: str, source: ResultsSource) -> str:
    """One tournament's page (templates/tournament.html): standings, rating chart, matches."""
    standings = source.standings()
    bots = [s.bot for s in standings]
    matches = source.matches()
    return render(
        "tournament.html",
        PACKAGE,
        title=f"{source.title}: standings",
        source=source,
        standings=standings,
        colors={bot: color_of(i) for i, bot in enumerate(bots)},
        matches=matches,
        replay_ids={m.index: quote(replay_id(tid, m.index)) for m in matches},
        # An SVG this code drew, every name in it escaped (charts.py): trusted, so not escaped again.
        chart=Markup(rating_chart(source.rating_history(), bots)),
    )


def index_html(sources: Mapping[str, ResultsSource]) -> str:
    """The list of tournaments (templates/tournaments.html)."""
    return render("tournaments.html", PACKAGE, title="tournaments", sources=sources)


def results_routes(sources: Mapping[str, ResultsSource]) -> list[BaseRoute]:
    """``/`` (the list, or the one tournament), ``/t/{tid}/`` and ``/api/t/{tid}/standings``."""

    async def index(_request: Request) -> Response:
        if len(sources) == 1:
            return RedirectResponse(f"/t/{quote(next(iter(sources)))}/")
        return HTMLResponse(index_html(sources))

    async def tournament(request: Request) -> Response:
        tid = request.path_params["tid"]
        source = _source(sources, tid)
        return HTMLResponse(await trio.to_thread.run_sync(tournament_html, tid, source))

    async def standings(request: Request) -> Response:
        source = _source(sources, request.path_params["tid"])
        rows = await trio.to_thread.run_sync(source.standings)
        return JSONResponse([s.to_json() for s in rows])

    async def slash(request: Request) -> Response:
        return RedirectResponse(f"/t/{quote(request.path_params['tid'])}/")

    return [
        Route("/", index),
        Route("/t/{tid}/", tournament),
        Route("/t/{tid}", slash),
        Route("/api/t/{tid}/standings", standings),
    ]


def results_app(sources: Mapping[str, ResultsSource], allowed_hosts: AllowedHosts | None = None) -> Starlette:
    """`cellarena web`'s app: the tournaments' pages and their replays in the player."""
    routes = [*results_routes(sources), *replay_routes(replay_library(sources))]
    return build_app(routes, allowed_hosts=allowed_hosts)
