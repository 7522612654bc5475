"""The reaper (`cellarena.server.bots.reaper`): what a killed `cellarena` started, it stops.

tests/test_hostile_bots.py kills a running `match` and `tournament` and checks that nothing a bot
started outlives them. These force the ordering that test once lost on a loaded machine: cellarena
killed after a bot started but before the reaper heard of it, while the bot had already forked."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bot_processes import BotPids, wait_until_dead
from game_servers import wait_for
from test_hostile_bots import ORPHANER

from cellarena.server.bots import launcher
from cellarena.server.bots.confinement import MARKER_VAR
from cellarena.server.bots.launcher import BotSpec, start_bot, stop_bot
from cellarena.server.bots.reaper import Reaper
from cellarena.server.bots.spawn import Child

#: A bot's command that waits to be stopped.
WAITING = "python -c 'import time; time.sleep(300)'"


async def test_the_reaper_hears_of_a_bot_before_the_bot_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(Reaper, "_send", classmethod(lambda cls, line: said.append(line)))
    said_at_start: list[list[str]] = []
    real_spawn = launcher.spawn

    async def spawn(argv: list[str], **popen_kwargs: object) -> Child:
        said_at_start.append(list(said))
        return await real_spawn(argv, **popen_kwargs)

    monkeypatch.setattr(launcher, "spawn", spawn)
    proc = await start_bot(BotSpec("waiting", WAITING), "127.0.0.1", 9, None)
    marker = proc.launch.marker
    try:
        # Its marker (and its cgroup, where it has one) before it ran; its first process once started.
        assert [[line.split("\t")[:4] for line in lines] for lines in said_at_start] == [
            [["add", marker, "0", marker]]
        ]
        assert said[1].split("\t")[:4] == ["add", marker, str(proc.pid), marker]
    finally:
        await stop_bot(proc, patience=0)
    assert said[-1] == f"done\t{marker}"


async def test_a_bot_that_could_not_start_is_taken_off_the_reapers_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []
    monkeypatch.setattr(Reaper, "_send", classmethod(lambda cls, line: said.append(line)))
    with pytest.raises(OSError):
        await start_bot(BotSpec("nowhere", "/nonexistent/bot"), "127.0.0.1", 9, None)
    assert [line.split("\t")[0] for line in said] == ["add", "done"]
    assert said[0].split("\t")[1] == said[1].split("\t")[1]


async def test_no_bot_starts_where_its_reaper_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reaper that cannot start (no process left for it) refuses the bot before it runs: a bot
    the reaper does not know of could outlive a killed cellarena."""

    def cannot_start() -> subprocess.Popen[bytes]:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(Reaper, "_pipe", [])
    monkeypatch.setattr(Reaper, "_start", staticmethod(cannot_start))
    spawned: list[list[str]] = []

    async def spawn(argv: list[str], **popen_kwargs: object) -> Child:
        spawned.append(argv)
        raise AssertionError("started")

    monkeypatch.setattr(launcher, "spawn", spawn)
    with pytest.raises(BlockingIOError):
        await start_bot(BotSpec("waiting", WAITING), "127.0.0.1", 9, None)
    assert spawned == []


def test_a_reaper_told_only_a_bots_marker_stops_everything_the_bot_started(tmp_path: Path) -> None:
    """The window the first "add" closes: cellarena dies before it could say the bot's first process.
    The bot forked a child that ignores SIGTERM and double-forked a grandchild into a session of its
    own; its first process ended (as the parent-death signal ends it). The reaper, its pipe closed,
    finds both by the marker in their environment."""
    marker = secrets.token_hex(8)
    reaper = subprocess.Popen(
        [sys.executable, "-m", "cellarena.server.bots.reaper"], stdin=subprocess.PIPE, start_new_session=True
    )
    assert reaper.stdin is not None
    reaper.stdin.write(f"add\tbot\t0\t{marker}\n".encode())
    reaper.stdin.flush()
    orphaner = tmp_path / "orphaner.py"
    orphaner.write_text(ORPHANER)
    pids = BotPids(tmp_path / "pids")
    bot = subprocess.Popen(
        [sys.executable, str(orphaner), str(pids.path), "-c", "import time; time.sleep(300)"],
        env={**os.environ, MARKER_VAR: marker},
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(pids.listed()) >= 2, "the bot's child and grandchild", timeout=60)
        started = pids.listed()
        bot.kill()
        bot.wait()
        reaper.stdin.close()  # as when cellarena is killed: the pipe's only writer is gone
        assert reaper.wait(timeout=60) == 0
        left = wait_until_dead(started, 60)
        assert left == [], f"still running: {left}"
    finally:  # whatever failed, nothing of the test's runs on
        for proc in (bot, reaper):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for pid in pids.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
