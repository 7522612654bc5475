"""The PROXY protocol (HAProxy's, versions 1 and 2): who the client is, from a proxy in front.

A stream proxy (HAProxy, nginx ``stream``, stunnel) connects to the server from its own address, so
without help every client seems to be the proxy, and every per-address count (connections, wrong
tokens) counts all clients as one. A proxy configured to send the PROXY protocol starts each
connection with one header naming the client's address, then relays the client's bytes untouched
(TLS too). Only connections from a trusted proxy (`trusted_proxies`) are read this way, and each must
start with a header: anyone else could claim any address.

The header is parsed strictly, since a listener off loopback faces hostile peers and a proxy's bug
must not turn into a wrong address: version 1 is one line of at most 107 bytes (``PROXY TCP4 src dst
sport dport\\r\\n``, ``TCP6``, or ``UNKNOWN``); version 2 is a 16-byte binary block and its addresses and
TLVs, at most `MAX_V2` bytes. Any other byte is an error that names what was wrong.

`ProxyHeaderReader` is the parser, sans-IO. It is fed what the socket holds (peeked, not read) and
says how many of those bytes are the header, so the server reads exactly the header and not a byte
of what follows: the rest (a hello, a TLS ClientHello) is left in the kernel for the connection.
`read_proxy_header` does that over a non-blocking socket, under a deadline.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
from dataclasses import dataclass

import trio

#: The version 2 signature, the first 12 bytes of a binary header.
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX = b"PROXY "
#: The longest version 1 line, CRLF included (the specification's limit).
MAX_V1 = 107
#: The longest version 2 header this server takes: 16 bytes and addresses plus TLVs (a proxy adds a
#: few TLVs, such as a unique id or TLS details; the format allows 64 KiB, nobody needs that here).
MAX_V2 = 16 + 1024
_V2_ADDRESS_LENGTH = {0x11: 12, 0x21: 36}  # TCP over IPv4, TCP over IPv6
_PORT = re.compile(rb"0|[1-9][0-9]{0,4}")


class ProxyHeaderError(Exception):
    """The stream does not start with a well-formed PROXY header; the message says what is wrong."""


@dataclass(frozen=True)
class ProxyHeader:
    """What a PROXY header said: the client's (address, port), or None when the proxy speaks for
    itself (version 2 ``LOCAL``, such as a health check, or version 1 ``UNKNOWN``)."""

    client: tuple[str, int] | None
    version: int


class ProxyHeaderReader:
    """Reads one PROXY header off the front of a stream, never a byte past it (see the module)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.header: ProxyHeader | None = None

    def wanted(self) -> int:
        """How many bytes to look at next: the header's end lies within them (a version 1 line
        ends at its LF, which may come sooner)."""
        if self._buf[:1] == V2_SIGNATURE[:1]:
            return self._v2_wanted()
        return MAX_V1 - len(self._buf)

    def _v2_wanted(self) -> int:
        if len(self._buf) < 16:
            return 16 - len(self._buf)  # the fixed part first: it says how long the rest is
        return 16 + struct.unpack_from("!H", self._buf, 14)[0] - len(self._buf)

    def take(self, data: bytes) -> int:
        """``data`` is what the stream holds now (not yet consumed); returns how many of its first
        bytes belong to the header: consume exactly those. Sets `header` once the header is whole.
        Raises `ProxyHeaderError` as soon as a byte shows the stream is not a valid header."""
        used = 0
        while used < len(data) and self.header is None:
            first = bytes(self._buf[:1]) or data[used : used + 1]
            if first not in (V1_PREFIX[:1], V2_SIGNATURE[:1]):
                raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
            if first == V1_PREFIX[:1]:
                used += self._take_v1(data[used:])
            else:
                used += self._take_v2(data[used:])
        return used

    def _take_v1(self, data: bytes) -> int:
        end = data.find(b"\n")
        n = len(data) if end < 0 else end + 1
        if len(self._buf) + n > MAX_V1:
            raise ProxyHeaderError(f"a PROXY version 1 header is at most {MAX_V1} bytes, CRLF included")
        self._buf += data[:n]
        head = bytes(self._buf[: len(V1_PREFIX)])
        if not V1_PREFIX.startswith(head):
            raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
        if end >= 0:
            self.header = _parse_v1(bytes(self._buf))
        return n

    def _take_v2(self, data: bytes) -> int:
        n = min(len(data), self._v2_wanted())
        self._buf += data[:n]
        sig = bytes(self._buf[:12])
        if not V2_SIGNATURE.startswith(sig):
            raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
        if len(self._buf) == 16:
            length = struct.unpack_from("!H", self._buf, 14)[0]
            if 16 + length > MAX_V2:
                raise ProxyHeaderError(
                    f"a PROXY version 2 header of {16 + length} bytes; this server takes at most {MAX_V2}"
                )
            _check_v2_start(bytes(self._buf))
        if len(self._buf) >= 16 and self._v2_wanted() == 0:
            self.header = _parse_v2(bytes(self._buf))
        return n


