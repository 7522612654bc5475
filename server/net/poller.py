"""The readiness of every client socket, from one trio task.

Why not a trio task per connection waiting on its own socket: each such task brings a nursery, a
cancel scope, coroutines and closures, about a hundred objects that every full garbage collection
walks. At a thousand clients a full collection took 16 to 40 ms, longer than a quarter of a 15 Hz
tick, and it came exactly when it hurts: while a crowd of bots connects and matches start. Waking a
task per message also costs a task switch each.

Here every connection is registered with one selector (epoll on Linux, kqueue on macOS and the
BSDs). One task waits, through trio, for the selector's own descriptor to become readable, then
calls each ready connection back synchronously. A connection with nothing to do is a plain object:
no task, no cancel scope. A connection asks only for the events it wants (reading is off while a
fixed-rate match drains it itself; writing is on only while frames wait for the kernel), so the
selector reports nothing in the steady state of a fixed-rate match.
"""

from __future__ import annotations

import logging
import math
import selectors
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import trio

log = logging.getLogger("cellarena.server")


class Pollable(Protocol):
    """What the poller calls back."""

    def fileno(self) -> int: ...

    def on_ready(self, readable: bool, writable: bool) -> None:
        """The socket is ready for what was asked; called from the poller's task, must not block."""

    def on_deadline(self) -> None:
        """The deadline set with `Poller.set_deadline` has passed."""

    def abort(self) -> None:
        """The poller stops: close now, without waiting for anything."""


T = TypeVar("T", bound="Pollable")


class PollerUnavailableError(OSError):
    """This platform has no selector whose own descriptor trio can wait on (an OSError, so that the
    commands report it as they report a port already in use)."""


class Poller(Generic[T]):
    """Watches many sockets for one trio task; `serve()` is that task."""

    def __init__(self) -> None:
        selector = selectors.DefaultSelector()
        if not hasattr(selector, "fileno"):  # select() or poll() only: nothing trio can wait on
            selector.close()
            raise PollerUnavailableError(
                "the cellarena server needs epoll or kqueue (Linux, macOS or a BSD); "
                "on Windows, run it under WSL"
            )
        self._selector = selector
        self._fd = selector.fileno()
        self._masks: dict[T, int] = {}
        self._deadlines: dict[T, float] = {}
        self._scope: trio.CancelScope | None = None
        self._targets: set[T] = set()
        self._empty = trio.Event()
        self._stopped = False

    # ----------------------------------------------------------------- registration
    def add(self, target: T) -> None:
        """Own ``target`` until `remove`; it asks for events with `watch`."""
        if self._stopped:
            target.abort()
            return
        self._targets.add(target)

    def watch(self, target: T, *, read: bool, write: bool) -> None:
        """Ask for exactly these events on ``target`` (neither: none, it stays owned)."""
        mask = (selectors.EVENT_READ if read else 0) | (selectors.EVENT_WRITE if write else 0)
        old = self._masks.get(target, 0)
        if mask == old or target not in self._targets:
            return
        if not mask:
            del self._masks[target]
            self._selector.unregister(target)
        elif not old:
            self._masks[target] = mask
            self._selector.register(target, mask, target)
        else:
            self._masks[target] = mask
            self._selector.modify(target, mask, target)

    def set_deadline(self, target: T, when: float) -> None:
        """Call ``target.on_deadline()`` once at trio time ``when``, unless it is removed first."""
        self._deadlines[target] = when
        if self._scope is not None and when < self._scope.deadline:
            self._scope.deadline = when

    def remove(self, target: T) -> None:
        """Forget ``target``; call it before closing its socket (a closed descriptor cannot be
        unregistered, and its number may already belong to a new connection)."""
        self.watch(target, read=False, write=False)
        self._deadlines.pop(target, None)
        self._targets.discard(target)
        if not self._targets:
            self._empty.set()

    @property
    def targets(self) -> frozenset[T]:
        return frozenset(self._targets)

    async def wait_empty(self) -> None:
        """Return once every target has been removed."""
        if self._targets:
            self._empty = trio.Event()
            await self._empty.wait()

    # ----------------------------------------------------------------- the task
    def _call(self, target: T, callback: Callable[..., None], *args: bool) -> None:
        """Run one callback; one that raises costs its own target, never the poller or the others."""
        try:
            callback(*args)
        except Exception:
            log.exception("internal error serving %r; it is closed", target)
            self.remove(target)
            target.abort()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dispatch readiness and deadlines until cancelled; then abort every target left."""
        select, read, write = self._selector.select, selectors.EVENT_READ, selectors.EVENT_WRITE
        try:
            task_status.started()
            while True:
                with trio.CancelScope(deadline=min(self._deadlines.values(), default=math.inf)) as scope:
                    self._scope = scope
                    await trio.lowlevel.wait_readable(self._fd)
                self._scope = None
                # Level-triggered: whatever a callback leaves unread is reported again next round.
                for key, events in select(0):
                    target = key.data
                    if target in self._masks:  # an earlier callback of this round may have removed it
                        self._call(target, target.on_ready, bool(events & read), bool(events & write))
                if self._deadlines:
                    now = trio.current_time()
                    for target, when in list(self._deadlines.items()):
                        if when <= now and self._deadlines.get(target) == when:
                            del self._deadlines[target]
                            self._call(target, target.on_deadline)
        finally:
            self._stopped = True
            self._scope = None
            for target in list(self._targets):
                target.abort()
            self._selector.close()
