"""A control group per launched bot, where the host lets cellarena make one (docs/security.md).

Why: a cgroup holds every process a bot starts, however it forks, detaches or renames itself, so the
bot can be stopped as a whole (the freezer first, so that nothing forks while it is killed), and the
kernel itself can count its CPU time and hold it to a memory and a process limit, with no polling
window. Where there is none (no cgroup file system, or not writable by this user), the launcher's
process tracking and polling (`cellarena.server.bots.confinement`) do the same less strictly.

Two kinds of hosts:

- cgroup v1 (and hybrid hosts): one hierarchy per controller; cellarena uses ``memory``, ``pids``,
  ``freezer`` and ``cpuacct``, each where it is mounted and writable;
- cgroup v2, the unified hierarchy: ``cgroup.kill`` and ``cgroup.freeze`` always, CPU time from
  ``cpu.stat``, and memory and process limits where the ``memory`` and ``pids`` controllers can be
  enabled for cellarena's cgroup.

Each bot's cgroup is made beside nothing else, inside the cgroup cellarena runs in, named
``cellarena-<marker>``; the bot's first process joins it before it executes the bot's program.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from dataclasses import dataclass, field

#: The cgroup v1 controllers cellarena uses.
V1_CONTROLLERS = ("memory", "pids", "freezer", "cpuacct")
#: The key of the unified (v2) hierarchy among the controllers.
UNIFIED = "unified"
#: Seconds to wait for a freezer to freeze, and for a killed cgroup to empty.
SETTLE_SECONDS = 2.0


#: The environment variable that chooses which cgroups cellarena uses: ``auto`` (the default: every
#: hierarchy it may write), ``v1``, ``v2``, or ``off``.
CHOICE_VAR = "CELLARENA_CGROUPS"


@functools.cache
def detect() -> dict[str, str]:
    """The folders of this process's own cgroups that cellarena may use, by controller (one of
    `V1_CONTROLLERS`, or `UNIFIED`), as `CHOICE_VAR` allows; empty where there are none. Read once
    per process."""
    choice = os.environ.get(CHOICE_VAR, "auto").strip().lower() or "auto"
    if choice not in ("auto", "v1", "v2", "off"):
        raise ValueError(f"{CHOICE_VAR}={choice!r}: give auto, v1, v2 or off")
    found = {} if choice == "off" else _writable()
    if choice == "v1":
        found.pop(UNIFIED, None)
    elif choice == "v2":
        found = {k: v for k, v in found.items() if k == UNIFIED}
    return found


def _writable() -> dict[str, str]:
    """Controller -> this process's own cgroup folder under it, for each one it may write to."""
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
        with open("/proc/self/cgroup") as f:
            own_lines = f.read().splitlines()
    except OSError:
        return {}
    mounts = _mounts(lines)
    own = _own_groups(own_lines)
    found = {}
    for controller, point in mounts.items():
        if controller in own:
            folder = os.path.join(point, own[controller].lstrip("/"))
            if os.path.isdir(folder) and os.access(folder, os.W_OK):
                found[controller] = folder
    return found


def _mounts(mountinfo: list[str]) -> dict[str, str]:
    """Controller -> where its hierarchy is mounted, from /proc/self/mountinfo's lines."""
    mounts: dict[str, str] = {}
    for line in mountinfo:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        kind, point, options = rest[0], fields[4], rest[2].split(",")
        if kind == "cgroup2":
            mounts.setdefault(UNIFIED, point)
        elif kind == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options:
                    mounts.setdefault(controller, point)
    return mounts


def _own_groups(cgroup: list[str]) -> dict[str, str]:
    """Controller -> this process's cgroup path in it, from /proc/self/cgroup's lines."""
    own: dict[str, str] = {}
    for line in cgroup:
        number, _, after = line.partition(":")
        names, _, path = after.partition(":")
        if number == "0" and names == "":
            own[UNIFIED] = path
        for name in names.split(","):
            if name in V1_CONTROLLERS:
                own[name] = path
    return own


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


