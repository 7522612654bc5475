"""Issue 29's "Done when", in Chromium: a stranger signs up
on a community ladder's pages, gets a token, runs a bot that joins and plays; the bot then crashes
five matches and is paused; its owner reads why on their page, fixes it and resumes it; the bot plays
again; the owner challenges a named bot and reads the head-to-head; the host sees all of it in
``/metrics``. Real processes throughout: `ladder serve` (with ``--health-port``), the host's bot ``builder``,
`ladder web --signup open` over HTTPS, and the bot under its own supervisor (tests/bots/flaky.py),
broken and fixed through the file it reads. The owner's page is saved as a screenshot.

The flow runs on SQLite only: what differs on PostgreSQL is the store, whose every step here runs
on both there (tests/test_ladder_community_store.py: failed matches in a row pause a bot, versions
per seat, challenges and their quota, head to head; tests/test_ladder_accounts.py: sign-up,
sessions, an owner's bots; tests/test_ladder_community_processes.py: serve, web and the host's
commands as processes on one PostgreSQL database, a challenge played, a resume, /metrics)."""

from __future__ import annotations

import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from browser import Console, shot_dir
from cellarena_cli import CLI, cellarena, served
from certificates import pem_files
from game_servers import Process, start, wait_for
from ladder_pages import URL

from cellarena.arena.ladder.store.ladder_store import LadderStore

ROOT = Path(__file__).resolve().parent.parent
FLAKY = Path(__file__).parent / "bots" / "flaky.py"
PASSWORD = "correct horse battery"
VIEWPORT = {"width": 1280, "height": 900}
#: Short matches at a quick tick rate: the scenario plays about ten of them.
PACING = ["--max-ticks", "12", "--tick-rate", "40", "--budget-ms", "25", "--grace", "0"]
#: Two bots whose ratings drift apart (one crashes, the other wins) would wait up to 30 s for the
#: matchmaker's window at each match; this ladder pairs them after a second.
QUIET = ["--starve-after", "1"]


@contextmanager
def ladder_serve(where: list[str], folder: Path) -> Iterator[tuple[int, str]]:
    """`ladder serve` with /metrics; its bot port and health URL."""
    served = start([*CLI, *where, "serve", "rezzo", "--port", "0", "--health-port", "0",
                    *PACING, *QUIET], folder, "serve")  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        found = None
        while found is None and time.monotonic() < deadline and served.proc.poll() is None:
            found = re.search(
                r"on 127\.0\.0\.1:(\d+).*health at (http://127\.0\.0\.1:\d+)/health", served.stderr()
            )
            time.sleep(0.05)
        assert found is not None, f"ladder serve did not start:\n{served.stderr()}"
        yield int(found.group(1)), found.group(2)
    finally:
        served.stop()


@contextmanager
def ladder_web(where: list[str], folder: Path) -> Iterator[str]:
    """`ladder web --signup open` over HTTPS; its URL."""
    _, chain, key = pem_files(folder, "localhost", "127.0.0.1")
    tls = ["--tls-cert", str(chain), "--tls-key", str(key)]
    with served(*where, "web", "rezzo", "--port", "0", "--signup", "open", *tls, url=URL) as web:
        yield web.url.rstrip("/")


