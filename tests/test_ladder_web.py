"""The ladder as its users see it: two outside bots (the SDK's `--ladder` mode) and a house bot play
rated matches unattended; the ladder survives SIGKILL with identical standings; and its pages
(`cellarena ladder web`) show the table `cellarena ladder standings` prints, bot pages, matches,
replays in the player and the live match, in a real browser, with no token anywhere."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from browser import page_of, shot_dir, viewer
from cellarena_cli import ROOT, cellarena, here, last_lines
from game_servers import Process, add_ladder_bot, ladder_serve, start, wait_for
from test_ladder_community_processes import host

from cellarena.arena.ladder.records import STANDINGS_COLUMNS
from cellarena.arena.ladder.store.ladder_store import LadderStore

T = TypeVar("T")

BOT = ROOT / "example_bots" / "rezzo" / "random_walker.py"


def finished(folder: Path) -> int:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return sum(1 for m in store.matches("rezzo", limit=500) if m.status == "finished")


def finished_bots(folder: Path) -> set[str]:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return {b for m in store.matches("rezzo", limit=500) if m.status == "finished" for b in m.bots}


def outside_bot(folder: Path, name: str, port: int, token_file: Path) -> Process:
    argv = [sys.executable, str(BOT), "--port", str(port), "--name", name, "--token-file", str(token_file)]
    return start([*argv, "--ladder"], folder / "bots", name)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_ladder_plays_unattended_survives_a_kill_and_shows_its_table(browser: Any, tmp_path: Path) -> None:
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    command = f"python {ROOT}/example_bots/rezzo/builder.py"
    house = host(tmp_path, "house", "add", "builder", command, "--game", "rezzo")
    assert house.exit_code == 0, house.output
    server = ladder_serve(tmp_path, "--house-after", "0.3")
    bots = [outside_bot(tmp_path, name, server.port, token) for name, token in tokens.items()]
    try:
        # Unattended: the two outside bots play each other; when bob goes, the house bot plays alice.
        wait_for(lambda: finished(tmp_path) >= 3, "three rated matches", timeout=120)
        bots[1].stop()
        wait_for(lambda: "builder" in finished_bots(tmp_path), "a match of the house bot", timeout=120)
        bots[1] = outside_bot(tmp_path, "bob", server.port, tokens["bob"])
        wait_for(lambda: finished(tmp_path) >= 6, "six rated matches", timeout=120)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    finally:
        server.stop()
    with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
        before = [s.to_json() for s in store.standings("rezzo")]
    assert finished_bots(tmp_path) == {"alice", "bob", "builder"}

    # On the same port: the bots, backing off meanwhile, come back by themselves.
    server = ladder_serve(tmp_path, "--house-after", "0.3", port=server.port, label="restarted")
    try:
        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
            assert [s.to_json() for s in store.standings("rezzo")] == before  # the kill lost nothing
            count = finished(tmp_path)
        wait_for(lambda: finished(tmp_path) >= count + 2, "matches after the restart", timeout=120)
        with viewer("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0",
                    "--live-port", str(server.port)) as url:  # fmt: skip
            check_pages(browser, url, tmp_path, tokens, server)
    finally:
        for bot in bots:
            bot.stop()
        server.stop()


def _between_matches(folder: Path, read: Callable[[], T]) -> T:
    """``read()`` made while no match finished: the ladder plays on, and a result that lands between
    two reads reorders the table (ratings, and a bot leaving its provisional matches)."""
    for _ in range(20):
        count = finished(folder)
        value = read()
        if finished(folder) == count:
            return value
    raise AssertionError("a match finished during every one of 20 reads")


def live_frames(page: Any, server: Process, count: int) -> None:
    """Wait until the live page has drawn ``count`` frames of the ladder's matches; if it never does,
    fail saying what the page said, whether the ladder still runs and what it logged last (a bare
    Playwright timeout, seen once in a full run, said none of it)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # where used, as browser.py imports it

    try:
        page.wait_for_function(
            f"Number(document.getElementById('player').dataset.liveFrames) >= {count}", timeout=60_000
        )
    except PlaywrightTimeout:
        said = page.evaluate(
            "[document.getElementById('status')?.innerText,"
            " document.getElementById('player').dataset.liveFrames]"
        )
        running = "running" if server.proc.poll() is None else f"ended with {server.proc.returncode}"
        tail = last_lines(server.stderr())
        raise AssertionError(
            f"the live page drew {said[1] or 0} of {count} frames in 60 s; it says {said[0]!r}; the "
            f"ladder is {running}, its last lines:\n{tail}"
        ) from None


