"""A stranger joins a community ladder in Chromium (issue 29): signs up on the pages, makes a bot, copies
its token (shown once), runs a real bot with it against a real `ladder serve`, reads the private side
of its match, the replay with their bot's debug drawings, and revokes the bot, which the running
server ends. And the attacks on those flows, in the
browser: a page of another site that posts the owner's form, and a session cookie replayed after logout.
Screenshots of each page go to the test's folder (or CELLARENA_SCREENSHOTS). Both tests use one site
(`ladder web --signup open` over HTTPS, started once), under owner names of their own."""

from __future__ import annotations

import http.server
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser import Console, shot_dir
from cellarena_cli import cellarena
from game_servers import ladder_serve, start, wait_for
from ladder_pages import Pages, ladder_pages

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.server.replay import read_replay, verify

DRAWER = Path(__file__).parent / "bots" / "drawer.py"
PASSWORD = "correct horse battery"
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    """The ladder's pages, open to sign-ups; its folder is the ladder's (a test serves it there)."""
    with ladder_pages(tmp_path_factory.mktemp("ladder"), "--signup", "open") as pages:
        yield pages


def bot_names(folder: Path) -> set[str]:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return {b.name for b in store.list_bots()}


@contextmanager
def other_site(folder: Path, target: str) -> Iterator[str]:
    """A page on another origin whose form posts to ``target``'s "make a bot" as soon as it loads."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(
        "<!doctype html><title>free prizes</title><form id=f method=post "
        f'action="{target}/account/bots"><input name=name value=planted><input name=csrf value=guess>'
        "</form><script>document.getElementById('f').submit()</script>"
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, directory=str(folder), **kw)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def owner_matches(folder: Path, bot: str) -> list[int]:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return [
            b.match.id
            for b in store.bot_history(bot, limit=50)
            if b.match.status == "finished" and b.match.replay
        ]


def _sign_up_and_make_a_bot(page: Any, url: str, shots: Path) -> str:
    """A stranger signs up on the pages and makes a bot: its token, shown once."""
    page.goto(url + "/")
    page.click("text=sign up")
    page.fill("input[name=name]", "stranger")
    page.fill("input[name=password]", PASSWORD)
    page.screenshot(path=str(shots / "ladder-signup.png"))
    page.click("button[type=submit]")
    page.wait_for_url("**/account")
    assert "stranger's bots" in page.inner_text("h1")

    page.fill("#new-bot input[name=name]", "mybot")
    page.click("#new-bot button")
    token = page.inner_text("#token").strip()
    assert token.startswith("cla_") and len(token) == 47
    page.screenshot(path=str(shots / "ladder-token.png"))
    page.click("text=Back to your bots")
    assert token not in page.content()  # shown once
    return token


def _the_owners_replay_and_the_public_one(
    page: Any, url: str, row: Any, match_id: int, tmp_path: Path, ladder: Path
) -> None:
    """The owner's copy of a replay keeps their bot's drawings; the public copy and player keep none."""
    with page.expect_download() as download:
        row.locator("text=download with your debug drawings").click()
    mine = tmp_path / "mine.replay"
    download.value.save_as(str(mine))
    replay = read_replay(mine)
    with LadderStore(ladder / "ladder.sqlite", create=False) as store:
        m = store.match(match_id)
    assert m is not None
    seat = next(s.seat for s in m.seats if s.bot == "mybot")
    assert any(seat in t.debug for t in replay.ticks), "the owner's copy keeps their drawings"
    assert all(set(t.debug) <= {seat} for t in replay.ticks) and verify(replay).ok
    public = page.request.get(f"{url}/api/replays/{match_id}/file").body()
    assert b"\xa5debug" not in public  # the public copy keeps none
    page.goto(f"{url}/replays/{match_id}/")  # the public player names it by number
    page.wait_for_function("document.querySelector('.subtitle').textContent.includes('seed')")
    subtitle = page.inner_text(".subtitle")
    assert subtitle.startswith(f"match {match_id} · seed") and str(ladder) not in page.content()


def test_a_stranger_signs_up_runs_a_bot_and_reads_its_private_side(
    browser: Any, site: Pages, tmp_path: Path
) -> None:
    shots = shot_dir(tmp_path)
    pages, ladder = site, site.folder
    builder = f"python {Path(__file__).resolve().parent.parent}/example_bots/rezzo/builder.py"
    added = cellarena("ladder", "--dir", str(ladder), "house", "add", "builder", builder, "--game", "rezzo")
    assert added.returncode == 0, added.stderr
    server = ladder_serve(ladder, "--house-after", "0.3")
    bot = None
    try:
        context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
        page = context.new_page()
        console = Console(page)

        token = _sign_up_and_make_a_bot(page, pages.url, shots)

        token_file = tmp_path / "mybot.token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        argv = [sys.executable, str(DRAWER), "--port", str(server.port), "--ladder", "--token-file"]
        bot = start([*argv, str(token_file)], tmp_path / "bots", "mybot")
        wait_for(lambda: bool(owner_matches(ladder, "mybot")), "a finished match of mybot", timeout=120)
        match_id = owner_matches(ladder, "mybot")[-1]

        page.reload()
        row = page.locator(f"section.bot tr:has(a[href='/matches/{match_id}'])")
        cells = row.locator("td").all_inner_texts()
        assert cells[1] == "builder" and cells[4].isdigit() and cells[5].isdigit()  # late, invalid
        assert cells[8]  # why it ended, for this bot
        page.screenshot(path=str(shots / "ladder-account.png"), full_page=True)
        _the_owners_replay_and_the_public_one(page, pages.url, row, match_id, tmp_path, ladder)

        page.goto(f"{pages.url}/bots/mybot")
        assert "bot of stranger" in page.inner_text("main")
        page.screenshot(path=str(shots / "ladder-bot.png"), full_page=True)

        # Revoked on the page: the running ladder serve hears it through the change log and
        # ends the bot's connection with `revoked`, a code the SDK does not retry.
        page.goto(f"{pages.url}/account")
        page.click("section[data-bot=mybot] button:text('Revoke')")
        page.wait_for_selector("text=Its token stops working for good")  # asked first (issue 42)
        page.click("button:text('Revoke mybot for good')")
        page.wait_for_url("**/account")
        assert "revoked" in page.inner_text("section[data-bot=mybot] h2").lower()
        wait_for(lambda: bot is not None and bot.proc.poll() is not None, "the revoked bot to stop", 60)
        assert "revoked" in bot.stderr()
        console.assert_clean()
        context.close()
    finally:
        if bot is not None:
            bot.stop()
        server.stop()


def test_another_sites_page_and_a_cookie_after_logout_are_refused(
    browser: Any, site: Pages, tmp_path: Path
) -> None:
    shots = shot_dir(tmp_path)
    bots = bot_names(site.folder)
    pages = site
    context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
    page = context.new_page()
    page.goto(pages.url + "/signup")
    page.fill("input[name=name]", "victim")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")

    # The victim, logged in, opens another site's page, which posts the ladder's form at once.
    with other_site(tmp_path / "evil", pages.url) as evil:
        page.goto(evil)
        page.wait_for_url(f"{pages.url}/account/bots")
        text = page.inner_text("main")
        # Refused by its Origin, whether or not the browser sent the cookie (SameSite=Lax).
        assert f"posted from another site ({evil.rstrip('/')})" in text, text
        page.screenshot(path=str(shots / "ladder-csrf-refused.png"))
    assert bot_names(pages.folder) == bots  # none made

    # A copy of the session cookie, taken before logout, is worth nothing after it.
    page.goto(pages.url + "/account")
    stolen = [c for c in context.cookies() if c["name"] == "cellarena_session"]
    assert stolen and stolen[0]["httpOnly"] and stolen[0]["secure"] and stolen[0]["sameSite"] == "Lax"
    page.click("#logout button")
    page.wait_for_url("**/login")
    thief = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
    thief.add_cookies(stolen)
    theirs = thief.new_page()
    theirs.goto(pages.url + "/account")
    assert theirs.url.endswith("/login") and "Log in" in theirs.inner_text("h1")
    theirs.screenshot(path=str(shots / "ladder-after-logout.png"))
    thief.close()
    context.close()
