"""A bot written against the raw protocol, for server tests: its behaviour is chosen by argv[1].

random   answer every tick at once with seeded random moves
delay:MS answer every tick MS milliseconds after receiving it
silent   send hello, then never answer
nohello  take its connection, send nothing, and exit (status 0) once the server closes it
noconnect never touch its connection (nor connect): sleep until stopped
crash    send hello, answer two ticks, then exit with status 3
crashlog as crash, writing a last line to stderr first, a token-like secret in it
forever  answer every tick, and ignore `end` (never exit by itself)
game:G   as random, but say in hello that it plays game G
chatty   as random, but print 100 kB to stdout before every answer
slow:MS:N as random, but answer ticks whose number N divides MS milliseconds after receiving them
flood    as random, with a `debug` map far past every cap (and every third tick a malformed one)
Writes its pid to $BOT_PID_FILE when set, so tests can check nothing is left running, and with
$BOT_TIMING_FILE set, one line per answer: the tick, and the ms from the tick's arrival (the
kernel's receive stamp, so time the bot spent descheduled counts too) to sending the answer, then
to just before sending it (the server saw the answer between the two).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import sys
import time
from typing import Any

from cellarena.sdk import protocol

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value where Python lacks the name


def _token() -> str | None:
    """The seat token from the pipe a launcher hands over (a ladder's house bots), read once."""
    fd = os.environ.get("CELLARENA_TOKEN_FD")
    if not fd:
        return os.environ.get("CELLARENA_TOKEN")
    with os.fdopen(int(fd), "rb") as pipe:
        return pipe.readline().decode().strip()


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "random"
    if os.environ.get("BOT_PID_FILE"):
        with open(os.environ["BOT_PID_FILE"], "a") as f:
            f.write(f"{os.getpid()}\n")
    name = os.environ.get("CELLARENA_NAME", "raw")
    # Everything is set up (and the answer path run once) before hello: the first tick's budget
    # starts when the server sends it, and timing tests expect this bot to be ready by then.
    reader = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
    reader.feed(protocol.encode(protocol.moves(0, [0])))
    game = mode[5:] if mode.startswith("game:") else "rezzo"
    if mode == "noconnect":
        time.sleep(600)  # the launcher stops it long before
        return 0
    sock, token = _connect()
    if mode == "nohello":
        sock.settimeout(600)  # the launcher stops it long before
        while sock.recv(1 << 16):  # an `error` (the hello timeout), then the end of the stream
            pass
        print("nohello: the server closed the connection", flush=True)
        return 0
    sock.sendall(protocol.encode(protocol.hello(name, game, token=token)))
    return _Player(mode, sock, random.Random(name)).play(reader)


def _connect() -> tuple[socket.socket, str | None]:
    """The connection to play on, and the token to say hello with."""
    if os.environ.get("CELLARENA_SOCKET_FD"):
        # The launcher's connection, which already owns this bot's seat: no token (docs/protocol.md).
        sock = socket.socket(fileno=int(os.environ["CELLARENA_SOCKET_FD"]))
        token = None
    else:
        sock = socket.create_connection((os.environ["CELLARENA_HOST"], int(os.environ["CELLARENA_PORT"])))
        token = _token()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock, token


class _Player:
    """The match as ``mode`` plays it, from hello to its end (the exit status)."""

    def __init__(self, mode: str, sock: socket.socket, rng: random.Random) -> None:
        self.mode = mode
        self.sock = sock
        self.rng = rng
        self.answered = 0
        self.timing = open(os.environ["BOT_TIMING_FILE"], "a") if os.environ.get("BOT_TIMING_FILE") else None  # noqa: SIM115
        if self.timing is not None:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def play(self, reader: protocol.FrameReader) -> int:
        mode = self.mode
        while True:
            data, arrival = self._receive()
            if not data:
                if mode == "forever":
                    time.sleep(3600)
                return 0
            received = time.monotonic()
            for msg in reader.feed(data):
                if msg["type"] == "tick":
                    status = self._tick(msg, arrival, received)
                    if status is not None:
                        return status
                elif msg["type"] == "end":
                    print("end", msg, flush=True)
                    if mode == "forever":
                        time.sleep(3600)
                    return 0
                elif msg["type"] == "error":
                    print("error", msg, file=sys.stderr, flush=True)
                    return 2

    def _receive(self) -> tuple[bytes, float]:
        """What arrived, and when (the kernel's stamp when timing)."""
        arrival = time.time()
        if self.timing is None:
            return self.sock.recv(1 << 16), arrival
        data, ancdata, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(16))
        for level, kind, stamp in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack_from("qq", stamp)
                arrival = sec + nsec * 1e-9
        return data, arrival

    def _tick(self, msg: dict[str, Any], arrival: float, received: float) -> int | None:
        """Answer one tick as the mode says; an exit status to end with, or None to go on."""
        mode = self.mode
        if mode == "silent":
            return None
        if mode in ("crash", "crashlog") and self.answered == 2:
            if mode == "crashlog":
                print("warming up", file=sys.stderr)
                print(f"giving up: map too big; key {'c0ffee' * 8} rejected", file=sys.stderr)
            return 3
        _wait(mode, msg, received)
        moves = [self.rng.randrange(6) for _ in msg["agents"]]
        answer: dict[str, object] = dict(protocol.moves(msg["tick"], moves))
        if mode == "flood":
            answer["debug"] = _flood(msg["tick"])
        before = time.time()
        self.sock.sendall(protocol.encode(answer))
        if self.timing is not None:
            after = time.time()
            ms = ((after - arrival) * 1000, (before - arrival) * 1000)
            print(msg["tick"], *ms, file=self.timing, flush=True)
        self.answered += 1
        return None


def _wait(mode: str, msg: dict[str, Any], received: float) -> None:
    """The delays of the delay:, slow: and chatty modes, before an answer."""
    if mode.startswith("delay:"):
        time.sleep(max(0.0, received + float(mode[6:]) / 1000 - time.monotonic()))
    if mode.startswith("slow:"):
        ms, every = mode[5:].split(":")
        if msg["tick"] % int(every) == 0:
            time.sleep(max(0.0, received + float(ms) / 1000 - time.monotonic()))
    if mode == "chatty":
        sys.stdout.write("x" * 99_999 + "\n")
        sys.stdout.flush()


def _flood(tick: int) -> object:
    """A drawing past the caps of docs/protocol.md#debug, with malformed entries among the good."""
    if tick % 3 == 0:
        return ["not", "a", "map"]
    marks: list[object] = [{"cell": [i % 13, i // 13 % 13], "colour": "#ff0000"} for i in range(400)]
    marks[1:3] = [{"cell": "x", "colour": "#ff0000"}, {"cell": [1, 1], "colour": "red!"}]
    lines = [{"from": [0, 0], "to": [12, 12], "colour": "#00ff00"} for _ in range(100)]
    return {"marks": marks, "lines": lines, "text": ["y" * 100] * 30}


if __name__ == "__main__":
    raise SystemExit(main())
