"""tests/suite.py, the README's test command: two phases, both run, one closing line for both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from cellarena_cli import line_within, run_here
from suite import LONGEST_FIRST, PARALLEL, REALTIME_PARALLEL
from xdist.scheduler import LoadFileScheduling

ROOT = Path(__file__).resolve().parent.parent


def _suite(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """tests/suite.py ARGS, with ``env`` over the environment."""
    # `-n 0` last: these runs pick one test or two, which four test processes would only slow.
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "suite.py"), *args, "-n", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_both_phases_run_and_the_last_line_sums_them() -> None:
    proc = _suite("tests/test_timing_as_promised.py", "-k", "15_hz_gets_63_ms")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert f"== parallel phase: pytest -m not realtime -n {PARALLEL}" in proc.stdout
    assert f"== realtime phase: pytest -m realtime -n {REALTIME_PARALLEL}" in proc.stdout
    assert lines[-1] == "1 passed, 0 failed"  # the realtime phase selected nothing: not a failure


def test_a_failure_in_either_phase_fails_the_run_and_both_phases_run(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\n"
        "def test_parallel():\n    assert False\n\n"
        "@pytest.mark.realtime\n"
        "def test_realtime():\n    assert False\n"
    )
    proc = _suite(str(tmp_path / "test_two.py"), "-p", "no:cacheprovider")
    assert proc.returncode == 1, proc.stdout
    assert "test_two.py::test_parallel" in proc.stdout and "test_two.py::test_realtime" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "0 passed, 2 failed"


def test_the_realtime_phase_collects_only_the_files_that_mark_a_test_realtime(tmp_path: Path) -> None:
    """Fewer files to import; and a realtime test in a file the phase would not collect is named
    (tests/conftest.py stops any run on it), so no test falls between the two phases."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import suite
    finally:
        sys.path.remove(str(ROOT / "tests"))
    files = suite.realtime_files()
    assert "tests/test_match_cli.py" in files and "tests/test_cata.py" not in files
    assert suite.realtime_files_unless_named([]) == files
    assert suite.realtime_files_unless_named(["-k", "budget"]) == files
    assert suite.realtime_files_unless_named(["tests/test_time_bank.py"]) == []
    assert suite.unlisted([ROOT / "tests" / "test_match_cli.py"]) == []
    stray = tmp_path / "test_elsewhere.py"
    assert suite.unlisted([stray, ROOT / "tests" / "test_match_cli.py"]) == [str(stray)]
    # What each phase runs (the runs above show the phases run as listed; collecting all ~190 files
    # once more to see it took 10 s).
    (parallel, parallel_args), (realtime, realtime_args) = suite.phases(["-k", "budget"])
    assert (parallel, realtime) == ("parallel phase", "realtime phase")
    assert parallel_args[:2] == ["-m", "not realtime"] and parallel_args[-2:] == ["-k", "budget"]
    assert realtime_args == ["-m", "realtime", "-n", str(suite.REALTIME_PARALLEL), "-k", "budget", *files]


def test_the_parallel_phase_reports_its_slowest_tests_and_files_in_a_few_lines() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from durations_digest import DurationsDigest
    finally:
        sys.path.remove(str(ROOT / "tests"))
    output = [
        "tests/test_a.py ....\n",
        "============================= slowest durations =============================\n",
        "30.00s setup    tests/test_b.py::test_one\n",
        "12.50s call     tests/test_a.py::test_x[sqlite]\n",
        "10.00s call     tests/test_b.py::test_two\n",
        "0.50s teardown tests/test_a.py::test_y\n",
        "\n",
        "(2400 durations < 0.005s hidden.  Use -vv to show these durations.)\n",
        "=========================== short test summary info ===========================\n",
        "2 passed in 1.00s\n",
    ]
    digest = DurationsDigest(phases=2, files=5)
    shown = [out for line in output for out in digest.feed(line)]
    assert shown[0] == output[0] and shown[-2:] == output[-2:]
    assert "".join(shown[1:-2]) == (
        "== slowest 2 test phases\n"
        "30.00s setup    tests/test_b.py::test_one\n"
        "12.50s call     tests/test_a.py::test_x[sqlite]\n"
        "== slowest 2 of 2 files (53 s in all)\n"
        "    40.0s  75.5%  tests/test_b.py\n"
        "    13.0s  24.5%  tests/test_a.py\n"
    )
    assert list(digest.table()) == []  # told once


