"""Issue 42's "done when", end to end: one real ladder started by `cellarena ladder up` from one config
file (docs/ladder.md, "One file to run a ladder"): TLS on the bot port (a certificate of a CA made
here), two games, PostgreSQL, a house bot, `workers = 2`, pages with sign-up open that mail through a
local SMTP server (aiosmtpd, tests/smtp_server.py). On it a house bot plays a TLS bot, /live/ relays a
TLS match (from the port the serve recorded: `up` wires each game's live view), an owner signs up in
Chromium, makes a bot, and the command on its token page, run as written by a shell in the bot's
folder, plays; "forgot password" mails a link that sets a new password; last, a kill -9 of `up`
stops every part it started (each watches `up`'s pipe).

One `ladder up` for the module; each test waits on what it checks under a deadline."""

from __future__ import annotations

import contextlib
import email
import email.policy
import os
import re
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bot_processes import alive
from browser import Console
from cellarena_cli import CLI, ROOT
from certificates import pem_files
from game_servers import WITHOUT_NUMBA, Process, start, wait_for
from postgres_server import PostgresServer
from smtp_server import SmtpServer
from test_ladder_tls_parts import live_messages
from test_ladder_up import listening
from test_web_ladder_connect import SCRIPTED, run_as_written

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.server.cli.run import SUPERVISOR_FD, run_trio

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"

CONFIG = """\
db = "{db}"

[games.rezzo]
host = "127.0.0.1"
port = 0
tls-cert = "tls/chain.pem"
tls-key = "tls/key.pem"
public-host = "localhost"
workers = 2
max-ticks = 30
tick-rate = 30
budget-ms = 25
grace = 0
house-after = 0.5

[games.cata]
host = "127.0.0.1"
port = 0
tls-cert = "tls/chain.pem"
tls-key = "tls/key.pem"

[web]
games = ["rezzo"]
port = 0
signup = "open"
smtp-host = "127.0.0.1"
smtp-port = {smtp}
smtp-tls = "none"
mail-from = "ladder@example.org"

[[house]]
name = "builder"
game = "rezzo"
command = "python {builder}"
"""


@dataclass
class Site:
    folder: Path
    up: Process
    db: str
    rezzo: int
    web: str
    smtp: SmtpServer


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("up-e2e")
    (folder / "tls").mkdir()
    pem_files(folder / "tls", "localhost", "127.0.0.1")
    db = postgres_server.create_database()
    builder = ROOT / "example_bots" / "rezzo" / "builder.py"
    smtp = SmtpServer(folder / "mail", folder / "tls" / "chain.pem", folder / "tls" / "key.pem")
    config = CONFIG.format(db=db, builder=builder, smtp=smtp.ports["plain"])
    (folder / "ladder.toml").write_text(config)
    up = start(
        [*CLI, "ladder", "up", str(folder / "ladder.toml"), "--grace", "20"], folder, "up", env=WITHOUT_NUMBA
    )
    try:
        rezzo = listening(up, "serve rezzo")
        listening(up, "serve cata")
        web = listening(up, "web")

        def recorded() -> bool:  # each serve records where bots connect once it listens
            with LadderStore(db, create=False) as store:
                return set(store.endpoints()) == {"rezzo", "cata"}

        wait_for(recorded, "both games' addresses", 60)
        yield Site(folder, up, db, rezzo, f"http://127.0.0.1:{web}", smtp)
    finally:
        if up.proc.poll() is None:
            up.stop(timeout=60)
        smtp.stop()


def finished_with(site: Site, bot: str, process: Process) -> set[str]:
    """The bots of ``bot``'s first finished match (waited for)."""
    found: list[set[str]] = []

    def played() -> bool:
        assert process.proc.poll() is None, f"{bot} stopped:\n{process.stderr()}"
        with LadderStore(site.db, create=False) as store:
            history = store.bot_history(bot, limit=20)
        found.extend(set(m.match.bots) for m in history if m.match.status == "finished")
        return bool(found)

    wait_for(played, f"{bot} to play a match", 120)
    return found[0]


def test_a_house_bot_plays_a_tls_bot_and_live_shows_the_match(site: Site) -> None:
    with LadderStore(site.db, create=False) as store:
        token = store.add_bot("walker", "rezzo")[1].secret
        assert {b.name: b.kind for b in store.list_bots("rezzo")}["builder"] == "house"
    folder = site.folder / "walker"
    folder.mkdir()
    (folder / "walker.token").write_text(token + "\n")
    argv = [sys.executable, str(ROOT / "example_bots" / "rezzo" / "random_walker.py"), "--host", "localhost",
            "--port", str(site.rezzo), "--ladder", "--token-file", "walker.token", "--tls-ca",
            str(site.folder / "tls" / "ca.pem")]  # fmt: skip
    walker = start(argv, folder, "walker", cwd=folder)
    try:
        # `up` gave the pages `--live-port rezzo=auto`: the relay reached the TLS port serve recorded
        # (its certificate pinned), though the file names neither port nor CA: a match as it is played.
        seen = live_messages(site.web, 2)
        welcome = next(m for m in seen if m["type"] == "welcome")
        assert sorted(welcome["names"]) == ["builder", "walker"], welcome
        assert finished_with(site, "walker", walker) == {"builder", "walker"}
    finally:
        walker.stop()
    said = site.up.stderr()
    assert "WRONG_VERSION_NUMBER" not in said and "live view:" not in said, said
    assert "matches played in 2 worker processes" in said


