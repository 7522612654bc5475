"""What a confined Python program sees of Python: cellarena's own interpreter and the packages the host
offers, read-only, and nothing else of the host's environments (docs/security.md).

A confined program runs as a user of its own (as root) or in bubblewrap's sandbox, so the host's
virtual environment, often in a private home, is out of its reach, and should be: it holds the
ladder's own dependencies. The view gives it the interpreter cellarena runs on (its base prefix,
without the virtual environment's packages: ``-S``) and, on ``PYTHONPATH``, only the packages named
(``cellarena.sdk``, ``numpy``, ``msgpack`` by default), each bound read-only where it is, under `VIEW`.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

#: Where the offered packages appear inside the sandbox (a tmpfs covers /run there).
VIEW = "/run/cellarena/python"


@dataclass(frozen=True)
class PythonView:
    """What a confined program sees: bubblewrap arguments that show the packages, the interpreter's
    path, the environment it needs, the top-level names a program may import beyond the standard
    library, the folders shown at their place and those hidden."""

    args: tuple[str, ...]
    executable: str
    env: tuple[tuple[str, str], ...]
    offered: tuple[str, ...]
    #: Folders shown at their own place (the interpreter's), and folders hidden (`exposure`).
    expose: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()


def package_folders(name: str) -> list[Path]:
    """The folders (or single module file) that make the importable ``name``, with a wheel's
    ``NAME.libs`` beside it (numpy's bundled libraries); empty when it is not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        found = [Path(p) for p in spec.submodule_search_locations if Path(p).is_dir()]
    elif spec.origin and Path(spec.origin).is_file():
        found = [Path(spec.origin)]
    else:
        return []
    libs = [f.parent / f"{f.name}.libs" for f in found]
    return found + [lib for lib in libs if lib.is_dir()]


def hidden_ancestor(path: Path) -> Path | None:
    """The first folder above ``path`` that other users may not pass through (a private home), which a
    sandbox covers with an empty tmpfs so that ``path``, bound at its own place, can be reached."""
    for parent in reversed(path.parents):
        if parent == Path("/"):
            continue
        try:
            mode = parent.stat().st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return parent
    return None


def passable(path: Path, below: Path) -> list[str]:
    """bubblewrap arguments making the folders above ``path`` and under ``below`` (a tmpfs of the
    sandbox's) ones every user may pass through: bubblewrap would make them private to root."""
    above = [p for p in reversed(path.parents) if p.is_relative_to(below) and p != below]
    return [arg for p in above for arg in ("--perms", "0755", "--dir", str(p))]


def covers(paths: list[Path], hidden: tuple[Path, ...] = ()) -> list[Path]:
    """The folders a sandbox covers with an empty tmpfs: those the host hides (``hidden``: the
    ladder's own) and each private folder above one of ``paths``, outermost only."""
    found = {a for p in paths if (a := hidden_ancestor(p)) is not None} | set(hidden)
    return sorted(c for c in found if not any(c != o and c.is_relative_to(o) for o in found))


def exposure(paths: list[Path], hidden: tuple[Path, ...] = ()) -> list[str]:
    """bubblewrap arguments covering `covers` and then binding each of ``paths`` read-only at its
    own place (what a cover held was out of reach anyway, or is the host's)."""
    over = covers(paths, hidden)
    args = [arg for c in over for arg in ("--tmpfs", str(c))]
    for path in paths:
        under = next((c for c in over if path.is_relative_to(c)), None)
        if under is not None:
            args += [*passable(path, under), "--ro-bind", str(path), str(path)]
    return args


def python_view(packages: tuple[str, ...], hidden: tuple[Path, ...] = ()) -> PythonView:
    """The view of Python for a sandbox that offers ``packages`` (dotted names: ``cellarena.sdk``),
    with ``hidden`` folders out of sight."""
    prefix = Path(sys.base_prefix).resolve()
    executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    expose = [prefix] if executable.is_relative_to(prefix) else [prefix, executable]
    args = ["--tmpfs", "/run"]
    for name in packages:
        for folder in package_folders(name):
            where = Path(VIEW, *name.split(".")[:-1], folder.name)
            args += [*passable(where, Path("/run")), "--ro-bind", str(folder), str(where)]
    env = (("PYTHONPATH", VIEW), ("PYTHONNOUSERSITE", "1"), ("PYTHONDONTWRITEBYTECODE", "1"))
    offered = tuple(sorted({name.split(".")[0] for name in packages if package_folders(name)}))
    return PythonView(tuple(args), os.fspath(executable), env, offered, tuple(expose), tuple(hidden))