def test_the_suite_keeps_bytecode_out_of_the_checkout_where_the_environment_forbids_it_there(
    tmp_path: Path,
) -> None:
    import suite

    source = tmp_path / "src" / "module_a.py"
    source.parent.mkdir()
    source.write_text("X = 1\n")
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": os.environ["PATH"]}
    with suite.bytecode_kept(environ):
        assert "PYTHONDONTWRITEBYTECODE" not in environ
        prefix = Path(environ["PYTHONPYCACHEPREFIX"])
        # A process under the suite's environment writes its bytecode to the prefix, not beside
        # the source, and a second one reads it from there.
        for _ in range(2):
            subprocess.run(
                [sys.executable, "-c", "import module_a"], cwd=source.parent, env=environ, check=True
            )
        assert list(prefix.rglob("module_a.*.pyc")) != []
        assert not (source.parent / "__pycache__").exists()
    assert environ == {"PYTHONDONTWRITEBYTECODE": "1", "PATH": os.environ["PATH"]}
    assert not prefix.exists()
    # Where bytecode may go beside the sources, the environment is left alone.
    plain = {"PATH": os.environ["PATH"]}
    with suite.bytecode_kept(plain):
        assert plain == {"PATH": os.environ["PATH"]}


def test_the_compile_step_compiles_each_test_file_once_and_then_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the parallel phase the suite has pytest compile (rewrite) the test files that lack
    bytecode, in shares, where the phase's processes will look for it; files named on the command
    line skip the step."""
    import suite

    folder = tmp_path / "tests"
    folder.mkdir()
    names = ["test_one.py", "test_three.py", "test_two.py"]
    for i, name in enumerate(names):
        (folder / name).write_text("def test_it():\n    assert 1 + 1 == 2\n" + "# padding\n" * i)
    prefix = tmp_path / "bytecode"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    assert [p.name for p in suite.uncompiled_tests(folder)] == names
    with monkeypatch.context() as hurried:  # out of time: stopped, said, the phase compiles them
        hurried.setattr(suite, "COMPILE_WITHIN", 0)
        assert suite.compile_tests([], folder) is not None
    assert "compile: not done in 0 s" in capsys.readouterr().out
    assert [p.name for p in suite.uncompiled_tests(folder)] == names
    assert suite.compile_tests(["-x"], folder) is not None
    assert suite.uncompiled_tests(folder) == []
    # pytest's own bytecode (asserts rewritten), under the prefix, never beside the sources.
    assert sorted(p.name.split(".")[0] for p in prefix.rglob("test_*-pytest-*.pyc")) == [
        n.removesuffix(".py") for n in names
    ]
    assert not (folder / "__pycache__").exists()
    assert suite.compile_tests([], folder) is None  # nothing left to compile
    changed = folder / "test_two.py"
    changed.write_text("def test_it():\n    assert 2 + 2 == 4\n")
    assert suite.uncompiled_tests(folder) == [changed]
    assert suite.compile_tests([str(changed)], folder) is None  # a named file: the phase compiles it


def test_the_compile_step_splits_the_files_into_shares_of_about_the_same_size(tmp_path: Path) -> None:
    import suite

    files = []
    for i, size in enumerate([900, 500, 400, 300, 100]):
        files.append(tmp_path / f"test_{i}.py")
        files[-1].write_text("#" * size)
    parts = suite.shares(files, 2)
    assert sorted(sum(p.stat().st_size for p in part) for part in parts) == [1000, 1200]
    assert sorted(p for part in parts for p in part) == sorted(files)
    assert suite.shares(files[:1], 3) == [files[:1]]  # no empty share
    assert suite.shares([], 2) == []


def test_processes_the_tests_start_take_ctrl_c_even_when_the_suite_was_started_in_the_background() -> None:
    """A shell's `pytest ... &` starts pytest ignoring SIGINT, which exec keeps: tests/conftest.py sets
    Python's handler back, so a `cellarena` process a test stops with Ctrl-C is not deaf to it."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    loads_conftest = (
        f"import signal, subprocess, sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import conftest; "
        f"print(subprocess.run([sys.executable, '-c', {probe!r}], capture_output=True, text=True).stdout)"
    )
    for code, ignored in ((probe, "True"), (loads_conftest, "False")):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True, text=True, timeout=60, check=True, cwd=ROOT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `&` starts it
        )  # fmt: skip
        assert done.stdout.strip() == ignored, done.stderr


