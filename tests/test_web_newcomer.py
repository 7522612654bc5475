"""What a newcomer tripped over in the browser (issue 27, point 6): live controls that did nothing,
last frames that read "? generations, ended ?" and "turn 31 of 30", the tournament page's bare
"l / i / i", and cell colours too close to tell apart. Each page is a real `cellarena` command's."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser import Console, hex_rgb, page_of, shot_dir, viewer
from cellarena_cli import ROOT, line_within, run_here, start_cellarena
from colour_distance import DEFICIENCIES, as_seen_with, ciede2000, ciede2000_lab
from written_replays import clumps_replay

from cellarena.sdk.games.cloth import step
from cellarena.server.games import get_engine
from cellarena.server.replay import board_at, read_replay, verify

BOTS = ROOT / "example_bots"
PLAYER = "document.getElementById('player')"


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
        url = line_within(proc.stderr, what="live view's address").split("live view at ")[1].strip()
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


# ------------------------------------------------------------------------------------------ colours
STATIC = ROOT / "server" / "web" / "static"
#: CIEDE2000 differences. 2.3 is a difference people just notice side by side; the issue's "too close"
#: pairs were Rezzo's photon and seat 0's flag (8.4) and its wire and seat 0's base (13.3).
APART = 11.0  #: any two colours a player must tell apart
APART_FROM_NOBODY = 18.0  #: Rezzo: a cell of no one (wire, photon, ...) against any seat's
APART_FROM_OWN_PIECE = 8.0  #: a seat's agent or unit against its other cells: it is a shape too (arrow, disc)


class Legends:
    """Each game's legend as the player's page computes it: one page per game (its palette.js and
    games/GAME.js), kept for the module and asked for every number of seats."""

    def __init__(self, browser: Any, stack: ExitStack) -> None:
        self.browser, self.stack = browser, stack
        self.pages: dict[str, tuple[Any, Console]] = {}

    def rows(self, game: str, players: int) -> list[tuple[str, str]]:
        """(colour, label) of each row of ``game``'s legend in a match of ``players`` seats."""
        if game not in self.pages:
            page, console = self.stack.enter_context(page_of(self.browser))
            page.set_content("<!doctype html><html><body></body></html>")
            page.add_script_tag(path=str(STATIC / "palette.js"))
            page.add_script_tag(path=str(STATIC / "games" / f"{game}.js"))
            self.pages[game] = (page, console)
        page, console = self.pages[game]
        names = [f"bot{s}" for s in range(players)]
        rows = page.evaluate(
            "(meta) => window.CellarenaGame.legend(meta)", {"names": names, "players": players}
        )
        console.assert_clean()
        return [(str(colour), str(label)) for colour, label in rows]


@pytest.fixture(scope="module")
def legends(browser: Any) -> Iterator[Legends]:
    with ExitStack() as stack:
        yield Legends(browser, stack)


def _owner(label: str, players: int) -> int | None:
    """The seat a legend row is of (its label names the bot), or None for a cell of no one."""
    owners = [s for s in range(players) if f"bot{s}" in label]
    return owners[0] if len(owners) == 1 else None


def _piece(label: str) -> bool:
    return "agent" in label or "unit" in label


def _too_close(rows: list[tuple[str, str]], players: int, nobody: float) -> list[str]:
    close = []
    for (c1, l1), (c2, l2) in itertools.combinations(rows, 2):
        o1, o2 = _owner(l1, players), _owner(l2, players)
        need = APART
        if o1 is None or o2 is None:
            need = nobody
        elif o1 == o2 and _piece(l1) != _piece(l2):
            need = APART_FROM_OWN_PIECE
        if (d := ciede2000(hex_rgb(c1), hex_rgb(c2))) < need:
            close.append(f"{l1} {c1} / {l2} {c2}: {d:.1f} < {need}")
    return close


