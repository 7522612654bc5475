"""The live view's server for `cellarena bench web`: one 15 Hz match of the load workload, its live
pages, and the no-op load bots; prints the live page's URL, then its own CPU time as JSON.

Run as ``python -m cellarena.server.bench.web_server GAME TICKS``. The page's URL comes first so the
benchmark can open browsers before the match starts; the match waits a second for them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import trio

from cellarena.server.bench.server import bench_load
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.web.live import LiveFeed, relay, serve_live
from cellarena.server.web.serving import bind, url_of


async def main(game: str, ticks: int) -> None:
    load = bench_load(game)
    lobby = Lobby(
        LobbyConfig(
            game, load.server_config(ticks), TickSettings(tick_rate=15.0), host="127.0.0.1", port=0, matches=1
        )
    )
    feed = LiveFeed(game)
    sock = bind("127.0.0.1", 0)
    print(url_of(sock, "/live/"), flush=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_live, sock, feed)
        port = await nursery.start(lobby.serve)
        nursery.start_soon(relay, "127.0.0.1", port, feed)
        await trio.sleep(1.0)  # the benchmark opens its pages now
        cpu0, wall0 = time.process_time(), time.perf_counter()
        bots = await trio.lowlevel.open_process(
            [sys.executable, "-m", "cellarena.server.bench.loadgen", "127.0.0.1", str(port),
             str(load.server_seats), game],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        await bots.wait()
        print(
            json.dumps({"cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - wall0}),
            flush=True,
        )
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
