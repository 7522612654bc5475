"""One ladder site for several games, across real processes, on SQLite and on PostgreSQL: a `ladder
serve` per game on one database, one `ladder web` over both with one account per owner, and SDK bots
of each game. Stopping one game's server (kill -9, then a start that voids what it left) leaves the
other game's matches alone (docs/ladder.md, "Several games"). The pages relay each game's match live
(`--live-port rezzo=PORT --live-port cata=auto`): /live/cata/ draws a cata match in Chromium."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio
from browser import launched, page_of
from cellarena_cli import CLI, ROOT
from game_servers import WITHOUT_NUMBA
from ladder_pages import ladder_pages
from test_ladder_accounts_web import here, signed_up
from test_ladder_community_processes import database, host, http, start, stop, wait_until
from test_ladder_tls_parts import live_messages
from wire_client import Client

from cellarena.arena.ladder.store.ladder_store import VOID_ON_START, LadderStore
from cellarena.sdk import protocol

__all__ = ["database"]  # the fixture, on SQLite and on PostgreSQL

PASSWORD = "correct horse battery"
#: Rezzo duels of 2 s (40 ticks), cata matches of 4 s (6 turns, 24 ticks): one of each is nearly
#: always under way.
REZZO = ["serve", "rezzo", "--max-ticks", "40", "--tick-rate", "20", "--budget-ms", "40"]
CATA = [
    "serve",
    "cata",
    "--port",
    "0",
    "--size",
    "16",
    "--max-turns",
    "6",
    "--tick-rate",
    "6",
    "--budget-ms",
    "100",
]
LISTENING = r"on 127\.0\.0\.1:(\d+)"


def start_reading(args: list[str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    """`start`, and what the process printed until it was ready."""
    env = {**os.environ, **WITHOUT_NUMBA}
    proc = subprocess.Popen(
        [*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if re.search(pattern, line):
            return proc, "".join(lines)
    raise AssertionError(f"{args[:6]} did not start: {''.join(lines)}")


def token_file(folder: Path, name: str, token: str) -> Path:
    path = folder / f"{name}.token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path


def sdk_bot(game: str, port: int, token: Path, log: Path) -> subprocess.Popen[bytes]:
    """The SDK's random bot of ``game``, playing on the ladder until stopped."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cellarena.sdk.opponents", game, "--ladder", "--port", str(port),
             "--token-file", str(token)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


async def _one_account_a_bot_of_each_game(site: str, tokens: dict[str, str]) -> None:
    """One owner, one account, a bot in each game; a bot without its game is refused, saying why."""
    status, body = await trio.to_thread.run_sync(
        http, f"{site}/api/signup", None, {"name": "olga", "password": PASSWORD}
    )
    assert status == 201, body
    for game in ("rezzo", "cata"):
        ask = {"owner": "olga", "password": PASSWORD, "name": f"olga-{game}", "game": game}
        status, body = await trio.to_thread.run_sync(http, f"{site}/api/owner/bots", None, ask)
        assert status == 201 and json.loads(body)["game"] == game, body
        tokens[f"olga-{game}"] = json.loads(body)["token"]
    ask = {"owner": "olga", "password": PASSWORD, "name": "olga-x"}
    status, body = await trio.to_thread.run_sync(http, f"{site}/api/owner/bots", None, ask)
    assert status == 400 and "game must be one of rezzo, cata" in body


async def _a_bot_at_another_games_port(ports: dict[str, int], tokens: dict[str, str]) -> None:
    """A bot at another game's port is told where it belongs."""
    client = await Client.connect(ports["rezzo"])
    try:
        await client.hello("c1", token=tokens["c1"])
        refused = await client.recv(timeout=30)
    finally:
        await client.stream.aclose()
    assert refused is not None and refused["code"] == protocol.BAD_HELLO
    assert "port of the ladder's cata server" in refused["message"]


async def _the_pages_show_both_games(site: str) -> None:
    """The pages show both games, each under its own address; bots and matches by name and number."""
    status, page = await trio.to_thread.run_sync(http, f"{site}/")
    assert status == 200 and 'data-game="rezzo"' in page and 'data-game="cata"' in page
    assert "olga-rezzo" in page and "olga-cata" in page
    status, body = await trio.to_thread.run_sync(http, f"{site}/api/games")
    assert [g["game"] for g in json.loads(body)["games"]] == ["rezzo", "cata"]
    for game, bot in (("rezzo", "r1"), ("cata", "c1")):
        status, body = await trio.to_thread.run_sync(http, f"{site}/api/{game}/standings")
        assert status == 200 and bot in [s["bot"] for s in json.loads(body)["standings"]]
        status, page = await trio.to_thread.run_sync(http, f"{site}/{game}/matches")
        assert status == 200 and f"{game} ladder: matches" in page
        status, body = await trio.to_thread.run_sync(http, f"{site}/api/bots/olga-{game}")
        assert status == 200 and json.loads(body)["game"] == game
        status, body = await trio.to_thread.run_sync(http, f"{site}/api/bots/olga-{game}/stats")
        assert status == 200 and json.loads(body)["matches"] >= 1, body
    status, body = await trio.to_thread.run_sync(http, f"{site}/api/standings")
    assert status == 404 and "/api/rezzo/standings, /api/cata/standings" in body


