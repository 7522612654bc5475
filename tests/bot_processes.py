"""Which bot processes a test started are still running. tests/bots/raw_bot.py appends its pid to the
file named by $BOT_PID_FILE, so a test can check that `cellarena` left none behind."""

from __future__ import annotations

import contextlib
import os
import select
import time
from dataclasses import dataclass
from pathlib import Path

from cellarena.server.bots.confinement import process_table


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie its parent has not reaped yet (or left to a container's
    init) counts as ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the command's name, which may hold spaces and parentheses: after the last ")".
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` now (children, theirs, ...), from the launcher's process table."""
    children: dict[int, list[int]] = {}
    for stat in process_table().values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_until_dead(pids: list[int], seconds: float) -> list[int]:
    """Those of ``pids`` still running after up to ``seconds`` (empty as soon as none is). Waits on
    each one's pidfd, readable once it has ended (a zombie has), not on a clock of its own."""
    waiting: dict[int, int] = {}
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                waiting[os.pidfd_open(pid)] = pid
        deadline = time.monotonic() + seconds
        while waiting and (left := deadline - time.monotonic()) > 0:
            ended, _, _ = select.select(list(waiting), [], [], left)
            for fd in ended:
                os.close(fd)
                del waiting[fd]
        return sorted(waiting.values())
    finally:
        for fd in waiting:
            os.close(fd)


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
