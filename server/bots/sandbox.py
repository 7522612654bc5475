"""Running a bot's build confined as the bot itself is, offline (docs/security.md, "What confines a build").

A build runs code its owner wrote (a build.sh, a CMakeLists.txt, a cargo build script), so it gets
what `--isolate` gives a bot and a little more, since it must write:

- bubblewrap: the system read-only, a /dev and /proc of its own, its own process namespace, and an
  empty network namespace (no network at all: toolchains work offline, Rust from Debian's crates);
- the folder it builds in bound writable, and nothing else but a size-capped tmpfs as /tmp and HOME;
  folders the host names (``hidden``: the ladder's own) covered by an empty tmpfs;
- a user of its own when cellarena runs as root (the folder is given to that user first);
- its cgroup's memory and process limits where the host offers them, else the launcher's polling;
  CPU time and RLIMIT_FSIZE per file in the kernel; the folder's size checked while it runs, as
  cgroups do not limit disk;
- a wall-time limit, under trio's deadline; its output (stdout and stderr) kept up to a size.

Every process it started is killed when it ends, however it ends.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import trio

from cellarena.server.bots.cgroups import BotCgroup
from cellarena.server.bots.confinement import (
    ISOLATED_UID_BASE,
    ISOLATED_UID_RANGE,
    MARKER_VAR,
    POLL_SECONDS,
    IsolationError,
    Limits,
    ProcessTree,
    become_subreaper,
    cgroup_reason,
    child_setup,
    exit_reason,
    over_limit,
    process_table,
)
from cellarena.server.bots.python_view import PythonView, covers, exposure, passable
from cellarena.server.bots.reaper import Reaper
from cellarena.server.bots.spawn import Child, spawn

#: What a sandboxed build sees of the environment: nothing of cellarena's own but these...
KEPT_VARIABLES = ("LANG", "LC_ALL", "TZ")
#: ...and the system's toolchains (Debian's, as .ci/run installs them), not those of a user's PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The log's last words when it was cut.
_CUT = "\n[cellarena: build log cut at {kib} KiB; the rest was dropped]\n"
#: What a tool says when it finds no network: the build tried to reach it.
_OFFLINE_SIGNS = (
    "network is unreachable",
    "temporary failure in name resolution",
    "could not resolve host",
    "name or service not known",
    "failed to resolve",
)


@dataclass(frozen=True)
class SandboxLimits:
    """What one build may use. The defaults fit a bot from `cellarena new-bot` in any language with
    room to spare on a small host (a C++ starter builds in about 15 s and 300 MiB)."""

    #: Wall time of the whole build, in seconds.
    seconds: float = 300.0
    #: CPU time of all its processes together, in seconds.
    cpu_seconds: float = 600.0
    #: Resident memory of all its processes together, in MiB.
    memory_mb: int = 2048
    #: Processes at once (compilers fork: a make -j2 of C++ uses about 10).
    processes: int = 128
    #: The largest file it may write, in MiB (RLIMIT_FSIZE).
    file_mb: int = 256
    #: The folder it builds in, in MiB, all files together (checked while it runs).
    disk_mb: int = 1024
    #: Its /tmp and HOME, a tmpfs of this size in MiB (it counts towards its memory too).
    tmp_mb: int = 256
    #: Bytes of its output kept in its log.
    log_bytes: int = 256 * 1024

    def bot_limits(self) -> Limits:
        return Limits(memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds, processes=self.processes)


@dataclass(frozen=True)
class SandboxRun:
    """How a sandboxed command ended: its exit status (None: killed here), its log, how long it took,
    and why it was stopped or failed, for a person (None: it succeeded)."""

    returncode: int | None
    log: str
    seconds: float
    reason: str | None


def check_sandbox() -> None:
    """`IsolationError` when builds cannot be confined here (no bubblewrap, or as root no setpriv)."""
    missing = [tool for tool in ("bwrap", "setpriv") if shutil.which(tool) is None]
    if "bwrap" in missing or (os.geteuid() == 0 and missing):
        raise IsolationError(
            f"builds run under bubblewrap (and as root, setpriv), and {' and '.join(missing)} is not "
            "installed (apt-get install bubblewrap util-linux); docs/security.md says what confines a build"
        )


def sandbox_argv(
    argv: list[str],
    folder: Path,
    limits: SandboxLimits,
    *,
    uid: int | None = None,
    hidden: tuple[Path, ...] = (),
    view: PythonView | None = None,
) -> list[str]:
    """bubblewrap's command line around ``argv``, run in ``folder`` (see the module's docstring).

    As root (``uid`` given), bubblewrap runs as root, so that it can bind what only root may reach
    (cellarena's interpreter in a private home, `cellarena.server.bots.python_view`), and the command
    is started as ``uid`` with no capability left (setpriv); otherwise bubblewrap runs as this user."""
    expose = list(view.expose) if view is not None else []
    hidden = tuple(hidden) + (view.hidden if view is not None else ())
    # The folder is bound writable below, after what covers it (a hidden or private folder, /tmp),
    # through folders made passable: bubblewrap would make them private to root.
    over = [*covers([*expose, folder], hidden), Path("/tmp")]
    cover = next((c for c in reversed(over) if folder.is_relative_to(c)), None)
    above = passable(folder, cover) if cover is not None else []
    drop = ["--cap-drop", "ALL"] if uid is None else []
    user = [] if uid is None else [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--",
    ]  # fmt: skip
    return [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        *exposure([*expose, folder], hidden), *(view.args if view is not None else ()),
        "--size", str(limits.tmp_mb * 2**20), "--tmpfs", "/tmp", "--chmod", "1777", "/tmp",
        *above, "--bind", str(folder), str(folder),
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
        "--die-with-parent", *drop, "--chdir", str(folder),
        "--", *user, *argv,
    ]  # fmt: skip


def _isolated_uid() -> int | None:
    """A user of the build's own when cellarena runs as root, else None (bubblewrap maps the caller)."""
    if os.geteuid() != 0:
        return None
    return ISOLATED_UID_BASE + secrets.randbelow(ISOLATED_UID_RANGE)


def _give(folder: Path, uid: int) -> None:
    """Give ``folder`` and what it holds to ``uid`` (symbolic links themselves, never their targets)."""
    os.chown(folder, uid, uid, follow_symlinks=False)
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def _settle(folder: Path) -> None:
    """What the build made is cellarena's again, readable by every user (the bot runs as another
    one) and writable by none but cellarena: a version does not change once built."""
    me = os.geteuid()
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files, ""]:
            path = os.path.join(root, name) if name else root
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    continue
                os.chown(path, me, -1)
                executable = stat.S_ISDIR(info.st_mode) or info.st_mode & stat.S_IXUSR
                os.chmod(path, 0o755 if executable else 0o644)


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder`` (not following links)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


