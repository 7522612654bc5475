"""The Host names a web server answers to, checked on every request (`HostCheck`).

A page on another site can make a browser send it requests under that site's name: its DNS answers
with this server's address (DNS rebinding), and the browser then treats the server as the page's own
origin, so the page reads the answers, and an Origin check that compares against the request's own
Host passes. A server that answers only to its own names refuses those requests: 400, saying which
names it answers to.

Which names, as Django and Rails choose them: those the operator gives (``--allowed-host``, repeatable;
``*.example.org`` for its subdomains, ``*`` for any, which turns the check off), plus the address the
server listens on, plus ``localhost``, ``127.0.0.1`` and ``::1`` when it listens on loopback or every
address (no other site can take those names). Listening on every address (``0.0.0.0``, ``::``) with no
name given is refused at start: the server cannot know the name its visitors use (Django's
``ALLOWED_HOSTS`` must be set outside debug mode for the same reason).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.web.pages import error_response

#: The names every server on loopback answers to.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: Addresses that mean "every address of this machine".
WILDCARDS = ("", "0.0.0.0", "::")

#: A Host header: a name or IPv4 address, or an IPv6 address in brackets; then an optional port.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s/?#@\[\]:\\]+)(:[0-9]{0,5})?")


class HostsError(ValueError):
    """The allowed names cannot be worked out; ``str()`` says which option to give."""


def host_name(header: str) -> str | None:
    """The name in a ``Host`` (or ``X-Forwarded-Host``) value, lowercase, without port or brackets;
    None if it is not a host."""
    found = _HOST.fullmatch(header.strip())
    if found is None:
        return None
    return found.group(1).strip("[]").lower().rstrip(".")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


class AllowedHosts:
    """Names a server answers to: exact names, ``*.DOMAIN`` (its subdomains), or ``*`` (any)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(
            dict.fromkeys(n.strip().strip("[]").lower().rstrip(".") for n in names if n.strip())
        )
        self.any = "*" in self.names
        self._exact = frozenset(n for n in self.names if not n.startswith("*"))
        self._suffixes = tuple(n[1:] for n in self.names if n.startswith("*."))

    def allows(self, name: str | None) -> bool:
        """Whether the host ``name`` (`host_name`'s) is one of these."""
        if self.any:
            return True
        if not name:
            return False
        return name in self._exact or any(name.endswith(s) and len(name) > len(s) for s in self._suffixes)

    def __str__(self) -> str:
        return ", ".join(self.names)

    @classmethod
    def for_server(cls, bind_host: str, given: Sequence[str]) -> tuple[AllowedHosts, str | None]:
        """The names a server listening on ``bind_host`` answers to with ``--allowed-host given``, and a
        warning for the operator (or None). `HostsError` for every address and no name given."""
        wildcard = bind_host.strip("[]") in WILDCARDS
        if wildcard and not given:
            raise HostsError(
                f"--host {bind_host or '(every address)'} listens on every address, so the pages cannot "
                "tell their own names from another site's (DNS rebinding): name each host name browsers "
                "use with --allowed-host NAME (repeatable; '*.example.org' for its subdomains, '*' for any)"
            )
        names = list(given)
        if not wildcard:
            names.append(bind_host)
        if wildcard or is_loopback(bind_host):
            names += LOOPBACK_NAMES
        allowed = cls(names)
        warning = None
        if allowed.any:
            warning = (
                "--allowed-host '*': the pages answer to any Host, so another site's page can reach them "
                "under its own name (DNS rebinding); name the hosts instead"
            )
        elif not given and not is_loopback(bind_host):
            warning = (
                f"the pages answer to the Host {bind_host} only; if browsers reach them by a name "
                "(ladder.example.org), give it with --allowed-host NAME"
            )
        return allowed, warning


class HostCheck:
    """ASGI middleware: a request whose ``Host`` is not allowed gets 400 (a WebSocket is closed
    before it opens). Behind a proxy of ``trusted``, its ``X-Forwarded-Host`` is checked too: that is
    the name the pages take for their own (`AccountSite.origin`)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts, trusted: TrustedProxies | None = None) -> None:
        self.app = app
        self.allowed = allowed
        self.trusted = trusted or TrustedProxies()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allowed.any:
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        sent = [headers.get(b"host", b"").decode("latin-1")]
        peer = (scope.get("client") or ("", 0))[0]
        forwarded = headers.get(b"x-forwarded-host")
        if forwarded is not None and self.trusted and self.trusted.trusts(peer):
            sent.append(forwarded.decode("latin-1").split(",")[0])
        refused = next((h for h in sent if not self.allowed.allows(host_name(h))), None)
        if refused is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        shown = repr(refused[:100]) if refused else "no host"
        response = error_response(
            Request(scope),
            400,
            f"this server answers to {self.allowed} only, not to {shown} (the Host this request names)",
            "Use the server's own address. Its operator names more with --allowed-host.",
        )
        await response(scope, receive, send)