def check_pages(browser: Any, url: str, folder: Path, tokens: dict[str, Path], server: Process) -> None:
    secrets = [path.read_text().strip() for path in tokens.values()]

    def command_and_store() -> tuple[list[dict[str, Any]], list[tuple[str, ...]], list[Any]]:
        # In process: a `cellarena` process takes a second or two to start on a busy machine, and the
        # ladder, playing on, finished a match during each of 20 such reads (the command as a process
        # is tests/test_ladder_cli.py's).
        done = here("ladder", "--dir", str(folder), "standings", "rezzo", "--json")
        assert done.exit_code == 0, done.output
        table = done.output
        with LadderStore(folder / "ladder.sqlite", create=False) as store:
            return (
                json.loads(table)["standings"],
                [s.cells() for s in store.standings("rezzo")],
                (store.matches("rezzo", limit=5)),
            )

    standings, cells, matches = _between_matches(folder, command_and_store)
    assert [c[1] for c in cells][: len(standings)] == [s["bot"] for s in standings][: len(cells)]
    shots = shot_dir(folder)
    with page_of(browser) as (page, console):
        # The page's table is the command's table, cell for cell (as of the page's reading). The ladder
        # plays on meanwhile, one match at a time: read before and after the page, it is one of the two.
        # On a busy machine two matches may end while the page loads; then it is read again.
        for _ in range(10):
            with LadderStore(folder / "ladder.sqlite", create=False) as store:
                before = [s.cells() for s in store.standings("rezzo")]
            page.goto(url)
            header = page.eval_on_selector_all("#standings tr th", "ths => ths.map(t => t.innerText)")
            assert tuple(header) == STANDINGS_COLUMNS
            rows = page.eval_on_selector_all(
                "#standings tr",
                "trs => trs.slice(1).map(tr => Array.from(tr.cells).map(td => td.innerText))",
            )
            with LadderStore(folder / "ladder.sqlite", create=False) as store:
                after = [s.cells() for s in store.standings("rezzo")]
            if [tuple(r) for r in rows] in (before, after):
                break
        assert [tuple(r) for r in rows] in (before, after)
        page.screenshot(path=str(shots / "ladder-standings.png"), full_page=True)
        # A bot's page: its rating chart and its matches.
        page.click("#standings a:text('alice')")
        page.wait_for_selector("svg.chart")
        assert page.eval_on_selector_all("#bot-matches tr", "trs => trs.length") > 1
        page.screenshot(path=str(shots / "ladder-bot.png"), full_page=True)
        # A finished match, its replay in the player.
        done = next(m for m in matches if m.status == "finished")
        page.goto(f"{url}matches/{done.id}")
        assert page.inner_text("#seats").count("\n") >= 2
        page.click("a:text('watch')")
        page.wait_for_selector("canvas")
        page.wait_for_function(
            "document.querySelector('#tick') && document.querySelector('#tick').innerText !== ''"
        )
        # The live match of the running ladder.
        page.goto(f"{url}live/")
        live_frames(page, server, 3)
        console.assert_clean()

    # The same over JSON; the replay downloads as the file the ladder wrote; no secret anywhere.
    def api_and_store() -> tuple[int, Any, list[tuple[str, ...]]]:
        status, body = get(f"{url}api/standings")
        with LadderStore(folder / "ladder.sqlite", create=False) as store:
            return status, body, [s.cells() for s in store.standings("rezzo")]

    status, body, cells = _between_matches(folder, api_and_store)
    assert status == 200 and [s["bot"] for s in json.loads(body)["standings"]] == [c[1] for c in cells]
    status, data = get(f"{url}api/matches/{done.id}")
    match = json.loads(data)
    assert match["replay"] == {"watch": f"/replays/{done.id}/", "download": f"/api/replays/{done.id}/file"}
    with urllib.request.urlopen(f"{url}api/replays/{done.id}/file", timeout=30) as response:
        assert response.read() == Path(str(done.replay)).read_bytes()
    pages = [
        get(f"{url}{p}")[1]
        for p in ("", "bots/alice", "bots/builder", "matches", "api/matches", "api/bots/alice")
    ]
    for text in pages:
        assert not any(secret in text for secret in secrets)
        assert "example_bots/rezzo/builder.py" not in text  # a house bot's command stays on the host
    assert get(f"{url}bots/nobody")[0] == 404 and get(f"{url}matches/99999")[0] == 404
    assert get(f"{url}matches?before=x")[0] == 400


def test_ladder_web_needs_a_ladder(tmp_path: Path) -> None:
    done = cellarena("ladder", "--dir", str(tmp_path / "none"), "web", "rezzo", "--port", "0")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "none" in done.stderr


def test_ladder_web_says_when_its_port_is_taken(tmp_path: Path) -> None:
    LadderStore(tmp_path / "ladder.sqlite").close()
    with viewer("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0") as url:
        port = url.rsplit(":", 1)[1].strip("/")  # bound before the URL is printed
        taken = cellarena("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", port)
    assert taken.returncode == 2 and "already in use" in taken.stderr
