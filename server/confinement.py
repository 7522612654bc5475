"""Confining a bot that cellarena launches: limits on what it may use, another user when asked, and every
process it starts found and stopped (docs/security.md).

Why polling ``/proc`` rather than cgroups: cgroups need privileges or a delegated subtree that most
hosts running cellarena do not give, and `RLIMIT_AS` breaks runtimes that reserve large address
spaces (node, the JVM). So the launcher reads the process table a few times a second: a bot's
processes are its own process, their children, anything in the sessions they started, and orphans
that carry the bot's marker in their environment (the launcher is a child subreaper, so orphans come
to it instead of to init). Memory (resident, summed over the tree), CPU time and the number of
processes are checked against `Limits` there, and a bot over one is killed with a reason that names
the limit. Open files, and CPU time per process as a backstop, are kernel rlimits set before exec.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import resource
import secrets
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds between two looks at a bot's processes.
POLL_SECONDS = 0.2
#: First uid of the range `--isolate` runs bots as (each launch picks a random one in the range).
ISOLATED_UID_BASE = 2_000_000_000
ISOLATED_UID_RANGE = 100_000_000
#: The environment variable that marks every process of one launched bot (not a secret).
MARKER_VAR = "CELLARENA_BOT_MARK"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Limits:
    """What one bot, with every process it starts, may use during a match; None means no limit."""

    #: Resident memory of all the bot's processes together, in MiB.
    memory_mb: int | None = 2048
    #: CPU time of all the bot's processes together, in seconds, over the whole match.
    cpu_seconds: float | None = 1800.0
    #: Processes (and threads' parents) the bot may have at once, itself included.
    processes: int | None = 64
    #: Open files per process (RLIMIT_NOFILE): the kernel refuses more with EMFILE.
    open_files: int | None = 1024

    def describe(self) -> str:
        parts = [
            f"memory {self.memory_mb} MiB" if self.memory_mb else "memory unlimited",
            f"CPU {self.cpu_seconds:g} s" if self.cpu_seconds else "CPU unlimited",
            f"{self.processes} processes" if self.processes else "processes unlimited",
            f"{self.open_files} open files" if self.open_files else "open files unlimited",
        ]
        return ", ".join(parts)


class IsolationError(RuntimeError):
    """`--isolate` cannot be honoured on this host; the message says why and what to do."""


def isolation_method() -> str | None:
    """How `--isolate` confines bots here: "user" (a user of its own; cellarena runs as root), "bwrap"
    (bubblewrap, when installed: a read-only view of the system, its own process namespace), or None."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "user"
    if shutil.which("bwrap") is not None:
        return "bwrap"
    return None


def check_isolation() -> str:
    """The isolation method of this host; `IsolationError` when there is none."""
    method = isolation_method()
    if method is None:
        raise IsolationError(
            "--isolate runs each bot as a user of its own, which needs cellarena to run as root (e.g. in "
            "a container), or under bubblewrap, which is not installed (apt-get install bubblewrap); "
            "do one of those or leave --isolate out (docs/security.md)"
        )
    return method


