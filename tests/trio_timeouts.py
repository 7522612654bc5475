"""A trio test that runs out of time fails alone, saying where its tasks waited.

pyproject's ``timeout`` (pytest-timeout, ``signal`` method) raises its failure from SIGALRM's handler
wherever the main thread is. In a trio test that is mostly trio's own loop, between two steps and
outside the generator that runs them; that generator then keeps the dead run as the thread's current
one while pytest keeps the failure's frames, and the process's next trio test fails too ("Attempted
to call run() from inside a run()"). Here the handler hands the failure to the run instead
(`trio.lowlevel.TrioToken.run_sync_soon`): trio cancels every task and ends the run, and the test
fails with pytest-timeout's message, after a dump of every task's await stack (what a hung test
needs to be read).

tests/conftest.py loads it for every run.
"""

from __future__ import annotations

import inspect
import signal
import sys
import threading
import traceback
from collections.abc import Generator
from types import FrameType

import pytest
import pytest_timeout
import trio


def _is_trio_test(item: pytest.Item) -> bool:
    return inspect.iscoroutinefunction(getattr(item, "obj", None))


def _task_stacks() -> str:
    """Every task of the current run and where it waits, as a traceback each."""
    out: list[str] = []

    def visit(task: trio.lowlevel.Task, depth: int) -> None:
        stack = traceback.StackSummary.extract(task.iter_await_frames())
        out.append(f"{'  ' * depth}task {task.name}:\n" + "".join(stack.format()))
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                visit(child, depth + 1)

    visit(trio.lowlevel.current_root_task(), 0)  # type: ignore[arg-type]  # None only outside a run
    return "\n".join(out)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: pytest_timeout.Settings) -> bool | None:
    """For a trio test under the ``signal`` method: the failure raised inside the run. Others:
    pytest-timeout's own (None)."""
    if settings.method != "signal" or not _is_trio_test(item):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None  # no signal handler here: pytest-timeout's thread then

    def time_is_up() -> None:
        sys.stderr.write(f"\n+++ Timeout: the tasks of {item.nodeid} +++\n{_task_stacks()}\n")
        pytest_timeout.timeout_sigalrm(item, settings)  # other threads' stacks, then the failure

    def handler(_signum: int, _frame: FrameType | None) -> None:
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:  # outside the run (its set-up): fail where it is, as pytest-timeout does
            pytest_timeout.timeout_sigalrm(item, settings)
        else:
            token.run_sync_soon(time_is_up)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's cancel hook calls it
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


def _timeout_in(exc: BaseException | None) -> BaseException | None:
    """pytest-timeout's failure, if it is what ended ``exc`` (through causes and exception groups)."""
    if exc is None:
        return None
    if isinstance(exc, pytest.fail.Exception) and "from pytest-timeout" in str(exc):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _timeout_in(inner)) is not None:
                return found
    return _timeout_in(exc.__cause__)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The run's end reads "internal error in Trio - please file a bug!" (a callback given to the run
    raised): the test fails with the timeout itself."""
    __tracebackhide__ = True
    try:
        return (yield)
    except trio.TrioInternalError as exc:
        found = _timeout_in(exc.__cause__)
        if found is None:
            raise
        raise found.with_traceback(None) from None
