"""cellarena's build backend: setuptools' own (pyproject.toml's `backend-path`), but for one thing.

An editable install (`pip install -e .`) in setuptools' default mode maps `cellarena.sdk` to `sdk/`
with an import hook, which Python runs and type checkers do not: `mypy --strict my_bot.py` could not
find the SDK (issue 44). Here the default editable install is a folder
`build/__editable__.cellarena-links/cellarena/` whose `server`, `sdk` and `arena` are symlinks to the
checkout's folders, on a plain `.pth` path line: Python and mypy both read it, and, the links being
folders, a module added to the checkout shows at once as with the import hook.

An sdist carries this file too, so that a wheel builds from it.

An install that names its mode (`--config-settings editable_mode=strict|lenient|compat`) gets
setuptools' own, and so does one where symlinks cannot be made (setuptools' import hook then).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools

build_wheel = _setuptools.build_wheel
get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
get_requires_for_build_wheel = _setuptools.get_requires_for_build_wheel
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _setuptools.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable

#: setuptools' import hook in an editable wheel: a module at the wheel's top and the .pth that runs it.
_FINDER = re.compile(r"__editable___.*_finder\.py")
_PTH = re.compile(r"__editable__\..*\.pth")


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """setuptools' sdist, with this backend in it (pyproject.toml names it, and no package holds it)."""
    name = _setuptools.build_sdist(sdist_directory, config_settings)
    sdist = Path(sdist_directory, name)
    with tarfile.open(sdist) as old:
        members = [(m, old.extractfile(m) if m.isfile() else None) for m in old.getmembers()]
        top = members[0][0].name.split("/")[0]
        ours = Path(__file__).read_bytes()
        added = tarfile.TarInfo(f"{top}/.ci/{Path(__file__).name}")
        added.size, added.mode, added.mtime = len(ours), 0o644, members[0][0].mtime
        with tarfile.open(sdist.with_suffix(".new"), "w:gz", format=tarfile.PAX_FORMAT) as new:
            for member, data in members:
                new.addfile(member, data)
            new.addfile(added, io.BytesIO(ours))
    sdist.with_suffix(".new").replace(sdist)
    return name


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    if _names_a_mode(config_settings or {}):
        return name
    links = _link_folders(Path.cwd())
    if links is not None:
        _point_at(Path(wheel_directory, name), links)
    return name


def _names_a_mode(settings: dict[str, Any]) -> bool:
    return any(key in settings for key in ("editable_mode", "editable-mode")) or "--mode" in str(
        settings.get("--build-option", "")
    )


def _link_folders(project: Path) -> Path | None:
    """build/__editable__.NAME-links/, where each package-dir entry (`cellarena.sdk` = `sdk`) is a
    symlink to its folder; None where the file system has no symlinks."""
    config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    root = project / "build" / f"__editable__.{config['project']['name']}-links"
    shutil.rmtree(root, ignore_errors=True)
    try:
        for package, folder in package_dir.items():
            link = root.joinpath(*package.split("."))
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink((project / folder).resolve(), link, target_is_directory=True)
    except OSError:  # e.g. Windows without the right to make symlinks
        shutil.rmtree(root, ignore_errors=True)
        return None
    return root.resolve()


def _point_at(wheel: Path, links: Path) -> None:
    """Rewrite the editable wheel: its .pth names ``links`` instead of running the import hook, and
    the hook's module goes. A wheel without the hook (setuptools chose otherwise) is left as it is."""
    with zipfile.ZipFile(wheel) as old:
        items = [(info, old.read(info)) for info in old.infolist()]
    if not any(_FINDER.fullmatch(info.filename) for info, _ in items):
        return
    kept = [
        (info, f"{links}\n".encode() if _PTH.fullmatch(info.filename) else data)
        for info, data in items
        if not _FINDER.fullmatch(info.filename)
    ]
    record = next(info.filename for info, _ in kept if info.filename.endswith(".dist-info/RECORD"))
    lines = [_record_line(info.filename, data) for info, data in kept if info.filename != record]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as new:
        for info, data in kept:
            new.writestr(info, "".join([*lines, f"{record},,\n"]) if info.filename == record else data)


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"
