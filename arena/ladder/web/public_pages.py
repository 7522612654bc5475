"""The ladder's public pages: standings, bot pages, the match list, replays and the live match.

Pages render from Jinja2 templates (``templates/*.html`` beside this module, autoescaped): a bot's name
is data wherever it is shown. The owners' pages (`owner_pages`) share their header (``ladder.html``).

Served by `cellarena ladder web GAME...`, a process of its own beside the `ladder serve` of each game,
reading the same database, on the web app the replay viewer uses (`cellarena.server.web`): every page is
also JSON under ``/api/``, every finished match's replay plays in the viewer and downloads, and
``/live/`` shows the newest match as it is played. The pages read the store in worker threads (it
blocks), and only read: these routes take no input but page addresses, so a stranger can do nothing here
but look. `LadderSite` makes the pages; `public_routes` maps their paths. Signing up, logging in and
owning bots are `owner_pages`' (`owner_routes`), served beside these only with ``ladder web --signup``.

Nothing secret is shown: the store's records hold no token or digest, and a house bot's command
(which may name paths on the host) is left out; replays are offered by match id, never by path.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import trio
from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request

from cellarena.arena.ladder.identity.lockout import TokenLockout
from cellarena.arena.ladder.records import STANDINGS_COLUMNS, MatchRecord
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.store.ladder_store import MAX_ID, LadderStore
from cellarena.arena.ladder.web.community_pages import OwnerSessions
from cellarena.arena.ratings import ladder as ratings
from cellarena.arena.ratings.ladder import PROVISIONAL_MATCHES
from cellarena.arena.web.charts import rating_chart
from cellarena.arena.web.results_source import RatingPoint
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.replay import strip_debug_bytes
from cellarena.server.web.numbers import parse_number
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
    """The pages of a ladder's games, read from its store.

    One game: its standings at ``/``, its matches at ``/matches`` (and ``/api/standings``,
    ``/api/matches``). Several games (one `ladder serve` each on the database, docs/ladder.md "Several
    games"): ``/`` lists them, each game's standings and matches are at ``/GAME/`` and ``/GAME/matches``
    (``/api/GAME/standings``, ``/api/GAME/matches``, ``/api/games``). Bots, matches and replays are at
    the same addresses either way: a bot's name and a match's number are the database's, across games.
    """

    def __init__(
        self,
        store: LadderStore,
        game: str | Sequence[str],
        *,
        live: bool = False,
        public_debug: bool = False,
        accounts: bool = False,
        policy: str | None = None,
        rules: LadderRules | None = None,
        trusted_proxies: TrustedProxies | None = None,
    ) -> None:
        self.store = store
        self.games = (game,) if isinstance(game, str) else tuple(game)
        if not self.games:
            raise ValueError("a ladder site needs a game")
        #: The first game: the one game of a one-game site.
        self.game = self.games[0]
        self.several = len(self.games) > 1
        self.live = live
        #: Whether owners' pages are served beside (`owner_pages`): the header links to them.
        self.accounts = accounts
        self.policy = policy
        #: Who is logged in, for the header (`OwnerGuard.owner`); None without accounts.
        self.who: Callable[[Request], Awaitable[Any]] | None = None
        #: Owners' sessions for the community API's changes (`OwnerGuard.api_owner`); None: tokens only.
        self.owner_sessions: OwnerSessions | None = None
        #: Whether anyone may download the bots' debug drawings; else only each bot's owner gets its
        #: own, with the bot's token (`owner_replay`).
        self.public_debug = public_debug
        #: Wrong tokens sent to the owner's endpoint, by address: locked out as on the bot port.
        self.lockout = TokenLockout(rules or LadderRules(), "wrong tokens to the owner's replay endpoint")
        self._forgotten_at = 0.0
        #: Proxies whose X-Forwarded-For names the client (none by default: the peer is the client).
        self.trusted_proxies = trusted_proxies or TrustedProxies()

    def root(self, game: str) -> str:
        """Where ``game``'s standings and match list are: ``/`` on a one-game site, else ``/GAME/``
        (without its closing slash)."""
        return f"/{quote(game, safe='')}" if self.several and game else ""

    def render_page(self, template: str, title: str, game: str | None = None, **context: Any) -> str:
        """``template`` for ``game``'s pages (None: the first game's; "": the list of games)."""
        game = self.game if game is None else game
        return render(
            template,
            "cellarena.arena.ladder.web",
            title=title,
            game=game,
            games=self.games,
            root=self.root(game),
            api_root="/api" + self.root(game),
            live=self.live,
            accounts=self.accounts,
            policy=self.policy,
            has_replay=_has_replay,
            bot_href=bot_href,
            shown=ratings.shown,
            **context,
        )

    # -- pages (run in a worker thread: the store blocks) --------------------------------------------
    def standings_html(self, game: str | None = None, owner: object = None) -> str:
        game = game or self.game
        return self.render_page(
            "standings.html",
            f"{game} ladder",
            game,
            owner=owner,
            columns=STANDINGS_COLUMNS,
            table=self.store.standings(game),
            provisional_matches=PROVISIONAL_MATCHES,
            recent=self.store.matches(game, limit=10),
        )

    def games_html(self, owner: object = None) -> str:
        """A site of several games: each game's first ten and its newest matches, linked."""
        return self.render_page(
            "games.html",
            "ladder: " + ", ".join(self.games),
            "",
            owner=owner,
            columns=STANDINGS_COLUMNS,
            tables={g: self.store.standings(g)[:10] for g in self.games},
            recent={g: self.store.matches(g, limit=5) for g in self.games},
            root_of=self.root,
        )

    def bot_html(self, name: str, owner: object = None) -> str:
        bot = self.store.bot(name)
        if bot is None or bot.game not in self.games:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        history = self.store.rating_history(name)
        points = [RatingPoint(p.match_id, name, ratings.shown(p.rating)) for p in history]
        standing = next((s for s in self.store.standings(bot.game) if s.bot == name), None)
        summary = (
            f"rank {standing.rank}, rating {standing.rating:.2f} over {standing.matches} matches "
            f"({standing.wins} won, {standing.draws} drawn, {standing.losses} lost)"
            if standing is not None
            else "not ranked" + (" (revoked)" if not bot.active else " yet")
        )
        return self.render_page(
            "bot.html",
            name,
            bot.game,
            owner=owner,
            bot=bot if standing is None else replace(bot, kind=standing.kind),  # "submitted" too
            owner_name=self._owner_of(name) if self.accounts else None,
            summary=summary,
            chart=Markup(rating_chart(points, [name])),  # SVG the code drew; it escapes the names
            recent=self.store.bot_history(name, limit=PAGE),
        )

    def _owner_of(self, name: str) -> str | None:
        from cellarena.arena.ladder.accounts.owners import Accounts

        return Accounts(self.store).owner_of(name)

    def matches_html(self, before: int | None, game: str | None = None, owner: object = None) -> str:
        game = game or self.game
        matches = self.store.matches(game, limit=PAGE, before=before)
        return self.render_page(
            "matches.html",
            f"{game} ladder: matches",
            game,
            owner=owner,
            matches=matches,
            more=matches[-1].id if len(matches) == PAGE else None,
        )

    def match_html(self, match_id: int, owner: object = None) -> str:
        m = self.match_or_404(match_id)
        return self.render_page("match.html", f"match #{match_id}", m.game, m=m, owner=owner)

    def match_or_404(self, match_id: int) -> MatchRecord:
        m = self.store.match(match_id)
        if m is None or m.game not in self.games:
            raise HTTPException(404, f"no match #{match_id} on this ladder")
        return m

    # -- JSON -----------------------------------------------------------------------------------------
    def bot_json(self, name: str) -> dict[str, Any]:
        bot = self.store.bot(name)
        if bot is None or bot.game not in self.games:
            raise HTTPException(404, f"no bot {name!r} on this ladder")
        standing = next((s for s in self.store.standings(bot.game) if s.bot == name), None)
        return {
            "name": bot.name,
            "game": bot.game,
            "kind": bot.kind if standing is None else standing.kind,  # "submitted" too
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
        if m is None or m.game not in self.games or not _has_replay(m) or m.replay is None:
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
        match_id = _match_number(rid)
        m = None if match_id is None else self.store.match(match_id)
        seats = [s.seat for s in m.seats if s.bot_id == bot.id] if m is not None else []
        path = self.replay_path(rid)
        if not seats or path is None:
            raise HTTPException(404, f"bot {bot.name} has no match {rid[:40]!r} with a replay here")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HTTPException(404, f"the replay of match {rid} cannot be read ({exc.strerror})") from None
        stripped, _ = strip_debug_bytes(data, f"match {match_id}", keep=seats)
        return stripped

    async def owner_replay_counted(self, host: str, rid: str, token: str) -> bytes:
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


def client_host(request: Request, trusted: TrustedProxies) -> str:
    """The client's address: the peer, or whom a trusted proxy's X-Forwarded-For names (every such
    header, in order: a proxy may add one rather than append to the first). The pages' one reading of
    it, for the owner endpoint's lock-out and the owners' sign-up and login limits alike."""
    peer = request.client.host if request.client is not None else "unknown"
    if not trusted:
        return peer
    chain = [h for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
    return trusted.client_of(peer, chain)


def _match_number(text: str) -> int | None:
    """``text`` as a match number, or None if it is not one (`numbers.parse_number`)."""
    return parse_number(text, maximum=MAX_ID)
