"""Unpacking uploaded bot archives (`cellarena.arena.ladder.submissions.unpack`): sound archives come
out whole, and each hostile one is refused with a message naming its entry and the rule, with nothing
written outside the target folder (and the target itself removed). No clock, no network."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cellarena.arena.ladder.submissions.unpack import UnpackError, UnpackLimits, unpack

BOT_TOML = b'command = "python bot.py"\n'
BOT_PY = b"print('hello')\n"


def tar_gz(*entries: tarfile.TarInfo | tuple[str, bytes]) -> bytes:
    """A .tar.gz of (name, bytes) files, or of TarInfo entries as given (links, devices...)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry, io.BytesIO(b"x" * entry.size) if entry.isreg() else None)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                info.mode = 0o755 if entry[0].endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


def zip_of(*entries: zipfile.ZipInfo | tuple[str, bytes], data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in entries:
            if isinstance(entry, zipfile.ZipInfo):
                archive.writestr(entry, data)
            else:
                archive.writestr(entry[0], entry[1])
    return buffer.getvalue()


def special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def zip_mode(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


def everything(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """A folder with a file beside where the bot is unpacked: the tests check both stay as they were."""
    (tmp_path / "beside.txt").write_text("mine")
    return tmp_path


def refused(box: Path, data: bytes, kind: str, *words: str, limits: UnpackLimits | None = None) -> str:
    with pytest.raises(UnpackError) as caught:
        unpack(data, kind, box / "bot", limits)
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert everything(box) == {"beside.txt"}  # nothing outside, and the target removed
    assert (box / "beside.txt").read_text() == "mine"
    assert not (Path("/tmp") / "evil").exists()
    return message


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_a_sound_archive_comes_out_whole(box: Path, kind: str) -> None:
    files = [
        ("bot.toml", BOT_TOML),
        ("bot.py", BOT_PY),
        ("lib/util/helpers.py", b"X = 1\n"),
        ("run.sh", b"#!"),
    ]
    data = tar_gz(*files) if kind == "tar.gz" else zip_of(*files)
    done = unpack(data, kind, box / "bot")
    assert done.folder == box / "bot" and done.files == 4 and done.bytes == sum(len(b) for _, b in files)
    assert (box / "bot" / "lib" / "util" / "helpers.py").read_bytes() == b"X = 1\n"
    inside = ("bot.toml", "bot.py", "lib", "lib/util", "lib/util/helpers.py", "run.sh")
    assert everything(box) == {"beside.txt", "bot", *(f"bot/{p}" for p in inside)}
    if kind == "tar.gz":
        assert stat.S_IMODE((box / "bot" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((box / "bot" / "bot.py").stat().st_mode) == 0o644


def test_an_archive_of_one_folder_is_that_folder(box: Path) -> None:
    done = unpack(tar_gz(("mybot/bot.toml", BOT_TOML), ("mybot/bot.py", BOT_PY)), "tar.gz", box / "bot")
    assert done.folder == box / "bot" / "mybot"


def test_the_target_must_be_new(box: Path) -> None:
    (box / "bot").mkdir()
    with pytest.raises(FileExistsError):
        unpack(tar_gz(("bot.toml", BOT_TOML)), "tar.gz", box / "bot")


# -- names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../evil", ("'../evil'", "'..'", "climb out")),
        ("lib/../../evil", ("'lib/../../evil'", "climb out")),
        ("/tmp/evil", ("'/tmp/evil'", "absolute")),
        ("C:/evil", ("'C:/evil'", "absolute")),
        ("lib\\..\\evil", ("backslash",)),
    ],
)
def test_paths_that_leave_the_folder_are_refused(
    box: Path, kind: str, name: str, words: tuple[str, ...]
) -> None:
    files = [("bot.toml", BOT_TOML), (name, b"gotcha")]
    refused(box, tar_gz(*files) if kind == "tar.gz" else zip_of(*files), kind, *words)


def test_a_path_deeper_than_the_limit_is_refused(box: Path) -> None:
    deep = "/".join("d" * 5 for _ in range(6)) + "/x.py"
    refused(
        box,
        tar_gz(("bot.toml", BOT_TOML), (deep, b"")),
        "tar.gz",
        "nests 7 deep",
        "limit of 6",
        limits=UnpackLimits(depth=6),
    )


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_a_name_given_twice_is_refused(box: Path, kind: str) -> None:
    files = [("bot.toml", BOT_TOML), ("bot.py", BOT_PY), ("./bot.py", b"other")]
    data = tar_gz(*files) if kind == "tar.gz" else zip_of(*files)
    refused(box, data, kind, "'./bot.py'", "names it twice")


def test_a_file_used_as_a_folder_is_refused(box: Path) -> None:
    refused(
        box,
        tar_gz(("bot.toml", BOT_TOML), ("lib", b""), ("lib/x.py", b"")),
        "tar.gz",
        "'lib/x.py'",
        "lib is a file",
    )


# -- kinds of entry ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (special("link", tarfile.SYMTYPE, "/etc/passwd"), ("'link'", "symbolic link", "/etc/passwd")),
        (special("inside", tarfile.SYMTYPE, "bot.py"), ("'inside'", "symbolic link", "no links")),
        (special("hard", tarfile.LNKTYPE, "bot.py"), ("'hard'", "hard link")),
        (special("null", tarfile.CHRTYPE), ("'null'", "device file")),
        (special("disk", tarfile.BLKTYPE), ("'disk'", "device file")),
        (special("pipe", tarfile.FIFOTYPE), ("'pipe'", "fifo")),
    ],
)
def test_links_devices_and_fifos_in_a_tar_are_refused(
    box: Path, entry: tarfile.TarInfo, words: tuple[str, ...]
) -> None:
    refused(box, tar_gz(("bot.toml", BOT_TOML), ("bot.py", BOT_PY), entry), "tar.gz", *words)


def test_a_symlink_then_a_file_through_it_never_writes_outside(box: Path) -> None:
    """The classic: a link to /tmp, then link/evil. The link is refused before anything follows it."""
    data = tar_gz(
        ("bot.toml", BOT_TOML), special("out", tarfile.SYMTYPE, str(box.parent)), ("out/evil", b"x")
    )
    refused(box, data, "tar.gz", "'out'", "symbolic link")


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (stat.S_IFLNK | 0o777, ("symbolic link",)),
        (stat.S_IFCHR | 0o600, ("device file",)),
        (stat.S_IFIFO | 0o600, ("fifo",)),
        (stat.S_IFSOCK | 0o600, ("socket",)),
    ],
)
def test_links_devices_and_fifos_in_a_zip_are_refused(box: Path, mode: int, words: tuple[str, ...]) -> None:
    data = zip_of(("bot.toml", BOT_TOML), zip_mode("odd", mode), data=b"/etc/passwd")
    refused(box, data, "zip", "'odd'", *words)


