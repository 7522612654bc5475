"""The replay player in a real browser: for every game, the canvas shows the engine's state at the tick
one seeks to, cell by cell; Rezzo's viewport overlay shows the very bytes the bot was sent.

Each replay comes from a real `cellarena match` of the example bots; each page from a real
`cellarena replay view`. Screenshots land in $CELLARENA_SCREENSHOTS (docs/web/ when refreshing the
docs' pictures: `CELLARENA_SCREENSHOTS=docs/web pytest tests/test_web_player.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser import hex_rgb, page_of, shot_dir, viewer
from cellarena_cli import ROOT, run_here
from written_replays import clumps_replay

from cellarena.sdk.games.cloth import SEAT_CODE, territory_plane
from cellarena.server.games import get_engine
from cellarena.server.games.base import substeps
from cellarena.server.replay import Replay, ReplayWriter, board_at, read_replay

BOTS = ROOT / "example_bots"

#: game -> (bot a, bot b, options of a short match)
MATCHES: dict[str, tuple[str, str, list[str]]] = {
    "rezzo": ("rezzo/raider.py", "rezzo/random_walker.py", ["--max-ticks", "160"]),
    "cloth": ("cloth/planner.py", "cloth/random_placer.py", ["--width", "96", "--height", "64"]),
    "cata": ("cata/lookahead.py", "cata/random_legal.py", ["--size", "48", "--max-turns", "12"]),
    "colorblocks": ("colorblocks/greedy.py", "colorblocks/random_legal.py", ["--max-turns", "40"]),
    "drop2df": ("drop2df/planner.py", "drop2df/passer.py", ["--turns", "12"]),
}


@pytest.fixture(scope="session")
def replays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One replay per game, played by the example bots through `cellarena match` (in this process; the
    bots are processes)."""
    out = tmp_path_factory.mktemp("replays")
    made = {}
    for game, (a, b, options) in MATCHES.items():
        path = out / f"{game}.replay"
        proc = run_here(
            "match", game, "--bot", f"alpha=python {BOTS / a}", "--bot", f"beta=python {BOTS / b}",
            "--fast", *options, "--replay", str(path), "--log-dir", str(out / f"{game}-logs"),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        made[game] = path
    return made


class Views:
    """`cellarena replay view` of each replay, started on first use and kept for the module: the tests
    of one replay open their own pages on one server (a process per page was a second of CPU each)."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self.urls: dict[Path, str] = {}

    def url(self, path: Path) -> str:
        if path not in self.urls:
            self.urls[path] = self.stack.enter_context(viewer("replay", "view", str(path), "--port", "0"))
        return self.urls[path]


@pytest.fixture(scope="module")
def views() -> Iterator[Views]:
    with ExitStack() as stack:
        yield Views(stack)


def _open(page: Any, url: str) -> dict[str, Any]:
    page.goto(url)
    page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
    return page.evaluate("window.cellarenaPlayer.state.meta")  # type: ignore[no-any-return]


#: The RGB of canvas SEL at each point [px, py] that POINT(args...) of the player gives, plus an offset:
#: one call for a board's worth of cells (a call per cell was most of these tests' CPU).
_PIXELS_AT = """([sel, point, cells, dx, dy]) => {
    const ctx = document.querySelector(sel).getContext('2d'), player = window.cellarenaPlayer;
    const at = point.split('.').reduce((o, k) => o[k], player);
    return cells.map((c) => {
        const [px, py] = at(...c);
        const rgb = ctx.getImageData(Math.floor(px + dx), Math.floor(py + dy), 1, 1).data;
        return [px, py, Array.from(rgb).slice(0, 3)];
    });
}"""


def _pixels(
    page: Any, selector: str, point: str, cells: list[tuple[int, int]], offset: float = 0.0
) -> list[tuple[float, float, tuple[int, int, int]]]:
    """For each cell, the canvas point ``window.cellarenaPlayer.<point>(*cell)`` and the RGB of canvas
    ``selector`` at that point moved by ``offset`` on both axes (`browser.pixel`'s reading, batched)."""
    got = page.evaluate(_PIXELS_AT, [selector, point, [list(c) for c in cells], offset, offset])
    return [(float(px), float(py), (int(rgb[0]), int(rgb[1]), int(rgb[2]))) for px, py, rgb in got]


def _seek(page: Any, index: int) -> None:
    page.evaluate("(i) => window.cellarenaPlayer.seek(i)", index)
    page.wait_for_function(f"document.getElementById('player')?.dataset.shown === '{index}'")


# ------------------------------------------------------------------------ each game's expected colours
def _rezzo_name(code: int) -> str:
    plain = {0: "blank", 1: "conductor", 2: "electron", 3: "tail", 4: "photon", 7: "oob"}
    if code < 8:
        return plain[code]
    return {8: "agent", 16: "flag", 24: "geyser", 32: "base"}[code & 0xF8] + str(code & 7)


def _rezzo(engine: Any) -> np.ndarray:
    return np.vectorize(_rezzo_name, otypes=[object])(engine.cells())


def _cloth(engine: Any) -> np.ndarray:
    cells, terr = engine.board, territory_plane(engine.board)
    empty = np.array(["cloth_empty", "cloth_terr_a", "cloth_terr_b", "cloth_terr_ab"], object)
    kinds = np.array(["", "cloth_a", "cloth_b", "cloth_neutral", "cloth_dead"], object)
    return np.where(cells == 0, empty[terr & 3], kinds[cells])


def _cata(engine: Any) -> np.ndarray:
    return np.where(engine.board == 1, "cata_white", "cata_black").astype(object)


def _colorblocks(engine: Any) -> np.ndarray:
    names = ["cb_neutral", "cb_red", "cb_blue", "cb_true_neutral", "cb_dead", "cb_objective_red",
             "cb_objective_blue", "cb_spawn_red", "cb_spawn_blue"]  # fmt: skip
    out = np.array(names, object)[engine.board.blocks.astype(int)]
    # units and guards are drawn over their block: leave those cells out of the comparison
    for unit in engine.board.units.values():
        out[unit.y, unit.x] = None
    out[engine.board.guards >= 0] = None
    return out


def _drop2df(engine: Any) -> np.ndarray:
    names = np.array(["d_empty", "d_plus", "d_minus", "d_block", "d_rabbit", "d_hole"], object)
    return np.stack([names[np.frombuffer(engine.row(s), np.uint8)] for s in range(engine.players)])


EXPECTED: dict[str, Callable[[Any], np.ndarray]] = {
    "rezzo": _rezzo, "cloth": _cloth, "cata": _cata, "colorblocks": _colorblocks, "drop2df": _drop2df,
}  # fmt: skip


def _sample(names: np.ndarray, rng: np.random.Generator, per_name: int = 6) -> list[tuple[int, int, str]]:
    """Up to ``per_name`` cells (x, y, name) of every state on the board, so rare states are checked too."""
    out = []
    for name in sorted({n for n in names.flat if n is not None}):
        ys, xs = np.nonzero(names == name)
        for i in rng.permutation(len(xs))[:per_name]:
            out.append((int(xs[i]), int(ys[i]), str(name)))
    return out


def _pick_index(rep: Replay, names_of: Callable[[Any], np.ndarray]) -> int:
    """The latest frame in the first two thirds of the match whose board shows the most different states."""
    engine = get_engine(rep.game).new(rep.config, rep.seed)
    best, best_kinds = 0, -1
    for i, rec in enumerate(rep.ticks):
        if i >= 1:
            kinds = len({n for n in names_of(engine).flat if n is not None})
            if kinds >= best_kinds:
                best, best_kinds = i, kinds
        if i >= len(rep.ticks) * 2 // 3:
            break
        engine.apply(rec.moves)
    return best


def _frame_index(rep: Replay, records: int) -> tuple[int, int]:
    """The player's frame after ``records`` tick records, and its number of frames: a game whose engine
    shows substeps (Cloth's generations) has those frames before each decision point's."""
    engine = get_engine(rep.game).new(rep.config, rep.seed)
    extra, at = 0, 0
    for i, rec in enumerate(rep.ticks):
        if i == records:
            at = records + extra
        engine.apply(rec.moves)
        extra += substeps(engine)
    if records == len(rep.ticks):
        at = records + extra
    return at, len(rep.ticks) + 1 + extra


@pytest.mark.parametrize("game", list(MATCHES))
def test_the_canvas_shows_the_engine_state_at_the_tick_sought(
    game: str, replays: dict[str, Path], browser: Any, views: Views, tmp_path: Path
) -> None:
    path = replays[game]
    rep = read_replay(path)
    index = _pick_index(rep, EXPECTED[game])
    tick = rep.ticks[index].tick  # frame i is the state at decision point ticks[i]
    engine = board_at(rep, tick)
    names = EXPECTED[game](engine)
    frame, frames = _frame_index(rep, index)
    with page_of(browser) as (page, console):
        meta = _open(page, views.url(path))
        assert meta["game"] == game and meta["frames"] == frames
        _seek(page, frame)
        assert page.evaluate(f"window.cellarenaPlayer.state.frames[{frame}].tick") == tick
        assert f"tick {tick}" in page.inner_text("#tick")
        palette = page.evaluate("window.CellarenaPalette.colors")
        scale = page.evaluate("window.cellarenaPlayer.view.cell")
        assert scale >= 3, f"the board is drawn {scale} px per cell: too small to check cells"
        sample = _sample(names, np.random.default_rng(1))
        # a fifth into the cell: clear of the arrows and letters drawn at cell centres
        read = _pixels(page, "#board", "view.cellCorner", [(x, y) for x, y, _ in sample], scale * 0.2)
        wrong = [
            f"({x}, {y}) {name}: want {palette[name]}, got {got}"
            for (x, y, name), (_, _, got) in zip(sample, read, strict=True)
            if got != hex_rgb(palette[name])
        ]
        assert not wrong, f"{len(wrong)} cells differ at tick {tick}:\n" + "\n".join(wrong[:20])
        # the seats' table shows each bot and its counts
        table = page.inner_text("#seats")
        assert "alpha" in table and "beta" in table
        assert page.locator("#legend li").count() >= 2
        page.screenshot(path=str(shot_dir(tmp_path) / f"{game}.png"))
        console.assert_clean()


def _view_name(code: int, seat: int, players: int) -> str:
    """A viewport byte (owners relative to the viewer) as the board's colour name (absolute owners)."""
    if code < 8:
        return _rezzo_name(code)
    return _rezzo_name((code & 0xF8) + ((code & 7) + seat) % players)


def test_rezzo_viewport_overlay_is_the_bytes_the_bot_was_sent(
    replays: dict[str, Path], browser: Any, views: Views, tmp_path: Path
) -> None:
    path = replays["rezzo"]
    rep = read_replay(path)
    index = 40
    tick = rep.ticks[index].tick
    engine = board_at(rep, tick)
    seat = 1
    agent = next(a for a in engine.agents() if a.player == seat and a.alive)
    codes, _damage = engine.viewport(seat, agent.index)
    request = engine.pending()[seat]
    k = request["agents"].index(agent.index)
    sent = request["cells"][k * 169 : (k + 1) * 169]
    assert codes.tobytes() == sent  # the engine's viewport code and what the seat was sent agree
    with page_of(browser) as (page, console):
        _open(page, views.url(path))
        _seek(page, index)
        cx, cy = page.evaluate(f"window.cellarenaPlayer.view.cellCenter({agent.x}, {agent.y})")
        box = page.locator("#board").bounding_box()
        page.mouse.click(box["x"] + cx, box["y"] + cy)
        page.wait_for_function(
            f"document.getElementById('player')?.dataset.viewport === '{index}/{seat}/{agent.index}'"
        )
        palette = page.evaluate("window.CellarenaPalette.colors")
        rows_cols = [(r, c) for r in range(13) for c in range(13)]
        wrong = []
        read = _pixels(page, "#viewport", "vpCellCenter", rows_cols)
        for (r, c), (_, _, got) in zip(rows_cols, read, strict=True):
            want = _view_name(sent[r * 13 + c], seat, rep.players)
            if got != hex_rgb(palette[want]):
                wrong.append(f"row {r} col {c} {want}: want {palette[want]}, got {got}")
        assert not wrong, "\n".join(wrong[:20])
        assert f"agent {agent.index}" in page.inner_text("#viewport-caption")
        # stepping keeps the overlay on the same agent, now showing the next tick's bytes
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            f"document.getElementById('player')?.dataset.viewport === '{index + 1}/{seat}/{agent.index}'"
        )
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(
            f"document.getElementById('player')?.dataset.viewport === '{index}/{seat}/{agent.index}'"
        )
        page.screenshot(path=str(shot_dir(tmp_path) / "rezzo-viewport.png"))
        console.assert_clean()


def test_controls_play_step_seek_speed_and_zoom(replays: dict[str, Path], browser: Any, views: Views) -> None:
    path = replays["rezzo"]
    frames = len(read_replay(path).ticks) + 1
    with page_of(browser) as (page, console):
        _open(page, views.url(path))
        page.keyboard.press("ArrowRight")
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '1'")
        page.keyboard.press("Shift+ArrowRight")
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '11'")
        page.keyboard.press("End")
        page.wait_for_function(f"document.getElementById('player')?.dataset.shown === '{frames - 1}'")
        assert "(end)" in page.inner_text("#tick")
        assert "wins" in page.inner_text("#events") or "draw" in page.inner_text("#events")
        page.keyboard.press("Home")
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
        page.keyboard.press("]")
        page.keyboard.press("]")
        assert page.input_value("#speed") == "4"
        page.keyboard.press(" ")
        page.wait_for_function("Number(document.getElementById('player')?.dataset.shown) >= 20")
        page.keyboard.press(" ")
        assert page.evaluate("window.cellarenaPlayer.state.playing") is False
        before = page.evaluate("window.cellarenaPlayer.view.cell")
        page.click("#zoom-in")
        assert page.evaluate("window.cellarenaPlayer.view.cell") == pytest.approx(before * 1.5)
        page.keyboard.press("0")
        assert page.evaluate("window.cellarenaPlayer.view.cell") == before
        # drag pans the board
        ox = page.evaluate("window.cellarenaPlayer.state.ox")
        box = page.locator("#board").bounding_box()
        page.mouse.move(box["x"] + 100, box["y"] + 100)
        page.mouse.down()
        page.mouse.move(box["x"] + 160, box["y"] + 120, steps=4)
        page.mouse.up()
        assert page.evaluate("window.cellarenaPlayer.state.ox") == ox + 60
        console.assert_clean()


#: Counts the animation frames a page asks the browser for (`window.framesAsked`), from its start.
_COUNT_FRAMES = """(() => {
    window.framesAsked = 0;
    const ask = window.requestAnimationFrame.bind(window);
    window.requestAnimationFrame = (callback) => { window.framesAsked += 1; return ask(callback); };
})()"""


def test_the_player_asks_for_animation_frames_only_while_it_plays(
    replays: dict[str, Path], browser: Any, views: Views
) -> None:
    """A paused replay costs the browser nothing: the animation loop runs from play to pause or to
    the last frame (an idle loop cost Chromium 7% of a core for every open page)."""
    path = replays["rezzo"]
    frames = len(read_replay(path).ticks) + 1
    with page_of(browser) as (page, console):
        page.add_init_script(_COUNT_FRAMES)
        _open(page, views.url(path))
        asked = page.evaluate("window.framesAsked")
        page.wait_for_timeout(300)
        assert page.evaluate("window.framesAsked") == asked
        page.keyboard.press(" ")
        page.wait_for_function("Number(document.getElementById('player')?.dataset.shown) >= 5")
        page.keyboard.press(" ")
        paused = page.evaluate("window.framesAsked")
        assert paused > asked
        page.wait_for_timeout(300)
        assert page.evaluate("window.framesAsked") == paused
        # Played to its end, the replay stops, and so does the loop.
        page.evaluate(f"window.cellarenaPlayer.seek({frames - 3})")
        page.keyboard.press(" ")
        page.wait_for_function("window.cellarenaPlayer.state.playing === false")
        ended = page.evaluate("window.framesAsked")
        assert page.get_attribute("#player", "data-shown") == str(frames - 1)
        page.wait_for_timeout(300)
        assert page.evaluate("window.framesAsked") == ended
        console.assert_clean()


def _big_cloth(path: Path) -> Path:
    """A 1024x1024 Cloth of Gold match: each turn a clump of units next to a random legal cell."""
    return clumps_replay(path, {"width": 1024, "height": 1024, "max_rounds": 6}, 5)


def test_a_1024_board_zooms_around_the_pointer_and_shows_its_cells(browser: Any, tmp_path: Path) -> None:
    path = _big_cloth(tmp_path / "big.replay")
    rep = read_replay(path)
    index = len(rep.ticks) - 1
    engine = board_at(rep, rep.ticks[index].tick)
    names = _cloth(engine)
    ys, xs = np.nonzero(engine.board == SEAT_CODE[0])
    tx, ty = int(xs[0]), int(ys[0])  # a cell of alpha's to zoom in on
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, console):
        # A million cells a frame: on a busy machine the frames take longer than Playwright's 30 s.
        page.set_default_timeout(180_000)
        _open(page, url)
        _seek(page, index)
        assert page.evaluate("window.cellarenaPlayer.view.cell") < 1  # the whole board fits
        cx, cy = page.evaluate(f"window.cellarenaPlayer.view.cellCenter({tx}, {ty})")
        box = page.locator("#board").bounding_box()
        page.mouse.move(box["x"] + cx, box["y"] + cy)
        for _ in range(14):
            page.mouse.wheel(0, -100)
            page.wait_for_timeout(20)
        scale = page.evaluate("window.cellarenaPlayer.view.cell")
        assert scale >= 8
        # the cell under the pointer stayed under it
        assert page.evaluate(f"window.cellarenaPlayer.view.toCell({cx}, {cy})") == [tx, ty]
        palette = page.evaluate("window.CellarenaPalette.colors")
        near = [
            (x, y)
            for y in range(max(0, ty - 12), min(1024, ty + 12))
            for x in range(max(0, tx - 12), min(1024, tx + 12))
        ]
        wrong = []
        for (x, y), (px, py, got) in zip(near, _pixels(page, "#board", "view.cellCenter", near), strict=True):
            if not (0 <= px < box["width"] and 0 <= py < box["height"]):
                continue
            if got != hex_rgb(palette[names[y, x]]):
                wrong.append(f"({x}, {y}) {names[y, x]}")
        assert not wrong, "\n".join(wrong[:20])
        page.screenshot(path=str(shot_dir(tmp_path) / "cloth-1024-zoomed.png"))
        console.assert_clean()


