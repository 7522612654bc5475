"""Closed seasons on the public site: each game's list of seasons and each season's archived table,
as pages and as JSON (``/seasons``, ``/seasons/N``, ``/api/seasons``, ``/api/seasons/N`` under each
game's root). They only read, as the other public pages do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.records import STANDINGS_COLUMNS, Season, Standing
from cellarena.arena.ladder.web.public_pages import LadderSite
from cellarena.server.web.numbers import path_number

#: No game closes this many seasons: a larger number is refused before the store is asked.
MAX_SEASON = 1_000_000


class SeasonPages:
    """The handlers of one game's season pages."""

    def __init__(self, site: LadderSite, game: str) -> None:
        self.site = site
        self.game = game

    def closed(self, number: int) -> tuple[Season, list[Standing]]:
        try:
            return self.site.store.season_standings(self.game, number)
        except LadderStoreError as exc:
            if "no closed season" in str(exc):
                raise HTTPException(404, f"{self.game} has no closed season {number}") from None
            raise

    def list_html(self, owner: object = None) -> str:
        seasons = self.site.store.seasons(self.game)
        title = f"{self.game} seasons"
        return self.site.render_page("seasons.html", title, self.game, owner=owner, seasons=seasons)

    def season_html(self, number: int, owner: object = None) -> str:
        season, table = self.closed(number)
        return self.site.render_page(
            "season.html",
            f"{self.game} ladder, {season.name}",
            self.game,
            owner=owner,
            season=season,
            columns=STANDINGS_COLUMNS,
            table=table,
        )

    async def page_list(self, request: Request) -> Response:
        return await self._html(request, self.list_html)

    async def page_season(self, request: Request) -> Response:
        number = path_number(request, "number", "season", maximum=MAX_SEASON)
        return await self._html(request, partial(self.season_html, number))

    async def api_list(self, _request: Request) -> Response:
        seasons = await trio.to_thread.run_sync(self.site.store.seasons, self.game)
        return JSONResponse({"game": self.game, "seasons": [s.to_json() for s in seasons]})

    async def api_season(self, request: Request) -> Response:
        number = path_number(request, "number", "season", maximum=MAX_SEASON)
        season, table = await trio.to_thread.run_sync(self.closed, number)
        return JSONResponse(
            {"game": self.game, "season": season.to_json(), "standings": [s.to_json() for s in table]}
        )

    async def _html(self, request: Request, fn: Callable[..., str]) -> Response:
        owner = None if self.site.who is None else await self.site.who(request)
        return HTMLResponse(await trio.to_thread.run_sync(partial(fn, owner=owner)))


def season_routes(site: LadderSite) -> list[BaseRoute]:
    """Each game's season pages, under its root (the site's root for a site of one game)."""
    routes: list[BaseRoute] = []
    for game in site.games:
        pages, root = SeasonPages(site, game), site.root(game)
        handlers: list[tuple[str, Callable[[Request], Awaitable[Response]]]] = [
            (f"{root}/seasons", pages.page_list),
            (f"{root}/seasons/{{number}}", pages.page_season),
            (f"/api{root}/seasons", pages.api_list),
            (f"/api{root}/seasons/{{number}}", pages.api_season),
        ]
        routes += [Route(path, handler) for path, handler in handlers]
    return routes
