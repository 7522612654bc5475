"""Load for `cellarena bench server`: many bot connections in one process, each answering at once.

Plain epoll in one thread, so that the load costs as little CPU as possible and the benchmark
measures the server, which runs in another process. Every bot answers a tick with its game's no-op
(the SDK's ``noop_answer``), and a frame already encoded for the same tick and answer is sent again
rather than encoded once more: in a benchmark of thousands of bots most answers are alike.
"""

from __future__ import annotations

import select
import socket
import sys
from collections.abc import Hashable
from typing import Any

from cellarena.sdk import protocol
from cellarena.sdk.games import adapter


def _key(tick: int, answer: Any) -> Hashable | None:
    """A cache key for the frame answering ``tick`` with ``answer``, or None if it cannot have one."""
    if isinstance(answer, list) and all(type(v) is int for v in answer):
        return tick, tuple(answer)
    return None


def run(host: str, port: int, connections: int, game: str) -> int:
    """Connect ``connections`` bots, answer every tick with no-ops, return when every match ended."""
    noop = adapter(game).noop_answer
    epoll = select.epoll()
    bots: dict[int, tuple[socket.socket, protocol.FrameReader]] = {}
    answers: dict[Hashable, bytes] = {}

    def serve(timeout: float) -> None:
        for fd, _ in epoll.poll(timeout):
            sock, reader = bots[fd]
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            done = not data
            for msg in reader.feed(data) if data else ():
                if msg["type"] == "tick":
                    answer = noop(msg)
                    key = _key(msg["tick"], answer)
                    frame = answers.get(key) if key is not None else None
                    if frame is None:
                        frame = protocol.encode(protocol.moves(msg["tick"], answer))
                        if key is not None:
                            if len(answers) > 64:
                                answers.clear()
                            answers[key] = frame
                    sock.send(frame)
                elif msg["type"] in ("end", "error"):
                    done = True
            if done:
                epoll.unregister(fd)
                del bots[fd]
                sock.close()

    for i in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(protocol.encode(protocol.hello(f"load{i}", game)))
        sock.setblocking(False)
        bots[sock.fileno()] = (sock, protocol.FrameReader(protocol.MAX_SERVER_FRAME))
        epoll.register(sock.fileno(), select.EPOLLIN)
        serve(0)  # the matches already seated are playing: answer them while the rest connect
    while bots:
        serve(60)
    epoll.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
