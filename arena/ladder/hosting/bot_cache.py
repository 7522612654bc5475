"""Built submitted bots where matches run: a cache by the archive's content hash (docs/ladder.md,
"How submitted bots are built and run").

A worker process or a cluster's worker that plays a match with a submitted bot gets the version's
archive with the match (`seat_launch.SeatLaunch`), and needs it unpacked and built on its own
machine. `BotCache.prepare` returns the built folder of an archive, kept under ``root/SHA-256``:
built once, into a temporary folder beside it, then renamed into place, so a folder under that name
is always whole; a lock file per hash makes a second process (or task) that wants the same archive
wait for the first one's build and take its result. A build that fails leaves nothing behind (the
next match tries again) and raises `PrepareError` with the cause: it costs that match, not the worker.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from cellarena.arena.ladder.submissions.archives import digest_of
from cellarena.arena.ladder.submissions.build import BuildLimits, BuildResult, build
from cellarena.arena.ladder.submissions.unpack import UnpackError, UnpackLimits, unpack

#: How often a task waiting for another's build of the same archive looks at its lock.
LOCK_POLL = 0.1
#: A build's maker: (the unpacked folder, its limits, the version's label, the bot's name) -> result.
Builds = Callable[[Path, BuildLimits, str, str], Awaitable[BuildResult]]


class PrepareError(RuntimeError):
    """A submitted bot cannot be made ready here; the message is the cause, for its match's log."""


def program_folder(entry: Path) -> Path | None:
    """The folder with the bot.toml in an unpacked archive (the archive's one top folder, or the
    folder itself); None if there is none."""
    if (entry / "bot.toml").is_file():
        return entry
    found = [p for p in sorted(entry.glob("*/bot.toml")) if p.is_file()]
    return found[0].parent if len(found) == 1 else None


class BotCache:
    """Built archives under ``root``, one folder per content hash (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        hidden: tuple[Path, ...] = (),
        unpack_limits: UnpackLimits | None = None,
        builds: Builds | None = None,
    ) -> None:
        self.root = root
        #: Out of a build's sight: the cache's other entries, and ``hidden`` (the ladder's folder).
        self.hidden = (root, *hidden)
        self.unpack_limits = unpack_limits
        #: How an unpacked archive is built (`build`, confined and offline, unless a test says).
        self.builds = builds

    def entry(self, sha256: str) -> Path:
        return self.root / sha256

    async def prepare(
        self, sha256: str, kind: str, archive: bytes, limits: BuildLimits, *, version: str, name: str
    ) -> Path:
        """The program folder of ``archive`` built, from the cache or built now; `PrepareError` says
        why it cannot be (an archive whose bytes are not ``sha256``, one that cannot be unpacked, a
        failed build)."""
        if len(sha256) != 64 or digest_of(archive) != sha256:
            raise PrepareError(f"the archive that came with the match is not {sha256[:12]}...: it changed")
        found = self._built(sha256)
        if found is not None:
            return found
        await trio.to_thread.run_sync(lambda: self.root.mkdir(parents=True, exist_ok=True))
        with open(self.root / f".{sha256}.lock", "wb") as lock:
            while not _try_lock(lock.fileno()):
                await trio.sleep(LOCK_POLL)  # another process or task builds it: take its result
            found = self._built(sha256)
            if found is not None:
                return found
            return await self._fill(sha256, kind, archive, limits, version=version, name=name)

    def _built(self, sha256: str) -> Path | None:
        entry = self.entry(sha256)
        return program_folder(entry) if entry.is_dir() else None

    async def _fill(
        self, sha256: str, kind: str, archive: bytes, limits: BuildLimits, *, version: str, name: str
    ) -> Path:
        """Unpack and build into a temporary folder, then rename it to the hash (under the lock)."""
        for stale in self.root.glob(f".{sha256}.build-*"):  # a process killed mid-build left it
            await trio.to_thread.run_sync(shutil.rmtree, stale, True)
        temporary = self.root / f".{sha256}.build-{uuid.uuid4().hex[:8]}"
        try:
            try:
                unpacked = await trio.to_thread.run_sync(unpack, archive, kind, temporary, self.unpack_limits)
            except (UnpackError, OSError) as exc:
                raise PrepareError(f"its archive cannot be unpacked here: {exc}") from None
            if self.builds is not None:
                built = await self.builds(unpacked.folder, limits, version, name)
            else:
                built = await build(unpacked.folder, limits, version=version, hidden=self.hidden, name=name)
            if not built.ok:
                raise PrepareError(f"its build failed here: {built.reason}")
            os.rename(temporary, self.entry(sha256))
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, temporary, True)
            raise
        found = self._built(sha256)
        if found is None:
            raise PrepareError("its archive holds no bot.toml")
        return found


def _try_lock(fd: int) -> bool:
    """Take the lock on ``fd`` if it is free (released when the file is closed, or the process dies)."""
    with contextlib.suppress(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    return False
