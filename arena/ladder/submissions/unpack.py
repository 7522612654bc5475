"""Unpacking an uploaded bot archive (``.tar.gz`` or ``.zip``) safely, into a folder of its own.

An archive is hostile until unpacked: every entry is checked before a byte of it is written, and
sizes are counted again while the bytes stream (an entry may say less than it holds: a zip bomb).
Refused, each with a message naming the entry and the rule:

- an archive over `UnpackLimits.archive_bytes`; more than ``files`` entries; an entry over
  ``file_bytes``, or all of them over ``unpacked_bytes``, by what they declare or what they hold;
- a path that is absolute, climbs out (``..``), nests deeper than ``depth``, uses ``\\`` or NUL,
  or names an entry twice (or a file as a folder);
- symbolic and hard links (none at all: a link that stays inside today is a way out tomorrow),
  devices, fifos, sockets, encrypted zip entries;
- no ``bot.toml`` at the top (or in the archive's one top folder), or one the bot reader refuses
  (`cellarena.arena.discovery`, the reader of tournaments' bot folders).

Nothing is written outside the target folder, which `unpack` creates (it must not exist) and removes
again when it refuses the archive. Files are created with ``O_EXCL | O_NOFOLLOW``, modes 0644 or 0755.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from cellarena.arena.discovery import MANIFEST, DiscoveryError, discover

_MiB = 1024 * 1024
#: Bytes read at a time from an entry.
_CHUNK = 64 * 1024
#: The longest path component (bytes), as Linux's file systems take.
_NAME_BYTES = 255


@dataclass(frozen=True)
class UnpackLimits:
    """What an uploaded archive may hold. The defaults fit a bot's sources with a small data file."""

    #: The archive itself, as uploaded (bytes).
    archive_bytes: int = 16 * _MiB
    #: All files unpacked together (bytes).
    unpacked_bytes: int = 64 * _MiB
    #: Entries (files and folders).
    files: int = 2000
    #: One file unpacked (bytes).
    file_bytes: int = 16 * _MiB
    #: Folders from the top to a file (``a/b/c.py`` is 3).
    depth: int = 16


class UnpackError(ValueError):
    """An archive refused; the message names the entry at fault and the rule, for the bot's owner."""


@dataclass(frozen=True)
class Unpacked:
    """An archive unpacked: ``folder`` holds its ``bot.toml`` (the target, or its one top folder)."""

    folder: Path
    files: int
    bytes: int


def unpack(data: bytes, kind: str, target: Path, limits: UnpackLimits | None = None) -> Unpacked:
    """Unpack ``data`` (``kind`` "tar.gz" or "zip") into ``target``, a new folder; `UnpackError`, with
    ``target`` removed again, for anything the rules above refuse."""
    limits = limits or UnpackLimits()
    if len(data) > limits.archive_bytes:
        raise UnpackError(f"the archive is {len(data)} bytes, over the limit of {limits.archive_bytes} bytes")
    if kind not in ("tar.gz", "zip"):
        raise UnpackError(f"an archive is a .tar.gz or a .zip, not {kind[:20]!r}")
    target.mkdir(mode=0o755)  # FileExistsError if it is there: never unpack over something
    writer = _Writer(target, limits)
    try:
        if kind == "zip":
            _unzip(data, writer)
        else:
            _untar(data, writer)
        folder = _bot_folder(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return Unpacked(folder, writer.count, writer.total)


class _Writer:
    """The entries written so far into ``target``, and the checks each new one passes first."""

    def __init__(self, target: Path, limits: UnpackLimits) -> None:
        self.target = target
        self.limits = limits
        self.count = 0
        self.total = 0
        self.files: set[tuple[str, ...]] = set()
        self.folders: set[tuple[str, ...]] = set()
        self.named: set[tuple[str, ...]] = set()

    def parts(self, name: str) -> tuple[str, ...]:
        """The entry's path as folder names, after every rule on names; () for the top itself."""
        shown = repr(name[:200])
        if "\x00" in name or "\\" in name:
            raise UnpackError(f"entry {shown}: a name may hold no backslash or NUL; use / between folders")
        if name.startswith("/") or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
            raise UnpackError(f"entry {shown}: an absolute path; paths in the archive are relative")
        parts = tuple(p for p in name.split("/") if p not in ("", "."))
        if ".." in parts:
            raise UnpackError(f"entry {shown}: '..' would climb out of the bot's folder")
        if len(parts) > self.limits.depth:
            raise UnpackError(
                f"entry {shown}: nests {len(parts)} deep, over the limit of {self.limits.depth}"
            )
        if any(len(p.encode("utf-8", "surrogateescape")) > _NAME_BYTES for p in parts):
            raise UnpackError(f"entry {shown}: a name over {_NAME_BYTES} bytes")
        if parts and parts in self.named:
            raise UnpackError(f"entry {shown}: the archive names it twice")
        self.named.add(parts)
        self.count += 1
        if self.count > self.limits.files:
            raise UnpackError(f"entry {shown}: the archive holds over {self.limits.files} entries, the limit")
        return parts

    def _parent(self, parts: tuple[str, ...], shown: str) -> Path:
        for i in range(1, len(parts)):
            if parts[:i] in self.files:
                raise UnpackError(
                    f"entry {shown}: {'/'.join(parts[:i])} is a file in the archive, not a folder"
                )
        parent = self.target.joinpath(*parts[:-1])
        parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.folders.update(parts[:i] for i in range(1, len(parts)))
        return parent

    def folder(self, parts: tuple[str, ...], shown: str) -> None:
        if not parts:
            return
        if parts in self.files:
            raise UnpackError(f"entry {shown}: the archive names it as a file and as a folder")
        self._parent(parts, shown)
        self.target.joinpath(*parts).mkdir(mode=0o755, exist_ok=True)
        self.folders.add(parts)

    def declared(self, shown: str, size: int) -> None:
        """Refuse an entry by the size it declares, before reading it."""
        if size > self.limits.file_bytes:
            raise UnpackError(
                f"entry {shown}: {size} bytes, over the limit of {self.limits.file_bytes} bytes for one file"
            )
        if self.total + size > self.limits.unpacked_bytes:
            raise UnpackError(
                f"entry {shown}: all files come to over {self.limits.unpacked_bytes} bytes, the limit"
            )

    def file(
        self, parts: tuple[str, ...], shown: str, size: int, source: IO[bytes], executable: bool
    ) -> None:
        """Write one file, counting the bytes it really holds against what it declared and the limits."""
        if not parts or parts in self.folders:
            raise UnpackError(f"entry {shown}: the archive names it as a file and as a folder")
        self.declared(shown, size)
        path = self._parent(parts, shown).joinpath(parts[-1])
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, 0o755 if executable else 0o644)
        self.files.add(parts)
        written = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if written > size:
                    raise UnpackError(
                        f"entry {shown}: holds more than the {size} bytes it declares (a zip bomb?)"
                    )
                out.write(chunk)
        self.total += written