def _parse_v1(line: bytes) -> ProxyHeader:
    if not line.endswith(b"\r\n"):
        raise ProxyHeaderError("a PROXY version 1 header must end with CRLF")
    parts = line[:-2].split(b" ")
    if parts[1:2] == [b"UNKNOWN"]:
        return ProxyHeader(None, 1)  # the rest of the line is to be ignored
    if len(parts) != 6 or parts[1] not in (b"TCP4", b"TCP6"):
        raise ProxyHeaderError(
            "a PROXY version 1 header is 'PROXY TCP4|TCP6 SOURCE DESTINATION SPORT DPORT' "
            "(single spaces) or 'PROXY UNKNOWN'"
        )
    family = ipaddress.IPv4Address if parts[1] == b"TCP4" else ipaddress.IPv6Address
    try:
        source = family(parts[2].decode("ascii"))
        family(parts[3].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ProxyHeaderError(
            f"a PROXY version 1 header with an address that is not {parts[1].decode()}"
        ) from None
    ports = []
    for text in parts[4:6]:
        if not _PORT.fullmatch(text) or int(text) > 65535:
            raise ProxyHeaderError("a PROXY version 1 header with a port that is not 0-65535")
        ports.append(int(text))
    return ProxyHeader((str(source), ports[0]), 1)


def _check_v2_start(head: bytes) -> None:
    """The version, command and family bytes, checked as soon as they are in."""
    version, command = head[12] >> 4, head[12] & 0x0F
    if version != 2:
        raise ProxyHeaderError(f"a PROXY header of version {version}; this server reads versions 1 and 2")
    if command not in (0, 1):
        raise ProxyHeaderError(f"a PROXY version 2 header with command {command} (neither LOCAL nor PROXY)")
    family = head[13]
    if command == 1 and family not in (0x00, *_V2_ADDRESS_LENGTH):
        raise ProxyHeaderError(
            f"a PROXY version 2 header for family 0x{family:02x}; this server takes TCP over IPv4 or IPv6"
        )
    length = struct.unpack_from("!H", head, 14)[0]
    if command == 1 and length < _V2_ADDRESS_LENGTH.get(family, 0):
        raise ProxyHeaderError("a PROXY version 2 header too short for its addresses")


def _parse_v2(header: bytes) -> ProxyHeader:
    command, family = header[12] & 0x0F, header[13]
    body = header[16:]
    size = _V2_ADDRESS_LENGTH.get(family, 0)
    tlvs = body[size:] if command == 1 else b""
    while tlvs:  # type, length, value: each must fit exactly
        if len(tlvs) < 3 or 3 + struct.unpack_from("!H", tlvs, 1)[0] > len(tlvs):
            raise ProxyHeaderError("a PROXY version 2 header whose TLVs do not fit its length")
        tlvs = tlvs[3 + struct.unpack_from("!H", tlvs, 1)[0] :]
    if command == 0 or family == 0x00:
        return ProxyHeader(None, 2)  # LOCAL (the proxy itself), or PROXY for an unspecified family
    if family == 0x11:
        address = str(ipaddress.IPv4Address(body[0:4]))
        port = struct.unpack_from("!H", body, 8)[0]
    else:
        address = str(ipaddress.IPv6Address(body[0:16]))
        port = struct.unpack_from("!H", body, 32)[0]
    return ProxyHeader((address, port), 2)


async def read_proxy_header(sock: socket.socket, timeout: float) -> ProxyHeader:
    """Read the PROXY header at the front of non-blocking ``sock``, and nothing past it, within
    ``timeout`` seconds. `ProxyHeaderError` if it is not one, is cut off, or is too slow."""
    reader = ProxyHeaderReader()
    with trio.move_on_after(timeout):
        while reader.header is None:
            await trio.lowlevel.wait_readable(sock)
            try:
                data = sock.recv(max(1, reader.wanted()), socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                raise ProxyHeaderError(
                    f"the proxy's connection failed before its PROXY header: {exc}"
                ) from None
            if not data:
                raise ProxyHeaderError("the proxy closed the connection before its PROXY header ended")
            n = reader.take(data)
            if n and len(sock.recv(n)) != n:  # the bytes were there a moment ago: cannot happen
                raise ProxyHeaderError("the PROXY header could not be read whole")
        assert reader.header is not None
        return reader.header
    raise ProxyHeaderError(f"no whole PROXY header within {timeout:g} s of connecting")
