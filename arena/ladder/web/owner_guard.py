"""What every owners' page checks before it acts: the session cookie, CSRF, the Origin, per-address limits.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import trio
from itsdangerous import BadSignature, Signer
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from cellarena.arena.ladder.accounts.mailer import Mailer
from cellarena.arena.ladder.accounts.owners import SESSION_LIFETIME, AccountError, Accounts, Owner, Policy
from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.web.limits import LOGINS_PER_HOUR, MAX_BOTS_PER_OWNER, SIGNUPS_PER_HOUR
from cellarena.arena.ladder.web.public_pages import client_host
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.web.hosts import AllowedHosts
from cellarena.server.web.json_body import read_body, read_json_object

log = logging.getLogger("cellarena.ladder")
Endpoint = Callable[[Request], Awaitable[Response]]

SESSION_COOKIE = "cellarena_session"
FORM_COOKIE = "cellarena_form"
#: The header in which a script sends the owner's CSRF token to the community API (with the cookie).
CSRF_HEADER = "x-csrf-token"
#: The largest POST body read: a form of a name, a password and a code is far below it; a 10 KB field
#: still reaches the checks that name it, a megabyte is refused unread.
MAX_BODY = 16 * 1024
KEY_BYTES = 32


def store_faults(endpoint: Endpoint, where: str, retry: str) -> Endpoint:
    """``endpoint`` with a database fault (down, full, read-only) as a 503 that asks to come back
    (``retry`` says when), its details in the log only under ``where`` (they name the database's path
    or host, which visitors have no business seeing)."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except LadderStoreError as exc:
            log.error("%s: %s %s: %s", where, request.method, request.url.path, exc)
            raise HTTPException(503, f"the ladder's database is not answering{retry}") from None

    return run


def guarded(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with the store's faults as pages: an `AccountError` that escaped it is a 400 with
    its message; a database fault a 503 (`store_faults`)."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except AccountError as exc:  # before store_faults: an AccountError is a LadderStoreError
            raise HTTPException(400, str(exc)) from None

    return store_faults(run, "ladder pages", " just now; try again in a minute")


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
    max_bots: int = MAX_BOTS_PER_OWNER
    session_lifetime: timedelta = SESSION_LIFETIME
    trusted: TrustedProxies = field(default_factory=TrustedProxies)
    #: Sign-ups per address per hour.
    signups_per_hour: int = SIGNUPS_PER_HOUR
    #: Password checks (logins, the API's) per address per hour.
    logins_per_hour: int = LOGINS_PER_HOUR
    #: The names the pages answer to (``--allowed-host``): a form's Origin must name one of them.
    allowed_hosts: AllowedHosts | None = None
    #: The mail sender (``--smtp-host``; docs/ladder.md "Mail"), or None: no mail, the host's reset codes.
    mailer: Mailer | None = None
    #: ``--verify-email``: sign-up asks for an address, and bots are made only once it is verified.
    verify_email: bool = False


def _hmac(key: bytes, purpose: str, value: str) -> str:
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


class OwnerGuard:
    """The checks of the owners' requests, under the host's settings (`AccountSettings`)."""

    def __init__(self, settings: AccountSettings, accounts: Accounts) -> None:
        self.settings = settings
        self.accounts = accounts
        self._signer = Signer(settings.key, salt="cellarena-session")
        self.signups = AddressLimit(settings.signups_per_hour)
        self.logins = AddressLimit(settings.logins_per_hour)

    def sign(self, session: str) -> str:
        """The session cookie's value: the session id, signed with the host's key."""
        return self._signer.sign(session.encode("ascii")).decode("ascii")

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

    def check_api_origin(self, request: Request) -> None:
        """The API takes no cookie, so a browser on another site gains nothing by posting to it; a
        request that says it comes from another site's page is refused all the same."""
        if request.headers.get("origin") is not None:
            self.check_origin(request)

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

    def set_cookie(self, response: Response, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(
            name, value, max_age=max_age, path="/", secure=True, httponly=True, samesite="lax"
        )

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

    def limited(self, limit: AddressLimit, request: Request, what: str) -> None:
        if not limit.allow(self.client(request)):
            raise HTTPException(
                429,
                f"too many {what} from your address ({limit.count} an hour); wait and try again later",
            )

    async def api_owner(self, request: Request) -> tuple[str, frozenset[str]] | None:
        """The community API's owner (`community_pages.OwnerSessions`): None without a session cookie;
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


def _origin_host(origin: str) -> str | None:
    """The host name of an ``Origin`` (or a Referer's ``scheme://host``), or None if it has none."""
    try:
        return urlsplit(origin).hostname
    except ValueError:  # a bracket that does not close
        return None
