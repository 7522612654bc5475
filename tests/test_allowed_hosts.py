"""The web servers answer only to their own names (issue 39, item 5): `--allowed-host`, checked on every
request (`server.web.hosts.HostCheck`), so a page on another site whose name resolves to the ladder
(DNS rebinding) gets 400, and the forms' Origin check compares against the ladder's own names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from asgi_calls import call
from cellarena_cli import cellarena, invoke
from web_apps import FIXTURES, Ladder, ladder

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.owner_guard import AccountSettings
from cellarena.arena.ladder.web.owner_pages import AccountSite
from cellarena.arena.ladder.web.owner_routes import owner_routes
from cellarena.server.web.app import build_app
from cellarena.server.web.hosts import AllowedHosts, HostsError, host_name
from cellarena.server.web.live import LiveFeed, live_app

SIGNUP = json.dumps({"name": "carol", "password": "correct horse battery staple"}).encode()
JSON = (b"content-type", b"application/json")


@pytest.fixture
def site(tmp_path: Path) -> Ladder:
    made = ladder(tmp_path)
    yield made
    made.store.close()


def test_a_host_header_is_read_as_a_name_without_its_port() -> None:
    assert host_name("Ladder.Example.org:8080") == "ladder.example.org"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("example.org.") == "example.org"
    for bad in ("", "a b", "user@evil.example", "evil.example/x", "[::1", "a:b"):
        assert host_name(bad) is None, bad


def test_the_default_names_follow_the_address_listened_on() -> None:
    loopback, warning = AllowedHosts.for_server("127.0.0.1", ())
    assert warning is None and loopback.names == ("127.0.0.1", "localhost", "::1")
    assert not loopback.allows("evil.example") and not loopback.allows(None)
    named, warning = AllowedHosts.for_server("0.0.0.0", ("ladder.example.org", "*.example.net"))
    assert warning is None
    assert [named.allows(n) for n in ("ladder.example.org", "a.example.net", "example.net", "localhost")] == [
        True, True, False, True,
    ]  # fmt: skip
    with pytest.raises(HostsError, match="--allowed-host NAME"):
        AllowedHosts.for_server("0.0.0.0", ())
    with pytest.raises(HostsError, match="--allowed-host NAME"):
        AllowedHosts.for_server("::", ())
    lan, warning = AllowedHosts.for_server("192.0.2.7", ())
    assert lan.names == ("192.0.2.7",) and warning is not None and "--allowed-host" in warning
    anything, warning = AllowedHosts.for_server("0.0.0.0", ("*",))
    assert anything.allows("evil.example") and warning is not None and "DNS rebinding" in warning


async def test_a_request_naming_another_host_is_refused_saying_which_names(site: Ladder) -> None:
    for host in ("127.0.0.1:8080", "localhost", "[::1]:8080"):
        assert (await call(site.app, "GET", "/", host=host)).status == 200, host
    for host in ("evil.example:8080", "evil.example", "127.0.0.1.evil.example", ""):
        answer = await call(site.app, "GET", "/api/standings", host=host)
        assert answer.status == 400, host
        assert answer.json()["error"].startswith("this server answers to 127.0.0.1, localhost, ::1 only")
    assert (await call(site.app, "GET", "/", host=None)).status == 400


async def test_a_dns_rebinding_page_cannot_sign_up_or_log_in(site: Ladder) -> None:
    """Its requests name its own host, and its Origin matches that host: before, the Origin check
    passed; now the host is refused."""
    evil = [(b"origin", b"http://evil.example:8080"), JSON]
    answer = await call(site.app, "POST", "/api/signup", headers=evil, body=SIGNUP, host="evil.example:8080")
    assert answer.status == 400 and "not to 'evil.example:8080'" in answer.json()["error"]
    form = [(b"origin", b"http://evil.example:8080"), (b"content-type", b"application/x-www-form-urlencoded")]
    answer = await call(
        site.app, "POST", "/login", headers=form, body=b"name=a&password=b", host="evil.example:8080"
    )
    assert answer.status == 400
    assert site.store.bot("carol") is None
    mine = [(b"origin", b"http://127.0.0.1:8080"), JSON]
    assert (await call(site.app, "POST", "/api/signup", headers=mine, body=SIGNUP)).status == 201


async def test_the_origin_must_be_one_of_the_ladders_names_even_without_the_host_check(
    tmp_path: Path,
) -> None:
    """The Origin check stands on its own: the owners' routes in an app without `HostCheck` still
    refuse an Origin that is not one of the ladder's names, whatever Host the request names."""
    store = LadderStore(tmp_path / "ladder.sqlite")
    try:
        settings = AccountSettings(policy="open", key=b"k" * 32, allowed_hosts=AllowedHosts(["127.0.0.1"]))
        app = build_app(owner_routes(AccountSite(store, "cloth", settings)))  # no allowed_hosts: no HostCheck
        evil = [(b"origin", b"http://evil.example:8080"), JSON]
        answer = await call(app, "POST", "/api/signup", headers=evil, body=SIGNUP, host="evil.example:8080")
        assert answer.status == 403
        assert "posted from another site (http://evil.example:8080)" in answer.json()["error"]
        mine = [(b"origin", b"http://127.0.0.1:8080"), JSON]
        assert (await call(app, "POST", "/api/signup", headers=mine, body=SIGNUP)).status == 201
    finally:
        store.close()


