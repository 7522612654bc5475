"""Load for `cellarena bench server`: many bot connections in one process, each answering at once.

Plain epoll in one thread, so that the load costs as little CPU as possible and the benchmark
measures the server, which runs in another process. Every bot answers a tick with no-ops, and the
answer frame for a (tick, agent count) is encoded once and sent by every bot that needs it.
"""

from __future__ import annotations

import select
import socket
import sys

from cellarena.sdk import protocol


def run(host: str, port: int, connections: int, game: str = "rezzo") -> int:
    """Connect ``connections`` bots, answer every tick with no-ops, return when every match ended."""
    epoll = select.epoll()
    bots: dict[int, tuple[socket.socket, protocol.FrameReader]] = {}
    answers: dict[tuple[int, int], bytes] = {}

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
                    key = (msg["tick"], len(msg["agents"]))
                    frame = answers.get(key)
                    if frame is None:
                        if len(answers) > 64:
                            answers.clear()
                        frame = answers[key] = protocol.encode(protocol.moves(key[0], [0] * key[1]))
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
    raise SystemExit(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
