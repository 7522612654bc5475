"""Where a bot connects (issue 42, point 2), without a server: the one builder of the connect commands
(`connect_commands`) for every kit, with TLS or not, a certificate of the ladder's own or a public CA's,
a public host and port; what `ladder serve` records (`ops.endpoint`, the store's settings); the connect
page, its API and the certificate's download in this process (`asgi_calls`); and the options' errors."""

from __future__ import annotations

import shlex
import ssl
from pathlib import Path

import pytest
from asgi_calls import call
from cellarena_cli import invoke
from certificates import pem_files
from web_apps import GAME, LOOPBACK, Ladder, ladder

from cellarena.arena.cli.ladder.web import public_url
from cellarena.arena.ladder.connect_commands import (
    KITS,
    Address,
    Endpoint,
    certificates_only,
    connect_commands,
    kit_command,
)
from cellarena.arena.ladder.ops.endpoint import endpoint_of, system_trusts
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.app import ladder_app
from cellarena.server.net.tls import server_context

PUBLIC = Address("rezzo", "ladder.example.org", 7000, tls=True)
OWN = Address("rezzo", "ladder.example.org", 7000, tls=True, own_ca=True)
PLAIN = Address("rezzo", "127.0.0.1", 7777)


def by_kit(address: Address, bot: str | None = None) -> dict[str, list[str]]:
    return {c.kit: shlex.split(c.command) for c in connect_commands(address, bot)}


def test_every_kit_gets_a_command_in_the_pages_order() -> None:
    assert (
        [c.kit for c in connect_commands(PLAIN)]
        == list(KITS)
        == ["python", "typescript", "java", "cpp", "rust"]
    )


def test_plain_tcp_every_kit_connects_directly_without_tls() -> None:
    tail = ["--host", "127.0.0.1", "--port", "7777", "--ladder", "--token-file", "bot.token"]
    assert by_kit(PLAIN) == {
        "python": ["python", "my_bot.py", *tail],
        "typescript": ["node", "dist/src/bot.js", *tail],
        "java": ["java", "-jar", "build/my_bot.jar", *tail],
        "cpp": ["build/my_bot", *tail],
        "rust": ["target/release/my_bot", *tail],
    }
    assert all(c.proxy is None and c.setup is None for c in connect_commands(PLAIN))


def test_a_public_cas_certificate_needs_tls_only_and_the_bots_name_is_filled_in() -> None:
    commands = by_kit(PUBLIC, "annbot")
    tail = [
        "--host",
        "ladder.example.org",
        "--port",
        "7000",
        "--ladder",
        "--token-file",
        "annbot.token",
        "--tls",
    ]
    assert commands["python"] == ["python", "annbot.py", *tail]
    assert commands["typescript"] == ["node", "dist/src/bot.js", *tail]
    assert commands["java"] == ["java", "-jar", "build/annbot.jar", *tail]


def test_a_certificate_of_the_ladders_own_is_trusted_by_its_file() -> None:
    commands = by_kit(OWN, "annbot")
    for kit in ("python", "typescript", "java"):
        assert commands[kit][-3:] == ["--tls", "--tls-ca", "rezzo-ca.pem"], kit


@pytest.mark.parametrize("address", [PUBLIC, OWN])
def test_kits_without_tls_go_through_a_local_stunnel_that_checks_the_ladder(address: Address) -> None:
    for kit in ("cpp", "rust"):
        c = kit_command(kit, address, "annbot")
        assert shlex.split(c.command)[1:5] == ["--host", "127.0.0.1", "--port", "7778"]
        assert c.proxy == "stunnel rezzo-tls.conf" and c.setup_file == "rezzo-tls.conf"
        assert c.setup is not None
        lines = c.setup.splitlines()
        assert "client = yes" in lines and "accept = 127.0.0.1:7778" in lines
        assert "connect = ladder.example.org:7000" in lines and "checkHost = ladder.example.org" in lines
        if address.own_ca:
            assert "verifyPeer = yes" in lines and "CAfile = rezzo-ca.pem" in lines
        else:
            assert "verifyChain = yes" in lines and "CAfile = /etc/ssl/certs/ca-certificates.crt" in lines


