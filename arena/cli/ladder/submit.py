"""`ladder submit DIR`: pack a bot's folder and upload it to a ladder as a new version.

The folder is packed as `cellarena new-bot` lays it out: its sources and ``bot.toml``, without what
building and playing leave behind (`SKIPPED_FOLDERS`, `SKIPPED_SUFFIXES`), version control, virtual
environments, or token files. The archive is made the same for the same files (sorted, no owners or
times), so uploading an unchanged folder again stores nothing new (archives are kept by SHA-256).
"""

from __future__ import annotations

import gzip
import io
import json
import stat
import tarfile
from pathlib import Path
from typing import Any

import click

from cellarena.arena.cli.ladder.remote import check_url, post_as_bot, token_file_option, token_from

#: Folders never packed: build output, caches, version control, virtual environments, match output.
SKIPPED_FOLDERS = frozenset(
    {
        ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", "dist", "build", "target",
        "runs", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox",
    }
)  # fmt: skip
#: Files never packed: compiled Python, TypeScript's build info, tokens (a secret stays home).
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".tsbuildinfo", ".token")


class PackError(click.ClickException):
    """The folder cannot be packed as it is; the message names the file and says what to do."""


def packed_files(folder: Path) -> list[Path]:
    """The files and folders of ``folder`` to pack, sorted; `PackError` for a link (the ladder takes
    none) or a special file."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        mode = entry.lstat().st_mode
        if entry.name in SKIPPED_FOLDERS and stat.S_ISDIR(mode):
            continue
        if entry.name.endswith(SKIPPED_SUFFIXES) or entry.name == ".DS_Store":
            continue
        if stat.S_ISLNK(mode):
            raise PackError(
                f"{entry} is a symbolic link: the ladder takes no links; copy the file in its place"
            )
        if stat.S_ISDIR(mode):
            found.append(entry)
            found.extend(packed_files(entry))
        elif stat.S_ISREG(mode):
            found.append(entry)
        else:
            raise PackError(f"{entry} is neither a file nor a folder; move it out of the bot's folder")
    return found


def pack(folder: Path) -> bytes:
    """``folder`` as a .tar.gz with ``bot.toml`` at its top, the same bytes for the same files."""
    if not (folder / "bot.toml").is_file():
        raise PackError(
            f"{folder} has no bot.toml; give the bot's folder (cellarena new-bot writes one), "
            'or write one naming its command, e.g. command = "python bot.py"'
        )
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in packed_files(folder):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
            if info.isreg():
                with path.open("rb") as source:
                    tar.addfile(info, source)
            else:
                tar.addfile(info)
    return buffer.getvalue()


@click.command("submit")
@click.argument("folder", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--url", required=True, help="The ladder's pages (`ladder web`), https off this machine.")
@token_file_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the version and its state.")
def submit(folder: Path, url: str, token_file: str, as_json: bool) -> None:
    """Upload the bot in DIR to the ladder as a new version of the token's bot.

    DIR is packed as `cellarena new-bot` lays it out (build output, caches, .git, virtual
    environments and token files left out) and sent with the token in an Authorization header. The
    ladder checks the archive, then builds it, plays a validation match and makes it live; this prints
    the version's number and state (received). Exit status 1 when the ladder refuses it (the reason
    is printed) or cannot be reached.
    """
    token = token_from(token_file)
    if token is None:
        raise click.BadParameter(
            f"{token_file} holds no token; save your bot's token in it", param_hint="--token-file"
        )
    check_url(url, param_hint="--url", secret="the token")
    data = pack(folder)
    answer = _upload(url, token, data, as_json)
    if as_json:
        click.echo(json.dumps({"ok": True, **answer}))
    else:
        click.echo(
            f"{answer['bot']} version {answer['version']}: {answer['state']} "
            f"({answer['size']} bytes, sha256 {answer['sha256'][:12]}); the ladder builds and validates it"
        )


def _upload(url: str, token: str, data: bytes, as_json: bool) -> dict[str, Any]:
    return post_as_bot(
        url, "/api/submissions", token, data, "application/gzip", as_json, timeout=120, detail_chars=600
    )