class _Worker:
    """What xdist's scheduler asks of a test process: its name, and the tests it is handed."""

    def __init__(self, name: str, handed: list[int]) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.handed = handed
        self.shutting_down = False

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        self.handed.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_parallel_phase_hands_out_files_in_the_order_the_conftest_sorts_them(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conftest's `LONGEST_FIRST` only helps if xdist keeps the order: by default (3.8) it hands out
    the files with the most tests first, which put the longest (a few tests each) last, and one process
    ran on minutes after the others ran out of work. pyproject's addopts say ``--no-loadscope-reorder``;
    here xdist's own scheduler, with this run's options, hands out two long files of one test each
    before a short file of forty, in the order collected."""
    assert [n for n in LONGEST_FIRST if not (ROOT / "tests" / n).is_file()] == []  # none renamed away
    collection = [f"tests/{name}::test_one" for name in LONGEST_FIRST[:2]]
    collection += [f"tests/test_many.py::test_{i}" for i in range(40)]
    handed: list[int] = []
    monkeypatch.setattr(pytestconfig.option, "tx", ["popen", "popen"])  # two processes, also under -n 0
    scheduler = LoadFileScheduling(pytestconfig)
    workers = [_Worker(f"gw{i}", handed) for i in range(2)]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]  # what it uses of a WorkerController
        scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    files = list(dict.fromkeys(collection[i].split("::")[0] for i in handed))
    assert files == [f"tests/{name}" for name in LONGEST_FIRST[:2]] + ["tests/test_many.py"]


def test_a_test_that_hangs_fails_alone_saying_where_it_waited_and_the_run_goes_on(
    pytestconfig: pytest.Config, tmp_path: Path
) -> None:
    """A test blocked for good (a read from a process that never prints its address, a trio task
    waiting for what never comes) fails, naming where it waited, and the next tests run and pass:
    pyproject's ``timeout`` (pytest-timeout), here cut to two seconds, and tests/trio_timeouts.py
    for trio tests. Without them the run would wait forever."""
    configured = float(pytestconfig.getini("timeout"))
    assert 60 <= configured <= 600, configured  # set, and longer than the longest test under load
    assert pytestconfig.getini("timeout_method") == "signal"  # fails the test, not its process
    (tmp_path / "test_hang.py").write_text(
        "import os\n\nimport trio\n\n"
        "def test_sync_hangs():\n    read_end, _ = os.pipe()\n    os.read(read_end, 1)\n\n"
        "def test_sync_after():\n    pass\n\n"
        "async def test_trio_hangs():\n    await trio.Event().wait()\n\n"
        "async def test_trio_after():\n    await trio.sleep(0)\n"
    )
    proc = _suite(
        str(tmp_path / "test_hang.py"), "-p", "no:cacheprovider", "-p", "trio_timeouts",
        "-o", "trio_mode=true", "-o", "timeout=2", env={"PYTHONPATH": str(ROOT / "tests")},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "FAILED" in out and "test_hang.py::test_sync_hangs" in out and "os.read(read_end, 1)" in out
    assert "test_hang.py::test_trio_hangs" in out and "await trio.Event().wait()" in out
    assert out.count("Failed: Timeout (>2.0s) from pytest-timeout") >= 2, out
    assert "TrioInternalError" not in out and "run() from inside a run()" not in out
    assert proc.stdout.strip().splitlines()[-1] == "2 passed, 2 failed"


def test_a_line_from_a_child_is_awaited_under_a_deadline_that_names_it() -> None:
    """`cellarena_cli.line_within`, which tests use to read what a process prints: lines the text
    stream has read ahead come at once, the end comes as "", and a child that prints nothing more
    fails the test after the deadline, saying what it waited for, where a bare readline would hang."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('one\\ntwo', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert line_within(child.stdout, what="first line") == "one\n"
        assert line_within(child.stdout, 0.5, "second line") == "two\n"  # read ahead with the first
        with pytest.raises(AssertionError, match=r"^no third line in 0\.2 s$"):
            line_within(child.stdout, 0.2, "third line")
        assert child.stdin is not None
        child.stdin.close()  # the child ends; the read left waiting above takes its end
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()


def test_a_command_run_here_has_the_stderr_its_process_would_have() -> None:
    """`run_here` gives what `cellarena` as a process gives: nothing on stderr for a command that
    ends well (click ends it with SystemExit(0), which is no error), the traceback for one that
    raises."""
    import click

    ended = run_here("results", "--help")
    assert (ended.returncode, ended.stderr) == (0, "") and "Usage:" in ended.stdout

    @click.command()
    def broken() -> None:
        raise ValueError("broken on purpose")

    raised = run_here(command=broken)
    assert raised.returncode == 1
    assert raised.stderr.startswith("Traceback") and "ValueError: broken on purpose" in raised.stderr