def test_an_ip_address_is_checked_as_one_and_names_are_quoted_for_the_shell() -> None:
    v6 = Address("rezzo", "2001:db8::1", 7000, tls=True)
    assert "checkIP = 2001:db8::1" in (kit_command("cpp", v6).setup or "")
    assert "connect = [2001:db8::1]:7000" in (kit_command("rust", v6).setup or "")
    odd = kit_command("python", PLAIN, "Zoë's bot")
    # A name no folder of new-bot can have runs as my_bot; its token file keeps the name, quoted.
    assert shlex.split(odd.command)[:2] == ["python", "my_bot.py"]
    assert shlex.split(odd.command)[-1] == "Zoë's bot.token"
    assert kit_command("python", PLAIN, "x", "/home/ann/x.token").command.endswith(
        "--token-file /home/ann/x.token"
    )


def test_an_address_reads_back_from_the_api_and_refuses_what_is_not_one() -> None:
    assert Address.from_json(OWN.to_json()) == OWN
    for bad in (None, [], {"game": "rezzo"}, {**OWN.to_json(), "port": 0}, {**OWN.to_json(), "port": True},
                {**OWN.to_json(), "host": ""}):  # fmt: skip
        assert Address.from_json(bad) is None, bad


def test_an_endpoint_is_a_settings_row_and_a_damaged_row_is_none() -> None:
    e = Endpoint("rezzo", None, 7000, tls=True, ca_pem="PEM")
    assert Endpoint.from_setting(*e.to_setting()) == e
    assert e.address("site.example").host == "site.example" and e.address("x").own_ca
    assert Endpoint("rezzo", "bots.example", 1).address("site.example").host == "bots.example"
    for name, value in (("pause_after", "5"), ("endpoint:rezzo", "{"), ("endpoint:rezzo", '{"port": 99999}')):
        assert Endpoint.from_setting(name, value) is None


def test_the_store_keeps_each_games_endpoint_beside_the_policy(ladder_db: str) -> None:
    """On SQLite and PostgreSQL: one row per game, the latest serve's, the community policy untouched."""
    with LadderStore(ladder_db) as store:
        assert store.endpoints() == {}
        store.set_endpoint(Endpoint("rezzo", None, 7000))
        store.set_endpoint(Endpoint("rezzo", "bots.example", 7001, tls=True, ca_pem="PEM"))
        store.set_endpoint(Endpoint("cata", "127.0.0.1", 7002))
        assert store.endpoints() == {
            "rezzo": Endpoint("rezzo", "bots.example", 7001, tls=True, ca_pem="PEM"),
            "cata": Endpoint("cata", "127.0.0.1", 7002),
        }
        assert store.policy() == CommunityPolicy()


def test_only_certificates_are_kept_from_a_file_that_holds_its_key_too(tmp_path: Path) -> None:
    _, chain, key = pem_files(tmp_path, "localhost")
    both = key.read_text() + chain.read_text()
    kept = certificates_only(both)
    assert kept == chain.read_text() and "PRIVATE KEY" not in kept


def test_serve_records_its_public_address_and_its_own_certificate(tmp_path: Path) -> None:
    ca, chain, key = pem_files(tmp_path, "localhost", "127.0.0.1")
    context = server_context(chain, key)
    assert not system_trusts(context)  # a trustme CA: no system trusts it
    trusting = ssl.create_default_context(cafile=str(ca))
    assert _trusted_by(context, trusting)
    e = endpoint_of("rezzo", host="0.0.0.0", port=4000, tls=context, cert_file=str(chain))
    assert (e.host, e.port, e.tls, e.ca_pem) == (None, 4000, True, chain.read_text())
    e = endpoint_of("rezzo", host="0.0.0.0", port=4000, public_host="bots.example", public_port=443)
    assert (e.host, e.port, e.tls, e.ca_pem) == ("bots.example", 443, False, None)
    assert endpoint_of("rezzo", host="10.0.0.5", port=4000).host == "10.0.0.5"


