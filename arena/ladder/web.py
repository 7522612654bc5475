"""The ladder's public pages: standings, bot pages, the match list, replays and the live match.

Pages render from Jinja2 templates (``templates/*.html`` beside this module, autoescaped): a bot's name
is data wherever it is shown. The owners' pages (`web_accounts`) share their header (``ladder.html``).

Served by the ladder process itself (`cellarena ladder serve --web-port`), on the web app the replay
viewer uses (`cellarena.server.web`): every page is also JSON under ``/api/``, every finished
match's replay plays in the viewer and downloads, and ``/live/`` shows the newest match as it is
played. The pages read the store in worker threads (it blocks), and only read: these routes take
no input but page addresses, so a stranger can do nothing here but look. Signing up, logging in and
owning bots are `web_accounts`'s routes, served beside these only with ``ladder web --signup``.

Nothing secret is shown: the store's records hold no token or digest, and a house bot's command
(which may name paths on the host) is left out; replays are offered by match id, never by path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import trio
from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.records import STANDINGS_COLUMNS, MatchRecord
from cellarena.arena.ladder.store import MAX_ID, LadderStore
from cellarena.arena.ladder.web_community import CommunityApi, OwnerSessions
from cellarena.arena.web.charts import rating_chart
from cellarena.arena.web.results import RatingPoint
from cellarena.server.replay import strip_debug_bytes
from cellarena.server.web.replays import ReplayLibrary, replay_routes
from cellarena.server.web.templating import render

#: Matches per page of the match list, and on a bot's page.
PAGE = 50


def bot_href(name: str) -> str:
    """A bot's page: every character but the unreserved ones escaped, ``/`` too (a name ``a/..``
    would otherwise be resolved away by the browser)."""
    return f"/bots/{quote(name, safe='')}"


def _has_replay(m: MatchRecord) -> bool:
    return m.status == "finished" and m.replay is not None and Path(m.replay).is_file()


def match_json(m: MatchRecord) -> dict[str, Any]:
    """A match as the API shows it: the store's record, its replay as addresses rather than a path."""
    data = m.to_json()
    data["replay"] = (
        {"watch": f"/replays/{m.id}/", "download": f"/api/replays/{m.id}/file"} if _has_replay(m) else None
    )
    return data