@pytest.mark.parametrize(
    ("game", "players"),
    [
        *(("rezzo", n) for n in range(2, 9)),  # Rezzo's maps have 2 to 8 seats
        ("cata", 2), ("cloth", 2), ("colorblocks", 2), ("drop2df", 2),
    ],
)  # fmt: skip
def test_every_pair_of_web_cell_colours_is_told_apart(legends: Legends, game: str, players: int) -> None:
    """Every colour of the player's legend (each cell kind, each seat's) against every other, in a
    match of each size the built-in maps have."""
    rows = legends.rows(game, players)
    assert len(rows) >= 2
    nobody = APART_FROM_NOBODY if game == "rezzo" else APART
    assert _too_close(rows, players, nobody) == []


#: CIEDE2000 under simulated colour-vision deficiency, where everything is closer: each seat's own
#: colour (its agents) against every other seat's, and each kind of owned cell (base, geyser, flag)
#: against the same kind of every other seat. The just-noticeable difference is about 2.3.
APART_SEEN_WITH_CVD = 8.0
KIND_APART_SEEN_WITH_CVD = 4.0


def test_rezzos_eight_seats_stay_apart_for_colour_blind_viewers(legends: Legends) -> None:
    """The legend of an 8-seat Rezzo match, as viewers with protanopia, deuteranopia and tritanopia
    see it (Machado et al. 2009): seats' colours stay apart, and so does each kind of cell by owner.
    Seats 0-3 (Okabe-Ito) are further apart still: their worst pair is checked at 11."""
    rows = legends.rows("rezzo", 8)
    close = []
    for kind in ("agent", "base", "geyser", "flag"):
        of_kind = [(colour, label) for colour, label in rows if f": {kind}" in label]
        assert len(of_kind) == 8, rows
        for deficiency in DEFICIENCIES:
            for (c1, l1), (c2, l2) in itertools.combinations(of_kind, 2):
                seen = ciede2000(as_seen_with(deficiency, hex_rgb(c1)), as_seen_with(deficiency, hex_rgb(c2)))
                seats = [_owner(l1, 8), _owner(l2, 8)]
                need = KIND_APART_SEEN_WITH_CVD if kind != "agent" else APART_SEEN_WITH_CVD
                if kind == "agent" and all(s is not None and s < 4 for s in seats):
                    need = APART
                if seen < need:
                    close.append(f"{deficiency}: {l1} {c1} / {l2} {c2}: {seen:.1f} < {need}")
    assert close == []


def test_the_training_picture_has_the_players_colours(legends: Legends) -> None:
    """`render_mode="rgb_array"` (server/training/rezzo/picture.py) draws in the player's colours."""
    from cellarena.sdk.games.rezzo import Cell
    from cellarena.server.training.rezzo.picture import _palette

    table = _palette()
    rows = dict((label, colour) for colour, label in legends.rows("rezzo", 8))
    for seat in range(8):
        for kind, code in (
            ("agent", Cell.AGENT),
            ("base", Cell.BASE),
            ("geyser", Cell.GEYSER),
            ("flag", Cell.FLAG),
        ):
            label = next(lb for lb in rows if lb.startswith(f"bot{seat}: {kind}"))
            assert tuple(table[code + seat]) == hex_rgb(rows[label]), (seat, kind)
    for kind in ("conductor", "electron", "tail", "photon"):
        assert tuple(table[getattr(Cell, kind.upper())]) == hex_rgb(rows[kind]), kind


def test_the_issues_rezzo_pairs_are_far_apart(legends: Legends) -> None:
    rows = {label: colour for colour, label in legends.rows("rezzo", 2)}
    for one, other in [("photon", "bot0: flag"), ("conductor", "bot0: base"), ("conductor", "bot0: geyser")]:
        assert ciede2000(hex_rgb(rows[one]), hex_rgb(rows[other])) >= APART_FROM_NOBODY, (one, other)


