"""Running the `cellarena` command from tests: as a child process, as a user runs it (real bots,
signals, exit codes), or in this process through click's runner (quicker, for output and usage
errors)."""

from __future__ import annotations

import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click
from click.testing import CliRunner, Result

from cellarena.arena.cli import main

ROOT = Path(__file__).resolve().parent.parent
#: `cellarena` run by the interpreter running the tests, so no venv's bin/ need be on PATH.
CLI = [sys.executable, "-c", "from cellarena.arena.cli import main; main()"]
#: A Rezzo move's budget that a busy machine meets, for a test over TCP that checks a result, not the
#: clock (the realtime tests time the budget): Rezzo's default, a tick less 3 ms, was missed beside
#: three other test processes, and a late move plays none, which changes the match. With --fast a tick
#: waits only for the answers, so it costs nothing.
CLOCK_FREE = ("--budget-ms", "2000")


def project_copy(dest: Path) -> Path:
    """A copy of the project as a clean clone of this change holds it (tracked files, plus new ones
    git does not ignore) in ``dest``, to build a wheel or a plain install from; ``dest``."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for rel in out.splitlines():
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def cellarena(*args: str, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    """`cellarena ARGS` to the end, from the checkout; its output is captured, its exit code not checked."""
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False, **kw
    )


def start_cellarena(*args: str, **kw: Any) -> subprocess.Popen[str]:
    """`cellarena ARGS` started and left running (to signal or kill it); output piped unless ``kw`` says."""
    options: dict[str, Any] = {
        "cwd": ROOT,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "text": True,
    }
    return subprocess.Popen([*CLI, *args], **{**options, **kw})


@dataclass
class Served:
    """A `cellarena` command that serves (`served`): its address, its process and what it logged."""

    url: str
    proc: subprocess.Popen[str]
    err: IO[str]
    #: Its whole stderr, kept when it has ended and its file is closed.
    final: str | None = None

    def stderr(self) -> str:
        """Everything it wrote to stderr so far (all of it, once `served` is left)."""
        if self.final is not None:
            return self.final
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def tail(self) -> str:
        return last_lines(self.stderr())


def last_lines(log: str, lines: int = 30) -> str:
    """The last ``lines`` lines of a process's ``log``, for a failure's message."""
    return "\n".join(log.splitlines()[-lines:]) or "(nothing)"


#: Seconds a served command may take to print its address (a second or two on a quiet machine).
START_WITHIN = 120


def line_within(stream: IO[str] | None, within: float = START_WITHIN, what: str = "a line") -> str:
    """``stream.readline()`` (a child's output) under a deadline: the line ("" at its end), or an
    AssertionError naming ``what`` after ``within`` seconds, where a bare readline would wait for
    good on a child that hangs. The read runs in a thread of its own rather than after a select() on
    the pipe: a text stream holds lines it has read ahead, which a select() on its file does not see."""
    assert stream is not None
    read: queue.Queue[str] = queue.Queue(maxsize=1)
    threading.Thread(target=lambda: read.put(stream.readline()), daemon=True).start()
    try:
        return read.get(timeout=within)
    except queue.Empty:
        raise AssertionError(f"no {what} in {within:g} s") from None


@contextmanager
def served(*args: str, url: re.Pattern[str]) -> Iterator[Served]:
    """`cellarena ARGS` started for real, once it has printed the address ``url`` finds (group 1);
    stopped when left.

    Its stderr goes to a file, not a pipe: a pipe no one reads fills and stops a server that logs
    (a relay's warnings, a ladder's mails). A test failing inside the block gets the server's state
    and last lines as a note: a page that stopped loading says why only there."""
    with tempfile.TemporaryFile("w+") as err:
        proc = start_cellarena(*args, stderr=err)
        found = Served("", proc, err)
        try:
            line = line_within(proc.stdout, START_WITHIN, f"address from `cellarena {' '.join(args)}`")
            address = url.search(line)
            if not address:
                proc.kill()
                proc.wait(timeout=10)
                raise AssertionError(f"cellarena {' '.join(args)} printed no address: {line!r}")
            found.url = address.group(1)
            yield found
        except BaseException as exc:
            state = "running" if proc.poll() is None else f"ended with {proc.returncode}"
            exc.add_note(f"`cellarena {' '.join(args)}` is {state}; its stderr's last lines:\n{found.tail()}")
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            found.final = found.stderr()


def here(*args: str, env: dict[str, str] | None = None, command: click.Command = main) -> Result:
    """`cellarena ARGS` (or ``command``, e.g. a game's bench command) in this process, through click's
    runner, with ``env`` over the environment: the run every helper below shapes for its callers."""
    return CliRunner().invoke(command, list(args), env=env)


def invoke(*args: str, command: click.Command = main) -> tuple[int, str]:
    """``command`` (all of `cellarena` unless given) in this process: its exit code and output."""
    result = here(*args, command=command)
    return result.exit_code, result.output


def run_here(
    *args: str, env: dict[str, str] | None = None, command: click.Command = main
) -> subprocess.CompletedProcess[str]:
    """`cellarena ARGS` in this process, shaped as `cellarena` returns it: the exit code, stdout and
    stderr apart (an exception that escaped the command is in stderr as the traceback a process
    prints). For a command whose output is what a test checks, where a process adds a second.
    ``env`` goes over the environment while it runs: the processes it starts (bots) inherit it. A
    `tournament` too: its pool's fork server starts once per test process and plays the matches in
    processes of its own. What the command logs goes to pytest's capture, not to ``stderr``."""
    result = here(*args, env=env, command=command)
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exc_info[1], SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))  # starts "Traceback ..."
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def refused(*args: str, command: click.Command = main) -> Result:
    """`cellarena ARGS` in this process, refused as a usage error (exit status 2): its ``stderr`` says
    why. For a refusal of the arguments, where a child process would only add a second of imports."""
    result = here(*args, command=command)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    return result