def stop_shell(shell: Process) -> None:
    """Stop the shell running a command and the command (dash forwards no SIGTERM to it)."""
    children = Path(f"/proc/{shell.proc.pid}/task/{shell.proc.pid}/children")
    with contextlib.suppress(OSError):
        for pid in children.read_text().split():
            os.kill(int(pid), signal.SIGTERM)
    shell.stop()


def test_an_owner_signs_up_and_the_token_pages_command_plays_as_written(site: Site, browser: Any) -> None:
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    console = Console(page)
    page.goto(site.web + "/signup")
    page.fill("input[name=name]", "ann")
    page.fill("input[name=email]", "ann@example.org")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")
    page.fill("#new-bot input[name=name]", "scripted")
    page.click("#new-bot button")
    folder = site.folder / "owners" / "scripted"
    folder.mkdir(parents=True)
    (folder / "scripted.py").write_text(SCRIPTED)
    token = folder / "scripted.token"
    token.write_text(page.inner_text("#token").strip() + "\n")
    token.chmod(0o600)
    panel = page.locator("section.connect[data-game=rezzo]")
    command = panel.locator("tr[data-kit=python] pre.command").inner_text().strip()
    assert command == (
        f"python scripted.py --host localhost --port {site.rezzo} --ladder --token-file scripted.token "
        "--tls --tls-ca rezzo-ca.pem"
    )
    with page.expect_download() as download:
        panel.locator("a[download]").click()
    download.value.save_as(folder / download.value.suggested_filename)
    bot = run_as_written(command, folder, "scripted")
    try:
        assert "scripted" in finished_with(site, "scripted", bot)
    finally:
        stop_shell(bot)
    console.assert_clean()
    context.close()


def test_a_reset_mail_arrives_and_its_link_sets_a_new_password(site: Site, browser: Any) -> None:
    """After the owner's sign-up (the test before): the SMTP settings of the file's [web] table."""
    context = browser.new_context()
    page = context.new_page()
    console = Console(page)
    page.goto(site.web + "/login")
    page.click("#forgot-link")
    page.fill("input[name=email]", "ann@example.org")
    page.click("button[type=submit]")
    assert "If an account on this ladder has that address" in page.inner_text("main")

    def resets() -> list[email.message.EmailMessage]:
        mails = site.smtp.mails_to("ann@example.org")
        return [m for m in mails if m["Subject"] == "[rezzo ladder] Set a new password"]

    wait_for(lambda: bool(resets()), "the reset mail", 60)
    body = resets()[0].get_body(("plain",))
    assert body is not None
    link = re.search(r"https?://\S+/reset/mail\?t=\S+", body.get_content())
    assert link is not None, body.get_content()
    page.goto(link.group(0))
    page.fill("input[name=password]", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/login")
    page.fill("input[name=name]", "ann")
    page.fill("input[name=password]", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")
    assert "scripted" in page.inner_text("main")
    console.assert_clean()
    context.close()


def test_a_kill_9_of_up_stops_every_part_it_started(site: Site) -> None:
    said = site.up.stderr()
    started = re.findall(r"INFO (?:serve rezzo|serve cata|web) started \(pid (\d+)\)", said)
    pids = {int(pid) for pid in started}
    assert len(pids) == 3, said
    os.kill(site.up.proc.pid, signal.SIGKILL)
    site.up.proc.wait(timeout=30)

    # A part's parent is now init, which may not reap it at once: `alive` counts a zombie as ended.
    wait_for(lambda: not any(alive(pid) for pid in pids), "every part of the killed `up` to stop", 60)
    with LadderStore(site.db, create=False) as store:
        stuck = [m.id for m in store.matches("rezzo", limit=100) if m.status == "running"]
    assert stuck == []  # the serves stopped as on SIGTERM: matches under way voided


@pytest.mark.parametrize("named", ["seven", "987654"])
def test_a_supervisor_fd_that_is_no_open_pipe_is_said_and_not_watched(
    named: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def answer() -> int:
        return 42

    monkeypatch.setenv(SUPERVISOR_FD, named)
    assert run_trio(answer) == 42
    assert capsys.readouterr().err == (
        f"warning: {SUPERVISOR_FD}={named!r} names no open file descriptor: not watched\n"
    )
    assert SUPERVISOR_FD not in os.environ  # what the process starts is not told of it
