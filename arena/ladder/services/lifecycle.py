"""One lifecycle for the ladder's services: initialize, run, graceful shutdown, shutdown.

The ladder server is a few services (admission, the queue, the match starter, results and ratings),
each owning one part of its state and its own background work, as the FAForever server gives each of
its services ``initialize``, ``graceful_shutdown`` and ``shutdown``. Here, with trio, each also has a
``run`` task that reports through ``task_status`` once it is ready, so the next service starts only
after the one it reads from (the queue pairs by the ratings the results service loaded).

`Services` drives them in one order: initialize and run in the order given (a service comes after
what it depends on), graceful shutdown and shutdown in the reverse order (admission stops taking bots
before the starter stops starting matches, and the results service writes down last). A later
feature (accounts, challenges, pausing) is one more service in the list, not more branches in one class.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

log = logging.getLogger("cellarena.ladder")

#: Seconds each service's `shutdown` may take (voiding matches, writing the last results) before the
#: next one's turn: a database that hangs must not keep the process from stopping.
SHUTDOWN_DEADLINE = 10.0


class LadderService:
    """A part of the ladder with a lifecycle. Every hook does nothing by default."""

    #: The service's name in log lines.
    name = "service"

    async def initialize(self) -> None:
        """Once, before the ladder serves: read or repair what it needs. Raising stops the start."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Its background work, until cancelled; ``task_status.started()`` once it is ready."""
        task_status.started()

    async def graceful_shutdown(self) -> None:
        """The ladder is stopping: take no new work; what is under way goes on for now."""

    async def shutdown(self) -> None:
        """The ladder stops: end or put away what is under way (its `run` is cancelled by now)."""


class Services:
    """The ladder's services in dependency order, driven through their lifecycle together."""

    def __init__(self, services: Sequence[LadderService]) -> None:
        self.services = tuple(services)

    async def initialize(self) -> None:
        for service in self.services:
            await service.initialize()

    async def run(self) -> None:
        """Run every service's task, each started once the one before it is ready, until cancelled."""
        async with trio.open_nursery() as nursery:
            for service in self.services:
                await nursery.start(service.run)

    async def graceful_shutdown(self) -> None:
        for service in reversed(self.services):
            await service.graceful_shutdown()

    async def shutdown(self) -> None:
        """Shut every service down, last first, each under its deadline and shielded from the
        cancellation that stops the ladder; one that fails or hangs is logged and the rest go on."""
        with trio.CancelScope(shield=True):
            for service in reversed(self.services):
                with trio.move_on_after(SHUTDOWN_DEADLINE) as scope:
                    try:
                        await service.shutdown()
                    except Exception:
                        log.exception("the ladder's %s failed to shut down", service.name)
                if scope.cancelled_caught:
                    log.error(
                        "the ladder's %s did not shut down within %g s", service.name, SHUTDOWN_DEADLINE
                    )
