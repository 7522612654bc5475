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

from cellarena.arena.ladder.services.submitted import FAILED, Verdict, VersionCheck, check_version
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore, ArchiveStoreError
from cellarena.arena.ladder.submissions.unpack import UnpackError, UnpackLimits, unpack
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

        target = self.version_folder(version)
        try:
            data = await trio.to_thread.run_sync(self.archives.read, version.sha256, version.kind)
            await trio.to_thread.run_sync(lambda: shutil.rmtree(target, ignore_errors=True))
            target.parent.mkdir(parents=True, exist_ok=True)
            unpacked = await trio.to_thread.run_sync(unpack, data, version.kind, target, self.unpack_limits)
        except (ArchiveStoreError, UnpackError, OSError) as exc:
            await mark(FAILED, f"its archive cannot be unpacked: {exc}", "")
            return version, None
        verdict = await check_version(
            unpacked.folder, f"v{version.number}", self.check, mark, name=version.bot
        )
        return version, verdict


def _state(state: str) -> VersionState:
    """A state `check_version` tells, as the store's type (the store checks the move itself)."""
    states: dict[str, VersionState] = {
        "validating": "validating",
        "validated": "validated",
        "failed": "failed",
    }
    return states[state]
