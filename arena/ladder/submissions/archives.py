"""The content-addressed archive store: each uploaded archive once, under its SHA-256, in the ladder's
folder (``archives/ab/abcd....tar.gz``), written atomically and never changed or removed while a
version names it (versions are kept, so archives are too)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

#: The archive kinds taken, by the suffix they are kept under.
KINDS = ("tar.gz", "zip")

_DIGEST = re.compile(r"[0-9a-f]{64}")


class ArchiveStoreError(OSError):
    """The archive store cannot write or find an archive; the message names the file."""


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ArchiveStore:
    """Archives by content under ``folder`` (created on the first write)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, sha256: str, kind: str) -> Path:
        """Where the archive of that digest and kind is kept (whether it is there or not)."""
        if not _DIGEST.fullmatch(sha256) or kind not in KINDS:
            raise ValueError(f"not an archive's name: {sha256[:70]!r}.{kind[:10]}")
        return self.folder / sha256[:2] / f"{sha256}.{kind}"

    def put(self, data: bytes, kind: str) -> str:
        """Keep ``data`` (once: the same bytes are one file); its SHA-256. Written to a temporary file
        in the same folder, synced, then renamed into place, so a reader sees all of it or nothing."""
        sha256 = digest_of(data)
        target = self.path(sha256, kind)
        if target.is_file() and target.stat().st_size == len(data):
            return sha256
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(temporary, 0o444)
                os.replace(temporary, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            raise ArchiveStoreError(f"{target}: cannot keep the archive ({exc.strerror or exc})") from None
        return sha256

    def read(self, sha256: str, kind: str) -> bytes:
        """The archive's bytes, checked against its digest (a file changed on disk is refused)."""
        target = self.path(sha256, kind)
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise ArchiveStoreError(f"{target}: cannot read the archive ({exc.strerror or exc})") from None
        if digest_of(data) != sha256:
            raise ArchiveStoreError(f"{target}: the archive's bytes no longer match its SHA-256")
        return data
