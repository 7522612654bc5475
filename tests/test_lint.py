"""The code passes ruff, lint and format, with the configuration in pyproject.toml.

Only the project's own source is checked: a bot folder someone keeps inside the checkout is theirs,
and must not turn the project's tests red.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The project's top-level source folders (docs/architecture.md); nothing else is linted.
SOURCE = ("server", "sdk", "arena", "example_bots", "tests")


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *SOURCE], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_check() -> None:
    proc = _ruff("check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = _ruff("format", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_bot_folder_in_the_checkout_is_not_linted() -> None:
    folder = ROOT / f"my-bot-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        (folder / "bot.py").write_text("import os,sys\nx=1;y = [ 1,2 ]\n")
        probe = subprocess.run(
            [sys.executable, "-m", "ruff", "check", str(folder)], capture_output=True, text=True, check=False
        )
        assert probe.returncode != 0, "the probe bot must be one ruff rejects"
        assert _ruff("check").returncode == 0
        assert _ruff("format", "--check").returncode == 0
    finally:
        shutil.rmtree(folder)
