"""The owners' pages and HTTP API: sign-up, login, logout, an owner's bots and their matches' private side.

Mounted by `cellarena ladder web --signup POLICY` beside the public pages (`public_pages`).
What a page changes it writes to the database (`Accounts`), and a bot created, rotated or revoked
reaches a running ``ladder serve`` through the change log, as the host's commands do.

**Cookies.** A login sets ``cellarena_session``: the session's random id, signed with the host's key
(itsdangerous, the key read from a 0600 file whose path the host gives, `load_key`), HttpOnly (no
script reads it), Secure (sent over HTTPS only: serve the pages with ``--tls-cert``/``--tls-key`` or
behind a TLS proxy named by ``--trusted-proxy``) and SameSite=Lax (not sent on another site's POST).
The database keeps the id's SHA-256: logout revokes it there, so a copy of the cookie is refused after.

**CSRF.** Every form carries a hidden token: for a logged-in owner an HMAC of the session id under the
host's key; before login (the sign-up and login forms) an HMAC of a random ``cellarena_form`` cookie
(double submit). Every POST checks it, and also that its ``Origin`` (or, without one, ``Referer``) is
this site, under one of its own names (``--allowed-host``, `AccountSettings.allowed_hosts`; the app's
`HostCheck` refuses any other Host before a route sees it): a form posted from another site's page,
DNS-rebound to this one or not, is refused with a 403 that says so.

**Addresses.** Sign-ups and password checks are counted per client address, over a sliding hour; the
address is the socket's peer, or what ``X-Forwarded-For`` says when a proxy of ``--trusted-proxy`` sent
it (`TrustedProxies.client_of`: the one mechanism for every by-address limit).

**Input.** A POST body over `MAX_BODY` bytes is refused before it is parsed, and JSON is read by the
one reader with limits (`server.web.json_body`); each field is checked for its length (names,
passwords) by `Accounts`, whose messages the page shows.

**A bot's community side.** ``/account`` and ``/account/bots/NAME`` show each bot paused or banned
with the reason and the failed matches behind it (their causes), and forms to resume it (a ban only
the host lifts), to challenge a bot by name within the quota, and to refuse challenges: POSTs with
the CSRF token and Origin check above, applied by `CommunityApi`'s rules as its API applies them
(with ``owner NAME (owner)`` in the audit log). The same API accepts the owner's session instead of
the bot's token (`api_owner`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import trio
from itsdangerous import BadSignature, Signer
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.accounts.owners import (
    SESSION_LIFETIME,
    AccountError,
    Accounts,
    Owner,
    Policy,
)
from cellarena.arena.ladder.errors import BadNameError, LadderStoreError, UnknownBotError
from cellarena.arena.ladder.identity.tokens import Token
from cellarena.arena.ladder.records import BotMatch, BotRecord
from cellarena.arena.ladder.scoring.failures import failure_of
from cellarena.arena.ladder.store.ladder_store import MAX_ID, LadderStore
from cellarena.arena.ladder.web.community_pages import CommunityApi
from cellarena.arena.ladder.web.public_pages import bot_href, client_host
from cellarena.server.replay import strip_debug_bytes
from cellarena.server.trusted_proxies import TrustedProxies
from cellarena.server.web.hosts import AllowedHosts
from cellarena.server.web.json_body import read_body, read_json_object
from cellarena.server.web.numbers import path_number
from cellarena.server.web.templating import render

log = logging.getLogger("cellarena.ladder")
Endpoint = Callable[[Request], Awaitable[Response]]

SESSION_COOKIE = "cellarena_session"
FORM_COOKIE = "cellarena_form"
#: The header in which a script sends the owner's CSRF token to the community API (with the cookie).
CSRF_HEADER = "x-csrf-token"
#: The largest POST body read: a form of a name, a password and a code is far below it; a 10 KB field
#: still reaches the checks that name it, a megabyte is refused unread.
MAX_BODY = 16 * 1024
#: Matches of each bot on the owner's page.
RECENT = 20
KEY_BYTES = 32


def guarded(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with the store's faults as pages: an `AccountError` that escaped it is a 400 with
    its message; a database fault (down, full, read-only) a 503 that asks to come back, its details
    in the log only (they name the database's path or host, which visitors have no business seeing)."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except AccountError as exc:
            raise HTTPException(400, str(exc)) from None
        except LadderStoreError as exc:
            log.error("ladder pages: %s %s: %s", request.method, request.url.path, exc)
            raise HTTPException(
                503, "the ladder's database is not answering just now; try again in a minute"
            ) from None

    return run


class KeyFileError(Exception):
    """The signing key's file cannot be used; the message names it and says what to do."""