def _terminal_rgb(style: str) -> tuple[int, int, int]:
    """A rich style's colour (its background for "on ...") under rich's default terminal theme."""
    from rich.style import Style
    from rich.terminal_theme import DEFAULT_TERMINAL_THEME

    parsed = Style.parse(style)
    colour = parsed.bgcolor if style.startswith("on ") else parsed.color
    assert colour is not None, style
    rgb = colour.get_truecolor(DEFAULT_TERMINAL_THEME, foreground=not style.startswith("on "))
    return (rgb.red, rgb.green, rgb.blue)


def test_every_pair_of_terminal_colours_is_told_apart() -> None:
    """The terminal pictures (`--watch`, `replay show`): a character that more than one owner draws
    (Rezzo's agent arrows) tells its owner by colour alone, as do Cloth's territories (on a dark
    terminal's black) and cells."""
    from cellarena.server.games.cloth.render import BACKGROUNDS
    from cellarena.server.games.cloth.render import STYLES as CLOTH
    from cellarena.server.games.rezzo.render import OWNER_STYLES

    sets = {
        "rezzo owners": list(OWNER_STYLES),
        "cloth cells": list(CLOTH),
        "cloth territories": ["on #000000", *BACKGROUNDS[1:]],
    }
    close = [
        f"{what}: {a} / {b}: {d:.1f}"
        for what, styles in sets.items()
        for a, b in itertools.combinations(styles, 2)
        if (d := ciede2000(_terminal_rgb(a), _terminal_rgb(b))) < APART
    ]
    assert close == []


def test_ciede2000_gives_the_published_differences() -> None:
    """Sharma, Wu and Dalal's test pairs (CIELAB in, the formula's difference out)."""
    pairs = [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
        ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
        ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),
        ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
    ]
    for one, other, want in pairs:
        assert ciede2000_lab(one, other) == pytest.approx(want, abs=1e-4)


# ------------------------------------------------------------------------- last frames, the results page
def _last_frame_events(page: Any, url: str) -> str:
    page.goto(url)
    page.wait_for_function(f"{PLAYER}?.dataset.shown === '0'")
    last = page.evaluate("window.cellarenaPlayer.state.meta.frames") - 1
    page.evaluate("(i) => window.cellarenaPlayer.seek(i)", last)
    page.wait_for_function(f"{PLAYER}?.dataset.shown === '{last}'")
    return str(page.inner_text("#events"))