class LadderSite:
    """The pages of one ladder's game, read from its store."""

    def __init__(
        self,
        store: LadderStore,
        game: str,
        *,
        live: bool = False,
        public_debug: bool = False,
        accounts: bool = False,
        policy: str | None = None,
    ) -> None:
        self.store = store
        self.game = game
        self.live = live
        #: Whether owners' pages are served beside (`web_accounts`): the header links to them.
        self.accounts = accounts
        self.policy = policy
        #: Who is logged in, for the header (`AccountSite.owner`); None without accounts.
        self.who: Callable[[Request], Awaitable[Any]] | None = None
        #: Owners' sessions for the community API's changes (`AccountSite.api_owner`); None: tokens only.
        self.owner_sessions: OwnerSessions | None = None
        #: Whether anyone may download the bots' debug drawings; else only each bot's owner gets its
        #: own, with the bot's token (`owner_replay`).
        self.public_debug = public_debug

    def _render(self, template: str, title: str, **context: Any) -> str:
        return render(
            template,
            "cellarena.arena.ladder",
            title=title,
            game=self.game,
            live=self.live,
            accounts=self.accounts,
            policy=self.policy,
            has_replay=_has_replay,
            bot_href=bot_href,
            **context,
        )

    # -- pages (run in a worker thread: the store blocks) --------------------------------------------
    def standings_html(self, owner: object = None) -> str:
        return self._render(
            "standings.html",
            f"{self.game} ladder",
            owner=owner,
            columns=STANDINGS_COLUMNS,
            table=self.store.standings(self.game),
            recent=self.store.matches(self.game, limit=10),
        )

    def bot_html(self, name: str, owner: object = None) -> str:
        bot = self.store.bot(name)
        if bot is None or bot.game != self.game:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        history = self.store.rating_history(name)
        points = [RatingPoint(p.match_id, name, p.rating.conservative) for p in history]
        standing = next((s for s in self.store.standings(self.game) if s.bot == name), None)
        summary = (
            f"rank {standing.rank}, rating {standing.rating:.2f} over {standing.matches} matches "
            f"({standing.wins} won, {standing.draws} drawn, {standing.losses} lost)"
            if standing is not None
            else "not ranked" + (" (revoked)" if not bot.active else " yet")
        )
        return self._render(
            "bot.html",
            name,
            owner=owner,
            bot=bot,
            owner_name=self._owner_of(name) if self.accounts else None,
            summary=summary,
            chart=Markup(rating_chart(points, [name])),  # SVG the code drew; it escapes the names
            recent=self.store.bot_history(name, limit=PAGE),
        )

    def _owner_of(self, name: str) -> str | None:
        from cellarena.arena.ladder.accounts import Accounts

        return Accounts(self.store).owner_of(name)

    def matches_html(self, before: int | None, owner: object = None) -> str:
        matches = self.store.matches(self.game, limit=PAGE, before=before)
        return self._render(
            "matches.html",
            f"{self.game} ladder: matches",
            owner=owner,
            matches=matches,
            more=matches[-1].id if len(matches) == PAGE else None,
        )

    def match_html(self, match_id: int, owner: object = None) -> str:
        return self._render("match.html", f"match #{match_id}", m=self._match(match_id), owner=owner)

    def _match(self, match_id: int) -> MatchRecord:
        m = self.store.match(match_id)
        if m is None or m.game != self.game:
            raise HTTPException(404, f"no match #{match_id} on this ladder")
        return m

    # -- JSON -----------------------------------------------------------------------------------------
    def bot_json(self, name: str) -> dict[str, Any]:
        bot = self.store.bot(name)
        if bot is None or bot.game != self.game:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        standing = next((s for s in self.store.standings(self.game) if s.bot == name), None)
        return {
            "name": bot.name,
            "kind": bot.kind,
            "active": bot.active,
            "standing": None if standing is None else standing.to_json(),
            "rating_history": [
                {
                    "match": p.match_id,
                    "ended": p.ended.isoformat(),
                    "mu": p.rating.mu,
                    "sigma": p.rating.sigma,
                }
                for p in self.store.rating_history(name)
            ],
            "recent": [match_json(b.match) for b in self.store.bot_history(name, limit=PAGE)],
            # The community ladder: why it may not play now, and its statistics (per version too).
            "paused": bot.paused,
            "banned": bot.banned,
            "stats": f"/api/bots/{quote(name, safe='')}/stats",
        }

    def replay_path(self, rid: str) -> Path | None:
        match_id = _match_number(rid)
        if match_id is None:
            return None
        m = self.store.match(match_id)
        if m is None or m.game != self.game or not _has_replay(m) or m.replay is None:
            return None
        return Path(m.replay)

    def owner_replay(self, rid: str, token: str) -> bytes:
        """Replay ``rid`` as the owner of the bot whose ``token`` this is gets it: with that bot's
        debug drawings and no other bot's. An HTTPException when the token is not a bot's (401) or
        the bot did not play a match of that number with a replay (404: the same answer whether the
        match exists or not, so a token cannot probe other bots' matches)."""
        bot = self.store.authenticate(token)
        if bot is None:
            raise HTTPException(401, "that token is no active bot's; give the bot's token (--token-file)")
        m = self.store.match(int(rid)) if rid.isdigit() else None
        seats = [s.seat for s in m.seats if s.bot_id == bot.id] if m is not None else []
        path = self.replay_path(rid)
        if not seats or path is None:
            raise HTTPException(404, f"bot {bot.name} has no match {rid!r} with a replay here")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HTTPException(404, f"the replay of match {rid} cannot be read ({exc.strerror})") from None
        stripped, _ = strip_debug_bytes(data, path.name, keep=seats)
        return stripped

    # -- routes ---------------------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        async def html(request: Request, fn: Any, *args: Any) -> Response:
            owner = None if self.who is None else await self.who(request)
            return HTMLResponse(await trio.to_thread.run_sync(partial(fn, *args, owner=owner)))

        async def standings(request: Request) -> Response:
            return await html(request, self.standings_html)

        async def bot(request: Request) -> Response:
            return await html(request, self.bot_html, request.path_params["name"])

        async def matches(request: Request) -> Response:
            return await html(request, self.matches_html, _before(request))

        async def match(request: Request) -> Response:
            return await html(request, self.match_html, request.path_params["id"])

        async def api_standings(_request: Request) -> Response:
            table = await trio.to_thread.run_sync(self.store.standings, self.game)
            return JSONResponse({"game": self.game, "standings": [s.to_json() for s in table]})

        async def api_bot(request: Request) -> Response:
            return JSONResponse(await trio.to_thread.run_sync(self.bot_json, request.path_params["name"]))

        async def api_matches(request: Request) -> Response:
            found = await trio.to_thread.run_sync(
                lambda: self.store.matches(self.game, limit=PAGE, before=_before(request))
            )
            return JSONResponse({"matches": [match_json(m) for m in found]})

        async def api_match(request: Request) -> Response:
            m = await trio.to_thread.run_sync(self._match, request.path_params["id"])
            return JSONResponse(match_json(m))

        async def api_owner_replay(request: Request) -> Response:
            # The token comes in a header, never the URL (URLs end up in logs and histories).
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise HTTPException(401, "send the bot's token as 'Authorization: Bearer TOKEN'")
            rid = request.path_params["rid"]
            data = await trio.to_thread.run_sync(self.owner_replay, rid, token.strip())
            name = f"ladder-{rid}.replay"
            disposition = {"content-disposition": f'attachment; filename="{name}"'}
            return Response(data, media_type="application/octet-stream", headers=disposition)

        library = ReplayLibrary(self.replay_path, debug=self.public_debug)
        return [
            *CommunityApi(
                self.store, self.game, self.owner_sessions
            ).routes(),  # first: /bots/{name:path} would take them
            Route("/", standings),
            Route("/bots/{name:path}", bot),
            Route("/matches", matches),
            Route("/matches/{id:int}", match),
            Route("/api/standings", api_standings),
            Route("/api/bots/{name:path}", api_bot),
            Route("/api/matches", api_matches),
            Route("/api/matches/{id:int}", api_match),
            Route("/api/replays/{rid}/owner", api_owner_replay),
            *replay_routes(library, prefix="/replays", public_debug=self.public_debug),
        ]


def _match_number(text: str) -> int | None:
    """``text`` as a match number, or None if it is not one (ASCII digits only: ``"²".isdigit()``)."""
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= MAX_ID else None


def _before(request: Request) -> int | None:
    text = request.query_params.get("before")
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise HTTPException(400, f"before={text[:40]!r}: give a match number, e.g. before=120")
    number = _match_number(text)
    if number is None:
        raise HTTPException(404, f"before={text[:40]}: no match number is that large")
    return number