async def run_sandboxed(
    argv: list[str],
    folder: Path,
    limits: SandboxLimits,
    *,
    env: dict[str, str] | None = None,
    hidden: tuple[Path, ...] = (),
    view: PythonView | None = None,
) -> SandboxRun:
    """Run ``argv`` in ``folder`` under the build's confinement; never raises for what the command or
    the folder does (`IsolationError` when this host cannot confine a build at all)."""
    check_sandbox()
    become_subreaper()
    folder = folder.resolve()
    marker = secrets.token_hex(8)
    uid = _isolated_uid()
    if uid is not None:
        try:
            await trio.to_thread.run_sync(_give, folder, uid)
        except OSError as exc:
            return SandboxRun(None, "", 0.0, f"the build's folder cannot be given to its user: {exc}")
    group = BotCgroup.make(marker)
    if group is not None:
        group.limit(limits.memory_mb, limits.processes)
    join = group.join_descriptors() if group is not None else []
    child_env = {k: os.environ[k] for k in KEPT_VARIABLES if k in os.environ}
    child_env.update(env or {})
    child_env.update({MARKER_VAR: marker, "HOME": "/tmp", "TMPDIR": "/tmp", "PATH": SYSTEM_PATH})
    # bubblewrap itself runs as this user (root binds first, then drops to ``uid``): RLIMIT_NPROC,
    # which counts a user's processes, would mean nothing; the cgroup or the polling count them.
    setup = child_setup(
        limits.bot_limits(),
        uid=None,
        nproc=False,
        join_fds=join,
        new_network=False,
        file_bytes=limits.file_mb * 2**20,
    )
    started = trio.current_time()
    try:
        Reaper.add(marker, None, marker, group)  # before it runs: see `start_bot`
        proc = await spawn(
            sandbox_argv(argv, folder, limits, uid=uid, hidden=hidden, view=view),
            stdin=subprocess.DEVNULL,
            env=child_env,
            cwd=str(folder),
            preexec_fn=setup,
        )
    except OSError as exc:
        with contextlib.suppress(OSError):
            Reaper.done(marker)
        if group is not None:
            group.remove()
        return SandboxRun(None, "", 0.0, f"the build could not start: {exc}")
    finally:
        for fd in join:
            with contextlib.suppress(OSError):
                os.close(fd)
    Reaper.add(marker, proc.pid, marker, group)
    code, log, stopped = await _supervise(proc, ProcessTree(proc.pid, marker), group, folder, limits)
    Reaper.done(marker)
    await trio.to_thread.run_sync(_settle, folder)
    why = stopped or _reason(code, limits, limits.bot_limits(), log)
    return SandboxRun(code, log, trio.current_time() - started, why)