@dataclass
class Launch:
    """How to start one bot: the extra environment, rlimits and user its process gets."""

    limits: Limits
    isolate: bool = False
    marker: str = field(default_factory=lambda: secrets.token_hex(8))
    method: str | None = None
    uid: int | None = None
    home: str | None = None

    def prepare(self) -> None:
        """With isolation, pick the bot's user and make its private writable folder (mode 700)."""
        if not self.isolate:
            return
        self.method = check_isolation()
        import tempfile

        # The homes share a parent that bubblewrap hides behind an empty tmpfs, so a bot sees only its own.
        base = os.path.join(tempfile.gettempdir(), f"cellarena-bots-{os.geteuid()}")
        os.makedirs(base, mode=0o711, exist_ok=True)
        os.chmod(base, 0o711)  # other users may pass through to their own home, not list the others
        self.home = tempfile.mkdtemp(prefix="bot-", dir=base)
        os.chmod(self.home, 0o700)
        if self.method == "user":
            self.uid = ISOLATED_UID_BASE + secrets.randbelow(ISOLATED_UID_RANGE)
            with contextlib.suppress(KeyError):
                pwd.getpwuid(self.uid)  # taken by a real user: try once more
                self.uid = ISOLATED_UID_BASE + secrets.randbelow(ISOLATED_UID_RANGE)
            os.chown(self.home, self.uid, self.uid)

    def argv(self, argv: list[str], cwd: str | None) -> list[str]:
        """The command line to run: under bubblewrap, the bot's behind it. Everything is read-only but
        its private folder (its HOME and TMPDIR) and a /dev and /proc of its own; it sees no other process
        and no other bot's folder."""
        if self.method != "bwrap" or self.home is None:
            return argv
        where = os.path.abspath(cwd or os.getcwd())
        return [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", os.path.dirname(self.home), "--bind", self.home, self.home,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--cap-drop", "ALL",
            "--chdir", where,
            "--", *argv,
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        extra = {MARKER_VAR: self.marker}
        if self.home is not None:
            extra.update(HOME=self.home, TMPDIR=self.home, USER="cellarena-bot")
        return extra

    def popen_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"preexec_fn": _rlimits(self.limits, isolated=self.uid is not None)}
        if self.uid is not None:
            kwargs.update(user=self.uid, group=self.uid, extra_groups=[], umask=0o077)
        return kwargs

    def cleanup(self) -> None:
        """Remove the private folder (whatever the bot left in it)."""
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


def _rlimits(limits: Limits, *, isolated: bool) -> Callable[[], None]:
    """The child's last step before exec: kernel limits. Only `setrlimit` calls (safe after fork), with
    values worked out here, each at most the current hard limit (which an unprivileged host cannot raise)."""
    wanted: list[tuple[int, int]] = []
    if limits.open_files is not None:
        wanted.append((resource.RLIMIT_NOFILE, limits.open_files))
    if limits.cpu_seconds is not None:
        # A backstop per process; the tree's total is checked by the watcher, which names the limit.
        wanted.append((resource.RLIMIT_CPU, int(limits.cpu_seconds) + 2))
    if limits.processes is not None and isolated:
        # RLIMIT_NPROC counts every process of the user: only meaningful when the bot has a user of its own.
        wanted.append((resource.RLIMIT_NPROC, limits.processes))
    settings = []
    for which, value in wanted:
        hard = resource.getrlimit(which)[1]
        top = value if hard == resource.RLIM_INFINITY else min(value, hard)
        high = top
        if which == resource.RLIMIT_CPU:  # SIGXCPU at the soft limit names it; SIGKILL a little later
            high = top + 5 if hard == resource.RLIM_INFINITY else min(top + 5, hard)
        settings.append((which, (top, high)))

    def apply() -> None:
        for which, pair in settings:
            resource.setrlimit(which, pair)

    return apply


