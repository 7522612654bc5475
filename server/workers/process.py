"""One worker process of `cellarena serve --workers N`: ``python -m cellarena.server.workers.process FD``.

FD is this process's end of the socket pair its front made (`workers.WorkerPool`). The first
message is the lobby config to run; from then on the front hands over matches (each seat's socket,
with the bytes the front read past its hello) and spectators, and this process plays them in a
lobby that does not listen (`LobbyConfig.listen`), exactly as one process would, and tells the
front each match's outcome. Told to stop, or finding its front gone (nobody would hear a result),
it stops as `serve` does on a signal: matches under way end without a result and every client is
told why.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import signal
import socket
import sys
from typing import Any

import trio

from cellarena.server.net.connection import Connection
from cellarena.server.play.lobby import Lobby
from cellarena.server.play.match import MatchOutcome
from cellarena.server.workers.front import Channel

log = logging.getLogger("cellarena.server")

#: Seconds to wait for the front's first message (it is sent as soon as the process starts).
CONFIG_TIMEOUT = 60.0


def adopt(lobby: Lobby, info: dict[str, Any], sock: socket.socket) -> Connection | None:
    """The connection the front handed over, served by ``lobby`` as the front served it."""
    conn = lobby.adopt(sock, peer=info["peer"], via=info["via"])
    if conn is None:
        return None
    conn.name = info["name"]
    conn.joined = info["joined"]
    if info["leftover"]:
        conn.frames.feed(info["leftover"])  # part of a frame only: a whole one was handled there
    conn.resume_reading()  # as after its hello; a match's seat sets its own reading when it greets
    return conn


def start_match(lobby: Lobby, message: dict[str, Any], socks: list[socket.socket]) -> None:
    """Start the match the front made, its seats in order (None: a seat whose bot left meanwhile)."""
    given = iter(socks)
    conns = [None if info is None else adopt(lobby, info, next(given)) for info in message["seats"]]
    lobby.start_match(
        conns,
        message["names"],
        engine_config=message["engine_config"],
        seed=message["seed"],
        recorder=message["recorder"],
        meta=message["meta"],
        number=message["number"],
    )


async def serve(sock: socket.socket) -> int:
    """Serve the front on ``sock`` until told to stop or the front is gone; the exit status."""
    channel = Channel(sock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send_all)
        with trio.move_on_after(CONFIG_TIMEOUT):
            first = await channel.receive()
        if first is None or first[0].get("kind") != "config":
            print("cellarena worker: no config came from the front; exiting", file=sys.stderr)
            return 2
        init = first[0]
        index = init["index"]
        logging.basicConfig(
            level=init["log_level"],
            stream=sys.stderr,
            format=f"%(asctime)s %(levelname)s worker {index}: %(message)s",
        )

        def finished(number: int, outcome: MatchOutcome | None) -> None:
            channel.post({"kind": "finished", "number": number, "outcome": outcome})

        lobby = Lobby(dataclasses.replace(init["config"], on_finished=finished))
        # As `serve` does: what start-up made need not be walked by every full collection.
        gc.collect()
        gc.freeze()
        await nursery.start(lobby.serve)
        channel.post({"kind": "ready", "pid": os.getpid()})
        while True:
            got = await channel.receive()
            if got is None:
                log.error("the front process is gone; stopping (matches under way end without a result)")
                await lobby.shutdown()
                break
            message, socks = got
            kind = message.get("kind")
            if kind == "match":
                start_match(lobby, message, socks)
            elif kind == "watch":
                conn = adopt(lobby, message["conn"], socks[0])
                if conn is not None:
                    number = message["number"]
                    if not message["asked"] and all(m.number != number for m in lobby.running):
                        number = None  # the newest ended on the way: this worker's newest, or its next
                    lobby.watch(conn, number)
            elif kind == "stop":
                # Each match cut short is told to the front as it ends (`finished`, no outcome).
                await lobby.shutdown(message.get("grace", 2.0))
                break
        await channel.flush(5.0)
        nursery.cancel_scope.cancel()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print(
            "usage: python -m cellarena.server.workers.process FD (started by `cellarena serve --workers`)",
            file=sys.stderr,
        )
        return 2
    # The front takes Ctrl-C and SIGTERM (a terminal and a service manager signal the whole group)
    # and tells each worker to stop; a worker whose front is gone stops by itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    return trio.run(serve, sock)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
