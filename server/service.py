"""A match server as a service: serve until a signal says stop.

Ctrl-C or SIGTERM (a service manager's stop) ends the running matches without a result and tells
every client why (`Lobby.shutdown`); a second signal stops at once. `cellarena serve` runs this; it
knows nothing of click, so it is tested on its own.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from cellarena.server.play.lobby import Lobby

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve_until_signalled(
    lobby: Lobby,
    *,
    on_listening: Callable[[int], None] = lambda port: None,
    notify: Callable[[str], None] = lambda text: None,
    signals: Iterable[signal.Signals] = STOP_SIGNALS,
    on_stop: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve ``lobby`` until it ends by itself (its match count is reached) or a signal stops it.

    ``on_listening(port)`` is called once the lobby listens; ``notify`` gets a line for the operator
    at each step of stopping. The first signal stops gracefully; a second one while that is under
    way (a client slow to take its last frame) cancels everything at once. ``on_stop`` runs at the
    first signal, before the lobby stops (a ladder's services take no new work from then on).
    """
    with trio.open_signal_receiver(*signals) as received:
        async with trio.open_nursery() as nursery:
            stopping = False

            async def serve_then_stop(task_status: trio.TaskStatus[int]) -> None:
                await lobby.serve(task_status=task_status)
                nursery.cancel_scope.cancel()

            async def stop_on_signal() -> None:
                nonlocal stopping
                async for _ in received:
                    if stopping:
                        notify("stopping at once")
                        nursery.cancel_scope.cancel()
                        return
                    stopping = True
                    notify("stopping (again to stop at once)")
                    nursery.start_soon(stop_gracefully)

            async def stop_gracefully() -> None:
                if on_stop is not None:
                    await on_stop()
                cut = await lobby.shutdown()
                notify(f"stopped; {cut} match(es) under way ended without a result")

            port = await nursery.start(serve_then_stop)
            nursery.start_soon(stop_on_signal)
            on_listening(port)
