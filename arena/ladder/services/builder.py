"""The ladder's builder: one ``received`` version at a time, from its stored archive to ``validated``
(live at once, `VersionTable.mark`) or ``failed`` (docs/ladder.md, "How submitted bots are built and
run").

`Builder.build_next` takes the oldest received version (`VersionTable.next_to_build`, which moves it
to ``building``), reads its archive back from the content-addressed store (checked against its
digest), unpacks it afresh into the version's own folder under the ladder's folder, and checks it
(`cellarena.arena.ladder.services.submitted.check_version`), each ended stage written to the store with
its reason and log. A version whose archive cannot be read or unpacked fails with that reason.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import trio

from cellarena.arena.ladder.services.submitted import FAILED, VALIDATED, Verdict, VersionCheck, check_version
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore, ArchiveStoreError
from cellarena.arena.ladder.submissions.build import BuildResult
from cellarena.arena.ladder.submissions.unpack import UnpackError, UnpackLimits, unpack
from cellarena.arena.ladder.submissions.validate import private_log
from cellarena.arena.ladder.submissions.versions import Version, VersionState


@dataclass
class Builder:
    """Builds a game's submitted versions (``check.game``) into ``folder``/BOT/NUMBER."""

    store: LadderStore
    archives: ArchiveStore
    folder: Path
    check: VersionCheck
    unpack_limits: UnpackLimits | None = None
    #: The version of the turn under way (or the last), for a caller that must fail it (`builds`).
    current: Version | None = None

    def version_folder(self, version: Version) -> Path:
        """Where a version is unpacked and built (a rebuild starts from a fresh copy there)."""
        return self.folder / version.bot / str(version.number)

    async def build_next(self) -> tuple[Version, Verdict | None] | None:
        """Build and validate the oldest received version of the game: it, and its verdict (None when
        its archive could not be read or unpacked); None when no version waits."""
        version = await trio.to_thread.run_sync(self.store.versions.next_to_build, [self.check.game])
        if version is None:
            return None
        self.current = version

        async def mark(state: str, reason: str | None, log: str) -> None:
            await trio.to_thread.run_sync(
                lambda: self.store.versions.mark(
                    version.id, _state(state), reason=reason, log_text=log, go_live=True
                )
            )

        try:
            unpacked = await self._unpack(version, self.version_folder(version))
        except _UNPACK_ERRORS as exc:
            await mark(FAILED, _unpack_failed(exc), "")
            return version, None
        verdict = await check_version(unpacked, f"v{version.number}", self.check, mark, name=version.bot)
        return version, verdict

    async def rebuild(self, version: Version) -> Verdict:
        """Build and validate ``version`` (a live one) again from its archive, after the host upgraded
        the SDK or a toolchain: beside the folder it plays from, so that it plays on meanwhile. Passed,
        the new build takes that folder's place (a rename: a match under way keeps its files);
        failed, the folder stays as it was. Its state in the store is not touched: the caller pauses
        a bot whose rebuild failed. The match's (or the build's) log is ``rebuild-vN``, private."""
        target = self.version_folder(version)
        fresh = target.with_name(f".{version.number}.rebuild")
        label = f"rebuild-v{version.number}"
        try:
            unpacked = await self._unpack(version, fresh)
        except _UNPACK_ERRORS as exc:
            why = _unpack_failed(exc)
            return Verdict(FAILED, why, BuildResult(False, "", 0.0, why))
        verdict = await check_version(
            unpacked, f"v{version.number}", self.check, name=version.bot, log_name=label
        )
        if verdict.state != VALIDATED:
            if verdict.validation is None:  # the build failed: its log is the one to keep
                kept = private_log(self.check.log_root, version.bot, label)
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(verdict.built.log, encoding="utf-8")
            await trio.to_thread.run_sync(lambda: shutil.rmtree(fresh, ignore_errors=True))
            return verdict
        await trio.to_thread.run_sync(_swap, fresh, target)
        return verdict

    async def _unpack(self, version: Version, folder: Path) -> Path:
        """Read ``version``'s archive back (checked against its digest) and unpack it afresh into
        ``folder``: the unpacked bot's folder. Raises one of `_UNPACK_ERRORS`."""
        data = await trio.to_thread.run_sync(self.archives.read, version.sha256, version.kind)
        await trio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
        folder.parent.mkdir(parents=True, exist_ok=True)
        unpacked = await trio.to_thread.run_sync(unpack, data, version.kind, folder, self.unpack_limits)
        return unpacked.folder


#: What `Builder._unpack` raises for an archive that cannot be read back or unpacked.
_UNPACK_ERRORS = (ArchiveStoreError, UnpackError, OSError)


def _unpack_failed(exc: Exception) -> str:
    """The reason a version whose archive cannot be unpacked fails with."""
    return f"its archive cannot be unpacked: {exc}"


def _swap(fresh: Path, target: Path) -> None:
    """Put the folder ``fresh`` in ``target``'s place, the old one out of the way, then removed."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _state(state: str) -> VersionState:
    """A state `check_version` tells, as the store's type (the store checks the move itself)."""
    states: dict[str, VersionState] = {
        "validating": "validating",
        "validated": "validated",
        "failed": "failed",
    }
    return states[state]
