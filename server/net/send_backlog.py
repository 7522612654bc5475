"""What a connection still has to send: the frames its socket's kernel buffer has not taken yet."""

from __future__ import annotations

import socket
from collections import deque


class SendBacklog:
    """Frames waiting for room in the kernel's buffer, oldest first, and their size in bytes.

    The first may be partly sent; whole frames are kept apart so that an error frame can always
    follow on a frame boundary (`drop_whole_frames`). A connection adds here only what the kernel
    did not take at once, so a client that reads keeps this empty.
    """

    __slots__ = ("frames", "head_started", "size")

    def __init__(self) -> None:
        self.frames: deque[memoryview] = deque()
        #: Bytes of every frame here.
        self.size = 0
        #: Whether the kernel took part of the first frame already (it must then go out whole).
        self.head_started = False

    def add(self, frame: bytes, sent: int = 0) -> None:
        """Queue ``frame`` but its first ``sent`` bytes, which the kernel took."""
        if not self.frames:
            self.head_started = sent > 0
        self.frames.append(memoryview(frame)[sent:] if sent else memoryview(frame))
        self.size += len(frame) - sent

    def send_to(self, sock: socket.socket) -> bool:
        """Hand ``sock`` as much as its kernel buffer takes now; True once nothing is left. A send
        that fails for another reason than a full buffer raises its OSError."""
        frames = self.frames
        while frames:
            head = frames[0]
            try:
                n = sock.send(head)
            except (BlockingIOError, InterruptedError):
                return False
            self.size -= n
            if n < len(head):
                frames[0] = head[n:]
                self.head_started = self.head_started or n > 0
                return False
            frames.popleft()
            self.head_started = False
        return True

    def drop_whole_frames(self) -> None:
        """Forget every frame not yet begun: what is left ends on a frame boundary."""
        keep = self.frames[0] if self.frames and self.head_started else None
        self.frames.clear()
        if keep is not None:
            self.frames.append(keep)
        self.size = len(keep) if keep is not None else 0

    def clear(self) -> None:
        self.frames.clear()
        self.size = 0
        self.head_started = False
