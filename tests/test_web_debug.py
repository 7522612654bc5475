"""The web player draws the bots' debug drawings (docs/protocol.md#debug-drawing): a layer per seat
over the board, each with its toggle, and each tick's text lines in a panel. Read from the canvas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bot_files import RAW_BOT
from browser import hex_rgb, launched, page_of, pixel, viewer
from cellarena_cli import cellarena
from test_web_player import _open, _seek

from cellarena.server.replay import read_replay

DRAWER = Path(__file__).parent / "bots" / "drawer.py"
MARK = "#e6194b"  # the drawer's "red"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as b:
        yield b


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
