"""Confining a bot that cellarena launches: limits on what it may use, another user and network when
asked, and every process it starts found and stopped (docs/security.md).

Each bot gets a cgroup of its own where the host lets cellarena make one (`cellarena.server.bots.cgroups`):
it holds every process the bot starts, counts their CPU time, is killed as a whole and, with
isolation, holds the bot to its memory and process limits in the kernel. But cgroups need
privileges or a delegated subtree that many hosts running cellarena do not give, and `RLIMIT_AS`
breaks runtimes that reserve large address spaces (node, the JVM). So the launcher also reads the
process table a few times a second: a bot's processes are its own process, their children,
anything in the sessions they started, and orphans that carry the bot's marker in their environment
(the launcher is a child subreaper, so orphans come to it instead of to init). Memory (resident,
summed over the tree), CPU time and the number of processes are checked against `Limits` there, and
a bot over one is killed with a reason that names the limit. Open files, and CPU time per process as
a backstop, are kernel rlimits set before exec, with the parent-death signal that ends a bot's first
process with cellarena.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellarena.server.bots.cgroups import BotCgroup

if TYPE_CHECKING:
    from cellarena.server.bots.python_view import PythonView

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
    #: The bot is handed its connection: isolated, it gets a network of its own with nothing in it.
    handed_connection: bool = False
    marker: str = field(default_factory=lambda: secrets.token_hex(8))
    method: str | None = None
    uid: int | None = None
    home: str | None = None
    #: The bot's cgroup, where the host lets cellarena make one (`cellarena.server.bots.cgroups`).
    cgroup: BotCgroup | None = None
    #: The bot gets a network namespace of its own (nothing to reach but the connection it is handed).
    private_network: bool = False
    #: A submitted program's confinement (`cellarena.server.bots.python_view`): bubblewrap even as
    #: root (which then starts the bot as its user), and these arguments of its, which show the
    #: interpreter and the packages the host offers. None: the usual confinement.
    view: PythonView | None = None
    _join_fds: list[int] = field(default_factory=list)

    def prepare(self) -> None:
        """Make the bot's cgroup where the host offers one; with isolation, also hold it to its limits
        there, pick the bot's user and network and make its private writable folder (mode 700)."""
        self.cgroup = BotCgroup.make(self.marker)
        if self.cgroup is not None:
            if self.isolate:
                self.cgroup.limit(self.limits.memory_mb, self.limits.processes)
            self._join_fds = self.cgroup.join_descriptors()
        if not self.isolate:
            return
        self.method = check_isolation()
        if self.view is not None and shutil.which("bwrap") is None:
            raise IsolationError(
                "a submitted bot runs under bubblewrap, which is not installed (apt-get install bubblewrap)"
            )
        if self.view is not None and self.handed_connection:
            self.private_network = True  # bubblewrap's empty network namespace
        elif not self.handed_connection:
            pass  # a bot that must connect itself (a ladder's house bot) keeps the host's network
        elif self.method == "bwrap" or can_unshare_network():
            self.private_network = True
        else:
            _warn_shared_network()
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
        and no other bot's folder, and has a network of its own with nothing in it (its connection to
        the match is handed over)."""
        if self.view is not None and self.home is not None:
            return self._sandboxed(argv, os.path.abspath(cwd or os.getcwd()))
        if self.method != "bwrap" or self.home is None:
            return argv
        where = os.path.abspath(cwd or os.getcwd())
        network = ["--unshare-net"] if self.private_network else []
        return [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", os.path.dirname(self.home), "--bind", self.home, self.home,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", *network,
            "--die-with-parent", "--cap-drop", "ALL",
            "--chdir", where,
            "--", *argv,
        ]  # fmt: skip

    def _sandboxed(self, argv: list[str], where: str) -> list[str]:
        """A submitted program's command line: its view (`cellarena.server.bots.python_view`: the
        interpreter, the packages, the host's folders hidden) and its own folder, read-only; as
        root, bubblewrap starts it as its user with no capability left."""
        from cellarena.server.bots.python_view import exposure

        assert self.home is not None and self.view is not None
        user = ["--cap-drop", "ALL", "--"]
        if self.uid is not None:
            user = [
                "--", "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--",
            ]  # fmt: skip
        return [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            *exposure([*self.view.expose, Path(where)], self.view.hidden), *self.view.args,
            "--tmpfs", os.path.dirname(self.home), "--bind", self.home, self.home,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
            "--die-with-parent", "--chdir", where, *user, *argv,
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        extra = {MARKER_VAR: self.marker}
        if self.home is not None:
            extra.update(HOME=self.home, TMPDIR=self.home, USER="cellarena-bot")
        return extra

    def popen_kwargs(self) -> dict[str, Any]:
        new_network = self.private_network and self.method == "user" and self.view is None
        # RLIMIT_NPROC only where no cgroup counts the bot's processes: it would refuse the fork first,
        # and the cgroup's refusal is the one the watcher can name.
        nproc = self.uid is not None and not (self.cgroup is not None and self.cgroup.processes_limited)
        # A submitted program's bubblewrap changes the user itself (setpriv), after its binds.
        uid = None if self.view is not None else self.uid
        setup = child_setup(
            self.limits,
            uid=uid,
            nproc=nproc and uid is not None,
            join_fds=self._join_fds,
            new_network=new_network,
        )
        kwargs: dict[str, Any] = {"preexec_fn": setup}
        if self.uid is not None:
            kwargs.update(umask=0o077)
        return kwargs

    def started(self) -> None:
        """The bot's first process has started (and joined its cgroup): close what it needed."""
        for fd in self._join_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._join_fds = []

    def cleanup(self) -> None:
        """Remove the private folder (whatever the bot left in it) and the cgroup (killed before)."""
        self.started()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
        if self.cgroup is not None:
            self.cgroup.remove()


