"""The C++, Rust and Java starters draw (their kits' debug API, docs/sdk.md) and the web player shows it:
one real Rezzo match on the four-player map seats the three built starters (the builds
tests/test_native_kits.py shares) beside a bot that draws nothing, and the replay's drawings are read
from the player's canvas, as tests/test_web_debug.py reads the Python SDK's."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from bot_files import RAW_BOT
from browser import hex_rgb, page_of, pixel, viewer
from cellarena_cli import cellarena
from native_starters import LANGS, starters_of
from test_web_player import _open, _seek

from cellarena.server.replay import Replay, read_replay

#: What every Rezzo starter draws each tick: its first agent's cell ahead, in "yellow".
YELLOW = "#ffe119"


def _command(folder: Path) -> str:
    """The starter's bot.toml command with its files made absolute, to run from anywhere."""
    words = shlex.split(tomllib.loads((folder / "bot.toml").read_text())["command"])
    return shlex.join(str(folder / w) if (folder / w).exists() else w for w in words)


@pytest.fixture(scope="module")
def played(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    """One short match of the C++, Rust and Java starters (each named by its language) and a silent bot."""
    starters = starters_of(request.config)
    folders = [starters.get(lang, "rezzo") for lang in LANGS]
    out = tmp_path_factory.mktemp("native-debug")
    bots = [arg for lang, f in zip(LANGS, folders, strict=True) for arg in ("--bot", f"{lang}={_command(f)}")]
    proc = cellarena(
        "match", "rezzo", "--map", "quad", *bots, "--bot", f"quiet={RAW_BOT} random", "--fast",
        "--max-ticks", "10", "--replay", str(out / "m.replay"), "--log-dir", str(out / "logs"), "--json",
        timeout=300,
    )  # fmt: skip
    logs = {p.name: p.read_text() for p in (out / "logs").glob("*.log")}
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{logs}"
    return read_replay(out / "m.replay")


def test_each_native_starters_mark_is_in_the_replay_and_on_the_players_board(
    played: Replay, browser: Any
) -> None:
    rep = played
    seat = {name: i for i, name in enumerate(rep.names)}
    seats = [seat[lang] for lang in LANGS]
    # A tick at which every starter's agent was on the board, so each drew its mark.
    index = next(
        (i for i in range(len(rep.ticks) - 1, 0, -1)
         if all(s in rep.ticks[i].debug and rep.ticks[i].debug[s].get("marks") for s in seats)),
        None,
    )  # fmt: skip
    assert index is not None, [t.debug for t in rep.ticks]
    tick = rep.ticks[index]
    cells = {}
    for s in seats:
        (mark,) = tick.debug[s]["marks"]  # the kit sent it, the server placed it on the board
        assert mark["colour"] == YELLOW and mark["label"] == "ahead" and "agent" not in mark, mark
        cells[s] = mark["cell"]
        (text,) = tick.debug[s]["text"]
        assert text.startswith(f"tick {tick.tick}: agent "), text
    assert len({tuple(c) for c in cells.values()}) == len(LANGS)  # one cell each, none shared
    assert seat["quiet"] not in tick.debug  # the silent bot drew nothing
    with viewer("replay", "view", str(rep.path), "--port", "0") as url, page_of(browser) as (page, console):
        _open(page, url)
        _seek(page, index)
        scale = page.evaluate("window.cellarenaPlayer.view.cell")
        assert scale >= 3
        panel = page.inner_text("#debug-text")
        for lang in LANGS:
            s = seat[lang]
            x, y = cells[s]
            # A quarter into the cell, clear of the label drawn at its top right corner.
            corner = page.evaluate(f"window.cellarenaPlayer.view.cellCorner({x}, {y})")
            at = (corner[0] + scale * 0.3, corner[1] + scale * 0.7)
            assert pixel(page, "#board", *at) == hex_rgb(YELLOW), lang
            assert f"{lang}: tick {tick.tick}: agent " in panel, panel
            assert page.locator(f"#debug-seat-{s}").count() == 1
        assert page.locator(f"#debug-seat-{seat['quiet']}").count() == 0  # nothing drawn: no toggle
        console.assert_clean()