class _Reads(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped(io.RawIOBase):
    """A stream that refuses to give more than ``cap`` bytes: a gzip that inflates without end."""

    def __init__(self, inner: _Reads, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.given += len(data)
        if self.given > self.cap:
            raise UnpackError(f"the archive inflates to over {self.cap} bytes (a gzip bomb?)")
        buffer[: len(data)] = data
        return len(data)


def _tar_entries(data: bytes, limits: UnpackLimits) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    if not data.startswith(b"\x1f\x8b"):
        raise UnpackError("the archive is not gzip-compressed; send a .tar.gz (or a .zip as application/zip)")
    # Headers and padding: up to 1.5 KB per entry besides its bytes, and the end-of-archive blocks.
    cap = limits.unpacked_bytes + 1536 * (limits.files + 2) + 10240
    stream = io.BufferedReader(_Capped(gzip.GzipFile(fileobj=io.BytesIO(data)), cap))
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            yield tar, member


def _untar(data: bytes, writer: _Writer) -> None:
    try:
        for tar, member in _tar_entries(data, writer.limits):
            parts = writer.parts(member.name)
            shown = repr(member.name[:200])
            if member.issym() or member.islnk():
                what = "a symbolic" if member.issym() else "a hard"
                raise UnpackError(
                    f"entry {shown}: {what} link (to {member.linkname[:200]!r}); archives may hold no links"
                )
            if member.isdir():
                writer.folder(parts, shown)
            elif member.isreg():
                source = tar.extractfile(member)
                assert source is not None
                writer.file(parts, shown, member.size, source, bool(member.mode & 0o111))
            else:
                raise UnpackError(f"entry {shown}: {_tar_type(member)}; archives hold files and folders only")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise UnpackError(
            f"the archive is not a sound .tar.gz ({str(exc)[:200] or type(exc).__name__})"
        ) from None


def _tar_type(member: tarfile.TarInfo) -> str:
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a fifo"
    return f"an entry of tar type {member.type!r}"


def _unzip(data: bytes, writer: _Writer) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > writer.limits.files:
                raise UnpackError(
                    f"the archive holds {len(infos)} entries, over the limit of {writer.limits.files}"
                )
            for info in infos:
                parts = writer.parts(info.filename)
                shown = repr(info.filename[:200])
                mode = (info.external_attr >> 16) if info.create_system == 3 else 0
                if info.flag_bits & 0x1:
                    raise UnpackError(f"entry {shown}: encrypted; send the archive without a password")
                _check_zip_mode(mode, shown)
                if info.is_dir():
                    writer.folder(parts, shown)
                    continue
                writer.declared(shown, info.file_size)
                with archive.open(info) as source:
                    writer.file(parts, shown, info.file_size, source, bool(mode & 0o111))
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise UnpackError(f"the archive is not a sound .zip ({str(exc)[:200]})") from None


def _check_zip_mode(mode: int, shown: str) -> None:
    kind = stat.S_IFMT(mode)
    if not kind or kind in (stat.S_IFREG, stat.S_IFDIR):
        return
    if kind == stat.S_IFLNK:
        raise UnpackError(f"entry {shown}: a symbolic link; archives may hold no links")
    if kind in (stat.S_IFCHR, stat.S_IFBLK):
        raise UnpackError(f"entry {shown}: a device file; archives hold files and folders only")
    what = "a fifo" if kind == stat.S_IFIFO else "a socket or special file"
    raise UnpackError(f"entry {shown}: {what}; archives hold files and folders only")


def _bot_folder(target: Path) -> Path:
    """The folder with the ``bot.toml``: the top, or the archive's one folder; its manifest checked."""
    folder = target
    if not (target / MANIFEST).is_file():
        inside = list(target.iterdir())
        if len(inside) == 1 and inside[0].is_dir() and (inside[0] / MANIFEST).is_file():
            folder = inside[0]
        else:
            raise UnpackError(
                f"the archive has no {MANIFEST} at its top (nor in its one top folder); a bot's folder "
                f'needs one naming its command, e.g. command = "python bot.py" (cellarena new-bot writes it)'
            )
    try:
        discover(folder, "")
    except DiscoveryError as exc:
        text = str(exc)
        with contextlib.suppress(ValueError):
            text = text.replace(str(folder) + os.sep, "").replace(str(folder), MANIFEST)
        raise UnpackError(f"{MANIFEST} refused: {text}") from None
    return folder
