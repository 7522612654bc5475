"""Servers and bots as separate processes, for tests of clients that keep playing: `cellarena serve`
and `cellarena ladder serve` on a free port, bots with their output in files (a pipe nobody reads
would fill up and stall a bot that plays for long), and the port a server prints when it listens."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio
from cellarena_cli import CLI, ROOT, run_here

#: Short, quick matches: each takes about a second.
PACING = ["--max-ticks", "30", "--tick-rate", "30", "--budget-ms", "25"]
#: Servers step Rezzo's worlds with numpy unless a test asks for numba (``numba=True``): as a ladder
#: installed as docs/ladder.md says (`.[web]`, without the `rl` extra's numba) serves, and a server
#: starts without loading numba's compiled batches (0.8 s of CPU a start, in some 60 starts a run).
#: The tests of served batches, worker processes and budgets over TCP ask for numba. The ladder
#: tests that start their processes otherwise (test_ladder_games, _cli, _up, _community_processes,
#: the doc walk) give this environment too.
WITHOUT_NUMBA = {"CELLARENA_NO_NUMBA": "1"}


@dataclass
class Process:
    """A process whose stdout and stderr go to files."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then the exit status (SIGKILL after ``timeout``, and an assertion)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.proc.args} did not stop on SIGTERM; stderr:\n{self.stderr()}"
            ) from None

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.proc.args} did not exit; stderr:\n{self.stderr()}") from None


def start(
    command: list[str], folder: Path, label: str, *, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> Process:
    """``command`` started with its output in ``folder``/``label``.out and .err, without CELLARENA_*
    variables but those in ``env`` (a bot gets everything else from its flags)."""
    folder.mkdir(parents=True, exist_ok=True)
    out, err = folder / f"{label}.out", folder / f"{label}.err"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CELLARENA_")}, **(env or {})}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(command, cwd=cwd, stdout=stdout, stderr=stderr, env=env)
    return Process(proc, out, err)


@dataclass
class Server(Process):
    port: int = 0


def start_server(
    args: list[str], folder: Path, label: str, timeout: float = 120, *, numba: bool = False
) -> Server:
    """`cellarena ARGS` (a serve command with ``--port``), once it says where it listens; Rezzo's
    worlds stepped by numba only with ``numba`` (`WITHOUT_NUMBA`)."""
    started = start([*CLI, *args], folder, label, env=None if numba else WITHOUT_NUMBA)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := re.search(r"on 127\.0\.0\.1:(\d+)", started.stderr()):
            return Server(started.proc, started.out, started.err, int(found.group(1)))
        if started.proc.poll() is not None:
            break
        time.sleep(0.05)
    started.stop()
    raise AssertionError(f"`cellarena {' '.join(args)}` did not start:\n{started.stderr()}")


def serve(folder: Path, *extra: str, port: int = 0, numba: bool = False) -> Server:
    """`cellarena serve rezzo` with quick matches."""
    return start_server(
        ["serve", "rezzo", "--port", str(port), *PACING, *extra], folder, "serve", numba=numba
    )


def ladder_serve(
    folder: Path, *extra: str, port: int = 0, label: str = "ladder", numba: bool = False
) -> Server:
    """`cellarena ladder serve rezzo` in ``folder`` with quick matches and no grace."""
    args = ["ladder", "--dir", str(folder), "serve", "rezzo", "--port", str(port), *PACING, "--grace", "0"]
    return start_server([*args, *extra], folder, label, numba=numba)


def add_ladder_bot(folder: Path, name: str) -> Path:
    """Register ``name`` on the ladder in ``folder``; its token is written to a file, whose path is
    returned (`--token-file`, so that no token sits on a command line). In this process (click's
    runner): a `cellarena` process would cost a second of imports for a row in the ladder's store."""
    added = run_here("ladder", "--dir", str(folder), "bot", "add", name, "--game", "rezzo")
    assert added.returncode == 0, added.stderr
    path = folder / f"{name}.token"
    path.write_text(added.stdout)
    path.chmod(0o600)
    return path


def ladder_matches(folder: Path, status: str | None = None) -> list[tuple[str, str | None, str | None]]:
    """The status, reason and replay of each match of the ladder in ``folder`` (of one ``status``),
    read from its SQLite file while it serves."""
    with contextlib.closing(sqlite3.connect(folder / "ladder.sqlite")) as db:
        rows = db.execute("SELECT status, reason, replay FROM matches ORDER BY id").fetchall()
    return [row for row in rows if status is None or row[0] == status]


def wait_for(predicate: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``predicate()`` every 0.1 s until it is true; an assertion naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def processes_in(folder: Path) -> list[int]:
    """Processes whose working folder is ``folder`` or under it: what a bot or a build left running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(folder):
                found.append(int(pid))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


JS_BOT = ROOT / "example_bots" / "rezzo" / "js_random"


def js_bot_folder() -> Path:
    """The JavaScript example bot's folder with its pinned dependencies installed: `npm ci` when they
    are missing or stale, so that no test depends on another having run first (a clean clone has no
    node_modules)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise AssertionError("the JavaScript example bot needs node and npm (apt-get install nodejs npm)")
    wanted = json.loads((JS_BOT / "package.json").read_text())["dependencies"]
    installed = JS_BOT / "node_modules"

    def up_to_date() -> bool:
        for name, version in wanted.items():
            meta = installed / name / "package.json"
            if not meta.is_file() or json.loads(meta.read_text()).get("version") != version:
                return False
        return True

    # One npm ci at a time: test processes running side by side (pytest-xdist) share the folder.
    with (JS_BOT / "package.json").open("rb") as lock:  # a lock on a file already there
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not up_to_date():
            npm_ci = ["npm", "ci", "--no-audit", "--no-fund"]
            subprocess.run(npm_ci, cwd=JS_BOT, check=True, capture_output=True, timeout=300)
            assert up_to_date(), "npm ci did not install the pinned dependencies"
    return JS_BOT


async def exited(proc: Process, timeout: float, why: Callable[[], str] = str) -> int:
    """Wait without blocking trio (a server or proxy in this process serves the bot meanwhile). A bot
    still running at ``timeout`` fails the test with its stderr and ``why()`` (what the server saw)."""
    with trio.move_on_after(timeout):
        while proc.proc.poll() is None:
            await trio.sleep(0.05)
        return proc.proc.returncode
    raise AssertionError(
        f"the bot still ran after {timeout} s{why()}; {_process_state(proc.proc.pid)}; its stderr:\n"
        f"{proc.stderr()[-4000:]}"
    )


def _process_state(pid: int) -> str:
    """What the kernel says of a process that should have ended: its state, where it sleeps, its
    open files (a stopped process, a read on a pipe that never ends, a socket left open)."""
    root = Path(f"/proc/{pid}")
    try:
        state = next(line for line in (root / "status").read_text().splitlines() if line.startswith("State:"))
        wchan = (root / "wchan").read_text()
        fds = []
        for fd in (root / "fd").iterdir():
            with contextlib.suppress(OSError):  # one closed meanwhile
                fds.append(os.readlink(fd))
    except (OSError, StopIteration) as exc:
        return f"no state read ({exc})"
    return f"{state}, waiting in {wchan or '-'}, open: {', '.join(sorted(fds))}"