def test_a_cata_match_ended_by_its_cap_says_so_on_its_last_frame(browser: Any, tmp_path: Path) -> None:
    """The reaction of the last turn stops after its tally (the cap ends the match), so it has no
    generations: the last frame read "? generations, ended ?"."""
    replay = tmp_path / "cata.replay"
    bots = [
        "--bot",
        f"a=python {BOTS / 'cata' / 'lookahead.py'}",
        "--bot",
        f"b=python {BOTS / 'cata' / 'random_legal.py'}",
    ]
    played = run_here(
        "match", "cata", *bots, "--size", "32", "--max-turns", "3", "--fast", "--replay", str(replay)
    )
    assert played.returncode == 0, played.stderr
    with viewer("replay", "view", str(replay), "--port", "0") as url, page_of(browser) as (page, console):
        events = _last_frame_events(page, url)
        assert "?" not in events, events
        assert "last reaction (turn 3): the match ended before its run, tally" in events
        page.screenshot(path=str(shot_dir(tmp_path) / "cata-end.png"))
        console.assert_clean()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one finished drop2df tournament of the example bots (30 turns a match)."""
    root = tmp_path_factory.mktemp("runs")
    # In this process: see `run_here` on tournaments.
    proc = run_here(
        "tournament", "drop2df", "--bots-dir", str(ROOT / "example_bots"), "--rounds", "1",
        "--out", str(root / "cup"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_the_results_page_says_what_its_counts_are_and_drop2df_ends_at_its_last_turn(
    runs: Path, browser: Any, tmp_path: Path
) -> None:
    with viewer("web", str(runs), "--port", "0") as url, page_of(browser) as (page, console):
        page.goto(url)
        header = page.locator("#matches tr").first.inner_text()
        assert "late / invalid / illegal" in header and "l / i / i" not in header
        legend = page.inner_text("#counts-legend")
        for word in ("late", "invalid", "illegal", "one line per seat"):
            assert word in legend
        page.screenshot(path=str(shot_dir(tmp_path) / "results.png"), full_page=True)
        watch = page.locator("#matches tr[data-match] a", has_text="watch").first.get_attribute("href")
        events = _last_frame_events(page, url.rstrip("/").rsplit("/t/", 1)[0] + watch)
        assert "all 30 turns played" in events and "turn 31" not in events, events
        console.assert_clean()


# ------------------------------------------------------------------------------- cloth's generations
def _cells(page: Any, index: int) -> np.ndarray:
    """The board of frame ``index`` as the page holds it."""
    frame = page.evaluate(f"window.cellarenaPlayer.state.frames[{index}].frame")
    cells = np.frombuffer(base64.b64decode(frame["cells"]["b64"]), np.uint8)
    return cells.reshape(frame["height"], frame["width"])


def test_a_cloth_replay_steps_through_each_generation(browser: Any, tmp_path: Path) -> None:
    """A replay holds decision points (4 frames for a round's 168 generations); the player shows every
    generation between them, each the SDK's step of the one before, and the count after the last
    one is the replay's own (hash-checked) decision point."""
    # Written here, not played by the example bots: random_placer's unseeded dice once let both
    # populations die in round 1, before the rounds this test steps through. Seed 0 lasts 4 rounds.
    replay = clumps_replay(tmp_path / "cloth.replay", {"width": 32, "height": 32}, 0)
    rep = read_replay(str(replay))
    assert len(rep.ticks) >= 3, f"the match ended at tick {len(rep.ticks)}: {rep.result}"
    assert verify(rep).ok  # the file is as any replay: nothing added to it
    engine = get_engine("cloth").new(rep.config, rep.seed)
    for rec in rep.ticks:
        engine.apply(rec.moves)
    rounds = len(engine.frame()["history"])
    generations = rep.config["generations"]
    with viewer("replay", "view", str(replay), "--port", "0") as url, page_of(browser) as (page, console):
        page.goto(url)
        page.wait_for_function(f"{PLAYER}?.dataset.shown === '0'")
        meta = page.evaluate("window.cellarenaPlayer.state.meta")
        assert meta["frames"] == len(rep.ticks) + 1 + rounds * generations
        page.evaluate("window.cellarenaPlayer.seek(2)")  # both seats placed: round 1's generation 0
        page.wait_for_function(f"{PLAYER}?.dataset.shown === '2'")
        assert "round 1: generation 0 of 168 (the units just placed)" in page.inner_text("#events")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"{PLAYER}?.dataset.shown === '3'")
        assert "generation 1 of 168" in page.inner_text("#tick")
        assert np.array_equal(_cells(page, 3), step(_cells(page, 2)))
        for index in (2 + 97, 2 + generations - 1):  # two more, up to the last before the count
            page.evaluate(f"window.cellarenaPlayer.seek({index})")
            page.wait_for_function(f"{PLAYER}?.dataset.shown === '{index}'")
            assert np.array_equal(_cells(page, index), step(_cells(page, index - 1)))
        after = 2 + generations  # the decision point the round's count leads to
        page.evaluate(f"window.cellarenaPlayer.seek({after})")
        page.wait_for_function(f"{PLAYER}?.dataset.shown === '{after}'")
        assert page.evaluate(f"window.cellarenaPlayer.state.frames[{after}].sub") is None
        assert np.array_equal(_cells(page, after), step(_cells(page, after - 1)))
        assert np.array_equal(_cells(page, after), board_at(rep, rep.ticks[2].tick).board)
        page.screenshot(path=str(shot_dir(tmp_path) / "cloth-generations.png"))
        console.assert_clean()
