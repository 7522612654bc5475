"""Which bot processes a test started are still running. tests/bots/raw_bot.py appends its pid to the
file named by $BOT_PID_FILE, so a test can check that `cellarena` left none behind."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` now (children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_until_dead(pids: list[int], seconds: float) -> list[int]:
    """Those of ``pids`` still running after up to ``seconds`` (empty as soon as none is)."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@dataclass(frozen=True)
class BotPids:
    """A pid file for raw_bot.py: pass ``env`` to the `cellarena` process that starts the bots."""

    path: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "BOT_PID_FILE": str(self.path)}

    def listed(self) -> list[int]:
        """Every bot that started, dead or alive."""
        return [int(p) for p in self.path.read_text().split()] if self.path.exists() else []

    def running(self) -> list[int]:
        return [p for p in self.listed() if alive(p)]

    def wait_until_dead(self, seconds: float = 15.0) -> list[int]:
        """The bots still running after up to ``seconds`` (an empty list as soon as none is); the
        file is read again at each look, for bots that start meanwhile."""
        deadline = time.monotonic() + seconds
        while (left := self.running()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left
