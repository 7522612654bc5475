"""Load for `cellarena bench server`: many bot connections in one process, each answering at once.

Plain `selectors` (epoll) in one thread, so that the load costs as little CPU as possible and the
benchmark measures the server, which runs in another process.
"""

from __future__ import annotations

import selectors
import socket
import sys

from cellarena.sdk import protocol


def run(host: str, port: int, connections: int, game: str = "rezzo") -> int:
    """Connect ``connections`` bots, answer every tick with no-ops, return when every match ended."""
    sel = selectors.DefaultSelector()
    readers: dict[socket.socket, protocol.FrameReader] = {}
    for i in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(protocol.encode(protocol.hello(f"load{i}", game)))
        sock.setblocking(False)
        readers[sock] = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
        sel.register(sock, selectors.EVENT_READ)
    open_count = connections
    while open_count:
        for key, _ in sel.select(timeout=60):
            sock = key.fileobj
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            done = not data
            for msg in readers[sock].feed(data) if data else ():
                if msg["type"] == "tick":
                    sock.send(protocol.encode(protocol.moves(msg["tick"], [0] * len(msg["agents"]))))
                elif msg["type"] in ("end", "error"):
                    done = True
            if done:
                sel.unregister(sock)
                sock.close()
                open_count -= 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