@functools.cache
def _warn_shared_network() -> None:
    """Once per process: the bots of this host share its network, even isolated."""
    logging.getLogger("cellarena.server").warning(
        "--isolate: this host refuses a network namespace (no CAP_SYS_ADMIN?): the bots share the "
        "host's network (docs/security.md)"
    )


@functools.cache
def can_unshare_network() -> bool:
    """Whether this process may give a child a network namespace of its own (root with
    CAP_SYS_ADMIN: not in every container). Tried once, in a throw-away process."""
    if not sys.platform.startswith("linux"):
        return False
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x40000000) != 0)"
    try:
        return subprocess.run([sys.executable, "-c", probe], timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def child_setup(
    limits: Limits,
    *,
    uid: int | None,
    nproc: bool,
    join_fds: list[int],
    new_network: bool,
    file_bytes: int | None = None,
) -> Callable[[], None]:
    """The bot's first process's last steps before exec, in this order: join its cgroup (writing "0"
    to each descriptor of ``join_fds``), a network namespace of its own (``new_network``), its user
    (``uid``: no groups, that uid and gid), kernel limits (RLIMIT_NPROC with ``nproc``, meaningful
    only for a user of its own; RLIMIT_FSIZE with ``file_bytes``, a build's), and the parent-death
    signal. Only system
    calls, safe after a fork, with everything worked out here; rlimits are each at most the current
    hard limit (which an unprivileged host cannot raise)."""
    wanted: list[tuple[int, int]] = []
    if limits.open_files is not None:
        wanted.append((resource.RLIMIT_NOFILE, limits.open_files))
    if limits.cpu_seconds is not None:
        # A backstop per process; the tree's total is checked by the watcher, which names the limit.
        wanted.append((resource.RLIMIT_CPU, int(limits.cpu_seconds) + 2))
    if limits.processes is not None and nproc:
        # RLIMIT_NPROC counts every process of the user: only meaningful when the bot has a user of its own.
        wanted.append((resource.RLIMIT_NPROC, limits.processes))
    if file_bytes is not None:  # a larger file is cut short with SIGXFSZ, which names the limit
        wanted.append((resource.RLIMIT_FSIZE, file_bytes))
    settings = []
    for which, value in wanted:
        hard = resource.getrlimit(which)[1]
        top = value if hard == resource.RLIM_INFINITY else min(value, hard)
        high = top
        if which == resource.RLIMIT_CPU:  # SIGXCPU at the soft limit names it; SIGKILL a little later
            high = top + 5 if hard == resource.RLIM_INFINITY else min(top + 5, hard)
        settings.append((which, (top, high)))

    parent = os.getpid()
    prctl = _libc_function("prctl")
    unshare = _libc_function("unshare") if new_network else None

    def apply() -> None:
        for fd in join_fds:
            with contextlib.suppress(OSError):  # outside its cgroup, the process tracking still finds it
                os.write(fd, b"0")
        if unshare is not None and unshare(CLONE_NEWNET) != 0:
            raise OSError("cannot give the bot a network namespace of its own")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        for which, pair in settings:
            resource.setrlimit(which, pair)
        # Killed when cellarena ends, even by SIGKILL: the forking thread lives as long as cellarena
        # (`cellarena.server.bots.spawn`). Asked for last, as a change of user would clear it.
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # cellarena died before the request was made
                os._exit(1)

    return apply


#: unshare(2): a new network namespace.
CLONE_NEWNET = 0x40000000
#: prctl(2) options.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _libc_function(name: str) -> Callable[..., int] | None:
    """A libc function, looked up before a fork (after it, in a child of a threaded process, a lookup
    could wait on a lock that another thread held), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    return function


def become_subreaper() -> None:
    """Make orphaned descendants of this process its children (Linux), so a bot's double-forked
    processes are still found, and reaped, by the launcher. Harmless where unsupported."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


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

    def __init__(self, root: int, marker: str, *, orphans_anywhere: bool = False) -> None:
        self.root = root
        #: Look for the marker in every process, not only in those re-parented to this one or to init:
        #: the reaper, after cellarena died, has orphans re-parented to whichever subreaper is above.
        self.orphans_anywhere = orphans_anywhere
        self.marker = f"{MARKER_VAR}={marker}".encode()
        #: (pid, start) of every process seen as the bot's, so a reused pid is never mistaken for one.
        self.known: set[tuple[int, int]] = set()
        #: No root yet (0: the reaper told of a bot about to start) is no session: init's is 0 here.
        self.sessions: set[int] = {root} if root > 0 else set()
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
                elif (
                    (self.orphans_anywhere or s.ppid in (me, 1))
                    and pid != self.root
                    and (pid, s.start) not in self.unmarked
                ):
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


def cgroup_reason(cgroup: BotCgroup | None, limits: Limits) -> str | None:
    """The limit the kernel held a bot to in its cgroup, when the bot ran into it (its out-of-memory
    killer ended one of its processes, or it refused a fork), said as `over_limit` says it; or None."""
    if cgroup is None:
        return None
    if cgroup.memory_limited and limits.memory_mb is not None and cgroup.memory_hit():
        return over_limit(limits, limits.memory_mb * 2**20 + 1, 0.0, 0)
    if cgroup.processes_limited and limits.processes is not None and cgroup.processes_hit():
        return over_limit(limits, 0, 0.0, limits.processes + 1)
    return None


def exit_reason(code: int | None, limits: Limits) -> str | None:
    """What a bot's exit status says about a limit (the kernel's CPU backstop, SIGXCPU), or None."""
    if code == -signal.SIGXCPU and limits.cpu_seconds is not None:
        return f"CPU time limit exceeded ({limits.cpu_seconds:g} s)"
    return None
