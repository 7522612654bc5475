"""A worker's temporary folder outlives a SIGKILL; the next folder of its kind removes it, and never a
live process's folder, another kind's, another namespace's, a link or another user's
(server/scratch_folders.py; tournament jobs, hosted matches and ladder workers make theirs there)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cellarena_cli import line_within

from cellarena.server.scratch_folders import owned_folder, sweep

#: A child that makes a folder of ``sys.argv[1]``'s kind, writes in it, says where, and then either
#: kills itself (``kill``) or waits for its standard input to close (``wait``).
CHILD = """
import os, signal, sys
from cellarena.server.scratch_folders import owned_folder
with owned_folder(sys.argv[1]) as folder:
    (folder / "match.replay").write_bytes(b"replay")
    print(folder, flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
"""


def _child(tmp: Path, kind: str, how: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, how],
        env={**os.environ, "TMPDIR": str(tmp)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, Path(line_within(proc.stdout, what="scratch folder's path").strip())


def test_a_killed_processs_folder_goes_with_the_next_of_its_kind_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed, left = _child(tmp_path, "cellarena-job-", "kill")
    assert killed.stdout is not None and killed.stdout.read() == ""  # ended, and not reaped: a zombie
    assert (left / "match.replay").is_file()  # what a SIGKILL leaves behind
    other_kind, other_left = _child(tmp_path, "cellarena-hosted-", "kill")
    assert other_kind.wait(timeout=60) == -signal.SIGKILL
    live, held = _child(tmp_path, "cellarena-job-", "wait")
    # Names like a dead process's, but not ours to remove: another namespace's, a link, a file.
    pid = left.name.removeprefix("cellarena-job-").split("-")[1]
    foreign = tmp_path / f"cellarena-job-1-{pid}-abc"
    foreign.mkdir()
    target = tmp_path / "kept"
    target.mkdir()
    (target / "precious").write_text("x")
    namespace = left.name.removeprefix("cellarena-job-").split("-")[0]
    link = tmp_path / f"cellarena-job-{namespace}-{pid}-link"
    link.symlink_to(target, target_is_directory=True)
    plain = tmp_path / f"cellarena-job-{namespace}-{pid}-file"
    plain.write_text("x")
    others = []
    if os.geteuid() == 0:  # root can give a folder to another user
        others.append(tmp_path / f"cellarena-job-{namespace}-{pid}-nobody")
        others[0].mkdir()
        os.chown(others[0], 65534, 65534)
    try:
        with owned_folder("cellarena-job-") as mine:
            assert mine.is_dir() and mine.name.startswith(f"cellarena-job-{namespace}-{os.getpid()}-")
            assert not left.exists()  # the killed job's
            assert held.is_dir() and (other_left / "match.replay").is_file()
            assert foreign.is_dir() and link.is_symlink() and (target / "precious").is_file()
            assert plain.is_file() and all(o.is_dir() for o in others)
        assert not mine.exists()
        assert killed.wait(timeout=60) == -signal.SIGKILL  # removed while still a zombie, above
        assert sweep("cellarena-hosted-") == [other_left]
    finally:
        assert live.stdin is not None
        live.stdin.close()
        assert live.wait(timeout=60) == 0
    assert not held.exists()  # a live process removes its own when it ends