async def _each_games_match_is_live(site: str, bots: dict[str, set[str]], in_chromium: bool) -> None:
    """/live/ lists both games; each game's socket relays its own match (rezzo's from the port the
    pages were given, cata's from the one its serve recorded); in Chromium, /live/cata/ draws one."""
    status, page = await trio.to_thread.run_sync(http, f"{site}/live/")
    assert status == 200 and 'href="/live/rezzo/"' in page and 'href="/live/cata/"' in page
    for game, names in bots.items():
        seen = await trio.to_thread.run_sync(partial(live_messages, site, 2, 60, f"/live/{game}/ws"))
        welcome = next(m for m in seen if m["type"] == "welcome")
        assert welcome["game"] == game and set(welcome["names"]) <= names, welcome
    if in_chromium:
        await trio.to_thread.run_sync(_cata_drawn_live, site, bots["cata"])


def _cata_drawn_live(site: str, names: set[str]) -> None:
    with launched() as browser, page_of(browser) as (page, console):
        page.goto(f"{site}/live/cata/")
        page.wait_for_function(
            "Number(document.getElementById('player').dataset.liveFrames) >= 3", timeout=60_000
        )
        title = page.inner_text("#player header")
        assert title.startswith("cata: ") and any(name in title for name in names), title
        colours = page.evaluate(
            """() => { const c = document.getElementById('board');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                const seen = new Set();
                for (let i = 0; i < d.length; i += 4 * 97) seen.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]);
                return seen.size; }"""
        )
        assert colours >= 3, colours  # a board drawn, not a blank canvas
        console.assert_clean()


async def _rezzo_dies_and_cata_plays_on(
    store: LadderStore, servers: dict[str, subprocess.Popen[str]], serve_rezzo: list[str]
) -> None:
    """rezzo's server dies (kill -9) with a match under way; cata's plays on meanwhile, and a new
    rezzo server voids only rezzo's cut match."""

    def matches(game: str, status: str) -> list[int]:
        return [m.id for m in store.matches(game, limit=200) if m.status == status]

    await wait_until(lambda: matches("rezzo", "finished") and matches("cata", "finished"), 90)
    # rezzo's server dies (kill -9) with a match under way; cata's plays on meanwhile. The kill
    # follows a match's start, not any running match: one seen at its last tick could end (and be
    # recorded) before the kill lands on a busy machine.
    seen = max(matches("rezzo", "running") + matches("rezzo", "finished"))
    await wait_until(lambda: any(m > seen for m in matches("rezzo", "running")), 30)
    servers["rezzo"].kill()
    servers["rezzo"].wait()
    cut_short = matches("rezzo", "running")
    assert cut_short, "a rezzo match was under way when its server died"
    await wait_until(lambda: matches("cata", "running"), 30)
    cata_live = matches("cata", "running")
    servers["rezzo"], _ = start(serve_rezzo, LISTENING)  # voids only rezzo's
    for match_id in cut_short:
        record = store.match(match_id)
        assert record is not None and (record.status, record.reason) == ("void", VOID_ON_START)
    played = max(matches("rezzo", "finished"))
    await wait_until(lambda: all(m in matches("cata", "finished") for m in cata_live), 60)
    assert matches("cata", "void") == []  # nothing rezzo's server did touched cata's matches
    await wait_until(lambda: max(matches("rezzo", "finished")) > played, 60)  # its bots are back


