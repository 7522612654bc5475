"""The community ladder's pages and HTTP API, beside the ladder's public pages (`public_pages`).

Public and read-only: ``/bots/NAME/stats`` (a page) and ``/api/bots/NAME/stats`` (JSON,
`bot_stats`), ``/api/bots/NAME/challenges`` (its challenges, made and received).

Changes, each a POST authorised by a bot's token in ``Authorization: Bearer TOKEN`` (never in the
URL: URLs end up in logs), found by the token's hash and compared in constant time
(`LadderStore.authenticate`); a token is good only for its own bot. With ``ladder web --signup``
an owner's login works too: the session cookie with the page's CSRF token in an ``X-CSRF-Token``
header and this site's ``Origin`` (`OwnerSessions`, checked by `owner_pages`); it acts for that
owner's bots only (403 for another's), and a challenge then names its bot, ``{"bot": "MINE", ...}``:

- ``POST /api/bots/NAME/resume``: resume the paused bot NAME (its owner has fixed it);
- ``POST /api/challenges`` with ``{"opponent": "OTHER"}``: the token's bot challenges OTHER, within
  the host's quota (201 and the challenge; 409 with the reason when refused, 429 for the quota);
- ``POST /api/bots/NAME/challenges`` with ``{"refuse": true|false}``: NAME refuses challenges, or
  takes them again.

Each change reaches a running ``ladder serve`` through the database's change log, within its poll.
Every refusal is JSON ``{"error": "..."}`` that says what to do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import quote

import trio
from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.errors import ChallengeRefusedError
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.scoring.bot_stats import bot_stats
from cellarena.arena.ladder.store.ladder_store import LadderStore, UnknownBotError
from cellarena.arena.ladder.web.action_log import said
from cellarena.arena.web.charts import rating_chart
from cellarena.arena.web.results_source import RatingPoint
from cellarena.server.web.json_body import read_json_object
from cellarena.server.web.templating import render

#: A request body larger than this is refused before it is parsed (bytes).
MAX_BODY = 4096

#: The owner logged in on a request, as (their name, their active bots' names); None when the request
#: carries no session cookie. Raises HTTPException (401, 403) for a session that is stale, or a
#: request without this site's Origin or the session's CSRF header (`OwnerGuard.api_owner`).
OwnerSessions = Callable[[Request], Awaitable[tuple[str, frozenset[str]] | None]]


class CommunityApi:
    """The routes above, over ``store``, for the ladder of ``game`` (a name, or several)."""

    def __init__(
        self, store: LadderStore, game: str | Sequence[str], sessions: OwnerSessions | None = None
    ) -> None:
        self.store = store
        self.games = (game,) if isinstance(game, str) else tuple(game)
        #: Owners' logins (``ladder web --signup``), or None: tokens only.
        self.sessions = sessions

    # -- reading --------------------------------------------------------------------------------------
    def _bot(self, name: str) -> BotRecord:
        bot = self.store.bot(name)
        if bot is None or bot.game not in self.games:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        return bot

    def stats_json(self, name: str) -> dict[str, Any]:
        bot = self._bot(name)
        stats = bot_stats(name, self.store.bot_seats(name))
        stats["paused"] = bot.paused
        stats["banned"] = bot.banned
        stats["failures_in_a_row"] = bot.failures
        return stats

    def stats_html(self, name: str) -> str:
        stats = self.stats_json(name)
        points = [RatingPoint(p["match"], name, p["rating"]) for p in stats["rating"]]
        chart = Markup(rating_chart(points, [name]))  # trusted: an SVG the code drew, names escaped there
        return render(
            "bot_stats.html",
            "cellarena.arena.ladder.web",
            title=f"{name}: statistics",
            bot=name,
            bot_url=f"/bots/{quote(name, safe='')}",
            stats=stats,
            chart=chart,
        )

    def challenges_json(self, name: str) -> dict[str, Any]:
        self._bot(name)
        return {"bot": name, "challenges": [c.to_json() for c in self.store.challenges_of(name)]}

    # -- changes --------------------------------------------------------------------------------------
    def _caller(self, token: str, name: str | None = None) -> BotRecord:
        bot = self.store.authenticate(token)
        if bot is None or bot.game not in self.games:
            raise HTTPException(401, "that token is no active bot's on this ladder; send your bot's token")
        if name is not None and bot.name != name:
            raise HTTPException(
                403, f"that token is {bot.name}'s, not {name}'s: a token acts for its own bot"
            )
        return bot

    def resume(self, token: str, name: str) -> dict[str, Any]:
        return self.resume_bot(self._caller(token, name), f"{name} (api)")

    def resume_bot(self, bot: BotRecord, actor: str) -> dict[str, Any]:
        """Resume ``bot`` for ``actor`` (its token, or its owner): 409 for a ban, which the host lifts."""
        if bot.banned is not None:
            raise HTTPException(
                409, f"{bot.name} is banned by the ladder's host ({bot.banned}); ask the host"
            )
        if bot.paused is None:
            return {"bot": bot.name, "paused": None, "resumed": False}
        self.store.resume(bot.name, actor=actor)
        return {"bot": bot.name, "paused": None, "resumed": True}

    def challenge(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        bot = self._caller(token)
        return self.challenge_by(bot, body.get("opponent"), f"{bot.name} (api)")

    def challenge_by(self, bot: BotRecord, opponent: object, actor: str) -> dict[str, Any]:
        """``bot`` challenges ``opponent``: 400 for no name, 409 (429 for the quota) when refused."""
        if not isinstance(opponent, str) or not 1 <= len(opponent) <= 64:
            raise HTTPException(400, 'give the opponent\'s name: {"opponent": "NAME"}')
        try:
            made = self.store.challenge(bot.name, opponent, actor=actor)
        except ChallengeRefusedError as exc:
            text = str(exc)
            raise HTTPException(429 if "quota" in text else 409, text) from None
        return made.to_json()

    def set_refusal(self, token: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.refusal_of(self._caller(token, name), body.get("refuse"), f"{name} (api)")

    def refusal_of(self, bot: BotRecord, refuse: object, actor: str) -> dict[str, Any]:
        if not isinstance(refuse, bool):
            raise HTTPException(400, 'say {"refuse": true} or {"refuse": false}')
        changed = self.store.refuse_challenges(bot.name, refuse, actor=actor)
        return {"bot": bot.name, "refuses_challenges": changed.refuses_challenges}

    async def acting(self, request: Request, name: str | None, body: dict[str, Any]) -> tuple[BotRecord, str]:
        """The bot a change is for and who asks (for the audit log): by the request's bot token, or
        by its owner's session (`sessions`), whose bots are theirs alone."""
        if self.sessions is None or "authorization" in request.headers:
            token = _bearer(request)
            bot = await trio.to_thread.run_sync(self._caller, token, name)
            return bot, f"{bot.name} (api)"
        found = await self.sessions(request)
        if found is None:
            raise HTTPException(
                401,
                "send the bot's token as 'Authorization: Bearer TOKEN', or log in and send your "
                "session with the page's CSRF token in an X-CSRF-Token header",
            )
        owner, mine = found
        target = name if name is not None else body.get("bot")
        if not isinstance(target, str) or not target:
            raise HTTPException(400, 'say which of your bots acts: {"bot": "NAME", ...}')
        if target not in mine:
            raise HTTPException(
                403, f"{target[:64]!r} is not one of {owner}'s bots: an owner acts for their own bots only"
            )
        bot = await trio.to_thread.run_sync(self._bot, target)
        return bot, f"{owner} (owner)"

    # -- routes ---------------------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        """Put these before the ladder's own routes: ``/bots/{name:path}`` would take them."""

        async def run(fn: Any, *args: Any) -> Any:
            try:
                return await trio.to_thread.run_sync(fn, *args)
            except UnknownBotError as exc:
                raise HTTPException(404, str(exc)) from None

        async def stats_page(request: Request) -> Response:
            return HTMLResponse(await run(self.stats_html, request.path_params["name"]))

        async def stats_api(request: Request) -> Response:
            return JSONResponse(await run(self.stats_json, request.path_params["name"]))

        async def challenges_api(request: Request) -> Response:
            return JSONResponse(await run(self.challenges_json, request.path_params["name"]))

        async def resume_api(request: Request) -> Response:
            bot, actor = await self.acting(request, request.path_params["name"], {})
            answer = await run(self.resume_bot, bot, actor)
            said(actor, f"resumed bot {bot.name} through the API", _address(request))
            return JSONResponse(answer)

        async def challenge_api(request: Request) -> Response:
            body = await _json_body(request)
            bot, actor = await self.acting(request, None, body)
            if "bot" in body and body["bot"] != bot.name:
                raise HTTPException(403, f"that token is {bot.name}'s, not {str(body['bot'])[:64]}'s")
            made = await run(self.challenge_by, bot, body.get("opponent"), actor)
            said(
                actor,
                f"challenged {made.get('opponent')} with bot {bot.name} through the API",
                _address(request),
            )
            return JSONResponse(made, status_code=201)

        async def refusal_api(request: Request) -> Response:
            body = await _json_body(request)
            bot, actor = await self.acting(request, request.path_params["name"], body)
            answer = await run(self.refusal_of, bot, body.get("refuse"), actor)
            what = "refuses" if answer["refuses_challenges"] else "takes"
            said(actor, f"set bot {bot.name}: {what} challenges, through the API", _address(request))
            return JSONResponse(answer)

        return [
            Route("/bots/{name:path}/stats", stats_page),
            Route("/api/bots/{name:path}/stats", stats_api),
            Route("/api/bots/{name:path}/resume", resume_api, methods=["POST"]),
            Route("/api/bots/{name:path}/challenges", challenges_api, methods=["GET"]),
            Route("/api/bots/{name:path}/challenges", refusal_api, methods=["POST"]),
            Route("/api/challenges", challenge_api, methods=["POST"]),
        ]


def _bearer(request: Request) -> str:
    """The bot's token from ``Authorization: Bearer TOKEN`` (the only place a token is read from)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "send the bot's token as 'Authorization: Bearer TOKEN'")
    return token.strip()


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (`read_json_object`): 413 over `MAX_BODY`, 400 for anything else."""
    return await read_json_object(request, limit=MAX_BODY)


def _address(request: Request) -> str | None:
    """The peer's address (behind a proxy, the proxy's: `OwnerGuard.client` knows the client's)."""
    return None if request.client is None else request.client.host