async def test_behind_a_trusted_proxy_the_forwarded_host_is_checked_too(tmp_path: Path) -> None:
    made = ladder(
        tmp_path,
        allowed=AllowedHosts.for_server("127.0.0.1", ("ladder.example.org",))[0],
        trusted="127.0.0.1",
    )
    try:
        for forwarded, status in ((b"ladder.example.org", 200), (b"evil.example", 400)):
            answer = await call(made.app, "GET", "/", headers=[(b"x-forwarded-host", forwarded)])
            assert answer.status == status, forwarded
        # From an address that is not the proxy the header is ignored, as every forwarded header is.
        answer = await call(
            made.app, "GET", "/", headers=[(b"x-forwarded-host", b"evil.example")], client="192.0.2.9"
        )
        assert answer.status == 200
    finally:
        made.store.close()


async def test_a_websocket_naming_another_host_is_closed_before_it_opens() -> None:
    app = live_app(LiveFeed("cloth"), allowed_hosts=AllowedHosts.for_server("127.0.0.1", ())[0])
    sent: list[dict[str, object]] = []
    scope = {
        "type": "websocket", "asgi": {"version": "3.0"}, "scheme": "ws", "path": "/live/ws",
        "raw_path": b"/live/ws", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"evil.example:8766")], "client": ("127.0.0.1", 5),
        "server": ("127.0.0.1", 8766), "subprotocols": [],
    }  # fmt: skip

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    with trio.fail_after(5):
        await app(scope, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_listening_on_every_address_needs_allowed_hosts_named(tmp_path: Path) -> None:
    LadderStore(tmp_path / "ladder.sqlite").close()
    done = cellarena("ladder", "--dir", str(tmp_path), "web", "rezzo", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2 and "--allowed-host NAME" in done.stderr, done.stderr
    code, out = invoke("web", str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    assert code == 1 and "--allowed-host NAME" in out
    code, out = invoke("replay", "view", str(FIXTURES / "cloth.replay"), "--host", "::", "--port", "0")
    assert code == 1 and "--allowed-host NAME" in out


async def test_a_referer_that_is_no_url_is_refused_as_another_sites(site: Ladder) -> None:
    """Found by tests/test_hostile_requests.py: urlsplit raised on it, a 500."""
    sent = [(b"referer", b"http://[x/"), (b"content-type", b"application/x-www-form-urlencoded")]
    answer = await call(site.app, "POST", "/login", headers=sent, body=b"name=a&password=b")
    assert answer.raised is None and answer.status == 403 and "posted from another site" in answer.text
