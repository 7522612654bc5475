"""The public pages' paths (`ladder web GAME...`), each to its handler over a `LadderSite`.

One game's lists are at the root (``/``, ``/matches``, ``/api/standings``); several games' under
``/GAME/`` each, with ``/`` listing the games. Bots, matches and replays are at the root either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.store.ladder_store import MAX_ID
from cellarena.arena.ladder.web.community_pages import CommunityApi
from cellarena.arena.ladder.web.public_pages import PAGE, LadderSite, client_host, match_json
from cellarena.arena.ladder.web.season_pages import season_routes
from cellarena.server.web.numbers import path_number, query_number
from cellarena.server.web.replays import ReplayLibrary, replay_routes


class PublicPages:
    """The handlers of the public pages and their JSON API; `public_routes` maps the paths to them."""

    def __init__(self, site: LadderSite) -> None:
        self.site = site

    async def html(self, request: Request, fn: Any, *args: Any) -> Response:
        owner = None if self.site.who is None else await self.site.who(request)
        return HTMLResponse(await trio.to_thread.run_sync(partial(fn, *args, owner=owner)))

    def standings(self, game: str) -> Callable[[Request], Awaitable[Response]]:
        async def page(request: Request) -> Response:
            return await self.html(request, self.site.standings_html, game)

        return page

    async def games(self, request: Request) -> Response:
        return await self.html(request, self.site.games_html)

    async def bot(self, request: Request) -> Response:
        return await self.html(request, self.site.bot_html, request.path_params["name"])

    def matches(self, game: str) -> Callable[[Request], Awaitable[Response]]:
        async def page(request: Request) -> Response:
            return await self.html(request, self.site.matches_html, _before(request), game)

        return page

    async def match(self, request: Request) -> Response:
        return await self.html(
            request, self.site.match_html, path_number(request, "id", "match", maximum=MAX_ID)
        )

    def api_standings(self, game: str) -> Callable[[Request], Awaitable[Response]]:
        async def answer(_request: Request) -> Response:
            table = await trio.to_thread.run_sync(self.site.store.standings, game)
            return JSONResponse({"game": game, "standings": [s.to_json() for s in table]})

        return answer

    async def api_bot(self, request: Request) -> Response:
        return JSONResponse(await trio.to_thread.run_sync(self.site.bot_json, request.path_params["name"]))

    def api_matches(self, game: str) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            before = _before(request)
            found = await trio.to_thread.run_sync(
                lambda: self.site.store.matches(game, limit=PAGE, before=before)
            )
            return JSONResponse({"matches": [match_json(m) for m in found]})

        return answer

    async def api_games(self, _request: Request) -> Response:
        return JSONResponse(
            {
                "games": [
                    {
                        "game": g,
                        "standings": f"/api{self.site.root(g)}/standings",
                        "page": f"{self.site.root(g)}/",
                    }
                    for g in self.site.games
                ]
            }
        )

    async def which_game(self, request: Request) -> Response:
        roots = ", ".join(f"/api{self.site.root(g)}{request.url.path[4:]}" for g in self.site.games)
        raise HTTPException(404, f"this ladder serves several games: ask {roots}")

    async def api_match(self, request: Request) -> Response:
        match_id = path_number(request, "id", "match", maximum=MAX_ID)
        m = await trio.to_thread.run_sync(self.site.match_or_404, match_id)
        return JSONResponse(match_json(m))

    async def api_owner_replay(self, request: Request) -> Response:
        # The token comes in a header, never the URL (URLs end up in logs and histories).
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(401, "send the bot's token as 'Authorization: Bearer TOKEN'")
        rid = request.path_params["rid"]
        data = await self.site.owner_replay_counted(
            client_host(request, self.site.trusted_proxies), rid, token
        )
        name = f"ladder-{rid}.replay"
        disposition = {"content-disposition": f'attachment; filename="{name}"'}
        return Response(data, media_type="application/octet-stream", headers=disposition)


def public_routes(site: LadderSite) -> list[BaseRoute]:
    """Every public route of ``site``: the community API's first (/bots/{name:path} would take them)."""
    pages = PublicPages(site)
    library = ReplayLibrary(
        site.replay_path,
        debug=site.public_debug,
        errors=False,  # a bot's exceptions are its owner's, even where its drawings are published
        label=lambda rid: f"match {rid}",  # by number, never by path (public_pages' docstring)
        file_name=lambda rid: f"ladder-{rid}.replay",
    )
    return [
        *CommunityApi(site.store, site.games, site.owner_sessions).routes(),
        *_lists(site, pages),
        *season_routes(site),
        Route("/bots/{name:path}", pages.bot),
        Route("/matches/{id}", pages.match),
        Route("/api/bots/{name:path}", pages.api_bot),
        Route("/api/matches/{id}", pages.api_match),
        Route("/api/replays/{rid}/owner", pages.api_owner_replay),
        *replay_routes(library, prefix="/replays"),
    ]


def _lists(site: LadderSite, pages: PublicPages) -> list[BaseRoute]:
    """The standings and match lists: at the root for one game, under /GAME/ for each of several."""
    if not site.several:
        return [
            Route("/", pages.standings(site.game)),
            Route("/matches", pages.matches(site.game)),
            Route("/api/standings", pages.api_standings(site.game)),
            Route("/api/matches", pages.api_matches(site.game)),
        ]
    lists: list[BaseRoute] = [Route("/", pages.games), Route("/api/games", pages.api_games)]
    for g in site.games:
        root = site.root(g)
        lists += [
            Route(f"{root}/", pages.standings(g)),
            Route(root, redirect(f"{root}/")),
            Route(f"{root}/matches", pages.matches(g)),
            Route(f"/api{root}/standings", pages.api_standings(g)),
            Route(f"/api{root}/matches", pages.api_matches(g)),
        ]
    return [
        *lists,
        Route("/matches", redirect("/")),  # every game's list is its own
        Route("/api/standings", pages.which_game),
        Route("/api/matches", pages.which_game),
    ]


def redirect(to: str) -> Callable[[Request], Awaitable[Response]]:
    async def answer(_request: Request) -> Response:
        return RedirectResponse(to)

    return answer


def _before(request: Request) -> int | None:
    """The match list's ``?before=N``: 400 if N is not a number, 404 if no match number is that large."""
    if "before" not in request.query_params:
        return None
    return query_number(request, "before", 0, maximum=MAX_ID, too_large=404)
