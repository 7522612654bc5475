"""Temporary folders named for the process that made them, and removed once it is gone.

A worker killed outright (SIGKILL, the kernel's OOM killer, a lost host's reboot of its container)
never runs the ``finally`` that removes its temporary folder: on a host that plays matches for
months they pile up in the temporary folder, replays and bots' logs among them (a suite run left two
or three). So a folder made here carries its process's pid namespace and pid in its name, and each
new one first removes the folders of its prefix whose process has ended.

A folder is removed only when all of these hold: its name is one this module made, in this pid
namespace (a container's pids are another's); it is a directory, not a link to one, owned by this
user; and its process is not alive. A pid taken again by a live process keeps its folder until that
process ends too: never a live process's folder, at the cost of one left a while longer.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The namespace and pid after a folder's prefix: ``PREFIX{namespace}-{pid}-{random}``.
_OWNER = re.compile(r"(\d+)-(\d+)-")


@functools.cache
def _namespace() -> int | None:
    """This process's pid namespace (the inode of its /proc link), or None where /proc has none; read
    once (a forked child stays in its parent's)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def sweep(prefix: str, parent: Path | None = None) -> list[Path]:
    """Remove the folders of ``prefix`` in ``parent`` (the temporary folder) that `owned_folder` made
    in processes of this namespace that have ended; those removed."""
    namespace = _namespace()
    if namespace is None:
        return []
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return []
    for name in names:
        owner = _OWNER.match(name, len(prefix))
        if owner is None or int(owner[1]) != namespace or _alive(int(owner[2])):
            continue
        path = parent / name
        try:
            st = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():  # lstat: a link is no folder
            continue
        shutil.rmtree(path, ignore_errors=True)  # another sweep may be at it too
        removed.append(path)
    return removed


@contextmanager
def owned_folder(prefix: str) -> Iterator[Path]:
    """A new temporary folder named for this process, removed on exit, after removing (`sweep`) those
    of ``prefix`` left by processes that were killed before they could remove their own."""
    sweep(prefix)
    namespace = _namespace()
    owner = f"{namespace}-{os.getpid()}-" if namespace is not None else ""
    with tempfile.TemporaryDirectory(prefix=prefix + owner) as folder:
        yield Path(folder)
