"""The owners' pages and API of `cellarena ladder web --signup ...`, started for real over HTTPS: sign-up,
login, a bot and its token shown once, rotation and revocation reaching the change log; and the bad
input of issue 29: a form from another site, a cookie replayed after logout, sign-up floods from one
address (behind a trusted proxy too), names that differ by case or look-alikes, 10 KB fields, a
100 KB body, a readable key file. `ladder register` and `ladder owner` run once each as a user runs
them (a process), otherwise in this process.

The tests of pages share a site per configuration (module fixtures): a `ladder web` start costs a
second or two of CPU, and these tests are about the pages, not the start. Each test signs up owners
and makes bots of its own names, so none sees another's."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellarena_cli import cellarena, here, run_here
from ladder_pages import Browser, Pages, ladder_pages

from cellarena.arena.ladder.accounts.password_cost import VARIABLE as PASSWORD_COST_VARIABLE
from cellarena.arena.ladder.store.ladder_store import LadderStore

PASSWORD = "correct horse battery"


def signed_up(pages: Pages, name: str = "ann") -> Browser:
    browser = Browser(pages)
    browser.get("/signup")
    answer = browser.post("/signup", {"name": name, "password": PASSWORD})
    assert answer.status == 303 and answer.headers["location"] == "/account", answer.body
    return browser


@pytest.fixture(scope="module")
def open_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    """Open to sign-ups, one bot an owner; the sign-ups of all the tests on it stay under the limit."""
    folder = tmp_path_factory.mktemp("open")
    with ladder_pages(
        folder, "--signup", "open", "--max-bots-per-owner", "1", "--signups-per-hour", "50"
    ) as pages:
        yield pages


#: The proxied site's password checks an address may make in an hour (`--logins-per-hour`).
GUESSES = 5


@pytest.fixture(scope="module")
def proxied_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    """Open, behind a trusted proxy that forwards for the name ladder.example.org; two sign-ups an hour
    from an address (the proxy's own, 127.0.0.1, takes two here: the guesses' owner and the proxy's),
    and five password checks (an argon2 hash each: the default 30 cost the suite some 20 s of CPU)."""
    folder = tmp_path_factory.mktemp("proxied")
    proxy = ("--trusted-proxy", "127.0.0.1", "--allowed-host", "ladder.example.org")
    limits = ("--signups-per-hour", "2", "--logins-per-hour", str(GUESSES))
    with ladder_pages(folder, "--signup", "open", *limits, *proxy) as pages:
        yield pages


@pytest.fixture(scope="module")
def closed_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    """Closed to sign-ups, behind a trusted proxy for whose forwarded names the host named none."""
    folder = tmp_path_factory.mktemp("closed")
    with ladder_pages(folder, "--signup", "closed", "--trusted-proxy", "127.0.0.1") as pages:
        yield pages


def bot_names(pages: Pages) -> set[str]:
    with store_of(pages) as store:
        return {b.name for b in store.list_bots()}


def store_of(pages: Pages) -> LadderStore:
    return LadderStore(pages.folder / "ladder.sqlite", create=False)


def api(
    browser: Browser, path: str, body: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, dict]:
    answer = browser.request(
        path, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})}
    )
    return answer.status, json.loads(answer.body)


def test_sign_up_make_a_bot_see_its_token_once_rotate_and_revoke(open_site: Pages) -> None:
    pages = open_site
    browser = Browser(pages)
    form = browser.get("/signup")
    assert form.status == 200 and 'name=csrf value="' in form.body
    answer = browser.post("/signup", {"name": "ann", "password": PASSWORD})
    cookie = answer.headers["set-cookie"]
    assert answer.status == 303 and cookie.startswith("cellarena_session=")
    for attribute in ("HttpOnly", "Secure", "SameSite=lax", "Path=/"):
        assert attribute in cookie
    key = pages.folder / "session.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    account = browser.get("/account")
    assert account.status == 200 and "ann&#39;s bots" in account.body and "(0 of 1 active)" in account.body

    with store_of(pages) as store:
        start = store.last_change()
    made = browser.post("/account/bots", {"name": "annbot"})
    assert made.status == 200 and made.headers["cache-control"] == "no-store"
    token = made.body.split("<code id=token class=token>")[1].split("</code>")[0]
    assert token.startswith("cla_")
    assert token not in browser.get("/account").body  # shown once
    second = browser.post("/account/bots", {"name": "another"})
    assert second.status == 400 and "--max-bots-per-owner 1" in second.body

    rotated = browser.post("/account/bots/annbot/rotate", {})
    new = rotated.body.split("<code id=token class=token>")[1].split("</code>")[0]
    with store_of(pages) as store:
        assert store.authenticate(token) is None
        bot = store.authenticate(new)
        assert bot is not None and bot.name == "annbot"
    asked = browser.post("/account/bots/annbot/revoke", {})  # asks first (issue 42)
    assert asked.status == 200 and "Revoke annbot for good" in asked.body
    with store_of(pages) as store:
        assert store.authenticate(new) is not None
    assert browser.post("/account/bots/annbot/revoke", {"confirm": "yes"}).status == 303
    with store_of(pages) as store:
        assert store.authenticate(new) is None
        assert [(c.kind, c.bot) for c in store.changes_since(start)] == [
            ("bot_added", "annbot"),
            ("token_rotated", "annbot"),
            ("bot_revoked", "annbot"),
        ]
    page = browser.get("/bots/annbot")
    assert page.status == 200 and "bot of ann" in page.body and "revoked" in page.body


def test_a_form_posted_from_another_site_is_refused(open_site: Pages) -> None:
    pages = open_site
    bots = bot_names(pages)
    browser = signed_up(pages, "cat")
    browser.get("/account")
    cases = {
        "origin": browser.post("/account/bots", {"name": "a"}, origin="https://evil.example"),
        "null": browser.post("/account/bots", {"name": "b"}, origin="null"),
        "none": browser.post("/account/bots", {"name": "c"}, origin=None),
        "csrf": browser.post("/account/bots", {"name": "d"}, csrf=None),
        "stale": browser.post("/account/bots", {"name": "e"}, csrf="0" * 64),
    }
    referer = browser.request(
        "/account/bots",
        f"name=f&csrf={browser.csrf}".encode(),
        {"content-type": "application/x-www-form-urlencoded", "referer": "https://evil.example/x"},
    )
    assert all(a.status == 403 for a in [*cases.values(), referer]), {k: a.status for k, a in cases.items()}
    assert "posted from another site (https://evil.example)" in cases["origin"].body
    assert "cross-site request forgery" in referer.body
    assert "neither an Origin nor a Referer" in cases["none"].body
    assert "security token is missing or stale" in cases["csrf"].body
    # Sign-up and login forms are guarded too (a login forced on a victim is an attack as well).
    stranger = Browser(pages)
    stranger.get("/login")
    refused = stranger.post("/login", {"name": "cat", "password": PASSWORD}, origin="https://evil.example")
    assert refused.status == 403 and stranger.session_cookie() is None
    assert bot_names(pages) == bots  # none made


def test_a_session_cookie_replayed_after_logout_is_refused(open_site: Pages) -> None:
    pages = open_site
    browser = signed_up(pages, "dan")
    browser.get("/account")
    stolen, csrf = browser.session_cookie(), browser.csrf
    assert stolen is not None
    out = browser.post("/logout", {})
    assert out.status == 303 and out.headers["location"] == "/login"
    thief = Browser(pages)
    cookie = {"cookie": f"cellarena_session={stolen}"}
    again = thief.request("/account", headers=cookie)
    assert again.status == 303 and again.headers["location"] == "/login"
    posted = thief.request(
        "/account/bots",
        f"name=x&csrf={csrf}".encode(),
        {**cookie, "origin": pages.url, "content-type": "application/x-www-form-urlencoded"},
    )
    assert posted.status == 401 and "log in first" in posted.body
    forged = thief.request("/account", headers={"cookie": f"cellarena_session={stolen[:-2]}xx"})
    assert forged.status == 303  # a cookie whose signature is wrong is no session either


def test_sign_up_floods_are_limited_per_client_address_behind_a_trusted_proxy(proxied_site: Pages) -> None:
    pages = proxied_site
    browser = Browser(pages)
    one = {"x-forwarded-for": "203.0.113.5"}
    for name in ("a1", "a2"):
        status, body = api(browser, "/api/signup", {"name": name, "password": PASSWORD}, one)
        assert status == 201, body
    status, body = api(browser, "/api/signup", {"name": "a3", "password": PASSWORD}, one)
    assert status == 429 and "too many sign-ups from your address (2 an hour)" in body["error"]
    # Another client behind the same proxy is counted on its own.
    status, body = api(
        browser, "/api/signup", {"name": "b1", "password": PASSWORD}, {"x-forwarded-for": "203.0.113.6"}
    )
    assert status == 201, body
    # A client cannot pick its address: what it wrote before the proxy's entry is not believed.
    spoof = {"x-forwarded-for": "198.51.100.1, 203.0.113.5"}
    status, body = api(browser, "/api/signup", {"name": "c1", "password": PASSWORD}, spoof)
    assert status == 429


def test_look_alike_names_and_10_kb_inputs_are_refused_clearly(open_site: Pages) -> None:
    pages = open_site
    bots = bot_names(pages)
    browser = signed_up(pages, "alice")
    fresh = Browser(pages)
    for twin in ("Alice", "\u0430lice", "ａｌｉｃｅ"):
        status, body = api(fresh, "/api/signup", {"name": twin, "password": PASSWORD})
        assert status == 409 and "reads as 'alice'" in body["error"] and "look-alike" in body["error"]
    fresh.get("/signup")
    page = fresh.post("/signup", {"name": "ALICE", "password": PASSWORD})
    assert page.status == 400 and "look-alike characters count as one" in page.body
    status, body = api(fresh, "/api/signup", {"name": "x" * 10240, "password": PASSWORD})
    assert status == 400 and "(10240 characters): give 1 to 32" in body["error"]
    status, body = api(fresh, "/api/signup", {"name": "bob", "password": "p" * 10240})
    assert status == 400 and "10240 characters: give 10 to 256" in body["error"]
    browser.get("/account")
    made = browser.post("/account/bots", {"name": "b" * 10240})
    assert made.status == 400 and "give 1 to 64 characters" in made.body
    big = fresh.request("/api/signup", b"{" + b" " * 100_000 + b"}", {"content-type": "application/json"})
    assert big.status == 413 and "over 16 KB" in big.body
    assert bot_names(pages) == bots  # none made


def test_a_session_key_that_others_may_read_is_refused(tmp_path: Path) -> None:
    LadderStore(tmp_path / "ladder.sqlite").close()
    key = tmp_path / "session.key"
    key.write_text("ab" * 32)
    key.chmod(0o644)
    # In this process: refused before it binds or sets the password cost, so no server is left here.
    done = run_here("ladder", "--dir", str(tmp_path), "web", "rezzo", "--signup", "open", "--port", "0")
    assert done.returncode == 2 and f"chmod 600 {key}" in done.stderr and "--session-key-file" in done.stderr


def test_register_with_an_invite_and_approval_from_the_command_line(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    with ladder_pages(tmp_path, "--signup", "invite") as pages:
        env = {**os.environ, "SSL_CERT_FILE": str(pages.ca)}
        where = ("ladder", "--dir", str(tmp_path))
        register = (*where, "register", pages.url, "--password-file", str(password), "--json")
        refused = here(*register, "--name", "ann", env=env)
        assert refused.exit_code == 1 and "by invitation" in json.loads(refused.stdout)["error"]
        invite = json.loads(here(*where, "owner", "invite", "--json").stdout)["invite"]
        invite_file = tmp_path / "invite"
        invite_file.write_text(invite)
        token_file = tmp_path / "annbot.token"
        done = cellarena(  # a process, as a user runs it: the other registrations run here
            *register, "--name", "ann", "--invite-file", str(invite_file), "--bot", "annbot",
            "--token-file", str(token_file), env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        assert json.loads(done.stdout)["bot"] == {
            "name": "annbot",
            "game": "rezzo",
            "token_file": str(token_file),
        }
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        with store_of(pages) as store:
            bot = store.authenticate(token_file.read_text().strip())
            assert bot is not None and bot.name == "annbot"
        again = here(*register, "--name", "ben", "--invite-file", str(invite_file), env=env)
        assert again.exit_code == 1 and "used already" in json.loads(again.stdout)["error"]
        insecure = here(
            *where, "register", "http://ladder.example", "--name", "x", "--password-file", str(password)
        )
        assert insecure.exit_code == 2 and "use https" in insecure.stderr

    with ladder_pages(tmp_path, "--signup", "approval") as pages:
        env = {**os.environ, "SSL_CERT_FILE": str(pages.ca)}
        done = run_here(
            *where, "register", pages.url, "--password-file", str(password), "--name", "cy", env=env
        )
        assert done.returncode == 0 and "host approves new owners" in done.stdout
        browser = Browser(pages)
        browser.get("/login")
        waiting = browser.post("/login", {"name": "cy", "password": PASSWORD})
        assert waiting.status == 401 and "waiting for the host" in waiting.body
        approved = cellarena(*where, "owner", "approve", "cy", "--json")  # `ladder owner` as a process
        assert approved.returncode == 0 and json.loads(approved.stdout) == {"name": "cy", "approved": True}
        browser.get("/login")
        assert browser.post("/login", {"name": "cy", "password": PASSWORD}).status == 303
        listed = json.loads(here(*where, "owner", "list", "--json").stdout)["owners"]
        assert [(o["name"], o["status"], o["bots"]) for o in listed] == [
            ("ann", "active", ["annbot"]),
            ("cy", "active", []),
        ]


def test_a_lost_password_the_hosts_reset_code_and_deleting_an_account(open_site: Pages) -> None:
    pages = open_site
    where = ("ladder", "--dir", str(pages.folder))
    browser = signed_up(pages, "lena")
    browser.get("/account")
    browser.post("/account/bots", {"name": "lenabot"})
    code = json.loads(here(*where, "owner", "reset", "lena", "--json").stdout)["code"]
    other = Browser(pages)
    other.get("/reset")
    wrong = other.post("/reset", {"name": "lena", "code": "rst_guess", "password": "a new password"})
    assert wrong.status == 400 and "ask the ladder&#39;s host for a new one" in wrong.body
    done = other.post("/reset", {"name": "lena", "code": code, "password": "a new password"})
    assert done.status == 303
    assert browser.get("/account").status == 303  # the old session ended with the reset
    other.get("/login")
    assert other.post("/login", {"name": "lena", "password": "a new password"}).status == 303
    deleted = run_here(*where, "owner", "delete", "lena", "--yes", "--json")
    assert deleted.returncode == 0 and json.loads(deleted.stdout) == {
        "name": "lena",
        "revoked": ["lenabot"],
    }
    assert other.get("/account").status == 303
    with store_of(pages) as store:
        bot = store.bot("lenabot")
        assert bot is not None and not bot.active
    missing = here(*where, "owner", "reset", "nobody")
    assert missing.exit_code == 1 and "no owner named 'nobody'" in missing.stderr


def test_a_closed_ladder_lets_owners_log_in_but_takes_no_sign_up(closed_site: Pages) -> None:
    pages = closed_site
    browser = Browser(pages)
    assert browser.get("/signup").status == 404
    status, body = api(browser, "/api/signup", {"name": "ann", "password": PASSWORD})
    assert status == 403 and "takes no sign-ups" in body["error"]
    assert browser.get("/login").status == 200


def test_behind_a_trusted_tls_proxy_the_forwarded_origin_is_the_sites(
    proxied_site: Pages, closed_site: Pages, open_site: Pages
) -> None:
    """A TLS proxy at ladder.example.org forwards to the pages: forms posted from its pages carry that
    origin, which the pages take for their own only because the proxy is trusted and the host named
    the name (--allowed-host): a forwarded name that is not the ladder's is refused with 400 (the
    closed site trusts the proxy but named no name; its Host check answers before any page does)."""
    forwarded = {"x-forwarded-proto": "https", "x-forwarded-host": "ladder.example.org"}
    origin = "https://ladder.example.org"
    for pages, expected in ((proxied_site, 303), (closed_site, 400), (open_site, 403)):
        browser = Browser(pages)
        browser.get("/signup")
        body = f"name=ann&password={PASSWORD.replace(' ', '+')}&csrf={browser.csrf}".encode()
        headers = {**forwarded, "origin": origin, "content-type": "application/x-www-form-urlencoded"}
        answer = browser.request("/signup", body, headers)
        assert answer.status == expected, answer.body
        if expected == 403:
            assert f"posted from another site ({origin})" in answer.body
        if expected == 400:
            assert "not to &#39;ladder.example.org&#39;" in answer.body


def test_the_api_refuses_a_wrong_password_and_names_the_limit(open_site: Pages) -> None:
    pages = open_site
    browser = Browser(pages)
    assert api(browser, "/api/signup", {"name": "abe", "password": PASSWORD})[0] == 201
    status, body = api(
        browser, "/api/owner/bots", {"owner": "abe", "password": "wrong password", "name": "x"}
    )
    assert status == 401 and body["error"] == "wrong name or password"
    status, body = api(browser, "/api/owner/bots", {"owner": "abe", "password": PASSWORD, "name": "x"})
    assert status == 201 and body["token"].startswith("cla_") and body["name"] == "x"
    status, body = api(browser, "/api/owner/bots", {"owner": "abe", "password": PASSWORD, "name": "y"})
    assert status == 400 and "--max-bots-per-owner 1" in body["error"]
    status, body = api(
        browser, "/api/signup", {"name": "ben", "password": PASSWORD}, {"origin": "https://evil.example"}
    )
    assert status == 403 and "posted from another site" in body["error"]


def test_an_owner_deletes_their_own_account_with_their_password(open_site: Pages) -> None:
    pages = open_site
    browser = signed_up(pages, "del")
    browser.get("/account")
    browser.post("/account/bots", {"name": "delbot"})
    browser.get("/account")
    wrong = browser.post("/account/delete", {"password": "not my password"})
    assert wrong.status == 403 and "your account is not deleted" in wrong.body
    done = browser.post("/account/delete", {"password": PASSWORD})
    assert done.status == 200 and "del&#39;s account is deleted and delbot revoked" in done.body
    assert browser.get("/account").status == 303
    with store_of(pages) as store:
        bot = store.bot("delbot")
        assert bot is not None and not bot.active
    assert signed_up(pages, "del").get("/account").status == 200  # the name is free again


def test_names_are_data_on_every_page_and_the_header_knows_who_is_logged_in(open_site: Pages) -> None:
    pages = open_site
    browser = signed_up(pages, "<b>ann</b>")
    browser.get("/account")
    made = browser.post("/account/bots", {"name": "<script>x</script>"})
    assert made.status == 200 and "<script>x</script>" not in made.body
    for path in ("/", "/bots/%3Cscript%3Ex%3C%2Fscript%3E", "/account"):
        page = browser.get(path)
        assert page.status == 200 and "<b>ann</b>" not in page.body and "<script>x" not in page.body
        assert "&lt;b&gt;ann&lt;/b&gt;" in page.body  # the header names the owner, escaped
    assert "bot of &lt;b&gt;ann&lt;/b&gt;" in browser.get("/bots/%3Cscript%3Ex%3C%2Fscript%3E").body
    stranger = Browser(pages).get("/")
    assert "&lt;b&gt;ann" not in stranger.body and 'href="/login"' in stranger.body


def test_password_guesses_from_one_address_are_limited(proxied_site: Pages) -> None:
    pages = proxied_site  # its own address's password checks, spent here: no other test's on this site
    browser = Browser(pages)
    assert api(browser, "/api/signup", {"name": "gus", "password": PASSWORD})[0] == 201
    guess = {"owner": "gus", "password": "guess number n", "name": "x"}
    statuses = [api(browser, "/api/owner/bots", guess)[0] for _ in range(GUESSES)]
    assert statuses == [401] * GUESSES
    status, body = api(browser, "/api/owner/bots", {**guess, "password": PASSWORD})
    assert (
        status == 429 and f"too many password checks from your address ({GUESSES} an hour)" in body["error"]
    )
    browser.get("/login")
    page = browser.post("/login", {"name": "gus", "password": PASSWORD})
    assert page.status == 429 and browser.session_cookie() is None


def stored_hash(pages: Pages, name: str) -> str:
    with store_of(pages) as store, store.database.reading("read a password hash") as db:
        return str(db.query("SELECT password_hash FROM owners WHERE name = ?", (name,))[0][0])


def test_the_hosts_password_hash_cost_is_used_and_a_weak_one_is_warned_of(
    open_site: Pages, tmp_path: Path
) -> None:
    """`--password-hash` on the command line wins over the environment, where the suite's cheap cost
    is (tests/conftest.py), and a cost below OWASP's least is warned of at the start."""
    signed_up(open_site, "cheapcost")
    assert f"$argon2id$v=19${os.environ[PASSWORD_COST_VARIABLE]}$" in stored_hash(open_site, "cheapcost")
    folder = tmp_path / "owasp"
    folder.mkdir()
    with ladder_pages(folder, "--signup", "open", "--password-hash", "m=19456,t=2,p=1") as pages:
        signed_up(pages, "owasp")
        assert "$argon2id$v=19$m=19456,t=2,p=1$" in stored_hash(pages, "owasp")
    assert "warning: --password-hash" not in pages.stderr()
    with ladder_pages(folder, "--signup", "open") as pages:
        pass
    warned = pages.stderr()
    assert f"warning: --password-hash {os.environ[PASSWORD_COST_VARIABLE]} is cheaper than OWASP" in warned


@pytest.mark.parametrize("from_environment", [False, True])
def test_a_password_hash_cost_argon2id_cannot_use_stops_the_start_saying_what_to_give(
    tmp_path: Path, from_environment: bool
) -> None:
    args = ["ladder", "--dir", str(tmp_path), "web", "rezzo", "--signup", "open", "--port", "0"]
    if from_environment:
        done = here(*args, env={PASSWORD_COST_VARIABLE: "m=8,t=1"})
    else:
        done = here(*args, "--password-hash", "m=8,t=1")
    assert done.exit_code == 2, done.output
    named = f"Invalid value for '--password-hash' (env var: '{PASSWORD_COST_VARIABLE}'): 'm=8,t=1'"
    assert named in done.output and "give m=KIB,t=PASSES,p=LANES, each once" in done.output, done.output
