"""What a newcomer tripped over in the browser (issue 27, point 6): live controls that did nothing,
last frames that read "? generations, ended ?" and "turn 31 of 30", the tournament page's bare
"l / i / i", and cell colours too close to tell apart. Each page is a real `cellarena` command's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import launched, page_of, shot_dir
from cellarena_cli import ROOT, start_cellarena

BOTS = ROOT / "example_bots"
PLAYER = "document.getElementById('player')"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as b:
        yield b


def _live_tick(page: Any) -> int:
    return int(page.evaluate(f"{PLAYER}.dataset.liveTick"))


def _shown_tick(page: Any) -> int:
    return int(page.evaluate("window.cellarenaPlayer.state.frames[window.cellarenaPlayer.state.index].tick"))


def test_the_live_page_pauses_steps_and_seeks_through_received_frames(browser: Any, tmp_path: Path) -> None:
    proc = start_cellarena(
        "match", "rezzo", "--bot", f"a=python {BOTS / 'rezzo' / 'random_walker.py'}",
        "--bot", f"b=python {BOTS / 'rezzo' / 'raider.py'}", "--max-ticks", "3000", "--tick-rate", "15",
        "--log-dir", str(tmp_path / "logs"), "--web", "--web-port", "0",
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        url = proc.stderr.readline().split("live view at ")[1].strip()
        with page_of(browser) as (page, console):
            page.goto(url)
            page.wait_for_function(f"Number({PLAYER}.dataset.liveFrames) >= 10")
            assert not page.is_visible("#speed")  # frames come at the match's pace: no speed to set
            assert "(live)" in page.inner_text("#tick")
            page.click("#play")  # pause the view; the match goes on
            paused_at = _shown_tick(page)
            received = int(page.evaluate(f"{PLAYER}.dataset.liveFrames"))
            page.wait_for_function(f"Number({PLAYER}.dataset.liveFrames) >= {received + 5}")
            assert _shown_tick(page) == paused_at
            assert _live_tick(page) > paused_at
            assert "paused" in page.inner_text("#tick")
            page.click("#back")
            assert _shown_tick(page) == paused_at - 1
            page.click("#forward")
            page.click("#forward")
            assert _shown_tick(page) == paused_at + 1
            page.keyboard.press("ArrowLeft")
            assert _shown_tick(page) == paused_at
            first = int(page.evaluate("window.cellarenaPlayer.state.frames[0].tick"))
            page.locator("#seek").fill("0")  # seek to the oldest frame received
            assert _shown_tick(page) == first
            assert page.evaluate(f"{PLAYER}.dataset.shown") == "0"
            page.screenshot(path=str(shot_dir(tmp_path) / "live-paused.png"))
            page.click("#play")  # follow the match again: the newest frame
            page.wait_for_function(
                "window.cellarenaPlayer.state.index === window.cellarenaPlayer.state.frames.length - 1"
            )
            newest = _live_tick(page)
            page.wait_for_function(f"Number({PLAYER}.dataset.liveTick) > {newest + 3}")
            assert "(live)" in page.inner_text("#tick")
            assert _shown_tick(page) >= newest + 3
            console.assert_clean()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
