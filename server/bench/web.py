"""`cellarena bench web`: the browser viewer, measured in headless chromium (Playwright).

- **Playback**: frames painted per second while the player plays a replay of the load benchmarks'
  match (the first game with a `BenchLoad`: its eight-seat bench map, agents at work every tick),
  and while it repaints a 1024x1024 board (every game whose config takes a width and a height, at
  1024x1024), against the goals of 60 and 30.
- **Time to first frame**: from navigation to the first frame painted, for a 3,000-tick replay
  (the same match, 3,000 ticks long; ``--long-ticks`` for a shorter one), against the goal of 1 s.
- **CPU per live spectator**: the live view's server (a 15 Hz match and its live pages in one
  process) run twice side by side, without browsers and with several, its CPU compared.

The replays are played with every seat doing nothing, so that the benchmark needs no bots; the games
still run their automata. Nothing here names a game: the workloads come from the plugins.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from cellarena.server.bench.server import bench_load, load_games
from cellarena.server.cli.params import ranged_option

FPS_GOAL, BIG_FPS_GOAL, FIRST_FRAME_GOAL_S = 60.0, 30.0, 1.0
LONG_TICKS = 3000
#: The replay that plays (at 8x, from 256 frames loaded): also the long one when --long-ticks is as short.
PLAY_TICKS = 600
BIG = 1024


def _replay(path: Path, game: str, config: dict[str, Any], ticks: int) -> Path:
    """A replay of ``game`` with ``config`` in which no seat acts, up to ``ticks`` decision points."""
    from cellarena.server.games import get_engine
    from cellarena.server.replay import ReplayWriter

    engine = get_engine(game).new(config, 1)
    names = [f"seat{s}" for s in range(engine.players)]
    writer = ReplayWriter(path, engine, seed=1, names=names, events=True)
    for _ in range(ticks):
        if engine.result() is not None:
            break
        tick = engine.tick
        events = engine.apply({})
        writer.record(tick, {}, engine, events=events.log)
    result = engine.result()
    if result is not None:
        writer.finish(result)
    else:
        writer.close()
    return path


def _big_boards() -> list[tuple[str, dict[str, Any]]]:
    """(game, config) of a 1024x1024 board, for every game whose config has ``width`` and ``height``."""
    from dataclasses import fields

    from cellarena.server.games import plugins

    out = []
    for p in plugins():
        names = {f.name for f in fields(p.config_class())}  # type: ignore[arg-type]
        if {"width", "height"} <= names:
            out.append((p.name, {"width": BIG, "height": BIG}))
    return out


def _chromium() -> str:
    path = (
        os.environ.get("CELLARENA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if not path:
        raise click.ClickException(
            "no chromium on PATH (apt-get install -y chromium, or set CELLARENA_CHROMIUM)"
        )
    return path


class _Viewer:
    """`cellarena replay view PATH --port 0` as a child process, and its URL."""

    def __init__(self, *args: str) -> None:
        cli = [sys.executable, "-c", "from cellarena.arena.cli import main; main()"]
        self.proc = subprocess.Popen([*cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        found = re.search(r"at (http://\S+)", self.proc.stdout.readline())
        if not found:
            self.stop()
            raise click.ClickException(f"cellarena {' '.join(args)} did not start: {self.proc.stderr}")
        self.url = found.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _playback(browser: Any, replay: Path, seconds: float, *, repaint: bool) -> dict[str, float]:
    """Paints per second (playing, or repainting for a replay too short to play) and the first frame."""
    viewer = _Viewer("replay", "view", str(replay), "--port", "0")
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(viewer.url)
        page.wait_for_function("window.cellarenaPlayer && window.cellarenaPlayer.firstFrameMs !== null")
        first_ms = page.evaluate("window.cellarenaPlayer.firstFrameMs")
        # the browser paints at most once per animation frame: its rate, measured here, caps the fps
        refresh = page.evaluate(
            """() => new Promise((done) => { let n = 0; const t0 = performance.now();
                (function tick(now) { n++; if (now - t0 < 1000) requestAnimationFrame(tick);
                  else done(n / ((now - t0) / 1000)); })(t0); })"""
        )
        if repaint:
            # every animation frame repaints the board from scratch, alternating between two frames
            paints = page.evaluate(
                """(ms) => new Promise((done) => {
                    const p = window.cellarenaPlayer, n = p.state.meta.frames, t0 = performance.now();
                    let k = 0;
                    (function step(now) {
                        p.seek(k++ % Math.min(n, 2)); p.redraw();
                        if (now - t0 < ms) requestAnimationFrame(step); else done(k / ((now - t0) / 1000));
                    })(performance.now());
                })""",
                seconds * 1000,
            )
        else:
            page.wait_for_function(
                "window.cellarenaPlayer.state.frames.filter(Boolean).length >= 256", timeout=60_000
            )
            # 8x is 80 frames a second: more than the browser can paint, so every animation frame paints
            paints = page.evaluate(
                """(ms) => new Promise((done) => {
                    const p = window.cellarenaPlayer;
                    p.state.speed = 8; p.play();
                    setTimeout(() => {
                        const start = p.paints, t0 = performance.now();
                        setTimeout(() => done((p.paints - start) / ((performance.now() - t0) / 1000)), ms);
                    }, 200);
                })""",
                seconds * 1000,
            )
        page.close()
        return {
            "fps": round(float(paints), 1),
            "refresh_hz": round(float(refresh), 1),
            "first_frame_s": round(first_ms / 1000, 3),
        }
    finally:
        viewer.stop()


def _live_cpu(browser: Any, game: str, pages: int, seconds: float) -> dict[str, Any]:
    """CPU seconds per second of the live server, without browsers and with ``pages`` of them."""
    cpu = {}
    for watchers in (0, pages):
        server = subprocess.Popen(
            [sys.executable, "-m", "cellarena.server.bench.web_server", game, str(round(seconds * 15))],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        opened = []
        for _ in range(watchers):
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(url)
            opened.append(page)
        report = json.loads(server.stdout.readline())
        for page in opened:
            page.close()
        server.wait(timeout=30)
        cpu[watchers] = report["cpu_s"] / report["wall_s"]
    per = (cpu[pages] - cpu[0]) / pages
    return {
        "cpu_share_without_browsers": round(cpu[0], 4),
        f"cpu_share_with_{pages}_browsers": round(cpu[pages], 4),
        "cpu_share_per_spectator": round(per, 4),
        "tick_rate": 15,
    }


def run(seconds: float, spectators: int, long_ticks: int = LONG_TICKS) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    game = load_games()[0]
    load = bench_load(game)
    folder = Path(tempfile.mkdtemp(prefix="cellarena-bench-web-"))
    config = load.server_config(max(long_ticks, PLAY_TICKS))
    try:
        short = _replay(folder / "play.replay", game, config, PLAY_TICKS)
        long = short
        if long_ticks != PLAY_TICKS:  # the same match, recorded again to its own length
            long = _replay(folder / "long.replay", game, config, long_ticks)
        bigs = [(g, _replay(folder / f"{g}-big.replay", g, c, 4)) for g, c in _big_boards()]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"], headless=True)
            try:
                play = _playback(browser, short, seconds, repaint=False)
                # a long replay as short as the one played: its first frame was just measured
                first = play if long == short else _playback(browser, long, 1.0, repaint=False)
                big = {g: _playback(browser, path, seconds, repaint=True) for g, path in bigs}
                live = _live_cpu(browser, game, spectators, max(seconds, 4.0))
            finally:
                browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def meets(r: dict[str, float], goal: float) -> bool:
        # A browser paints once per animation frame at most; a goal at its refresh rate is met by
        # painting every animation frame (2% for the timer's jitter).
        return r["fps"] >= min(goal, r["refresh_hz"]) * 0.98

    return {
        "playback": {
            "game": game,
            "fps": play["fps"],
            "refresh_hz": play["refresh_hz"],
            "goal": FPS_GOAL,
            "ok": meets(play, FPS_GOAL),
        },
        "big_board": {
            g: {
                "size": f"{BIG}x{BIG}",
                "fps": r["fps"],
                "refresh_hz": r["refresh_hz"],
                "goal": BIG_FPS_GOAL,
                "ok": meets(r, BIG_FPS_GOAL),
            }
            for g, r in big.items()
        },
        "first_frame": {
            "ticks": long_ticks,
            "seconds": first["first_frame_s"],
            "goal": FIRST_FRAME_GOAL_S,
            "ok": first["first_frame_s"] < FIRST_FRAME_GOAL_S,
        },
        "live": live,
    }


@click.command("web")
@ranged_option("--seconds", 5.0, click.FloatRange(1, 120), "Per measure.")
@ranged_option("--spectators", 4, click.IntRange(1, 32), "Live pages.")
@ranged_option("--long-ticks", LONG_TICKS, click.IntRange(PLAY_TICKS, 100_000), "Ticks of the long replay.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(seconds: float, spectators: int, long_ticks: int, as_json: bool) -> None:
    """The browser viewer in headless chromium: playback fps, time to first frame, live CPU (docs/web.md)."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        raise click.ClickException("bench web needs playwright (pip install 'cellarena[test]')") from None
    result = run(seconds, spectators, long_ticks)
    if as_json:
        click.echo(json.dumps(result))
        return
    p, f = result["playback"], result["first_frame"]
    click.echo(
        f"playback ({p['game']}): {p['fps']} fps, the browser's refresh {p['refresh_hz']} Hz "
        f"(goal >= {p['goal']:.0f})"
    )
    for g, r in result["big_board"].items():
        click.echo(f"{r['size']} {g}: {r['fps']} fps (goal >= {r['goal']:.0f})")
    click.echo(f"first frame of a {f['ticks']}-tick replay: {f['seconds']} s (goal < {f['goal']:.0f} s)")
    live = result["live"]
    click.echo(
        f"live view at 15 Hz: server CPU {live['cpu_share_without_browsers']:.1%} without browsers, "
        f"{live['cpu_share_per_spectator']:.2%} more per spectator"
    )
