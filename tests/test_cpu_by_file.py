"""tests/cpu_by_file.py: each test file's CPU, its processes' included, summed across xdist's processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from cpu_by_file import costliest

TESTS = Path(__file__).resolve().parent

BURNS = """
import subprocess, sys

def test_burns_in_a_child():
    code = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
"""
SLEEPS = """
import time

def test_sleeps():
    time.sleep(0.4)
"""


def _pytest(folder: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "cpu_by_file", "-p", "no:cacheprovider", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_files_that_cost_most_cpu_come_first_with_their_processes_cpu(tmp_path: Path) -> None:
    (tmp_path / "test_burns.py").write_text(BURNS)
    (tmp_path / "test_sleeps.py").write_text(SLEEPS)
    # Through pytest-xdist's processes: the figures come to the controller in the tests' reports.
    out = _pytest(tmp_path, "-p", "xdist", "-n", "2", "--durations=0")
    rows = re.findall(r"^\s+([\d.]+)s\s+[\d.]+%  (\S+)$", out, re.MULTILINE)
    assert "== most CPU: 2 of 2 files" in out and [path for _, path in rows] == [
        "test_burns.py",
        "test_sleeps.py",
    ], out
    seconds = {path: float(s) for s, path in rows}
    # The child's 0.4 s of CPU counts in its test's file; a sleep costs next to none.
    assert seconds["test_burns.py"] >= 0.35 and seconds["test_sleeps.py"] < 0.2, out
    # Without --durations a run says nothing of it.
    assert "most CPU" not in _pytest(tmp_path)


def test_the_summary_ranks_files_by_cpu_and_gives_each_its_share() -> None:
    lines = list(costliest({"a.py": 1.0, "b.py": 3.0, "c.py": 0.0}, shown=2))
    assert lines == [
        "== most CPU: 2 of 3 files (4 s of CPU in all)",
        "     3.0s  75.0%  b.py",
        "     1.0s  25.0%  a.py",
    ]
    assert list(costliest({})) == []
