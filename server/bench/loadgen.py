"""Load for `cellarena bench server`: many bot connections in one process, each answering at once
(or, with a lead in ms, that long before its budget runs out: bots that use their whole budget).

Plain epoll in one thread, so that the load costs as little CPU as possible and the benchmark
measures the server, which runs in another process. Every bot answers a tick with its game's no-op
(the SDK's ``noop_answer``), and a frame already encoded for the same tick and answer is sent again
rather than encoded once more: in a benchmark of thousands of bots most answers are alike.

With a drawing (`DRAWINGS`), every answer also carries that ``debug`` map (docs/protocol.md#debug),
so that `bench server` can measure what the debug layer costs the server beside answers without one.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import select
import socket
import sys
import time
from collections.abc import Hashable
from typing import Any

from cellarena.sdk import protocol
from cellarena.sdk.games import adapter


def _drawing(marks: int, lines: int, text: list[str]) -> dict[str, Any]:
    """A ``debug`` map of cells every game takes (Rezzo: viewport cells of the first agent)."""
    return {
        "marks": [
            {"cell": [i % 13, (i * 5) % 13], "colour": "#ffe119", "label": f"mark {i}"} for i in range(marks)
        ],
        "lines": [{"from": [0, i % 13], "to": [12, (i * 3) % 13], "colour": "#42d4f4"} for i in range(lines)],
        "text": text,
    }


#: What the load's bots draw with each answer: nothing; what a bot author might draw (a few marks, a
#: line, two text lines); or a flood past every cap (300 marks, 80 lines, 2 KiB of text), which the
#: server cuts at the caps (its cost is the ceiling of the layer's).
DRAWINGS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "typical": _drawing(8, 1, ["heading north", "target at (4, 7)"]),
    "flood": _drawing(300, 80, ["x" * 100] * 20),
}


def _key(tick: int, answer: Any) -> Hashable | None:
    """A cache key for the frame answering ``tick`` with ``answer``, or None if it cannot have one."""
    if isinstance(answer, list) and all(type(v) is int for v in answer):
        return tick, tuple(answer)
    return None


def run(
    host: str, port: int, connections: int, game: str, lead_ms: float | None = None, debug: str = "none"
) -> int:
    """Connect ``connections`` bots, answer every tick with no-ops, return when every match ended.

    ``lead_ms``: answer that long before the tick's budget runs out (counted from the frame's
    arrival), instead of at once. ``debug``: the drawing sent with every answer (`DRAWINGS`)."""
    load = _Load(game, lead_ms, debug)
    for i in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(protocol.encode(protocol.hello(f"load{i}", game)))
        sock.setblocking(False)
        load.bots[sock.fileno()] = (sock, protocol.FrameReader(protocol.MAX_SERVER_FRAME))
        load.epoll.register(sock.fileno(), select.EPOLLIN)
        load.serve(0)  # the matches already seated are playing: answer them while the rest connect
    while load.bots:
        load.serve(60)
        load.send_due()
    load.epoll.close()
    return 0


class _Load:
    """The load's bots on one epoll: each tick answered with the game's no-op, at once or held back
    until ``lead_ms`` before its budget ends."""

    def __init__(self, game: str, lead_ms: float | None, debug: str) -> None:
        self.noop = adapter(game).noop_answer
        self.drawing = DRAWINGS[debug]
        self.lead_ms = lead_ms
        self.epoll = select.epoll()
        self.bots: dict[int, tuple[socket.socket, protocol.FrameReader]] = {}
        #: Encoded answers by `_key`: most ticks' no-op is the same frame.
        self.answers: dict[Hashable, bytes] = {}
        self.due: list[tuple[float, int, socket.socket, bytes]] = []  # answers held back, by when to send
        self.seq = itertools.count()

    def send_due(self) -> float:
        """Send the answers due by now; the seconds until the next one (or 60)."""
        due = self.due
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, sock, frame = heapq.heappop(due)
            if sock.fileno() >= 0:
                with contextlib.suppress(OSError):
                    sock.send(frame)
        return max(0.0, due[0][0] - now) if due else 60.0

    def serve(self, timeout: float) -> None:
        """Read what the bots were sent within ``timeout`` seconds, and answer; a bot whose match
        ended (or whose connection did) goes."""
        timeout = min(timeout, self.send_due())
        for fd, _ in self.epoll.poll(timeout):
            sock, reader = self.bots[fd]
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            done = not data
            for msg in reader.feed(data) if data else ():
                if msg["type"] == "tick":
                    self._answer(sock, msg)
                elif msg["type"] in ("end", "error"):
                    done = True
            if done:
                self.epoll.unregister(fd)
                del self.bots[fd]
                sock.close()

    def _answer(self, sock: socket.socket, msg: dict[str, Any]) -> None:
        frame = self._frame(msg)
        if self.lead_ms is None:
            sock.send(frame)
        else:
            when = time.monotonic() + (msg["budget_ms"] - self.lead_ms) / 1000.0
            heapq.heappush(self.due, (when, next(self.seq), sock, frame))

    def _frame(self, msg: dict[str, Any]) -> bytes:
        """The encoded no-op answer to the tick ``msg``, from the cache when it can be."""
        answer = self.noop(msg)
        key = _key(msg["tick"], answer)
        frame = self.answers.get(key) if key is not None else None
        if frame is None:
            reply: dict[str, Any] = dict(protocol.moves(msg["tick"], answer))
            if self.drawing is not None:
                reply["debug"] = self.drawing
            frame = protocol.encode(reply)
            if key is not None:
                if len(self.answers) > 64:
                    self.answers.clear()
                self.answers[key] = frame
        return frame


if __name__ == "__main__":
    # HOST PORT CONNECTIONS GAME [LEAD_MS or -] [DRAWING]
    lead = float(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
    drawn = sys.argv[6] if len(sys.argv) > 6 else "none"
    raise SystemExit(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], lead, drawn))
