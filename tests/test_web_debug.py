"""The web player draws the bots' debug drawings (docs/protocol.md#debug-drawing): a layer per seat
over the board, each with its toggle, and each tick's text lines in a panel. Read from the canvas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from bot_files import RAW_BOT
from browser import hex_rgb, page_of, pixel, viewer
from cellarena_cli import cellarena
from test_web_player import _open, _seek

from cellarena.server.replay import read_replay

if TYPE_CHECKING:
    from trio.testing import MockClock

DRAWER = Path(__file__).parent / "bots" / "drawer.py"
MARK = "#e6194b"  # the drawer's "red"


def test_the_player_draws_each_seats_marks_on_their_cells_with_a_toggle_and_text(
    browser: Any, tmp_path: Path
) -> None:
    path = tmp_path / "drawn.replay"
    played = cellarena(
        "match", "rezzo", "--bot", f"drawer=python {DRAWER}", "--bot", f"quiet={RAW_BOT} random",
        "--fast", "--max-ticks", "12", "--replay", str(path), "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    rep = read_replay(path)
    index = 5
    (mark,) = rep.ticks[index].debug[0]["marks"]
    x, y = mark["cell"]
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, console):
        _open(page, url)
        _seek(page, index)
        scale = page.evaluate("window.cellarenaPlayer.view.cell")
        assert scale >= 3
        # A quarter into the cell, clear of the label drawn at its top right corner.
        corner = page.evaluate(f"window.cellarenaPlayer.view.cellCorner({x}, {y})")
        at = (corner[0] + scale * 0.3, corner[1] + scale * 0.7)
        assert pixel(page, "#board", *at) == hex_rgb(MARK)
        assert f"drawer: tick {rep.ticks[index].tick}" in page.inner_text("#debug-text")
        # The seat's toggle hides its layer (and its text); the board shows through.
        page.click("#debug-seat-0")
        page.wait_for_function("!document.getElementById('debug-seat-0').checked")
        assert pixel(page, "#board", *at) != hex_rgb(MARK)
        assert "drawer:" not in page.inner_text("#debug-text")
        page.click("#debug-seat-0")
        assert pixel(page, "#board", *at) == hex_rgb(MARK)
        assert page.locator("#debug-seat-1").count() == 0  # the quiet bot drew nothing: no toggle
        console.assert_clean()


async def _spectated(spectator_debug: bool) -> list[dict[str, Any]]:
    """The frames a spectator got of a match in which seat 0 draws a mark each tick."""
    import trio
    from wire_client import Client

    from cellarena.sdk import protocol
    from cellarena.server.play.lobby import Lobby, LobbyConfig
    from cellarena.server.play.match import TickSettings

    settings = TickSettings(fast=True, spectator_debug=spectator_debug)
    config = LobbyConfig(
        "rezzo", {"map": "duel", "max_ticks": 8}, settings, host="127.0.0.1", port=0, matches=1
    )
    lobby = Lobby(config)
    frames: list[dict[str, Any]] = []

    async def bot(port: int, name: str, draws: bool) -> None:
        client = await Client.connect(port)
        await client.hello(name)
        while (msg := await client.recv(timeout=30)) is not None and msg["type"] != "end":
            if msg["type"] == "tick":
                reply = dict(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
                if draws:
                    reply["debug"] = {
                        "marks": [{"cell": [11, 6], "colour": "#e6194b"}],
                        "text": [f"t{msg['tick']}"],
                    }
                await client.send(reply)

    async def spectator(port: int) -> None:
        client = await Client.connect(port)
        await client.hello("watcher", role="spectator")
        while (msg := await client.recv(timeout=30)) is not None and msg["type"] != "end":
            if msg["type"] == "frame":
                frames.append(msg)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(lobby.serve)
            nursery.start_soon(spectator, lobby.port)
            await trio.sleep(0.2)  # watching before the match starts: every frame
            nursery.start_soon(bot, lobby.port, "drawer", True)
            nursery.start_soon(bot, lobby.port, "quiet", False)
    return frames


@pytest.mark.usefixtures("virtual_wall")
async def test_spectators_get_the_drawings_only_where_the_host_shows_them(autojump_clock: MockClock) -> None:
    """A public server's spectators (`serve`, the ladder's bot port) never get a bot's drawings; where
    the host shows them (`cellarena match`, whose spectator is its user's live view), each frame
    carries the drawings of the tick before it, placed on the board, with that tick."""
    public = await _spectated(False)
    assert len(public) > 5 and not any("debug" in f or "debug_tick" in f for f in public)
    shown = await _spectated(True)
    drawn = [f for f in shown if "debug" in f]
    assert len(drawn) >= len(shown) - 2  # every frame after the first tick's answers
    for f in drawn:
        (seat,) = f["debug"]  # the drawer's seat alone: the quiet bot drew nothing
        assert f["debug"][seat]["text"] == [f"t{f['debug_tick']}"]
        assert f["debug_tick"] == f["tick"] - 1 or f["final"]
        (mark,) = f["debug"][seat]["marks"]
        assert len(mark["cell"]) == 2 and "agent" not in mark  # a board cell, placed by the server


def test_the_live_view_of_a_match_draws_the_bots_marks(browser: Any, tmp_path: Path) -> None:
    """`match --web`: the live view draws each seat's drawing over the board as it plays (read from
    the canvas at the marked cell), with its toggle and its text; the drawer never moves, so its mark
    stays on one cell, which the replay names."""
    from cellarena_cli import start_cellarena
    from test_web_live import _line_with

    replay = tmp_path / "live.replay"
    proc = start_cellarena(
        "match", "rezzo", "--bot", f"drawer=python {DRAWER}", "--bot", f"quiet={RAW_BOT} random",
        "--max-ticks", "60", "--tick-rate", "15", "--replay", str(replay),
        "--log-dir", str(tmp_path / "logs"), "--json", "--web", "--web-port", "0",
    )  # fmt: skip
    try:
        url = _line_with(proc.stderr, "live view at").split("live view at ")[1].strip()
        with page_of(browser) as (page, console):
            page.goto(url)
            page.wait_for_function("Number(document.getElementById('player')?.dataset.liveDebugTick) >= 3")
            page.wait_for_selector("#debug-seat-0")
            assert "drawer: tick " in page.inner_text("#debug-text")  # while it plays
            page.wait_for_function("document.getElementById('player')?.dataset.liveResult !== undefined")
            rep = read_replay(replay)
            last = rep.ticks[-1]
            (mark,) = last.debug[0]["marks"]
            x, y = mark["cell"]
            scale = page.evaluate("window.cellarenaPlayer.view.cell")
            corner = page.evaluate(f"window.cellarenaPlayer.view.cellCorner({x}, {y})")
            at = (corner[0] + scale * 0.3, corner[1] + scale * 0.7)
            assert pixel(page, "#board", *at) == hex_rgb(MARK)
            assert f"drawer: tick {last.tick}" in page.inner_text("#debug-text")
            page.click("#debug-seat-0")  # its layer off: the board shows through
            page.wait_for_function("!document.getElementById('debug-seat-0').checked")
            assert pixel(page, "#board", *at) != hex_rgb(MARK)
            assert page.locator("#debug-seat-1").count() == 0  # the quiet bot drew nothing
            console.assert_clean()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
