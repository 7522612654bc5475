"""The community ladder's pages and HTTP API, beside the ladder's public pages (`web`).

Public and read-only: ``/bots/NAME/stats`` (a page) and ``/api/bots/NAME/stats`` (JSON,
`bot_stats`), ``/api/bots/NAME/challenges`` (its challenges, made and received).

Changes, each a POST authorised by a bot's token in ``Authorization: Bearer TOKEN`` (never in the
URL: URLs end up in logs), found by the token's hash and compared in constant time
(`LadderStore.authenticate`); a token is good only for its own bot:

- ``POST /api/bots/NAME/resume``: resume the paused bot NAME (its owner has fixed it);
- ``POST /api/challenges`` with ``{"opponent": "OTHER"}``: the token's bot challenges OTHER, within
  the host's quota (201 and the challenge; 409 with the reason when refused, 429 for the quota);
- ``POST /api/bots/NAME/challenges`` with ``{"refuse": true|false}``: NAME refuses challenges, or
  takes them again.

Each change reaches a running ``ladder serve`` through the database's change log, within its poll.
Every refusal is JSON ``{"error": "..."}`` that says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import trio
from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.bot_stats import bot_stats
from cellarena.arena.ladder.errors import ChallengeRefusedError
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store import LadderStore, UnknownBotError
from cellarena.arena.web.charts import rating_chart
from cellarena.arena.web.results import RatingPoint
from cellarena.server.web.templating import render

#: A request body larger than this is refused before it is parsed (bytes).
MAX_BODY = 4096


class CommunityApi:
    """The routes above, over ``store``, for the ladder of ``game`` (a name, or several)."""

    def __init__(self, store: LadderStore, game: str | Sequence[str]) -> None:
        self.store = store
        self.games = (game,) if isinstance(game, str) else tuple(game)

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
            "cellarena.arena.ladder",
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
        bot = self._caller(token, name)
        if bot.banned is not None:
            raise HTTPException(409, f"{name} is banned by the ladder's host ({bot.banned}); ask the host")
        if bot.paused is None:
            return {"bot": name, "paused": None, "resumed": False}
        self.store.resume(name, actor=f"{name} (api)")
        return {"bot": name, "paused": None, "resumed": True}

    def challenge(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        bot = self._caller(token)
        opponent = body.get("opponent")
        if not isinstance(opponent, str) or not 1 <= len(opponent) <= 64:
            raise HTTPException(400, 'give the opponent\'s name: {"opponent": "NAME"}')
        try:
            made = self.store.challenge(bot.name, opponent, actor=f"{bot.name} (api)")
        except ChallengeRefusedError as exc:
            text = str(exc)
            raise HTTPException(429 if "quota" in text else 409, text) from None
        return made.to_json()

    def set_refusal(self, token: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._caller(token, name)
        refuse = body.get("refuse")
        if not isinstance(refuse, bool):
            raise HTTPException(400, 'say {"refuse": true} or {"refuse": false}')
        bot = self.store.refuse_challenges(name, refuse, actor=f"{name} (api)")
        return {"bot": name, "refuses_challenges": bot.refuses_challenges}

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
            token = _bearer(request)
            return JSONResponse(await run(self.resume, token, request.path_params["name"]))

        async def challenge_api(request: Request) -> Response:
            token = _bearer(request)
            body = await _json_body(request)
            return JSONResponse(await run(self.challenge, token, body), status_code=201)

        async def refusal_api(request: Request) -> Response:
            token = _bearer(request)
            body = await _json_body(request)
            return JSONResponse(await run(self.set_refusal, token, request.path_params["name"], body))

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
    """The request's JSON object; 413 for a body over `MAX_BODY`, 400 for anything but an object."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise HTTPException(413, f"the body is over {MAX_BODY} bytes; send a small JSON object")
    try:
        body = json.loads(data or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise HTTPException(400, "the body is not JSON; send a JSON object") from None
    if not isinstance(body, dict):
        raise HTTPException(400, "send a JSON object")
    return body