def load_key(path: Path) -> bytes:
    """The cookie-signing key in ``path``, made (random, mode 0600) if the file does not exist.

    A key readable by other users would let them forge nothing (sessions are looked up in the database)
    but would let them make CSRF tokens for a stolen session id: refused, naming the file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise KeyFileError(
            f"{path}: cannot create the session key ({exc.strerror}); give --session-key-file"
        ) from None
    else:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(KEY_BYTES) + "\n")
    try:
        mode = path.stat().st_mode
        text = path.read_text("ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"{path}: cannot read the session key ({exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"{path}: other users may read the session key; chmod 600 {path}")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise KeyFileError(
            f"{path}: not a session key (32 random bytes in hex); delete it and a new one is made "
            "(every owner is then logged out)"
        )
    return key


class AddressLimit:
    """At most ``count`` events per client address in any ``window`` seconds (in this process)."""

    def __init__(
        self, count: int, window: float = 3600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.count = count
        self.window = window
        self.clock = clock
        self._seen: dict[str, deque[float]] = defaultdict(deque)

    def allow(self, address: str) -> bool:
        """Count one event of ``address`` if it is within the limit; False (nothing counted) if not."""
        now = self.clock()
        times = self._seen[address]
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.count:
            return False
        times.append(now)
        if len(self._seen) > 100_000:  # a flood of addresses: forget those that have gone quiet
            for quiet in [a for a, t in self._seen.items() if not t or t[-1] <= now - self.window]:
                del self._seen[quiet]
        return True


@dataclass
class AccountSettings:
    """What the host chose (`cellarena ladder web` options)."""

    policy: Policy | None
    key: bytes
    max_bots: int = 5
    session_lifetime: timedelta = SESSION_LIFETIME
    trusted: TrustedProxies = field(default_factory=TrustedProxies)
    #: Sign-ups per address per hour.
    signups_per_hour: int = 5
    #: Password checks (logins, the API's) per address per hour.
    logins_per_hour: int = 30
    #: The names the pages answer to (``--allowed-host``): a form's Origin must name one of them.
    allowed_hosts: AllowedHosts | None = None


def _hmac(key: bytes, purpose: str, value: str) -> str:
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


class AccountSite:
    """The owners' routes of a ladder's game, or of its several games (one account across them)."""

    def __init__(
        self,
        store: LadderStore,
        game: str | Sequence[str],
        settings: AccountSettings,
        *,
        live: bool = False,
    ) -> None:
        self.store = store
        #: Whether the header links to /live/ (`ladder web --live-port`), as the public pages' does.
        self.live = live
        self.accounts = Accounts(store)
        self.games = (game,) if isinstance(game, str) else tuple(game)
        self.game = self.games[0]
        #: The community API's rules (resume, challenge, refusal), applied to the pages' forms too.
        self.community = CommunityApi(store, self.games)
        self.settings = settings
        self._signer = Signer(settings.key, salt="cellarena-session")
        self.signups = AddressLimit(settings.signups_per_hour)
        self.logins = AddressLimit(settings.logins_per_hour)

    # -- requests ------------------------------------------------------------------------------------
    def client(self, request: Request) -> str:
        return client_host(request, self.settings.trusted)

    def origin(self, request: Request) -> str:
        """This site's origin as the browser sees it: from a trusted proxy's forwarded headers, or the
        request's own scheme and Host."""
        scheme, host = request.url.scheme, request.headers.get("host", "")
        peer = request.client.host if request.client is not None else ""
        if self.settings.trusted.trusts(peer):
            scheme = request.headers.get("x-forwarded-proto", scheme).split(",")[0].strip() or scheme
            host = request.headers.get("x-forwarded-host", host).split(",")[0].strip() or host
        return f"{scheme}://{host}".lower()

    def check_origin(self, request: Request) -> None:
        """A POST from another site's page is refused (403) whatever else it carries: its Origin must
        be this site's, under one of the names the pages answer to (`AccountSettings.allowed_hosts`),
        not merely whatever Host the request names."""
        sent = request.headers.get("origin")
        if sent is None or sent == "null":
            referer = request.headers.get("referer")
            if referer is None:
                if sent is None:
                    raise HTTPException(
                        403,
                        "this form came with neither an Origin nor a Referer header, so the ladder cannot "
                        "tell that it was sent from its own page; post it from the ladder's page",
                    )
            else:
                try:
                    parts = urlsplit(referer)
                    sent = f"{parts.scheme}://{parts.netloc}"
                except ValueError:  # "http://[x/": not an address, so not this site's
                    sent = referer[:100]
        mine = self.origin(request)
        allowed = self.settings.allowed_hosts
        # The request's Host is checked on the way in (`HostCheck`); this check holds without it.
        foreign = allowed is not None and sent is not None and not allowed.allows(_origin_host(sent))
        if sent is None or foreign or sent.lower() != mine:
            raise HTTPException(
                403,
                f"this form was posted from another site ({(sent or 'an opaque origin')[:100]}), not from "
                f"{mine}: refused (cross-site request forgery). Use the ladder's own page",
            )

    async def form(self, request: Request) -> dict[str, str]:
        """The POST's fields (URL-encoded form or JSON object), each its first value; 413 past MAX_BODY,
        400 for JSON that is not an object (`read_json_object`'s limits)."""
        if request.headers.get("content-type", "").startswith("application/json"):
            data = await read_json_object(request, limit=MAX_BODY)
            return {str(k): str(v) for k, v in data.items() if v is not None}
        body = (await read_body(request, MAX_BODY)).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}

    def session_id(self, request: Request) -> str | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie or len(cookie) > 300:
            return None
        try:
            return self._signer.unsign(cookie).decode("ascii")
        except (BadSignature, UnicodeDecodeError):
            return None

    async def owner(self, request: Request) -> Owner | None:
        session = self.session_id(request)
        if session is None:
            return None
        return await trio.to_thread.run_sync(self.accounts.session_owner, session)

    async def logged_in(self, request: Request) -> tuple[Owner, str]:
        """The owner and session of the request; 401 saying to log in when there is none."""
        session = self.session_id(request)
        owner = (
            None if session is None else await trio.to_thread.run_sync(self.accounts.session_owner, session)
        )
        if owner is None or session is None:
            raise HTTPException(401, "log in first (your session ended, or you logged out)")
        return owner, session

    def game_of(self, fields: dict[str, str]) -> str:
        """The game a new bot plays: the form's ``game``, which a site of several games needs."""
        game = fields.get("game", "")
        if game in self.games or (not game and len(self.games) == 1):
            return game or self.game
        raise AccountError(
            f"choose the bot's game: game must be one of {', '.join(self.games)}"
            + (f", not {game[:40]!r}" if game else "")
        )

    def csrf_for(self, session: str) -> str:
        return _hmac(self.settings.key, "csrf", session)

    def check_csrf(self, fields: dict[str, str], expected: str) -> None:
        if not hmac.compare_digest(fields.get("csrf", "").encode(), expected.encode()):
            raise HTTPException(
                403,
                "the form's security token is missing or stale (it was not sent from your current page); "
                "reload the page and send it again",
            )

    def form_token(self, request: Request) -> tuple[str, str]:
        """The anonymous forms' cookie value (kept, or new) and the hidden token that goes with it."""
        value = request.cookies.get(FORM_COOKIE, "")
        if not 20 <= len(value) <= 100:
            value = secrets.token_urlsafe(24)
        return value, _hmac(self.settings.key, "form", value)

    def _cookie(self, response: Response, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(
            name, value, max_age=max_age, path="/", secure=True, httponly=True, samesite="lax"
        )

    # -- pages ---------------------------------------------------------------------------------------
    def page(self, template: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        html = render(
            template,
            "cellarena.arena.ladder.web",
            game=" and ".join(self.games),
            games=self.games,
            policy=self.settings.policy,
            accounts=True,
            live=self.live,
            bot_href=bot_href,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def anonymous_form(
        self, template: str, request: Request, status: int = 200, **context: Any
    ) -> HTMLResponse:
        value, token = self.form_token(request)
        response = self.page(template, request, status, csrf=token, **context)
        self._cookie(response, FORM_COOKIE, value, None)
        return response

    async def anonymous_post(self, request: Request) -> dict[str, str]:
        self.check_origin(request)
        fields = await self.form(request)
        value = request.cookies.get(FORM_COOKIE, "")
        self.check_csrf(fields, _hmac(self.settings.key, "form", value) if value else "\0")
        return fields

    async def owner_post(self, request: Request) -> tuple[Owner, str, dict[str, str]]:
        self.check_origin(request)
        owner, session = await self.logged_in(request)
        fields = await self.form(request)
        self.check_csrf(fields, self.csrf_for(session))
        return owner, session, fields

    def _limited(self, limit: AddressLimit, request: Request, what: str) -> None:
        if not limit.allow(self.client(request)):
            raise HTTPException(
                429,
                f"too many {what} from your address ({limit.count} an hour); wait and try again later",
            )

    async def do_sign_up(self, request: Request, fields: dict[str, str]) -> Owner:
        if self.settings.policy is None:
            raise HTTPException(403, "this ladder takes no sign-ups; its host registers the bots")
        self._limited(self.signups, request, "sign-ups")
        policy = self.settings.policy
        return await trio.to_thread.run_sync(
            lambda: self.accounts.sign_up(
                fields.get("name", ""), fields.get("password", ""), policy=policy, invite=fields.get("invite")
            )
        )

    async def do_check_password(self, request: Request, fields: dict[str, str]) -> Owner:
        self._limited(self.logins, request, "password checks")
        return await trio.to_thread.run_sync(
            self.accounts.check_password, fields.get("name", ""), fields.get("password", "")
        )

    def account_context(self, owner: Owner, only: str | None = None) -> dict[str, Any]:
        """What the owner's page shows: each bot (or the one named ``only``), active first, with its
        recent matches' private side, the failed matches in a row behind a pause, its challenges and
        what is left of its quota."""
        if only is not None:
            bots = [self.accounts.bot_of(owner, only)]
        else:
            bots = sorted(self.accounts.bots(owner), key=lambda b: (not b.active, b.name))
        history: dict[str, list[BotMatch]] = {
            b.name: self.store.bot_history(b.name, limit=RECENT) for b in bots
        }
        return {
            "owner": owner,
            "bots": bots,
            "history": history,
            "failed": {b.name: failed_in_a_row(history[b.name]) for b in bots},
            "challenges": {b.name: self.store.challenges_of(b.name, limit=10) for b in bots},
            "quota_left": {b.name: self.store.challenges_left(b.name) for b in bots if b.active},
            "opponents": [b.name for g in self.games for b in self.store.list_bots(g) if b.active],
            "community": self.store.policy(),
            "max_bots": self.settings.max_bots,
            "errors": {},
            "back": "" if only is None else "bot",
            "admin": self.accounts.is_admin(owner),
        }

    async def check_admin(self, owner: Owner) -> None:
        """403 unless the host made ``owner`` an admin (`cellarena ladder owner admin NAME`)."""
        if not await trio.to_thread.run_sync(self.accounts.is_admin, owner):
            raise HTTPException(
                403,
                "only the ladder's admins see this page "
                "(the host makes one: cellarena ladder owner admin NAME)",
            )

    def admin_context(self) -> dict[str, Any]:
        """The admin page: owners waiting for approval, paused and banned bots, the audit log."""
        bots = [b for g in self.games for b in self.store.list_bots(g)]
        return {
            "pending": [o for o in self.accounts.owners() if not o.active],
            "stopped": [b for b in bots if b.active and (b.paused or b.banned)],
            "audit": self.store.audit_log(100),
            "admins": self.accounts.admins(),
        }

    async def api_owner(self, request: Request) -> tuple[str, frozenset[str]] | None:
        """The community API's owner (`web_community.OwnerSessions`): None without a session cookie;
        with one, this site's Origin, a live session and its CSRF token in ``X-CSRF-Token`` are required
        (a cookie rides along with any site's request: the header is what another site cannot send)."""
        if SESSION_COOKIE not in request.cookies:
            return None
        self.check_origin(request)
        owner, session = await self.logged_in(request)
        if not hmac.compare_digest(
            request.headers.get(CSRF_HEADER, "").encode(), self.csrf_for(session).encode()
        ):
            raise HTTPException(
                403,
                "with your login, send the CSRF token of your /account page in an X-CSRF-Token header "
                "(it was missing or stale)",
            )
        bots = await trio.to_thread.run_sync(self.accounts.bots, owner)
        return owner.name, frozenset(b.name for b in bots if b.active)

    def owner_replay(self, owner: Owner, match_id: int) -> bytes:
        """The replay of match ``match_id`` with the debug drawings of the owner's bots in it (and no one
        else's); 404, the same whether the match exists or not, when none of their bots played it."""
        mine = {b.id for b in self.accounts.bots(owner)}
        m = self.store.match(match_id)
        seats = [s.seat for s in m.seats if s.bot_id in mine] if m is not None else []
        if (
            m is None
            or not seats
            or m.replay is None
            or m.status != "finished"
            or not Path(m.replay).is_file()
        ):
            raise HTTPException(404, f"none of your bots has a match {match_id} with a replay here")
        try:
            data = Path(m.replay).read_bytes()
        except OSError as exc:
            raise HTTPException(
                404, f"the replay of match {match_id} cannot be read ({exc.strerror})"
            ) from None
        stripped, _ = strip_debug_bytes(data, f"match {match_id}", keep=seats)
        return stripped

    # -- routes --------------------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        async def signup_page(request: Request) -> Response:
            if self.settings.policy is None:
                raise HTTPException(404, "this ladder takes no sign-ups; its host registers the bots")
            return self.anonymous_form("account/signup.html", request, title="Sign up", error=None, name="")

        async def signup(request: Request) -> Response:
            fields = await self.anonymous_post(request)
            try:
                owner = await self.do_sign_up(request, fields)
            except (AccountError, BadNameError) as exc:
                return self.anonymous_form(
                    "account/signup.html",
                    request,
                    400,
                    title="Sign up",
                    error=str(exc),
                    name=fields.get("name", "")[:64],
                )
            if not owner.active:
                return self.page(
                    "account/message.html",
                    request,
                    title="Signed up",
                    message=f"You signed up as {owner.name}. The ladder's host approves new owners: "
                    "you can log in once they have.",
                )
            return await self.start_session(owner)

        async def login_page(request: Request) -> Response:
            return self.anonymous_form("account/login.html", request, title="Log in", error=None, name="")

        async def login(request: Request) -> Response:
            fields = await self.anonymous_post(request)
            try:
                owner = await self.do_check_password(request, fields)
            except AccountError as exc:
                return self.anonymous_form(
                    "account/login.html",
                    request,
                    401,
                    title="Log in",
                    error=str(exc),
                    name=fields.get("name", "")[:64],
                )
            return await self.start_session(owner)

        async def logout(request: Request) -> Response:
            _, session, _ = await self.owner_post(request)
            await trio.to_thread.run_sync(self.accounts.end_session, session)
            response = RedirectResponse("/login", status_code=303)
            response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
            return response

        async def reset_page(request: Request) -> Response:
            return self.anonymous_form(
                "account/reset.html", request, title="New password", error=None, name=""
            )

        async def reset(request: Request) -> Response:
            fields = await self.anonymous_post(request)
            self._limited(self.logins, request, "password checks")
            name = fields.get("name", "")
            try:
                await trio.to_thread.run_sync(
                    self.accounts.reset_password, name, fields.get("code", ""), fields.get("password", "")
                )
            except AccountError as exc:
                return self.anonymous_form(
                    "account/reset.html", request, 400, title="New password", error=str(exc), name=name[:64]
                )
            return RedirectResponse("/login", status_code=303)

        async def account(request: Request) -> Response:
            try:
                owner, session = await self.logged_in(request)
            except HTTPException:
                return RedirectResponse("/login", status_code=303)
            context = await trio.to_thread.run_sync(self.account_context, owner)
            return self.page(
                "account/account.html",
                request,
                title=f"{owner.name}'s bots",
                csrf=self.csrf_for(session),
                error=None,
                **context,
            )

        async def create_bot(request: Request) -> Response:
            owner, session, fields = await self.owner_post(request)
            name = fields.get("name", "")
            try:
                bot, token = await trio.to_thread.run_sync(
                    lambda: self.accounts.create_bot(
                        owner, name, self.game_of(fields), max_bots=self.settings.max_bots
                    )
                )
            except (AccountError, BadNameError) as exc:
                context = await trio.to_thread.run_sync(self.account_context, owner)
                return self.page(
                    "account/account.html",
                    request,
                    400,
                    title=f"{owner.name}'s bots",
                    csrf=self.csrf_for(session),
                    error=str(exc),
                    **context,
                )
            return self.token_page(request, owner, bot.name, token, "made")

        async def rotate(request: Request) -> Response:
            owner, _, _ = await self.owner_post(request)
            name = request.path_params["name"]
            token = await self.bot_action(lambda: self.accounts.rotate_bot(owner, name))
            assert isinstance(token, Token)
            return self.token_page(request, owner, name, token, "rotated")

        async def revoke(request: Request) -> Response:
            owner, _, _ = await self.owner_post(request)
            name = request.path_params["name"]
            await self.bot_action(lambda: self.accounts.revoke_bot(owner, name))
            return RedirectResponse("/account", status_code=303)

        async def delete_account(request: Request) -> Response:
            owner, session, fields = await self.owner_post(request)
            try:
                await self.do_check_password(
                    request, {"name": owner.name, "password": fields.get("password", "")}
                )
            except AccountError:
                context = await trio.to_thread.run_sync(self.account_context, owner)
                return self.page(
                    "account/account.html", request, 403, title=f"{owner.name}'s bots",
                    csrf=self.csrf_for(session),
                    error="the password is wrong: your account is not deleted", **context,
                )  # fmt: skip
            revoked = await trio.to_thread.run_sync(self.accounts.delete_owner, owner.name)
            response = self.page(
                "account/message.html",
                request,
                title="Account deleted",
                message=f"{owner.name}'s account is deleted"
                + (f" and {', '.join(revoked)} revoked" if revoked else "")
                + "; their matches stay in the history.",
            )
            response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
            return response

        async def bot_page(request: Request) -> Response:
            try:
                owner, session = await self.logged_in(request)
            except HTTPException:
                return RedirectResponse("/login", status_code=303)
            name = request.path_params["name"]
            context = await trio.to_thread.run_sync(lambda: self.account_context(owner, name))
            return self.page(
                "account/bot.html", request, title=f"{name} (yours)", csrf=self.csrf_for(session),
                error=None, **context,
            )  # fmt: skip

        async def bot_change(
            request: Request, change: Callable[[BotRecord, dict[str, str], str], object]
        ) -> Response:
            """A form's change to one of the owner's bots; back to the page it was posted from, which
            shows a refusal (a ban, the quota, an unknown opponent) beside the bot."""
            owner, session, fields = await self.owner_post(request)
            name = request.path_params["name"]
            bot = await self.bot_action(lambda: self.accounts.bot_of(owner, name))
            assert isinstance(bot, BotRecord)
            back_to_bot = fields.get("back") == "bot"
            try:
                await self.bot_action(lambda: change(bot, fields, f"{owner.name} (owner)"))
            except HTTPException as exc:
                if exc.status_code not in (400, 409, 429):
                    raise
                only = name if back_to_bot else None
                context = await trio.to_thread.run_sync(lambda: self.account_context(owner, only))
                context["errors"] = {name: exc.detail}
                return self.page(
                    "account/bot.html" if back_to_bot else "account/account.html", request,
                    exc.status_code, title=f"{name} (yours)" if back_to_bot else f"{owner.name}'s bots",
                    csrf=self.csrf_for(session), error=None, **context,
                )  # fmt: skip
            where = f"/account{bot_href(name)}" if back_to_bot else "/account"
            return RedirectResponse(where, status_code=303)

        async def resume_bot(request: Request) -> Response:
            return await bot_change(request, lambda b, f, who: self.community.resume_bot(b, who))

        async def challenge(request: Request) -> Response:
            return await bot_change(
                request, lambda b, f, who: self.community.challenge_by(b, f.get("opponent", "").strip(), who)
            )

        async def refusal(request: Request) -> Response:
            return await bot_change(
                request, lambda b, f, who: self.community.refusal_of(b, f.get("refuse") == "1", who)
            )

        async def admin_page(request: Request, status: int = 200, error: str | None = None) -> Response:
            owner, session = await self.logged_in(request)
            await self.check_admin(owner)
            context = await trio.to_thread.run_sync(self.admin_context)
            return self.page(
                "account/admin.html", request, status, title="Admin", csrf=self.csrf_for(session),
                error=error, owner=owner, **context,
            )  # fmt: skip

        async def admin_action(request: Request) -> Response:
            """One admin action (approve, pause, resume, ban, unban), audited as ``OWNER (admin)``."""
            owner, _, fields = await self.owner_post(request)
            await self.check_admin(owner)
            action, name = request.path_params["action"], fields.get("name", "").strip()
            reason = fields.get("reason", "").strip()
            who = f"{owner.name} (admin)"
            acts: dict[str, Callable[[], object]] = {
                "approve": lambda: self.accounts.approve(name, actor=who),
                "pause": lambda: self.store.pause(name, reason or "paused by an admin", actor=who),
                "resume": lambda: self.store.resume(name, actor=who),
                "ban": lambda: self.store.ban(name, reason, actor=who),
                "unban": lambda: self.store.unban(name, actor=who),
            }
            if action not in acts:
                raise HTTPException(404, f"no admin action {action[:30]!r}")
            if action == "ban" and not reason:
                return await admin_page(request, 400, "give the reason for a ban: the bot is told it")
            try:
                await trio.to_thread.run_sync(acts[action])
            except (AccountError, UnknownBotError) as exc:
                return await admin_page(request, 400, str(exc))
            return RedirectResponse("/admin", status_code=303)

        async def replay(request: Request) -> Response:
            owner, _ = await self.logged_in(request)
            match_id = path_number(request, "id", "match", maximum=MAX_ID)
            data = await trio.to_thread.run_sync(self.owner_replay, owner, match_id)
            disposition = {"content-disposition": f'attachment; filename="ladder-{match_id}.replay"'}
            headers = {**disposition, "cache-control": "private, no-store"}
            return Response(data, media_type="application/octet-stream", headers=headers)

        # -- the HTTP API: JSON in and out, no cookie (so nothing for another site to ride on) --------
        async def api_signup(request: Request) -> Response:
            self.check_api_origin(request)
            fields = await self.form(request)
            try:
                owner = await self.do_sign_up(request, fields)
            except (AccountError, BadNameError) as exc:
                status = 409 if "is taken" in str(exc) else 400
                return JSONResponse({"error": str(exc)}, status_code=status)
            return JSONResponse({"owner": owner.to_json()}, status_code=201)

        async def api_bots(request: Request) -> Response:
            """A new bot of the owner named in the body, with their password; its token, once."""
            self.check_api_origin(request)
            fields = await self.form(request)
            try:
                owner = await self.do_check_password(request, {**fields, "name": fields.get("owner", "")})
                bot, token = await trio.to_thread.run_sync(
                    lambda: self.accounts.create_bot(
                        owner, fields.get("name", ""), self.game_of(fields), max_bots=self.settings.max_bots
                    )
                )
            except (AccountError, BadNameError) as exc:
                status = 401 if "wrong name or password" in str(exc) else 400
                return JSONResponse({"error": str(exc)}, status_code=status)
            return JSONResponse({"name": bot.name, "game": bot.game, "token": token.secret}, status_code=201)

        endpoints = [
            ("/signup", signup_page, "GET"),
            ("/signup", signup, "POST"),
            ("/login", login_page, "GET"),
            ("/login", login, "POST"),
            ("/logout", logout, "POST"),
            ("/reset", reset_page, "GET"),
            ("/reset", reset, "POST"),
            ("/account", account, "GET"),
            ("/account/bots", create_bot, "POST"),
            ("/account/bots/{name:path}/rotate", rotate, "POST"),
            ("/account/bots/{name:path}/revoke", revoke, "POST"),
            ("/account/bots/{name:path}/resume", resume_bot, "POST"),
            ("/account/bots/{name:path}/challenge", challenge, "POST"),
            ("/account/bots/{name:path}/challenges", refusal, "POST"),
            ("/account/bots/{name:path}", bot_page, "GET"),
            ("/account/replays/{id}", replay, "GET"),
            ("/account/delete", delete_account, "POST"),
            ("/admin", admin_page, "GET"),
            ("/admin/{action}", admin_action, "POST"),
            ("/api/signup", api_signup, "POST"),
            ("/api/owner/bots", api_bots, "POST"),
        ]
        return [Route(path, guarded(endpoint), methods=[method]) for path, endpoint, method in endpoints]

    def check_api_origin(self, request: Request) -> None:
        """The API takes no cookie, so a browser on another site gains nothing by posting to it; a
        request that says it comes from another site's page is refused all the same."""
        if request.headers.get("origin") is not None:
            self.check_origin(request)

    async def start_session(self, owner: Owner) -> Response:
        session = await trio.to_thread.run_sync(
            self.accounts.new_session, owner, self.settings.session_lifetime
        )
        response = RedirectResponse("/account", status_code=303)
        signed = self._signer.sign(session.encode("ascii")).decode("ascii")
        self._cookie(response, SESSION_COOKIE, signed, int(self.settings.session_lifetime.total_seconds()))
        return response

    async def bot_action(self, action: Callable[[], object]) -> object:
        try:
            return await trio.to_thread.run_sync(action)
        except AccountError as exc:
            raise HTTPException(400, str(exc)) from None

    def token_page(self, request: Request, owner: Owner, name: str, token: Token, what: str) -> HTMLResponse:
        response = self.page(
            "account/token.html",
            request,
            owner=owner,
            title=f"{name}'s token",
            bot=name,
            token=token.secret,
            what=what,
            bot_url=bot_href(name),
        )
        response.headers["cache-control"] = "no-store"  # shown once: not kept by the browser's cache
        return response


def _origin_host(origin: str) -> str | None:
    """The host name of an ``Origin`` (or a Referer's ``scheme://host``), or None if it has none."""
    try:
        return urlsplit(origin).hostname
    except ValueError:  # a bracket that does not close
        return None


def failed_in_a_row(history: list[BotMatch]) -> list[tuple[BotMatch, str]]:
    """The bot's newest finished matches that failed, in a row (newest first), each with its failure
    (`failures.failure_of`): what a pause stands on, shown to the owner with each match's cause."""
    run = []
    for b in history:
        if b.match.status != "finished":
            continue
        me = b.me
        failure = failure_of(me.cause, me.late or 0, me.invalid or 0, b.match.ticks or 0)
        if failure is None:
            break
        run.append((b, failure))
    return run
