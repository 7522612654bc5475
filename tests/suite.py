"""The whole test suite in its two phases: what the README's second command and CI run.

    python tests/suite.py [PYTEST ARGS...]

0. **The compile step**: the test files not yet compiled are collected once, a share on each core
   (`compile_tests`), so that the parallel phase's processes do not each compile them anew.
1. **The parallel phase**: every test not marked ``realtime``, spread over pytest-xdist's processes
   (``PARALLEL`` of them, whole files each). None of these depends on how fast the machine is: the
   server's timing logic runs in virtual time (trio's MockClock and `cellarena.server.wall_clock`),
   and tests of processes, sockets and browsers wait on events under generous deadlines.
2. **The realtime phase**: the few tests marked ``realtime``, which measure real elapsed time or race
   the wall clock (a 15 Hz match's budgets over TCP, a bot 30 ms late), with the machine to
   themselves (``REALTIME_PARALLEL`` files at a time). Only the files that mark a test ``realtime``
   are collected (importing all 160 test files took 5 to 10 s of the phase's 90); tests/conftest.py
   fails the parallel phase if a realtime test stands in a file `realtime_files` would miss.

The parallel phase ends with the files that cost most CPU (tests/cpu_by_file.py) and its slowest
tests and files (tests/durations_digest.py), so every CI log shows where the CPU and the time go.
Both phases run even when the first fails, so one run shows every failure. The exit status is the
first non-zero of the two (pytest's own codes); "no test ran" in a phase (``-k`` that selects none of
its tests) is not a failure. Extra arguments go to both phases (``-x``, ``-k NAME``, a file; one that
names a file skips the compile step). The last lines give each step's seconds and sum both phases:
``N passed, N failed``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

from durations_digest import DurationsDigest

ROOT = Path(__file__).resolve().parent.parent
#: Test processes in the parallel phase, on CI's 2 cores: a test waits on processes, sockets,
#: builds' locks and browsers for part of its time, which more processes than cores fill. Measured
#: back to back in one warm checkout on a quiet 2-core machine (2026-11-30), with the longest files
#: first: 3 processes 497 s (the cores 92% busy), 4 processes 431 s (95%). (An earlier measurement that
#: found 4 slower was taken while xdist handed out the longest files last: see `LONGEST_FIRST`.)
PARALLEL = 4
#: Test processes in the realtime phase. Three: each realtime test has margins that hold beside two
#: processes that keep both cores busy (the issue's check), a heavier load than two other realtime
#: tests. Measured 2026-11-30 on 2 cores: the phase took 45 s one at a time, 25 s two at a time and
#: 21 s three at a time; three at a time beside two busy loops it passed four runs in a row (25 to
#: 28 s; two at a time there had taken 32 to 34 s).
REALTIME_PARALLEL = 3
#: The suite's longest files (builds of the language kits, clusters, browsers, ladders), each 15 s
#: or more on one process. pytest-xdist hands out whole files (``--dist loadfile``) in the
#: order tests/conftest.py sorts them, these first, so that the phase ends on short files: started
#: last (alphabetically, most are late), one of them kept a process busy minutes after the others had
#: run out of work. (xdist 3.8 reorders files by their number of tests unless told not to:
#: pyproject's addopts say ``--no-loadscope-reorder``.)
LONGEST_FIRST = (  # by their time in a fresh clone's run of the README's command, 2026-12-01, longest first
    "test_native_kits.py",
    "test_native_kits_ladder.py",
    "test_ladder_games.py",
    "test_new_bot.py",
    "test_ts_kit.py",
    "test_training_doc.py",
    "test_ladder_server.py",
    "test_serve_workers.py",
    "test_author_install.py",  # three venvs, built at once, then mypy, Chromium and training in each
    "test_ladder_cluster.py",
    "test_web_player.py",
    "test_sdk_ladder.py",
    "test_ladder_bench.py",
    "test_cluster.py",
    "test_js_bot.py",
    "test_sdk_walkthrough.py",
    "test_ladder_workers.py",
    "test_new_bot_node.py",
    "test_hostile_bots.py",
    "test_ladder_web.py",
    "test_new_bot_node_js.py",
    "test_ladder_submitted_e2e.py",
    "test_ladder_doc_walk.py",  # every command of docs/ladder.md: some 20 server processes
    "test_suite_runner.py",
    "test_match_cli.py",
    "test_web_bench.py",
    "test_web_live.py",
    "test_web_newcomer.py",
    "test_web_ladder_owner.py",
    "test_ladder_store.py",
)
#: Processes that compile the test files before the parallel phase (`compile_tests`): one a core.
COMPILERS = max(1, min(PARALLEL, os.cpu_count() or 1))
#: How long the compile step may take before the phase starts without it (a fresh clone: 9 s).
COMPILE_WITHIN = 180
#: pytest's exit code when it collected no test (a phase that ``-k`` leaves empty).
NO_TESTS = 5
#: How a test file marks a test, or itself (``pytestmark = pytest.mark.realtime``), realtime.
REALTIME_MARK = "mark.realtime"
_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def realtime_files() -> list[str]:
    """The test files that mark a test (or themselves) ``realtime``, relative to the checkout."""
    return sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").glob("test_*.py")
        if REALTIME_MARK in p.read_text(encoding="utf-8")
    )


def unlisted(paths: Iterable[Path]) -> list[str]:
    """Those of ``paths`` (files holding a test marked realtime) that `realtime_files` misses."""
    listed = {ROOT / rel for rel in realtime_files()}
    return sorted(str(p) for p in set(paths) if Path(p) not in listed)


def _phase(name: str, args: list[str]) -> tuple[int, dict[str, int], float]:
    print(f"== {name}: pytest {' '.join(args)}", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    last = ""
    durations = DurationsDigest()
    for line in proc.stdout:
        for shown in durations.feed(line):
            sys.stdout.write(shown)
            sys.stdout.flush()
        if line.strip():
            last = line
    sys.stdout.writelines(durations.table())
    code = proc.wait()
    counts: dict[str, int] = {}
    for number, word in _COUNTS.findall(last):
        key = "errors" if word.startswith("error") else word
        counts[key] = counts.get(key, 0) + int(number)
    return code, counts, time.monotonic() - started


def _names_tests(extra: list[str]) -> bool:
    """Whether the extra arguments name a test file, folder or test (``tests/test_x.py::name``)."""
    return any(not a.startswith("-") and ("/" in a or a.endswith(".py") or "::" in a) for a in extra)


def realtime_files_unless_named(extra: list[str]) -> list[str]:
    """The realtime files to collect, or none where the extra arguments name what to run."""
    return [] if _names_tests(extra) else realtime_files()


def phases(extra: list[str]) -> list[tuple[str, list[str]]]:
    """Each phase's name and pytest's arguments for it."""
    return [
        # Every run says where the time went: tests/durations_digest.py cuts pytest's report of
        # every test's durations to the slowest tests and files.
        ("parallel phase", ["-m", "not realtime", "-n", str(PARALLEL), "--durations=0", *extra]),
        # Extra arguments that name files or tests replace the realtime files, as in the first phase.
        (
            "realtime phase",
            ["-m", "realtime", "-n", str(REALTIME_PARALLEL), *extra, *realtime_files_unless_named(extra)],
        ),
    ]


@contextmanager
def bytecode_kept(environ: MutableMapping[str, str]) -> Iterator[None]:
    """Lets the suite's processes keep compiled bytecode where ``PYTHONDONTWRITEBYTECODE`` forbids it
    next to the sources: in a throwaway folder (``PYTHONPYCACHEPREFIX``), for the run.

    Why: the suite starts some 1,500 Python processes from this checkout (servers, bots, commands),
    and without bytecode each compiles every cellarena module it imports anew, about 0.2 s of CPU a
    process: a sixth of the parallel phase's CPU (measured on tests/test_tournament_cli.py and
    test_match_cli.py from a clean clone: 41 s to 35 s). The folder keeps the checkout as the
    setting wants it. A prefix the caller set is kept; the environment is restored after."""
    if not environ.get("PYTHONDONTWRITEBYTECODE"):
        yield
        return
    saved = dict(environ)
    with tempfile.TemporaryDirectory(prefix="cellarena-bytecode-") as folder:
        del environ["PYTHONDONTWRITEBYTECODE"]
        environ.setdefault("PYTHONPYCACHEPREFIX", folder)
        try:
            yield
        finally:
            environ.clear()
            environ.update(saved)


def uncompiled_tests(folder: Path = ROOT / "tests") -> list[Path]:
    """The test files whose bytecode, as pytest writes it (its assertions rewritten, named
    ``test_x.cpython-311-pytest-9.2.0.pyc``), is missing or older than the file, where the
    environment (``PYTHONPYCACHEPREFIX``) puts the bytecode of the processes the suite starts."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    where = Path(prefix, str(folder.resolve()).lstrip(os.sep)) if prefix else folder / "__pycache__"
    written: dict[str, float] = {}
    if where.is_dir():
        for pyc in where.glob("test_*-pytest-*.pyc"):
            stem = pyc.name.split(".", 1)[0]
            written[stem] = max(written.get(stem, 0.0), pyc.stat().st_mtime)
    return [p for p in sorted(folder.glob("test_*.py")) if written.get(p.stem, -1.0) < p.stat().st_mtime]


