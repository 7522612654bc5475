"""The ladder's public pages: standings, bot pages, the match list, replays and the live match.

Served by the ladder process itself (`cellarena ladder serve --web-port`), on the web app the replay
viewer uses (`cellarena.server.web`): every page is also JSON under ``/api/``, every finished
match's replay plays in the viewer and downloads, and ``/live/`` shows the newest match as it is
played. The pages read the store in worker threads (it blocks), and only read: the HTTP port takes
no input but page addresses, so a stranger can do nothing there but look.

Nothing secret is shown: the store's records hold no token or digest, and a house bot's command
(which may name paths on the host) is left out; replays are offered by match id, never by path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.lockout import TokenLockout
from cellarena.arena.ladder.records import STANDINGS_COLUMNS, BotMatch, MatchRecord, Standing
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.store import MAX_ID, LadderStore
from cellarena.arena.web.charts import rating_chart
from cellarena.arena.web.results import RatingPoint
from cellarena.server.replay import strip_debug_bytes
from cellarena.server.trusted_proxies import TrustedProxies
from cellarena.server.web.pages import page
from cellarena.server.web.replays import ReplayLibrary, replay_routes

#: Matches per page of the match list, and on a bot's page.
PAGE = 50


def _bot_link(name: str) -> str:
    return f'<a href="/bots/{quote(name, safe="")}">{escape(name)}</a>'


def _match_link(m: MatchRecord) -> str:
    return f'<a href="/matches/{m.id}">#{m.id}</a>'


def _replay_links(m: MatchRecord) -> str:
    if not _has_replay(m):
        return ""
    return f'<a href="/replays/{m.id}/">watch</a> · <a href="/api/replays/{m.id}/file">download</a>'


def _has_replay(m: MatchRecord) -> bool:
    return m.status == "finished" and m.replay is not None and Path(m.replay).is_file()


def match_json(m: MatchRecord) -> dict[str, Any]:
    """A match as the API shows it: the store's record, its replay as addresses rather than a path."""
    data = m.to_json()
    data["replay"] = (
        {"watch": f"/replays/{m.id}/", "download": f"/api/replays/{m.id}/file"} if _has_replay(m) else None
    )
    return data


def _result(m: MatchRecord) -> str:
    if m.status != "finished":
        return escape(m.status)
    if m.winner is None:
        return "draw"
    return f"{_bot_link(m.winner)} won"


def _matches_table(matches: Sequence[MatchRecord]) -> str:
    rows = "".join(
        f"<tr><td>{_match_link(m)}</td><td>{' vs '.join(_bot_link(b) for b in m.bots)}</td>"
        f"<td>{escape(m.map or 'default')}</td><td>{_result(m)}</td><td>{m.ticks or ''}</td>"
        f"<td>{escape(m.reason or '')}</td><td>{_replay_links(m)}</td></tr>"
        for m in matches
    )
    return (
        "<table class=list id=matches><tr><th>match</th><th>bots</th><th>map</th><th>result</th>"
        f"<th>ticks</th><th>why</th><th>replay</th></tr>{rows}</table>"
    )


def _standings_table(table: Sequence[Standing]) -> str:
    head = "".join(f"<th>{c}</th>" for c in STANDINGS_COLUMNS)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{_bot_link(cell) if i == 1 else escape(cell)}</td>" for i, cell in enumerate(s.cells())
        )
        + "</tr>"
        for s in table
    )
    return f"<table class=list id=standings><tr>{head}</tr>{rows}</table>"


