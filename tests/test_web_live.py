"""The live view in a real browser: `cellarena match --web` and `cellarena serve --web` show frames of a
running match and its result; a browser that never reads does not hold the match up."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
from browser import hex_rgb, page_of, pixel, shot_dir
from cellarena_cli import ROOT, line_within, start_cellarena
from trio.testing import MockClock

from cellarena.server.replay import board_at, read_replay
from cellarena.server.web.live import LiveFeed

BOTS = ROOT / "example_bots" / "rezzo"


def _line_with(stream: Any, text: str, limit: int = 20) -> str:
    for _ in range(limit):
        line = line_within(stream, what=f"line with {text!r}")
        if text in line or not line:
            break
    assert text in line, f"no line with {text!r}: the last was {line!r}"
    return line


def _stalled_websocket(url: str) -> socket.socket:
    """A WebSocket client that shakes hands and then never reads: the slowest possible browser."""
    host, port = url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /live/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    assert b"101" in sock.recv(12)
    return sock


def _rezzo_names(cells: np.ndarray) -> list[tuple[int, int, str]]:
    plain = {0: "blank", 1: "conductor", 2: "electron", 3: "tail", 4: "photon"}
    kinds = {8: "agent", 16: "flag", 24: "geyser", 32: "base"}
    out = []
    for y in range(0, cells.shape[0], 3):
        for x in range(0, cells.shape[1], 3):
            c = int(cells[y, x])
            out.append((x, y, plain[c] if c < 8 else kinds[c & 0xF8] + str(c & 7)))
    return out


def test_match_web_shows_the_running_match_and_its_result(browser: Any, tmp_path: Path) -> None:
    replay = tmp_path / "live.replay"
    proc = start_cellarena(
        "match", "rezzo", "--bot", f"a=python {BOTS / 'random_walker.py'}",
        "--bot", f"b=python {BOTS / 'raider.py'}", "--max-ticks", "90", "--tick-rate", "15",
        "--replay", str(replay), "--log-dir", str(tmp_path / "logs"), "--json", "--web", "--web-port", "0",
    )  # fmt: skip
    try:
        url = _line_with(proc.stderr, "live view at").split("live view at ")[1].strip()
        stalled = _stalled_websocket(url)
        with page_of(browser) as (page, console):
            page.goto(url)
            page.wait_for_function("Number(document.getElementById('player')?.dataset.liveFrames) >= 5")
            first = int(page.evaluate("document.getElementById('player')?.dataset.liveTick"))
            page.wait_for_function(
                f"Number(document.getElementById('player')?.dataset.liveTick) >= {first + 10}"
            )
            assert "(live)" in page.inner_text("#tick")
            page.wait_for_function("document.getElementById('player')?.dataset.liveResult !== undefined")
            summary = json.loads(_line_with(proc.stdout, "{"))
            shown = page.evaluate("document.getElementById('player')?.dataset.liveResult")
            assert shown == (summary["winner"] or "draw")
            assert summary["reason"] in page.inner_text("#events")
            # the last frame drawn is the match's final state, cell by cell
            engine = board_at(read_replay(replay))
            palette = page.evaluate("window.CellarenaPalette.colors")
            scale = page.evaluate("window.cellarenaPlayer.view.cell")
            for x, y, name in _rezzo_names(engine.cells()):
                cx, cy = page.evaluate(f"window.cellarenaPlayer.view.cellCorner({x}, {y})")
                assert pixel(page, "#board", cx + scale * 0.2, cy + scale * 0.2) == hex_rgb(palette[name]), (
                    x,
                    y,
                )
            page.screenshot(path=str(shot_dir(tmp_path) / "live.png"))
            console.assert_clean()
        stalled.close()
        assert proc.poll() is None  # the page stays up after the match, until Ctrl-C
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_web_follows_the_matches_of_a_server(browser: Any, tmp_path: Path) -> None:
    server = start_cellarena(
        "serve", "rezzo", "--port", "0", "--matches", "1", "--max-ticks", "45", "--tick-rate", "15",
        "--web", "--web-port", "0",
    )  # fmt: skip
    try:
        banner = _line_with(server.stderr, "serving rezzo on 127.0.0.1:")
        port = banner.split(":")[1].split()[0]
        url = _line_with(server.stderr, "live view at").split("live view at ")[1].strip()
        with page_of(browser) as (page, console):
            page.goto(url)
            assert "waiting for a match" in page.inner_text("#status")
            env = {**os.environ, "CELLARENA_HOST": "127.0.0.1", "CELLARENA_PORT": port}
            bots = [
                subprocess.Popen(
                    [sys.executable, str(BOTS / f"{name}.py")],
                    env={**env, "CELLARENA_NAME": name},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for name in ("random_walker", "raider")
            ]
            page.wait_for_function("Number(document.getElementById('player')?.dataset.liveFrames) >= 3")
            assert "random_walker vs raider" in page.inner_text(
                "h1"
            ) or "raider vs random_walker" in page.inner_text("h1")
            page.wait_for_function("document.getElementById('player')?.dataset.liveResult !== undefined")
            out, _err = server.communicate(timeout=30)
            result = json.loads(out.splitlines()[0])
            assert page.evaluate("document.getElementById('player')?.dataset.liveResult") == (
                result["winner"] or "draw"
            )
            for bot in bots:
                bot.wait(timeout=30)
            console.assert_clean()
    finally:
        server.kill()
        server.wait()


async def test_the_feed_keeps_only_the_newest_frame_for_a_slow_reader() -> None:
    feed = LiveFeed("rezzo")
    feed.publish({"type": "welcome", "match": 1, "names": ["a", "b"]})
    for tick in range(10_000):
        feed.publish({"type": "frame", "tick": tick, "cells": b"\x00" * 1024})
    assert feed.messages["frame"] == {"type": "frame", "tick": 9999, "cells": b"\x00" * 1024}
    assert json.loads(feed.encoded("frame") or b"")["tick"] == 9999
    woke = trio.Event()

    async def reader() -> None:
        await feed.changed()
        woke.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(0.01)
        assert not woke.is_set()
        feed.publish_result(2, {"winner": "a"})  # another match's result: not this one's
        await trio.sleep(0.01)
        assert not woke.is_set() and feed.messages["result"] is None
        feed.publish_result(1, {"winner": "a"})
        await trio.sleep(0.01)
        assert woke.is_set() and feed.messages["result"] == {"type": "result", "winner": "a"}


@pytest.mark.usefixtures("virtual_wall")
async def test_a_spectator_chooses_the_running_match_it_watches(autojump_clock: MockClock) -> None:
    """docs/protocol.md, "Spectators": ``match`` in a spectator's hello picks a running match."""
    from wire_client import Client

    from cellarena.sdk import protocol
    from cellarena.server.play.lobby import Lobby, LobbyConfig
    from cellarena.server.play.match import TickSettings

    lobby = Lobby(LobbyConfig("rezzo", {"map": "duel", "max_ticks": 300}, TickSettings(tick_rate=15), port=0))
    async with trio.open_nursery() as nursery:
        await nursery.start(lobby.serve)
        assert lobby.port is not None
        bots = []
        for name in ("a", "b", "c", "d"):  # two duels, both under way (nobody answers: 300 slow ticks)
            bot = await Client.connect(lobby.port)
            await bot.hello(name)
            bots.append(bot)
        with trio.fail_after(10):
            while len(lobby.running) < 2:
                await trio.sleep(0.01)
        first, second = sorted(m.number for m in lobby.running)
        for number in (first, second):
            watcher = await Client.connect(lobby.port)
            await watcher.hello("watcher", role="spectator", match=number)
            welcome = await watcher.recv()
            assert welcome is not None and welcome["type"] == "welcome" and welcome["match"] == number
            assert welcome["role"] == "spectator"
        lost = await Client.connect(lobby.port)
        await lost.hello("watcher", role="spectator", match=99)
        error = await lost.expect_error(protocol.BAD_HELLO)
        assert f"no match 99 is running here (running: {first}, {second})" in error["message"]
        nursery.cancel_scope.cancel()


