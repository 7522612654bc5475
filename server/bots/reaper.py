"""The reaper: a small process that outlives cellarena, to stop its bots if cellarena is killed.

Why: a SIGKILLed cellarena can stop nothing. The kernel's parent-death signal ends each bot's first
process with it (`cellarena.server.bots.confinement`), but not what that process started: a child, or
a grandchild double-forked into a session of its own, is re-parented to init and runs on. So the
launcher tells one reaper per cellarena process about each bot it starts (its cgroup, its first
process and its marker) and when it is done with it, through a pipe that only cellarena holds. The
pipe ends when cellarena does, however it ends; the reaper then kills every bot still listed, as a
whole where it has a cgroup, else by its sessions and its marker, removes their cgroups, and exits.

Lines on its standard input (words separated by tabs):

    add ID ROOT_PID MARKER [CONTROLLER=CGROUP_FOLDER ...]
    done ID

A bot is added twice: before it starts, with ROOT_PID 0 (found then by its marker and cgroup alone),
and once started, with its first process (whose sessions it then kills too).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from cellarena.server.bots.cgroups import BotCgroup


@dataclass
class _Entry:
    root: int
    marker: str
    #: Its cgroup's folder by controller; empty where it has none.
    folders: dict[str, str]


def stop_all(entries: dict[str, _Entry]) -> None:
    """Kill every listed bot, each as a whole, and remove its cgroup."""
    if not entries:
        return
    # Imported only now: a cellarena process that stopped its bots itself (the usual end) leaves its
    # reaper nothing to do, and each one starts a reaper (a third of the reaper's start-up CPU).
    from cellarena.server.bots.cgroups import BotCgroup
    from cellarena.server.bots.confinement import ProcessTree

    cgroups = {key: BotCgroup(entry.folders) for key, entry in entries.items() if entry.folders}
    for cgroup in cgroups.values():
        cgroup.kill()
    for key, entry in entries.items():
        # Its sessions, and orphans with its marker wherever they were re-parented.
        ProcessTree(entry.root, entry.marker, orphans_anywhere=True).kill()
        if key in cgroups:
            cgroups[key].remove()


def main() -> int:
    """Read the launcher's lines until the pipe ends, then stop what is still listed."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # Ctrl-C is for cellarena, which then tells us what it stopped
    entries: dict[str, _Entry] = {}
    for raw in sys.stdin.buffer:
        words = raw.decode("utf-8", "replace").rstrip("\n").split("\t")
        if words[0] == "add" and len(words) >= 4 and words[2].isdigit():
            folders = dict(word.split("=", 1) for word in words[4:] if "=" in word)
            entries[words[1]] = _Entry(int(words[2]), words[3], folders)
        elif words[0] == "done" and len(words) == 2:
            entries.pop(words[1], None)
    stop_all(entries)
    return 0


class Reaper:
    """The launcher's side: the reaper process of this cellarena process, started at its first bot."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    #: The one reaper of this process, once started.
    _pipe: ClassVar[list[subprocess.Popen[bytes]]] = []

    @classmethod
    def _send(cls, line: str) -> None:
        with cls._lock:
            if not cls._pipe or cls._pipe[0].poll() is not None:
                cls._pipe[:] = [cls._start()]
            stdin = cls._pipe[0].stdin
            assert stdin is not None
            with contextlib.suppress(OSError):
                stdin.write(line.encode() + b"\n")
                stdin.flush()

    @staticmethod
    def _start() -> subprocess.Popen[bytes]:
        # A session of its own: a signal to cellarena's process group (Ctrl-C, kill -9 -PGID) leaves it
        # running to do its work. Its pipe's write end is cellarena's alone (not inherited by bots).
        return subprocess.Popen(
            [sys.executable, "-m", "cellarena.server.bots.reaper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )

    @classmethod
    def add(cls, key: str, root: int | None, marker: str, cgroup: BotCgroup | None) -> None:
        """List the bot ``key``, or update it: ``root`` is its first process, None before it starts."""
        folders = [f"{k}={v}" for k, v in cgroup.folders.items()] if cgroup is not None else []
        cls._send("\t".join(["add", key, str(root or 0), marker, *folders]))

    @classmethod
    def done(cls, key: str) -> None:
        cls._send(f"done\t{key}")


if __name__ == "__main__":
    raise SystemExit(main())
