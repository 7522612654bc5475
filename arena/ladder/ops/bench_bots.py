"""Load for `cellarena bench ladder`: many ladder bots in one process that queue again after each match.

Each bot has its own token, read from standard input (one per line; never from the command line or
the environment, where other processes could read them). A bot says hello with its token, answers
every tick with the game's no-op, and when its match ends (or it is refused) connects again at once
(after a refusal that says come back later, after half a second), until the run's time is up. With
``follow``, the bots accept a ``redirect`` and play the match where it sends them (a ladder on a
cluster). Plain epoll in one thread, so that the load costs little CPU beside the server it measures.

Prints one JSON object: connections made, redirects followed and refusals by error code.
"""

from __future__ import annotations

import collections
import json
import select
import socket
import sys
import time
from dataclasses import dataclass, field

from cellarena.sdk import protocol
from cellarena.sdk.games import adapter

#: Seconds a refused bot waits before it connects again.
RETRY_S = 0.5


def _reader() -> protocol.FrameReader:
    return protocol.FrameReader(protocol.MAX_SERVER_FRAME)


@dataclass
class _Bot:
    token: str
    sock: socket.socket | None = None
    reader: protocol.FrameReader = field(default_factory=_reader)
    connect_at: float = 0.0
    #: Where the ladder sent the bot for its next match: (host, port, seat token).
    target: tuple[str, int, str] | None = None


def run(
    host: str, port: int, seconds: float, game: str, tokens: list[str], *, follow: bool = False
) -> dict[str, object]:
    """Play until ``seconds`` have passed (following redirects with ``follow``); the counts of what
    happened."""
    noop = adapter(game).noop_answer
    epoll = select.epoll()
    bots = [_Bot(token) for token in tokens]
    by_fd: dict[int, _Bot] = {}
    refused: collections.Counter[str] = collections.Counter()
    connections = redirects = 0
    accepts = protocol.ACCEPTS if follow else ()
    deadline = time.monotonic() + seconds

    def close(bot: _Bot, retry_after: float) -> None:
        assert bot.sock is not None
        fd = bot.sock.fileno()
        epoll.unregister(fd)
        del by_fd[fd]
        bot.sock.close()
        bot.sock = None
        bot.reader = _reader()
        bot.connect_at = time.monotonic() + retry_after

    while (now := time.monotonic()) < deadline:
        for i, bot in enumerate(bots):
            if bot.sock is None and bot.connect_at <= now:
                where, token = (host, port), bot.token
                if bot.target is not None:  # its match is elsewhere; then back to the ladder
                    where, token = bot.target[:2], bot.target[2]
                    bot.target = None
                try:
                    sock = socket.create_connection(where, timeout=5)
                except OSError:
                    bot.connect_at = now + RETRY_S
                    refused["connect_failed"] += 1
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                hello = protocol.hello(f"load{i}", game, token=token, accepts=accepts)
                sock.sendall(protocol.encode(hello))
                sock.setblocking(False)
                bot.sock = sock
                by_fd[sock.fileno()] = bot
                epoll.register(sock.fileno(), select.EPOLLIN)
                connections += 1
        for fd, _ in epoll.poll(0.02):
            bot = by_fd[fd]
            assert bot.sock is not None
            try:
                data = bot.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            retry: float | None = None if data else 0.0
            for msg in bot.reader.feed(data) if data else ():
                if msg["type"] == "tick":
                    try:
                        bot.sock.send(protocol.encode(protocol.moves(msg["tick"], noop(msg))))
                    except OSError:
                        retry = 0.0
                        break
                elif msg["type"] == "end":
                    retry = 0.0
                elif msg["type"] == "redirect":
                    bot.target = (msg["host"], msg["port"], msg["token"])
                    redirects += 1
                    retry = 0.0
                elif msg["type"] == "error":
                    refused[str(msg.get("code"))] += 1
                    retry = RETRY_S
            if retry is not None:
                close(bot, retry)
    for bot in bots:
        if bot.sock is not None:
            bot.sock.close()
    epoll.close()
    return {"connections": connections, "redirects": redirects, "refused": dict(refused)}


if __name__ == "__main__":
    tokens = [line.strip() for line in sys.stdin if line.strip()]
    follow = sys.argv[5:] == ["follow"]
    result = run(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], tokens, follow=follow)
    print(json.dumps(result), flush=True)
