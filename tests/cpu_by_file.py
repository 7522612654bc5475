"""Where the suite's CPU goes: each test file's CPU seconds, its tests' and the processes they waited for.

Why: the parallel phase is CPU-bound (docs/architecture.md, "Tests"). A file's wall time (the
durations digest) says how long it holds a test process, not what it costs the others: a test that
waits on a server's 15 Hz clock looks slow and costs little; one that starts ten `cellarena` processes
looks quick and costs seconds of every other test's CPU. So each test's CPU is counted from its
set-up to its tear-down: its test process's own, and that of the processes it started and waited for
(``RUSAGE_CHILDREN``, which also holds their own waited children: a tournament's bots, a ladder's
workers). A process not yet reaped, or one left to init, is not counted; a module fixture's set-up
counts in its file's first test, its tear-down in the last. The figure travels to pytest-xdist's
controller in the test's report, and with ``--durations`` (tests/suite.py passes it) the run ends
with the files that cost most.

tests/conftest.py loads it for every run; ``-p cpu_by_file`` loads it elsewhere.
"""

from __future__ import annotations

import resource
from collections.abc import Generator, Iterator

import pytest
from pluggy import Result

#: The name of a test's CPU seconds among its report's ``user_properties``.
CPU_PROPERTY = "cpu_seconds"
#: How many of the costliest files the summary lists.
SHOWN = 30
_STARTED = pytest.StashKey[float]()


def cpu_used() -> float:
    """CPU seconds, user and system, of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def costliest(per_file: dict[str, float], shown: int = SHOWN) -> Iterator[str]:
    """The summary's lines: a title, then the ``shown`` costliest files, most first, with their share."""
    if not per_file:
        return
    total = sum(per_file.values())
    ranking = sorted(per_file.items(), key=lambda item: (-item[1], item[0]))[:shown]
    yield f"== most CPU: {len(ranking)} of {len(per_file)} files ({total:.0f} s of CPU in all)"
    for path, seconds in ranking:
        yield f"{seconds:8.1f}s {100 * seconds / (total or 1):5.1f}%  {path}"


class CpuByFile:
    """The hooks: measure in the process that runs a test, add up in the one that reports it."""

    def __init__(self) -> None:
        self.per_file: dict[str, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        item.stash[_STARTED] = cpu_used()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        if call.when == "teardown" and _STARTED in item.stash:
            outcome.get_result().user_properties.append((CPU_PROPERTY, cpu_used() - item.stash[_STARTED]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == CPU_PROPERTY and isinstance(value, float):
                path = report.nodeid.split("::", 1)[0]
                self.per_file[path] = self.per_file.get(path, 0.0) + value

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, config: pytest.Config
    ) -> None:
        if config.getoption("durations", None) is None:
            return
        for line in costliest(self.per_file):
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CpuByFile(), "cpu-by-file")