def become_subreaper() -> None:
    """Make orphaned descendants of this process its children (Linux), so a bot's double-forked
    processes are still found, and reaped, by the launcher. Harmless where unsupported."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


@dataclass(frozen=True)
class _Stat:
    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    cpu: float  # own user+system seconds
    child_cpu: float  # seconds of children it has reaped
    rss: int  # bytes
    start: int  # clock ticks after boot: with the pid, identifies a process across pid reuse


def process_table() -> dict[int, _Stat]:
    """Every process this one can see, from /proc (empty where there is no /proc)."""
    table: dict[int, _Stat] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue
        rest = text[text.rfind(b")") + 2 :].split()
        try:
            table[int(name)] = _Stat(
                pid=int(name),
                state=rest[0].decode(),
                ppid=int(rest[1]),
                pgrp=int(rest[2]),
                session=int(rest[3]),
                cpu=(int(rest[11]) + int(rest[12])) / _TICKS,
                child_cpu=(int(rest[13]) + int(rest[14])) / _TICKS,
                rss=int(rest[21]) * _PAGE,
                start=int(rest[19]),
            )
        except (IndexError, ValueError):
            continue
    return table


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


class ProcessTree:
    """The processes of one launched bot, found in snapshots of the process table, and stopped."""

    def __init__(self, root: int, marker: str) -> None:
        self.root = root
        self.marker = f"{MARKER_VAR}={marker}".encode()
        #: (pid, start) of every process seen as the bot's, so a reused pid is never mistaken for one.
        self.known: set[tuple[int, int]] = set()
        self.sessions: set[int] = {root}
        self.root_start: int | None = None
        #: Orphans whose environment was read and is not the bot's: not read again every look.
        self.unmarked: set[tuple[int, int]] = set()

    def members(self, table: dict[int, _Stat]) -> list[_Stat]:
        """The bot's processes in ``table`` (updating what is known about them)."""
        me = os.getpid()
        root = table.get(self.root)
        if root is not None and self.root_start is None:
            self.root_start = root.start
            self.known.add((root.pid, root.start))
        found = {pid for pid, s in table.items() if (pid, s.start) in self.known}
        changed = True
        while changed:
            changed = False
            for pid, s in table.items():
                if pid in found or pid == me:
                    continue
                if s.ppid in found or (s.session in self.sessions and s.pgrp != 0 and pid != 1):
                    found.add(pid)
                    changed = True
                elif s.ppid in (me, 1) and pid != self.root and (pid, s.start) not in self.unmarked:
                    if _has_marker(pid, self.marker):
                        found.add(pid)
                        changed = True
                    else:
                        self.unmarked.add((pid, s.start))
        for pid in found:
            self.known.add((pid, table[pid].start))
            self.sessions.add(table[pid].session)
        return [table[pid] for pid in sorted(found)]

    def lineage(self, table: dict[int, _Stat]) -> list[int]:
        """The bot's first process and what descends from it (children, and its sessions), without
        the processes found by the marker alone: a marker is in the environment, which another
        process of the same user can read and copy, so it proves no kinship."""
        if self.root not in table:
            return []
        found = {self.root}
        sessions = {table[self.root].session}
        changed = True
        while changed:
            changed = False
            for pid, s in table.items():
                if pid not in found and pid != 1 and (s.ppid in found or s.session in sessions):
                    found.add(pid)
                    sessions.add(s.session)
                    changed = True
        return sorted(found)

    def usage(self, table: dict[int, _Stat]) -> tuple[int, float, int]:
        """(resident bytes, CPU seconds, live processes) of the bot now."""
        live = [s for s in self.members(table) if s.state not in ("Z", "X")]
        cpu = sum(s.cpu for s in live)
        root = table.get(self.root)
        if root is not None:
            cpu += root.child_cpu
        return sum(s.rss for s in live), cpu, len(live)

    def kill(self, rounds: int = 20) -> int:
        """SIGKILL every process of the bot until none is left (a fork bomb needs a few rounds); reap
        those that became this process's children. Returns how many were killed. Blocking: run in a
        thread."""
        import time

        me = os.getpid()
        killed = 0
        for _ in range(rounds):
            table = process_table()
            members = [s for s in self.members(table) if s.pid != self.root]
            live = [s for s in members if s.state not in ("Z", "X")]
            for s in live:
                with contextlib.suppress(OSError):
                    os.kill(s.pid, signal.SIGKILL)
                    killed += 1
            for s in members:
                if s.ppid == me:
                    with contextlib.suppress(ChildProcessError, OSError):
                        os.waitpid(s.pid, os.WNOHANG)
            if not live:
                break
            time.sleep(0.02)
        return killed


def over_limit(limits: Limits, rss: int, cpu: float, processes: int) -> str | None:
    """The limit a bot using this much is over, said for a person (the same words every time, so that
    standings can count them); None when it is within all."""
    if limits.memory_mb is not None and rss > limits.memory_mb * 2**20:
        return f"memory limit exceeded ({limits.memory_mb} MiB resident)"
    if limits.cpu_seconds is not None and cpu > limits.cpu_seconds:
        return f"CPU time limit exceeded ({limits.cpu_seconds:g} s)"
    if limits.processes is not None and processes > limits.processes:
        return f"process limit exceeded ({limits.processes} processes)"
    return None


def exit_reason(code: int | None, limits: Limits) -> str | None:
    """What a bot's exit status says about a limit (the kernel's CPU backstop, SIGXCPU), or None."""
    if code == -signal.SIGXCPU and limits.cpu_seconds is not None:
        return f"CPU time limit exceeded ({limits.cpu_seconds:g} s)"
    return None