def test_seat_counts_and_events_follow_the_ticks(browser: Any, tmp_path: Path) -> None:
    """Late and invalid answers (from the replay) and illegal moves (from re-simulation) add up per seat."""
    from cellarena.server.games.rezzo.engine import RezzoEngine

    path = tmp_path / "counts.replay"
    engine = RezzoEngine.new({"map": "duel", "max_ticks": 200}, 2)
    writer = ReplayWriter(path, engine, seed=2, names=["alpha", "beta"])
    totals = {"late": [0, 0], "invalid": [0, 0], "illegal": [0, 0]}
    at: dict[int, dict[str, list[int]]] = {0: {k: list(v) for k, v in totals.items()}}
    for i in range(40):
        tick = engine.tick
        moves = {0: [5], 1: [4]}  # hit and build wherever they stand: often illegal
        events = engine.apply(moves)
        late = {0: 1} if i % 5 == 0 else {}
        invalid = {1: 2} if i % 7 == 0 else {}
        writer.record(tick, moves, engine, late=late or None, invalid=invalid or None)
        for key, counts in (("late", late), ("invalid", invalid), ("illegal", events.illegal)):
            for seat, n in counts.items():
                totals[key][seat] += n
        at[i + 1] = {k: list(v) for k, v in totals.items()}
    writer.close()
    assert totals["illegal"][0] + totals["illegal"][1] > 0
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, console):
        _open(page, url)
        for index in (1, 15, 36, 40):
            _seek(page, index)
            for seat in (0, 1):
                row = page.locator(f'#seats tr[data-seat="{seat}"]')
                got = [int(row.locator(f"td.{k}").inner_text()) for k in ("late", "invalid", "illegal")]
                assert got == [at[index][k][seat] for k in ("late", "invalid", "illegal")], (index, seat)
        _seek(page, 36)  # the step into frame 36 applied record 35: beta was 2 invalid (35 % 7 == 0)
        assert "beta (seat 1): 2 invalid" in page.inner_text("#events")
        assert "the replay ends here without a result" not in page.inner_text("#events")
        _seek(page, 40)
        assert "the replay ends here without a result" in page.inner_text("#events")
        console.assert_clean()


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The version-1 fixture's Rezzo match (the raider's flag meets its own base) recorded again with
    its game events, and the frame after the step in which a player went out."""
    old = read_replay(ROOT / "tests" / "fixtures" / "replays_v1" / "rezzo.replay")
    engine = get_engine("rezzo").new(old.config, old.seed)
    path = tmp_path_factory.mktemp("decided") / "why.replay"
    writer = ReplayWriter(path, engine, seed=old.seed, names=old.names, events=True)
    out_frame = 0
    for i, t in enumerate(old.ticks):
        log = engine.apply(t.moves).log
        writer.record(t.tick, t.moves, engine, events=log)
        if any(e["kind"] == "out" for e in log):
            out_frame = i + 1
    result = engine.result()
    assert result is not None and out_frame
    writer.finish(result)
    return path, out_frame


def test_the_events_list_shows_the_games_events_and_why_it_ended(
    browser: Any, views: Views, decided: tuple[Path, int]
) -> None:
    """Issue 27: the player lists each step's game events, and on the last frame each seat's cause."""
    path, out_frame = decided
    with page_of(browser) as (page, console):
        _open(page, views.url(path))
        _seek(page, out_frame)
        said = page.inner_text("#events")
        assert "raider (seat 1): flag at base (flag (17, 4), base (16, 3), by raider (seat 1))" in said
        assert "raider (seat 1): out (cause flag_at_base)" in said
        assert "why: raider is out at tick 179: its flag at (17, 4) touched its own base at (16, 3)" in said
        assert "why: builder is the last player standing at tick 179" in said
        console.assert_clean()


def test_deciding_events_are_marks_that_seek_and_their_cells_are_outlined(
    browser: Any, views: Views, decided: tuple[Path, int]
) -> None:
    """Issue 27: a mark on the timeline per deciding event (Rezzo: the flag at the base, the player
    out), a click jumps to its frame, and there the flag's and the base's cells are outlined."""
    path, _ = decided
    with page_of(browser) as (page, console):
        _open(page, views.url(path))
        marks = page.locator("#marks .mark")
        assert marks.count() == 1  # flag_at_base and out lead to the same frame: one mark says both
        said = marks.first.get_attribute("title") or ""
        assert "flag at base (flag (17, 4), base (16, 3)" in said and "out (cause flag_at_base)" in said
        frame = int(marks.first.get_attribute("data-frame") or 0)
        _seek(page, 3)
        marks.first.click()
        page.wait_for_function(f"document.getElementById('player')?.dataset.shown === '{frame}'")
        assert page.evaluate("window.cellarenaPlayer.highlighted") == [[17, 4], [16, 3]]
        _seek(page, frame - 1)  # the world before the loss conversion: marked too
        assert page.evaluate("window.cellarenaPlayer.highlighted") == [[17, 4], [16, 3]]
        _seek(page, 5)
        assert page.evaluate("window.cellarenaPlayer.highlighted") == []
        console.assert_clean()


def test_blocked_agents_are_listed_but_are_no_marks(browser: Any, tmp_path: Path) -> None:
    """Rezzo's ``blocked`` tallies (nearly one a tick in a match of walkers) show in the tick's list;
    in a match without deciding events, whose every event would be a mark, they are none."""
    engine = get_engine("rezzo").new({"map": "duel", "max_ticks": 12}, 0)
    path = tmp_path / "walkers.replay"
    writer = ReplayWriter(path, engine, seed=0, names=["alpha", "beta"], events=True)
    records = 0
    while engine.result() is None:
        moves = {0: [1, 1], 1: [1, 1]}  # everyone walks on, into whatever is ahead
        tick = engine.tick
        writer.record(tick, moves, engine, events=engine.apply(moves).log)
        records += 1
    result = engine.result()
    assert result is not None
    writer.finish(result)
    assert any(e["kind"] == "blocked" for e in read_replay(path).events())
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, console):
        _open(page, url)
        marks = page.locator("#marks .mark")
        titles = [marks.nth(i).get_attribute("title") or "" for i in range(marks.count())]
        assert not any("blocked" in t for t in titles), titles
        listed = []
        for frame in range(1, records + 1):
            _seek(page, frame)
            listed.append(page.inner_text("#events"))
        assert any("blocked (count" in text for text in listed), listed
        console.assert_clean()
