"""The clock that says whether an answer was late: the wall clock, or trio's clock in virtual time.

A seat's budget starts when its frame left and its answer counts from when the kernel received it
(SO_TIMESTAMPNS), both read as ``time.time()``, so that the server's own delays are never charged to
a bot (`connection`). Tests of that timing logic run under trio's ``MockClock``, whose time jumps
ahead whenever every task waits: a 15 Hz match, its late answers and its time banks play at once and
the same on a busy machine. There the wall clock and the kernel's stamps would still say real time,
so inside `virtual()` both sides read trio's clock instead. Connections pick their clock when they
are made; the lobby's tasks inherit the choice from the task that started them.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator

import trio

_VIRTUAL: contextvars.ContextVar[bool] = contextvars.ContextVar("cellarena_virtual_wall", default=False)


def is_virtual() -> bool:
    """Whether this task reads trio's clock as the wall clock (and no kernel stamps)."""
    return _VIRTUAL.get()


def source() -> Callable[[], float]:
    """The wall clock for this task: ``time.time``, or ``trio.current_time`` in virtual time."""
    return trio.current_time if _VIRTUAL.get() else time.time


def now() -> float:
    return source()()


@contextlib.contextmanager
def virtual() -> Iterator[None]:
    """Within this block, tasks started from here judge lateness by trio's clock (a test's MockClock)."""
    token = _VIRTUAL.set(True)
    try:
        yield
    finally:
        _VIRTUAL.reset(token)