def _trusted_by(server: ssl.SSLContext, client: ssl.SSLContext) -> bool:
    """`system_trusts` with ``client`` in place of the system's default context."""
    original = ssl.create_default_context
    ssl.create_default_context = lambda *a, **k: client  # type: ignore[assignment]
    try:
        return system_trusts(server)
    finally:
        ssl.create_default_context = original  # type: ignore[assignment]


@pytest.fixture
def site(tmp_path: Path) -> Ladder:
    made = ladder(tmp_path)
    yield made
    made.store.close()


async def test_the_connect_page_shows_each_recorded_game_and_its_certificate(site: Ladder) -> None:
    unknown = await call(site.app, "GET", "/connect")
    assert unknown.status == 200 and "has recorded its address" in unknown.text
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    site.store.set_endpoint(Endpoint(GAME, None, 7443, tls=True, ca_pem=pem))
    page = await call(site.app, "GET", "/connect")
    # Served on every address, named by nothing: the site's own name (the request's here).
    expected = shlex.join(["python", "my_bot.py", "--host", "127.0.0.1", "--port", "7443", "--ladder",
                           "--token-file", "bot.token", "--tls", "--tls-ca", "cloth-ca.pem"])  # fmt: skip
    assert page.status == 200 and "TLS on" in page.text and expected in page.text
    assert 'href="/connect/cloth/ca.pem"' in page.text and "stunnel cloth-tls.conf" in page.text
    download = await call(site.app, "GET", "/connect/cloth/ca.pem")
    assert download.status == 200 and download.text == pem
    assert download.headers["content-disposition"] == 'attachment; filename="cloth-ca.pem"'
    api = (await call(site.app, "GET", "/api/connect")).json()
    assert api == {"games": [{"game": GAME, "host": "127.0.0.1", "port": 7443, "tls": True, "own_ca": True,
                              "ca": "http://127.0.0.1:8080/connect/cloth/ca.pem"}]}  # fmt: skip
    missing = await call(site.app, "GET", "/connect/rezzo/ca.pem")
    assert missing.status == 404 and "no certificate of its own" in missing.text
    home = await call(site.app, "GET", "/")
    assert 'href="/connect"' in home.text


async def test_a_public_url_names_the_site_and_the_bots_host(tmp_path: Path) -> None:
    store = LadderStore(tmp_path / "ladder.sqlite")
    try:
        store.set_endpoint(Endpoint(GAME, None, 7777, tls=True))  # a public CA's: nothing to download
        app, _ = ladder_app(store, [GAME], allowed_hosts=LOOPBACK, public_url="https://ladder.example.org")
        api = (await call(app, "GET", "/api/connect")).json()["games"][0]
        assert (api["host"], api["own_ca"], api["ca"]) == ("ladder.example.org", False, None)
        page = await call(app, "GET", "/connect")
        assert "nothing to do" in page.text and "--host ladder.example.org --port 7777" in page.text
    finally:
        store.close()


def test_public_url_and_public_host_refuse_what_is_no_address() -> None:
    assert public_url("https://ladder.example.org/") == "https://ladder.example.org"
    assert public_url("https://ladder.example.org:8443/pages") == "https://ladder.example.org:8443/pages"
    for bad in (
        "ladder.example.org",
        "ftp://x",
        "https://",
        "https://a?b=1",
        "https://u@a",
        "https://a:99999",
    ):
        with pytest.raises(Exception, match=r"--public-url|address"):
            public_url(bad)
    for bad in ("0.0.0.0", "https://x", "a b", "x:7777"):
        code, out = invoke("ladder", "serve", "rezzo", "--public-host", bad)
        assert code == 2 and "--public-host" in out and "no address a bot can connect to" in out, out
    code, out = invoke("ladder", "web", "rezzo", "--public-url", "ladder.example.org")
    assert code == 2 and "--public-url" in out and "https://NAME" in out, out