def shares(files: list[Path], n: int) -> list[list[Path]]:
    """``files`` in ``n`` shares of about the same size in bytes (none empty), largest first."""
    parts: list[list[Path]] = [[] for _ in range(min(n, len(files)))]
    sizes = [0] * len(parts)
    for path in sorted(files, key=lambda p: (-p.stat().st_size, p.name)):
        i = sizes.index(min(sizes))
        parts[i].append(path)
        sizes[i] += path.stat().st_size
    return parts


def compile_tests(extra: list[str], folder: Path = ROOT / "tests") -> float | None:
    """Compiles the test files not yet compiled, once, on every core, before the parallel phase;
    the seconds it took, or None where nothing needed it.

    Why: pytest rewrites a test file's asserts (an AST pass in Python, some 9 s of CPU for the
    whole folder) before it first imports it, and each of xdist's processes collects every file. In
    a fresh clone, or under a fresh ``PYTHONPYCACHEPREFIX`` (`bytecode_kept`), the phase's processes
    all start at once, find no bytecode and each rewrite every file: measured on 2 cores, the
    collection took 24.5 s of the phase (45 s of CPU); after this step's 9 s it takes 6.6 s. The
    step only collects (``--collect-only``, its outcome unused): a file that fails to import fails
    in the phase, with pytest's report."""
    files = [] if _names_tests(extra) else uncompiled_tests(folder)
    if not files:
        return None
    started = time.monotonic()
    print(f"== compile: pytest --collect-only over {len(files)} test files, {COMPILERS} at once", flush=True)
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-qq", "-n", "0", "-p", "no:cacheprovider"]
    procs = [
        subprocess.Popen(
            [*collect, *map(str, share)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for share in shares(files, COMPILERS)
    ]
    deadline, late = started + COMPILE_WITHIN, False
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            late = True
    if late:
        print(f"compile: not done in {COMPILE_WITHIN} s; the phase compiles the rest", flush=True)
    return time.monotonic() - started


def main(extra: list[str]) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with bytecode_kept(os.environ):
        return _run(extra)


def _run(extra: list[str]) -> int:
    status = 0
    total: dict[str, int] = {}
    times = []
    compiled = compile_tests(extra)
    if compiled is not None:
        times.append(f"compile {compiled:.0f} s")
    for name, args in phases(extra):
        code, counts, seconds = _phase(name, args)
        times.append(f"{name} {seconds:.0f} s")
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
        if code not in (0, NO_TESTS) and status == 0:
            status = code
    failed = total.get("failed", 0) + total.get("errors", 0)
    if status == 0 and not total.get("passed"):
        status = NO_TESTS
    print(f"suite: {', '.join(times)}")
    skipped = f", {total['skipped']} skipped" if total.get("skipped") else ""
    print(f"{total.get('passed', 0)} passed, {failed} failed{skipped}")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