async def _supervise(
    proc: Child, tree: ProcessTree, group: BotCgroup | None, folder: Path, limits: SandboxLimits
) -> tuple[int | None, str, str | None]:
    """Keep its log, watch it until it ends or goes over a limit or its time, then kill whatever it
    left: its exit status, its log, and the limit that stopped it (None if none did)."""
    log = bytearray()
    stopped: list[str] = []
    code: int | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_log, proc.stdout, log, limits.log_bytes)

            async def watch() -> None:
                with trio.move_on_after(limits.seconds):
                    why = await _watch(proc.pid, tree, group, folder, limits)
                    if why is not None:
                        stopped.append(why)
                        await trio.to_thread.run_sync(_stop, proc.pid, group, tree)
                    return
                stopped.append(f"time limit exceeded ({limits.seconds:g} s of wall time)")
                await trio.to_thread.run_sync(_stop, proc.pid, group, tree)

            nursery.start_soon(watch)
            code = await proc.wait()
            nursery.cancel_scope.deadline = trio.current_time() + 2.0  # the log's last words
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_stop, proc.pid, group, tree)
            if group is not None:
                # The kernel may have held it to a limit between two looks (a refused fork).
                stopped.append(cgroup_reason(group, limits.bot_limits()) or "")
                group.remove()
    return code, log.decode("utf-8", "replace"), next((w for w in stopped if w), None)


async def _watch(
    pid: int, tree: ProcessTree, group: BotCgroup | None, folder: Path, limits: SandboxLimits
) -> str | None:
    """Until the build ends, look at it every `POLL_SECONDS`: the limit it went over, or None."""
    bot = limits.bot_limits()
    while True:
        await trio.sleep(POLL_SECONDS)
        table = await trio.to_thread.run_sync(process_table)
        if pid not in table:
            return None
        rss, cpu, count = tree.usage(table)
        if group is not None:
            cpu = group.cpu_seconds() or cpu
            count = max(count, len(group.pids()))
        why = over_limit(bot, rss, cpu, count) or cgroup_reason(group, bot)
        if why is None and await trio.to_thread.run_sync(folder_bytes, folder) > limits.disk_mb * 2**20:
            why = f"disk limit exceeded ({limits.disk_mb} MiB in the build's folder)"
        if why is not None:
            return why


def _stop(pid: int, group: BotCgroup | None, tree: ProcessTree) -> None:
    """Kill the build, everything it started with it. Blocking: run in a thread or at once."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if group is not None:
        group.kill()
    tree.kill()


async def _keep_log(output: trio.abc.ReceiveStream | None, log: bytearray, limit: int) -> None:
    """Keep the build's output up to ``limit`` bytes; read and drop the rest so it never blocks."""
    if output is None:
        return
    cut = False
    async for chunk in output:
        room = limit - len(log)
        if room > 0:
            log += chunk[:room]
        elif not cut:
            cut = True
            log += _CUT.format(kib=limit // 1024).encode()


def _reason(code: int | None, limits: SandboxLimits, bot: Limits, log: str) -> str | None:
    """Why a build that ended by itself failed, for a person; None when it succeeded."""
    if code == 0:
        return None
    # A shell's, or bubblewrap's, child ended by a signal exits with 128 plus its number.
    sig = None
    if code is not None and code < 0:
        sig = -code
    elif code is not None and code > 128:
        sig = code - 128
    if sig == signal.SIGXFSZ:
        return f"file size limit exceeded ({limits.file_mb} MiB per file)"
    why = exit_reason(None if sig is None else -sig, bot)
    if why is not None:
        return why
    lower = log.lower()
    if "no space left on device" in lower or "disk quota exceeded" in lower:
        return f"disk limit exceeded (its /tmp holds {limits.tmp_mb} MiB)"
    if any(sign in lower for sign in _OFFLINE_SIGNS):
        return "it tried to reach the network: builds run offline (Debian's toolchains and crates only)"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"it was killed by {signal.Signals(-code).name}"
    return f"it failed with exit status {code}"