async def test_two_games_on_one_database_one_site_one_account(
    tmp_path: Path, database: str | None, free_port: int
) -> None:
    rezzo = [*REZZO, "--port", str(free_port)]  # the same port after a restart: its bots come back
    target = database or str(tmp_path / "ladder.sqlite")
    where = ["ladder", "--dir", str(tmp_path)] + (["--db", database] if database else [])
    tokens = {}
    for name, game in (("r1", "rezzo"), ("c1", "cata")):
        added = host(tmp_path, "bot", "add", name, "--game", game, "--json", db=database)
        assert added.exit_code == 0, added.output
        tokens[name] = json.loads(added.stdout)["token"]

    live = ["--live-port", f"rezzo={free_port}", "--live-port", "cata=auto"]  # cata's: --port 0
    web, pages = start(
        [*where, "web", "rezzo", "cata", "--port", "0", "--signup", "open", *live],
        r"rezzo, cata ladder pages at (http://127\.0\.0\.1:\d+)",
    )
    site = pages.group(1)
    servers: dict[str, subprocess.Popen[str]] = {}
    bots: list[subprocess.Popen[bytes]] = []
    try:
        await _one_account_a_bot_of_each_game(site, tokens)

        # A server per game on the one database; a second server of a game is refused.
        servers["rezzo"], found = start([*where, *rezzo], LISTENING)
        ports = {"rezzo": int(found.group(1))}
        # The community policy is the database's: a server that changes it says so.
        servers["cata"], printed = start_reading([*where, *CATA, "--pause-after", "3"], LISTENING)
        ports["cata"] = int(re.findall(LISTENING, printed)[-1])
        assert "policy changes for every game on this database: pause_after 3 (was 5)" in printed
        if database is None:  # PostgreSQL's refusal waits out SERVER_CLAIM_WAIT: its store test has it
            second = subprocess.run(
                [*CLI, *where, *REZZO, "--port", "0"],
                check=False,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode != 0 and "another ladder server for rezzo is running" in second.stderr

        await _a_bot_at_another_games_port(ports, tokens)

        for name, game in (("r1", "rezzo"), ("olga-rezzo", "rezzo"), ("c1", "cata"), ("olga-cata", "cata")):
            bots.append(
                sdk_bot(game, ports[game], token_file(tmp_path, name, tokens[name]), tmp_path / f"{name}.log")
            )

        store = LadderStore(target, create=False)
        try:
            await _rezzo_dies_and_cata_plays_on(store, servers, [*where, *rezzo])
        finally:
            store.close()

        await _the_pages_show_both_games(site)
        sdk_bots = {"rezzo": {"r1", "olga-rezzo"}, "cata": {"c1", "olga-cata"}}
        await _each_games_match_is_live(site, sdk_bots, in_chromium=database is None)
    finally:
        stop(*bots)
        for proc in servers.values():
            stop(proc)
        stop(web)


def test_one_account_makes_a_bot_of_each_game_on_the_pages(tmp_path: Path) -> None:
    """The owner's page of a site of several games asks each new bot's game (a select), refuses a bot
    without one, and lists the owner's bots of both; the games' pages are each at /GAME/."""
    with ladder_pages(tmp_path, "cata", "--signup", "open") as pages:  # web rezzo ... cata
        browser = signed_up(pages)
        account = browser.get("/account")
        assert account.status == 200 and "<select name=game required>" in account.body
        for name, game in (("annr", "rezzo"), ("annc", "cata")):
            made = browser.post("/account/bots", {"name": name, "game": game})
            assert made.status == 200 and "<code id=token class=token>cla_" in made.body, made.body
        refused = browser.post("/account/bots", {"name": "annx"})
        assert refused.status == 400 and "choose the bot&#39;s game" in refused.body
        refused = browser.post("/account/bots", {"name": "annx", "game": "chess"})
        assert refused.status == 400 and "not &#39;chess&#39;" in refused.body
        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
            assert {b.name: b.game for b in store.list_bots()} == {"annr": "rezzo", "annc": "cata"}
        account = browser.get("/account").body
        assert "annr</a> · rezzo" in account and "annc</a> · cata" in account
        home = browser.get("/")
        assert home.status == 200 and 'href="/rezzo/"' in home.body and 'href="/cata/"' in home.body
        assert "//" not in home.body.replace("://", "")  # no link leaves the site
        for game in ("rezzo", "cata"):
            page = browser.get(f"/{game}/")
            assert page.status == 200 and f"{game} ladder" in page.body
            assert f"href='/api/{game}/standings'" in page.body and f'href="/{game}/matches"' in page.body
        assert browser.get("/bots/annc").status == 200  # a bot's page is at its one address
        moved = browser.get("/matches")
        assert moved.status == 307 and moved.headers["location"] == "/"

        # `ladder register` names the game of the bot it makes (in this process: the command runs as
        # a process in tests/test_ladder_accounts_web.py).
        password = tmp_path / "password"
        password.write_text(PASSWORD)
        env = {**os.environ, "SSL_CERT_FILE": str(pages.ca)}
        register = ("ladder", "--dir", str(tmp_path), "register", pages.url, "--password-file", str(password))
        done = here(
            *register, "--name", "bo", "--bot", "bocata", "--game", "cata", "--json",
            "--token-file", str(tmp_path / "bocata.token"), env=env,
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["bot"]["game"] == "cata"