class LadderSite:
    """The pages of one ladder's game, read from its store."""

    def __init__(
        self,
        store: LadderStore,
        game: str,
        *,
        live: bool = False,
        public_debug: bool = False,
        rules: LadderRules | None = None,
        trusted_proxies: TrustedProxies | None = None,
    ) -> None:
        self.store = store
        self.game = game
        self.live = live
        #: Whether anyone may download the bots' debug drawings; else only each bot's owner gets its
        #: own, with the bot's token (`owner_replay`).
        self.public_debug = public_debug
        #: Wrong tokens sent to the owner's endpoint, by address: locked out as on the bot port.
        self.lockout = TokenLockout(rules or LadderRules(), "wrong tokens to the owner's replay endpoint")
        self._forgotten_at = 0.0
        #: Proxies whose X-Forwarded-For names the client (none by default: the peer is the client).
        self.trusted_proxies = trusted_proxies or TrustedProxies()

    def _nav(self) -> str:
        links = ['<a href="/">standings</a>', '<a href="/matches">matches</a>']
        if self.live:
            links.append('<a href="/live/">watch live</a>')
        return f"<nav>{' · '.join(links)}</nav>"

    def _page(self, title: str, body: str) -> str:
        header = f"<header><h1>{escape(title)}</h1>{self._nav()}</header>"
        return page(title, f"{header}<main class=results>{body}</main>")

    # -- pages (run in a worker thread: the store blocks) --------------------------------------------
    def standings_html(self) -> str:
        table = self.store.standings(self.game)
        recent = self.store.matches(self.game, limit=10)
        body = (
            f"<section class=panel><h2>Standings</h2>{_standings_table(table)}"
            "<p class=dim>rating = mu - 3 sigma (openskill); ranked by rating. late, invalid: answers "
            "that came after the budget, answers the game could not read (the bot's own failures), over "
            "all its matches; bank ms: time bank drawn (docs/protocol.md#the-time-bank). Every match, "
            "its seats and rating changes are in <a href='/api/standings'>/api/standings</a> and "
            "<a href='/api/matches'>/api/matches</a>.</p></section>"
            f"<section class=panel><h2>Recent matches</h2>{_matches_table(recent)}"
            "<p><a href='/matches'>all matches</a></p></section>"
        )
        return self._page(f"{self.game} ladder", body)

    def bot_html(self, name: str) -> str:
        bot = self.store.bot(name)
        if bot is None or bot.game != self.game:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        history = self.store.rating_history(name)
        points = [RatingPoint(p.match_id, name, p.rating.conservative) for p in history]
        recent = self.store.bot_history(name, limit=PAGE)
        standing = next((s for s in self.store.standings(self.game) if s.bot == name), None)
        summary = (
            f"rank {standing.rank}, rating {standing.rating:.2f} over {standing.matches} matches "
            f"({standing.wins} won, {standing.draws} drawn, {standing.losses} lost)"
            if standing is not None
            else "not ranked" + (" (revoked)" if not bot.active else " yet")
        )
        body = (
            f"<section class=panel><p>{escape(bot.kind)} bot, {escape(summary)}</p>"
            f"<h2>Rating after each match</h2>{rating_chart(points, [name])}</section>"
            f"<section class=panel><h2>Recent matches</h2>{self._bot_matches(recent)}</section>"
        )
        return self._page(name, body)

    def _bot_matches(self, recent: Sequence[BotMatch]) -> str:
        rows = "".join(
            f"<tr><td>{_match_link(b.match)}</td><td>{' '.join(_bot_link(o) for o in b.opponents)}</td>"
            f"<td>{b.seat}</td><td>{escape(b.outcome or b.match.status)}</td>"
            f"<td>{'' if b.rating_after is None else f'{b.rating_after.conservative:.2f}'}</td>"
            f"<td>{_why(b.me.cause_json())}</td><td>{_replay_links(b.match)}</td></tr>"
            for b in recent
        )
        return (
            "<table class=list id=bot-matches><tr><th>match</th><th>against</th><th>seat</th>"
            f"<th>result</th><th>rating after</th><th>why</th><th>replay</th></tr>{rows}</table>"
        )

    def matches_html(self, before: int | None) -> str:
        matches = self.store.matches(self.game, limit=PAGE, before=before)
        more = (
            f'<p><a href="/matches?before={matches[-1].id}">older matches</a></p>'
            if len(matches) == PAGE
            else ""
        )
        return self._page(
            f"{self.game} ladder: matches", f"<section class=panel>{_matches_table(matches)}{more}"
        )

    def match_html(self, match_id: int) -> str:
        m = self._match(match_id)
        seats = "".join(
            f"<tr><td>{s.seat}</td><td>{_bot_link(s.bot)}</td><td>{'' if s.rank is None else s.rank}</td>"
            f"<td>{'' if s.late is None else s.late}</td><td>{'' if s.invalid is None else s.invalid}</td>"
            f"<td>{'' if s.illegal is None else s.illegal}</td><td>{'yes' if s.forfeit else ''}</td>"
            f"<td>{'' if s.bank_drawn_ms is None else s.bank_drawn_ms}</td>"
            f"<td>{'' if s.before is None else f'{s.before.conservative:.2f}'}</td>"
            f"<td>{'' if s.after is None else f'{s.after.conservative:.2f}'}</td>"
            f"<td>{_why(s.cause_json())}</td></tr>"
            for s in m.seats
        )
        body = (
            f"<section class=panel><p>{_result(m)} on {escape(m.map or 'the default map')}"
            f"{'' if m.ticks is None else f' after {m.ticks} ticks'}"
            f"{'' if not m.reason else f' ({escape(m.reason)})'}. {_replay_links(m)}</p>"
            "<table class=list id=seats><tr><th>seat</th><th>bot</th><th>rank</th><th>late</th>"
            "<th>invalid</th><th>illegal</th><th>forfeit</th>"
            "<th title='ms of time bank drawn (empty: the match had none)'>bank ms</th>"
            "<th>rating before</th><th>after</th><th>why</th></tr>"
            f"{seats}</table></section>"
        )
        return self._page(f"match #{m.id}", body)

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

    async def _owner_replay_counted(self, host: str, rid: str, token: str) -> bytes:
        """`owner_replay`, with a wrong token counted against ``host`` as the bot port counts it
        (`TokenLockout`): past the limit the address gets 429 for its guesses, while a good token
        still gets its replay."""
        now = trio.current_time()
        if now - self._forgotten_at > 60.0:  # now and then, not on every request
            self._forgotten_at = now
            self.lockout.forget_old(now)
        over = self.lockout.arriving(host)
        try:
            return await trio.to_thread.run_sync(self.owner_replay, rid, token.strip())
        except HTTPException as exc:
            if exc.status_code == 401:
                locked = self.lockout.failed(host, over, trio.current_time())
                if locked is not None:
                    wait = math.ceil(locked)
                    raise HTTPException(
                        429,
                        f"too many wrong tokens from {host}; refused for another {wait} s",
                        headers={"retry-after": str(wait)},
                    ) from None
            raise
        finally:
            self.lockout.checked(host)

    # -- routes ---------------------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        async def html(fn: Any, *args: Any) -> Response:
            return HTMLResponse(await trio.to_thread.run_sync(fn, *args))

        async def standings(_request: Request) -> Response:
            return await html(self.standings_html)

        async def bot(request: Request) -> Response:
            return await html(self.bot_html, request.path_params["name"])

        async def matches(request: Request) -> Response:
            return await html(self.matches_html, _before(request))

        async def match(request: Request) -> Response:
            return await html(self.match_html, request.path_params["id"])

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
            data = await self._owner_replay_counted(_client_host(request, self.trusted_proxies), rid, token)
            name = f"ladder-{rid}.replay"
            disposition = {"content-disposition": f'attachment; filename="{name}"'}
            return Response(data, media_type="application/octet-stream", headers=disposition)

        library = ReplayLibrary(self.replay_path, debug=self.public_debug)
        return [
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


def _client_host(request: Request, trusted: TrustedProxies) -> str:
    """The client's address: the peer, or whom a trusted proxy's X-Forwarded-For names."""
    peer = request.client.host if request.client is not None else "unknown"
    if not trusted:
        return peer
    chain = [h for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
    return trusted.client_of(peer, chain)


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


def _why(cause: dict[str, Any] | None) -> str:
    """A seat's cause for a page: its sentence (escaped), the bare word when it has none, or nothing."""
    if cause is None:
        return ""
    word = escape(str(cause.get("cause", "unknown")))
    text = cause.get("text")
    if cause.get("cause") == "unknown":
        return "<span title='finished before causes were kept'>unknown</span>"
    return f"<span class=cause title='{word}'>{escape(str(text))}</span>" if text else word