def test_an_encrypted_zip_entry_is_refused(box: Path) -> None:
    data = bytearray(zip_of(("bot.toml", BOT_TOML), ("secret.py", b"x")))
    # Set the "encrypted" flag of the second entry in both its local and its central header.
    for signature in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.rfind(signature)
        flag_at = at + (6 if signature == b"PK\x03\x04" else 8)
        data[flag_at] |= 1
    refused(box, bytes(data), "zip", "'secret.py'", "encrypted")


# -- sizes ---------------------------------------------------------------------------------------------
def test_an_archive_over_its_limit_is_refused_before_anything(box: Path) -> None:
    data = tar_gz(("bot.toml", BOT_TOML), ("big", b"x" * 5000))
    refused(box, data, "tar.gz", "over the limit of 100 bytes", limits=UnpackLimits(archive_bytes=100))


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_too_many_files_are_refused(box: Path, kind: str) -> None:
    files = [("bot.toml", BOT_TOML), *((f"f{i}.py", b"") for i in range(10))]
    data = tar_gz(*files) if kind == "tar.gz" else zip_of(*files)
    refused(
        box,
        data,
        kind,
        "over the limit of 5" if kind == "zip" else "over 5 entries",
        limits=UnpackLimits(files=5),
    )


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_one_file_over_its_limit_is_refused(box: Path, kind: str) -> None:
    files = [("bot.toml", BOT_TOML), ("weights.bin", b"\0" * 4096)]
    data = tar_gz(*files) if kind == "tar.gz" else zip_of(*files)
    refused(
        box,
        data,
        kind,
        "'weights.bin'",
        "4096 bytes",
        "limit of 1000 bytes for one file",
        limits=UnpackLimits(file_bytes=1000),
    )


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_files_over_the_unpacked_total_are_refused(box: Path, kind: str) -> None:
    files = [("bot.toml", BOT_TOML), *((f"part{i}.bin", b"\0" * 600) for i in range(4))]
    data = tar_gz(*files) if kind == "tar.gz" else zip_of(*files)
    refused(
        box, data, kind, "'part3.bin'", "over 2000 bytes, the limit", limits=UnpackLimits(unpacked_bytes=2000)
    )


