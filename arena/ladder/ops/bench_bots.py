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
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

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


class _Load:
    """The bots of one run, their sockets in one epoll, and the counts of what happened."""

    def __init__(self, host: str, port: int, game: str, tokens: list[str], *, follow: bool) -> None:
        self.home = (host, port)
        self.game = game
        self.noop = adapter(game).noop_answer
        self.accepts = protocol.ACCEPTS if follow else ()
        self.epoll = select.epoll()
        self.bots = [_Bot(token) for token in tokens]
        self.by_fd: dict[int, _Bot] = {}
        self.refused: collections.Counter[str] = collections.Counter()
        self.connections = self.redirects = 0

    def connect_due(self, now: float) -> None:
        """Connect every bot whose time to (re)connect has come: to the ladder, or where it was sent."""
        for i, bot in enumerate(self.bots):
            if bot.sock is not None or bot.connect_at > now:
                continue
            where, token = self.home, bot.token
            if bot.target is not None:  # its match is elsewhere; then back to the ladder
                where, token = bot.target[:2], bot.target[2]
                bot.target = None
            try:
                sock = socket.create_connection(where, timeout=5)
            except OSError:
                bot.connect_at = now + RETRY_S
                self.refused["connect_failed"] += 1
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = protocol.hello(f"load{i}", self.game, token=token, accepts=self.accepts)
            sock.sendall(protocol.encode(hello))
            sock.setblocking(False)
            bot.sock = sock
            self.by_fd[sock.fileno()] = bot
            self.epoll.register(sock.fileno(), select.EPOLLIN)
            self.connections += 1

    def read(self, bot: _Bot) -> None:
        """Answer what ``bot``'s socket brought; close it when its match ended or it was refused."""
        assert bot.sock is not None
        try:
            data = bot.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        retry: float | None = None if data else 0.0
        for msg in bot.reader.feed(data) if data else ():
            if msg["type"] != "tick":
                retry = self.told(bot, msg, retry)
                continue
            try:
                bot.sock.send(protocol.encode(protocol.moves(msg["tick"], self.noop(msg))))
            except OSError:
                retry = 0.0
                break
        if retry is not None:
            self.close(bot, retry)

    def told(self, bot: _Bot, msg: dict[str, Any], retry: float | None) -> float | None:
        """A message other than a tick: the wait before connecting again once this batch is read
        (0 after an end or a redirect, `RETRY_S` after a refusal), or ``retry`` as it was."""
        kind = msg["type"]
        if kind == "redirect":
            bot.target = (msg["host"], msg["port"], msg["token"])
            self.redirects += 1
        elif kind == "error":
            self.refused[str(msg.get("code"))] += 1
            return RETRY_S
        return 0.0 if kind in ("end", "redirect") else retry

    def close(self, bot: _Bot, retry_after: float) -> None:
        assert bot.sock is not None
        fd = bot.sock.fileno()
        self.epoll.unregister(fd)
        del self.by_fd[fd]
        bot.sock.close()
        bot.sock = None
        bot.reader = _reader()
        bot.connect_at = time.monotonic() + retry_after

    def stop(self) -> dict[str, object]:
        for bot in self.bots:
            if bot.sock is not None:
                bot.sock.close()
        self.epoll.close()
        return {"connections": self.connections, "redirects": self.redirects, "refused": dict(self.refused)}


def run(
    host: str, port: int, seconds: float, game: str, tokens: list[str], *, follow: bool = False
) -> dict[str, object]:
    """Play until ``seconds`` have passed or SIGTERM comes (following redirects with ``follow``); the
    counts of what happened."""
    load = _Load(host, port, game, tokens, follow=follow)
    stopped: list[int] = []
    # The bench stops the load with SIGTERM once it has measured (its warm-up may run long).
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
    deadline = time.monotonic() + seconds
    while not stopped and (now := time.monotonic()) < deadline:
        load.connect_due(now)
        for fd, _ in load.epoll.poll(0.02):
            load.read(load.by_fd[fd])
    return load.stop()


if __name__ == "__main__":
    tokens = [line.strip() for line in sys.stdin if line.strip()]
    follow = sys.argv[5:] == ["follow"]
    result = run(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], tokens, follow=follow)
    print(json.dumps(result), flush=True)