def test_serve_web_shows_every_match_under_way(browser: Any, tmp_path: Path) -> None:
    server = start_cellarena(
        "serve", "rezzo", "--port", "0", "--matches", "2", "--max-ticks", "120", "--tick-rate", "15",
        "--web", "--web-port", "0",
    )  # fmt: skip
    bots: list[subprocess.Popen[bytes]] = []
    try:
        port = _line_with(server.stderr, "serving rezzo on 127.0.0.1:").split(":")[1].split()[0]
        _line_with(server.stderr, "live view at")
        every = _line_with(server.stderr, "every match under way at").split(" at ")[1].strip()
        env = {**os.environ, "CELLARENA_HOST": "127.0.0.1", "CELLARENA_PORT": port}
        for name in ("w1", "w2", "w3", "w4"):
            bots.append(
                subprocess.Popen(
                    [sys.executable, str(BOTS / "random_walker.py")],
                    env={**env, "CELLARENA_NAME": name},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        with page_of(browser) as (page, console):
            deadline = time.monotonic() + 30
            while True:
                page.goto(every)
                links = page.eval_on_selector_all("#running a", "as => as.map(a => a.innerText)")
                if len(links) == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert len(links) == 2, links
            page.screenshot(path=str(shot_dir(tmp_path) / "live-all.png"))
            # Each match on its own page: the names of that match's bots, and its frames.
            for index in range(2):
                page.goto(every)
                link = page.locator("#running a").nth(index)
                names = link.inner_text().split(": ", 1)[1].split(" vs ")
                link.click()
                page.wait_for_function("Number(document.getElementById('player')?.dataset.liveFrames) >= 3")
                heading = page.inner_text("h1")
                assert all(name in heading for name in names), (heading, names)
            console.assert_clean()
    finally:
        for bot in bots:
            bot.kill()
            bot.wait()
        server.kill()
        server.wait()