def _field(text: str | None, key: str) -> int:
    """The number after ``key`` in a flat-keyed cgroup file (``oom_kill 3``), or 0."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


@dataclass
class BotCgroup:
    """One bot's cgroup: a folder in each hierarchy it could be made in, by controller."""

    folders: dict[str, str] = field(default_factory=dict)
    #: The limits were set in the kernel (`limit`): memory, processes.
    memory_limited: bool = False
    processes_limited: bool = False

    @classmethod
    def make(cls, name: str, where: dict[str, str] | None = None) -> BotCgroup | None:
        """Make ``cellarena-NAME`` in every hierarchy of ``where`` (default: `detect()`); None when
        none could be made (no cgroups here, or not ours to write)."""
        group = cls()
        for controller, parent in (detect() if where is None else where).items():
            folder = os.path.join(parent, f"cellarena-{name}")
            try:
                os.mkdir(folder, 0o755)
            except OSError:
                continue
            group.folders[controller] = folder
        if not group.folders:
            return None
        unified = group.folders.get(UNIFIED)
        if unified is not None and not os.path.exists(os.path.join(unified, "cgroup.kill")):
            # Before Linux 5.14 the unified hierarchy cannot kill a group at once; v1's freezer can.
            os.rmdir(unified)
            del group.folders[UNIFIED]
            if not group.folders:
                return None
        return group

    def join_descriptors(self) -> list[int]:
        """Descriptors of each ``cgroup.procs``, opened here for the bot's first process to write
        "0" to (itself) between fork and exec, where opening a file could wait on another thread's lock."""
        fds = []
        for folder in self.folders.values():
            with contextlib.suppress(OSError):
                fds.append(os.open(os.path.join(folder, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        return fds

    def limit(self, memory_mb: int | None, processes: int | None) -> None:
        """Hold the bot to ``memory_mb`` MiB (swap included) and ``processes`` processes in the kernel,
        where a controller for each is here. The kernel then refuses a fork past the limit, and its
        out-of-memory killer ends a process of the bot at the memory limit; `memory_hit` and
        `processes_hit` tell the watcher, which stops the whole bot and names the limit."""
        memory, pids, unified = (self.folders.get(k) for k in ("memory", "pids", UNIFIED))
        if memory_mb is not None:
            size = str(memory_mb * 2**20)
            if memory is not None and _write(os.path.join(memory, "memory.limit_in_bytes"), size):
                _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), size)  # where swap is counted
                self.memory_limited = True
            elif unified is not None and _write(os.path.join(unified, "memory.max"), size):
                _write(os.path.join(unified, "memory.swap.max"), "0")
                self.memory_limited = True
        if processes is not None:
            for folder, name in ((pids, "pids.max"), (unified, "pids.max")):
                if folder is not None and _write(os.path.join(folder, name), str(processes)):
                    self.processes_limited = True
                    break

    def pids(self) -> set[int]:
        """Every process in the cgroup now."""
        found: set[int] = set()
        for folder in self.folders.values():
            text = _read(os.path.join(folder, "cgroup.procs")) or ""
            found.update(int(p) for p in text.split() if p.isdigit())
        return found

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that ever ran in the cgroup, ended ones included; None when no
        hierarchy here counts it."""
        if "cpuacct" in self.folders:
            text = _read(os.path.join(self.folders["cpuacct"], "cpuacct.usage"))
            if text is not None and text.strip().isdigit():
                return int(text) / 1e9
        if UNIFIED in self.folders:
            text = _read(os.path.join(self.folders[UNIFIED], "cpu.stat"))
            if text is not None and "usage_usec" in text:
                return _field(text, "usage_usec") / 1e6
        return None

    def memory_hit(self) -> bool:
        """The kernel's out-of-memory killer ended a process of the bot at its memory limit."""
        if "memory" in self.folders:
            return _field(_read(os.path.join(self.folders["memory"], "memory.oom_control")), "oom_kill") > 0
        if UNIFIED in self.folders:
            return _field(_read(os.path.join(self.folders[UNIFIED], "memory.events")), "oom_kill") > 0
        return False

    def processes_hit(self) -> bool:
        """The kernel refused the bot a process at its process limit."""
        for controller in ("pids", UNIFIED):
            if controller in self.folders:
                text = _read(os.path.join(self.folders[controller], "pids.events"))
                if _field(text, "max") > 0:
                    return True
        return False

    def kill(self) -> None:
        """Kill every process in the cgroup at once, and wait (up to `SETTLE_SECONDS`) until it is empty.
        v2 has ``cgroup.kill``; with v1's freezer the processes are frozen first, so that none forks
        a new one between two kills, then killed and thawed (a frozen process dies once thawed).
        Blocking: run in a thread."""
        unified = self.folders.get(UNIFIED)
        freezer = self.folders.get("freezer")
        if unified is not None and _write(os.path.join(unified, "cgroup.kill"), "1"):
            pass
        elif freezer is not None:
            state = os.path.join(freezer, "freezer.state")
            _write(state, "FROZEN")
            deadline = time.monotonic() + SETTLE_SECONDS
            while (_read(state) or "").strip() == "FREEZING" and time.monotonic() < deadline:
                time.sleep(0.005)
            self._signal_all()
            _write(state, "THAWED")
        deadline = time.monotonic() + SETTLE_SECONDS
        while self.pids() and time.monotonic() < deadline:
            self._signal_all()  # without a freezer: a fork between two rounds is killed the next
            time.sleep(0.01)

    def _signal_all(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Remove the cgroup's folders (an empty cgroup's; one still holding a process stays)."""
        for folder in self.folders.values():
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # a killed process leaves its cgroup a moment after it died
