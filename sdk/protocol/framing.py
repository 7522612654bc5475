"""Frames: the 4-byte length prefix and the msgpack body, both ways. `docs/protocol.md` is the spec.

A frame is a 4-byte big-endian unsigned length N, then N bytes holding one msgpack map with a
string ``type``. This module is sans-IO: it turns messages into bytes and bytes into messages and
knows nothing of sockets, so the blocking SDK client and the trio server share exactly one
implementation of the rules, including the error for every kind of bad input.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import msgpack

from cellarena.sdk.protocol.codes import BAD_FRAME, BAD_MESSAGE, TOO_LARGE, ProtocolError

HEADER = struct.Struct(">I")

_packer = msgpack.Packer(use_bin_type=True)


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame: the length prefix and the msgpack body."""
    body: bytes = _packer.pack(message)
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> dict[str, Any]:
    """A frame body as a message map; anything else is a ProtocolError naming what was wrong."""
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ProtocolError(BAD_FRAME, f"frame body is not one valid msgpack value ({exc})") from None
    except TypeError as exc:  # valid msgpack, but a map key is an array or a map
        raise ProtocolError(BAD_FRAME, f"map keys must be strings or integers ({exc})") from None
    if not isinstance(message, dict):
        raise ProtocolError(BAD_FRAME, f"a frame must hold a msgpack map, got {type(message).__name__}")
    for key in message:
        if type(key) is not str and type(key) is not int:  # a bin key (b"type") names no field
            raise ProtocolError(
                BAD_FRAME, f"map keys must be strings or integers, got {type(key).__name__} {key!r:.40}"
            )
    kind = message.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(BAD_MESSAGE, "every message needs a string field 'type'")
    return message


class FrameReader:
    """Reassembles frames from a byte stream that arrives in arbitrary pieces.

    ``feed()`` returns every complete message so far. A frame announced as larger than ``limit`` is
    refused from its 4-byte header alone, so a peer cannot make us buffer a huge body.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.limit:
                raise ProtocolError(
                    TOO_LARGE, f"frame of {size} bytes is over the limit of {self.limit} bytes"
                )
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            body = bytes(self._buf[HEADER.size : end])
            del self._buf[:end]
            out.append(decode_body(body))
        return out

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def take(self) -> bytes:
        """The bytes received but not yet part of a complete frame, out of the reader: a server that
        hands a connection to another process hands them along (`feed` them there)."""
        data, self._buf = bytes(self._buf), bytearray()
        return data