def metrics(health: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{health}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {m[0]: float(m[1]) for m in re.findall(r"^(cellarena_ladder_\w+) (\S+)$", text, re.MULTILINE)}


def finished(database: str, bot: str) -> list[Any]:
    """The bot's finished matches, newest first (read as the host would, from the database)."""
    with LadderStore(database, create=False) as store:
        return [b for b in store.bot_history(bot, limit=50) if b.match.status == "finished"]


def run_bot(folder: Path, port: int, token_file: Path, crash_file: Path, version: str, n: int) -> Process:
    argv = [sys.executable, str(FLAKY), "--port", str(port), "--ladder", "--name", "mybot",
            "--token-file", str(token_file), "--version", version]  # fmt: skip
    return start(argv, folder / "bots", f"mybot-{n}", env={"FLAKY_FILE": str(crash_file)})


def _sign_up_and_copy_a_token(page: Any, url: str, tmp_path: Path) -> Path:
    """A stranger signs up, makes a bot and copies its token (shown once) to a file: that file."""
    page.goto(url + "/signup")
    page.fill("input[name=name]", "stranger")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")
    page.fill("#new-bot input[name=name]", "mybot")
    page.click("#new-bot button")
    token = page.inner_text("#token").strip()
    token_file = tmp_path / "mybot.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    page.click("text=Back to your bots")
    return token_file


def _challenge_and_read_the_head_to_head(page: Any, url: str, database: str, shots: Path) -> None:
    """The owner challenges a named bot, and reads the head-to-head once it is played."""
    panel = page.locator("section[data-bot=mybot]")
    panel.locator("input[name=opponent]").fill("builder")
    panel.locator("form.challenge button").click()
    page.wait_for_url("**/account")
    quota = page.locator("section[data-bot=mybot] .quota").inner_text()
    assert quota.startswith("9 of 10 challenges left"), quota

    def played() -> bool:
        with LadderStore(database, create=False) as store:
            done = [c.match_id for c in store.challenges_of("mybot") if c.status == "played"]
            match = store.match(done[0]) if done and done[0] is not None else None
            return match is not None and match.status == "finished"

    wait_for(played, "the challenge's match to be played", 90)
    so_far = len(finished(database, "mybot"))
    page.goto(url + "/account")
    rows = page.locator("section[data-bot=mybot] table.challenges tr").all_inner_texts()
    assert any("builder" in r and "played" in r for r in rows), rows
    page.screenshot(path=str(shots / "ladder-owner-account.png"), full_page=True)
    page.locator("section[data-bot=mybot] a:text('statistics: head to head')").click()
    page.wait_for_url("**/bots/mybot/stats#head-to-head")
    h2h = page.locator("#head-to-head tr:has-text('builder')").inner_text().split("\t")
    assert h2h[0] == "builder" and so_far <= int(h2h[1]) <= len(finished(database, "mybot")), h2h
    versions = page.locator("#versions").inner_text()
    assert "1.0" in versions and "1.1" in versions
    page.screenshot(path=str(shots / "ladder-owner-stats.png"), full_page=True)


def _the_owner_reads_why(page: Any, url: str, shots: Path) -> Any:
    """The owner reads why their bot is paused on their page: its panel there."""
    page.goto(url + "/account")
    panel = page.locator("section[data-bot=mybot]")
    status = panel.locator(".paused.bot-state").inner_text()
    assert "Paused: 5 failed matches in a row, the last one disconnected" in status, status
    failed = panel.locator("table.failed tr").all_inner_texts()[1:]
    assert len(failed) == 5 and all("disconnected" in row for row in failed), failed
    page.screenshot(path=str(shots / "ladder-owner-paused.png"), full_page=True)
    return panel


def test_a_stranger_runs_a_bot_that_is_paused_fixed_resumed_and_challenges(
    browser: Any, tmp_path: Path
) -> None:
    shots = shot_dir(tmp_path)
    began = time.monotonic()
    database = str(tmp_path / "ladder.sqlite")
    where = ["ladder", "--dir", str(tmp_path)]
    LadderStore(database).close()
    # The named opponent: the host's bot, running all along (a house bot would start a process per
    # match, which costs the test seconds each).
    added = cellarena(*where, "bot", "add", "builder", "--game", "rezzo")
    assert added.returncode == 0, added.stderr
    builder_token = tmp_path / "builder.token"
    builder_token.write_text(added.stdout)
    builder_token.chmod(0o600)
    crash_file = tmp_path / "mode"
    crash_file.write_text("play\n")
    with ladder_serve(where, tmp_path) as (port, health), ladder_web(where, tmp_path) as url:
        builder = [sys.executable, str(ROOT / "example_bots" / "rezzo" / "builder.py"), "--port", str(port),
                   "--ladder", "--name", "builder", "--token-file", str(builder_token)]  # fmt: skip
        bots: list[Process] = [start(builder, tmp_path / "bots", "builder")]
        try:
            context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
            page = context.new_page()
            console = Console(page)

            token_file = _sign_up_and_copy_a_token(page, url, tmp_path)

            # The bot joins and plays.
            mybot = run_bot(tmp_path, port, token_file, crash_file, "1.0", 1)
            bots.append(mybot)
            wait_for(lambda: len(finished(database, "mybot")) >= 1, "mybot's first match", 90)
            assert mybot.proc.poll() is None

            # Broken: it crashes each match; after five in a row the ladder pauses it, and the bot,
            # refused with `paused` (which the SDK does not retry), stops.
            crash_file.write_text("crash\n")
            mybot.wait(120)
            assert "paused" in mybot.stderr() and "5 failed matches in a row" in mybot.stderr()
            assert mybot.stderr().count("crashed; starting it again") >= 5

            panel = _the_owner_reads_why(page, url, shots)

            # Fixed, resumed on the page, started again: it plays again.
            crash_file.write_text("play\n")
            before = len(finished(database, "mybot"))
            panel.locator("button:text('Resume mybot')").click()
            page.wait_for_url("**/account")
            assert page.locator("section[data-bot=mybot] .paused.bot-state").count() == 0
            bots.append(run_bot(tmp_path, port, token_file, crash_file, "1.1", 2))
            wait_for(lambda: len(finished(database, "mybot")) > before, "mybot to play again", 90)
            assert finished(database, "mybot")[0].me.cause_json()["cause"] != "disconnected"

            _challenge_and_read_the_head_to_head(page, url, database, shots)
            console.assert_clean()
            context.close()

            print(f"scenario took {time.monotonic() - began:.0f} s")
            # The host sees it all in /metrics.
            # Matches go on meanwhile: the count in the database is read first, and the server's
            # counter (which a match's end raises as it is stored) is then at least that.
            stored = len(finished(database, "mybot"))
            seen = metrics(health)
            assert seen["cellarena_ladder_matches_ended_total"] >= stored >= 8
            assert seen["cellarena_ladder_pauses_total"] == 1
            assert seen["cellarena_ladder_challenges_played_total"] == 1
            assert seen["cellarena_ladder_database_up"] == 1
        finally:
            for b in bots:
                b.stop()
