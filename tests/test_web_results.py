"""`cellarena web RUNS_DIR` in a real browser: the standings page shows the same table as the tournament
command, a rating chart per bot, a thumbnail of each match's final board drawn from the engine's state,
and each match's replay in the player."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser import hex_rgb, page_of, pixel, shot_dir, viewer
from cellarena_cli import ROOT, run_here

from cellarena.server.replay import board_at, read_replay

DROP2DF_NAMES = ["d_empty", "d_plus", "d_minus", "d_block", "d_rabbit", "d_hole"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A folder with one finished drop2df tournament of the example bots, and the command's JSON."""
    root = tmp_path_factory.mktemp("runs")
    # In this process: see `run_here` on tournaments.
    proc = run_here(
        "tournament", "drop2df", "--bots-dir", str(ROOT / "example_bots"), "--rounds", "2",
        "--out", str(root / "tournament-drop2df"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, json.loads(proc.stdout)


def test_standings_chart_thumbnails_and_replays(
    runs: tuple[Path, dict[str, Any]], browser: Any, tmp_path: Path
) -> None:
    root, report = runs
    with viewer("web", str(root), "--port", "0") as url, page_of(browser) as (page, console):
        page.goto(url)  # one tournament: the start page is its page
        assert page.url.endswith("/t/tournament-drop2df/")
        # the same table as `cellarena tournament --json`
        rows = page.locator("#standings tr[data-bot]")
        shown = [
            (rows.nth(i).get_attribute("data-bot"), rows.nth(i).locator("td").nth(2).inner_text())
            for i in range(rows.count())
        ]
        assert shown == [(s["bot"], f"{s['rating']:.2f}") for s in report["standings"]]
        # one line per bot, one point per match it played
        for s in report["standings"]:
            line = page.locator(f'svg.chart path[data-bot="{s["bot"]}"]')
            assert line.count() == 1
            assert line.get_attribute("d").count("L") == s["matches"] - 1
        # every match listed, its thumbnail drawn from the final state of its replay
        matches = page.locator("#matches tr[data-match]")
        assert matches.count() == report["matches"]
        palette = page.evaluate("window.CellarenaPalette.colors")
        db_rows = {r.index: r for r in _results(root)}
        for i in range(matches.count()):
            row = matches.nth(i)
            index = int(row.get_attribute("data-match"))
            canvas = row.locator("canvas.thumb")
            canvas.scroll_into_view_if_needed()
            page.wait_for_function("(c) => c.dataset.drawn === '1'", arg=canvas.element_handle())
            replay = db_rows[index].replay
            assert replay is not None
            engine = board_at(read_replay(replay))
            cells = np.stack([np.frombuffer(engine.row(s), np.uint8) for s in range(engine.players)])
            h, w = cells.shape
            scale = min(96 / w, 96 / h)
            ox, oy = (96 - w * scale) / 2, (96 - h * scale) / 2
            handle = canvas.element_handle()
            page.evaluate("(c) => { c.id = 'thumb-under-test'; }", handle)
            for y in range(h):
                for x in range(w):
                    got = pixel(page, "#thumb-under-test", ox + (x + 0.5) * scale, oy + (y + 0.5) * scale)
                    assert got == hex_rgb(palette[DROP2DF_NAMES[cells[y, x]]]), (index, x, y)
            page.evaluate("(c) => { c.id = ''; }", handle)
        page.screenshot(path=str(shot_dir(tmp_path) / "tournament.png"), full_page=True)
        # a match's replay plays in the player
        first = matches.first
        first.locator("a", has_text="watch").click()
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
        meta = page.evaluate("window.cellarenaPlayer.state.meta")
        assert meta["game"] == "drop2df"
        console.assert_clean()


def _results(root: Path) -> list[Any]:
    from cellarena.arena.web.results_source import find_tournaments

    (source,) = find_tournaments(root).values()
    return source.matches()


def test_a_folder_without_results_is_a_command_line_error(tmp_path: Path) -> None:
    proc = run_here("web", str(tmp_path), "--port", "0")  # refused before it binds: no server here
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith(f"error: {tmp_path}: holds no tournament results (results.sqlite)")
    missing = run_here("web", str(tmp_path / "none"), "--port", "0")
    assert missing.returncode == 1
    assert f"{tmp_path / 'none'}: no such folder" in missing.stderr
    assert "Traceback" not in proc.stderr + missing.stderr


def test_unknown_tournament_and_match_pages_are_readable_errors(
    runs: tuple[Path, dict[str, Any]], browser: Any
) -> None:
    root, _report = runs
    with viewer("web", str(root), "--port", "0") as url, page_of(browser) as (page, _console):
        response = page.goto(url + "t/nosuch/")
        assert response.status == 404 and "no tournament 'nosuch' here" in page.inner_text("body")
        response = page.goto(url + "replays/tournament-drop2df.999/")
        assert response.status == 404 and "no replay 'tournament-drop2df.999'" in page.inner_text("body")
        assert "Traceback" not in page.content()