def lying_zip(real: bytes, declared: int) -> bytes:
    """A zip whose one big entry declares ``declared`` bytes in both headers but inflates to ``real``."""
    data = bytearray(zip_of(("bot.toml", BOT_TOML), ("bomb.bin", real)))
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.rfind(signature)
        data[at + size_at : at + size_at + 4] = declared.to_bytes(4, "little")
    return bytes(data)


def test_a_zip_bomb_that_declares_little_is_stopped_by_what_it_holds(box: Path) -> None:
    """10 MB of zeros (10 KB compressed) declared as 100 bytes: never more than 100 bytes written."""
    message = refused(box, lying_zip(b"\0" * 10_000_000, 100), "zip", "'bomb.bin'")
    assert "zip bomb" in message or "not a sound .zip" in message


def test_a_zip_bomb_that_declares_its_size_is_refused_unread(box: Path) -> None:
    data = zip_of(("bot.toml", BOT_TOML), ("bomb.bin", b"\0" * 10_000_000))
    assert len(data) < 20_000
    refused(box, data, "zip", "'bomb.bin'", "10000000 bytes", limits=UnpackLimits(file_bytes=1_000_000))


def test_a_gzip_bomb_is_stopped_while_it_inflates(box: Path) -> None:
    """A tar header that announces 5 MB of extended (pax) header, which tar would read into memory
    whole, then 5 MB of zeros (5 KB compressed): stopped once the stream passes its cap."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = 5_000_000
    data = gzip.compress(header.tobuf(tarfile.USTAR_FORMAT) + b"\0" * 5_000_000, compresslevel=9)
    assert len(data) < 10_000
    refused(box, data, "tar.gz", "inflates to over", "gzip bomb", limits=UnpackLimits(unpacked_bytes=100_000))


# -- not archives, no bot.toml -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "kind", "words"),
    [
        (b"just text", "tar.gz", ("not gzip-compressed",)),
        (gzip.compress(b"not a tar at all" * 100), "tar.gz", ("not a sound .tar.gz",)),
        (tar_gz(("bot.toml", BOT_TOML))[:60], "tar.gz", ("not a sound .tar.gz",)),
        (b"PK\x03\x04 broken", "zip", ("not a sound .zip",)),
        (b"", "rar", ("a .tar.gz or a .zip",)),
    ],
    ids=["text", "gzip-not-tar", "tar-cut-short", "zip-broken", "rar"],  # gzip's bytes hold a time
)
def test_what_is_not_an_archive_is_refused(box: Path, data: bytes, kind: str, words: tuple[str, ...]) -> None:
    refused(box, data, kind, *words)


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ([("bot.py", BOT_PY)], ("no bot.toml",)),
        ([("a/bot.toml", BOT_TOML), ("b/x", b"")], ("no bot.toml",)),
        ([("bot.toml", b"command = [")], ("bot.toml refused", "not valid TOML")),
        ([("bot.toml", b'commands = "x"')], ("bot.toml refused", "unknown key(s) commands")),
        ([("bot.toml", b'name = "x"')], ("bot.toml refused", "missing command")),
    ],
)
def test_a_missing_or_bad_bot_toml_is_refused(
    box: Path, files: list[tuple[str, bytes]], words: tuple[str, ...]
) -> None:
    message = refused(box, tar_gz(*files), "tar.gz", *words)
    assert str(box) not in message  # the server's folders are not the owner's business


def test_unpacking_never_follows_a_link_planted_beside(box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are created with O_EXCL | O_NOFOLLOW: were a link already where a file goes (a race with
    another process), the write fails instead of following it."""
    writes: list[int] = []
    real_open: Callable[..., int] = os.open

    def watching(path: object, flags: int, mode: int = 0o777, **kw: object) -> int:
        writes.append(flags)
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", watching)
    unpack(tar_gz(("bot.toml", BOT_TOML)), "tar.gz", box / "bot")
    assert writes and all(f & os.O_NOFOLLOW and f & os.O_EXCL for f in writes)
