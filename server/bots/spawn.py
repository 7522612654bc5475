"""Starting a bot's process, and waiting for it, from trio.

Why not `trio.lowlevel.open_process`: it forks in one of trio's worker threads, which end after
10 s without work, and the kernel's parent-death signal (PR_SET_PDEATHSIG, which the launcher asks
for so that no bot outlives a killed cellarena) fires when the *thread* that forked the child ends,
not its process. So every bot is forked by one thread that lives as long as cellarena, and waited
for through a pidfd.
"""

from __future__ import annotations

import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import trio

_spawner: list[ThreadPoolExecutor] = []  # made at the first start
_spawner_lock = threading.Lock()


def _thread() -> ThreadPoolExecutor:
    """The one forking thread (an executor's worker waits for work as long as the process lives)."""
    with _spawner_lock:
        if not _spawner:
            _spawner.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="cellarena-spawn"))
        return _spawner[0]


class Child:
    """A started process: its output as a trio stream, and its exit awaited without a thread."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout: trio.abc.ReceiveStream | None = None
        if popen.stdout is not None:
            self.stdout = trio.lowlevel.FdStream(os.dup(popen.stdout.fileno()))
            popen.stdout.close()
        try:
            self._pidfd: int | None = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):  # before Linux 5.3: poll instead
            self._pidfd = None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        """Its exit status (negative: the signal that ended it), once it has exited."""
        while self._popen.poll() is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                await trio.sleep(0.05)
        self._close_pidfd()
        assert self._popen.returncode is not None
        return self._popen.returncode

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            trio.lowlevel.notify_closing(fd)
            os.close(fd)


async def spawn(argv: list[str], **popen_kwargs: Any) -> Child:
    """Start ``argv`` in a session of its own, its output (stdout and stderr) piped, forked by the
    one spawning thread; ``popen_kwargs`` go to `subprocess.Popen`."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, **popen_kwargs
        )

    # A cancelled start starts nothing; once asked for, the process is returned whatever happens
    # meanwhile, so that the caller owns it and can stop it (a cancellation between the two would
    # leave a process that nobody knows of running).
    await trio.lowlevel.checkpoint_if_cancelled()
    future = _thread().submit(start)
    try:
        with trio.CancelScope(shield=True):  # a fork and an exec: moments
            popen = await trio.to_thread.run_sync(future.result)
    except subprocess.SubprocessError as exc:  # a step before exec failed (`preexec_fn`)
        raise OSError(f"could not set the process up: {exc}") from None
    return Child(popen)
