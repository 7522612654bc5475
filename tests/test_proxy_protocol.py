"""The PROXY protocol parser (versions 1 and 2) and the trusted-proxy list: exact, strict, bounded.

The parser is fed what a socket would hold and must say exactly how many bytes are the header, so
that what follows (a hello, a TLS ClientHello) is left for the connection; anything malformed is an
error that says what, as soon as the byte that shows it arrives."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from cellarena.server.net.proxy_protocol import (
    MAX_V1,
    MAX_V2,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    ProxyHeaderReader,
)
from cellarena.server.net.trusted_proxies import TrustedProxies, parse_network

AFTER = b"\x00\x00\x00\x05hello"  # what follows the header: must never be taken


def v2(command: int, family: int, body: bytes, *, version: int = 2) -> bytes:
    return V2_SIGNATURE + bytes([version << 4 | command, family]) + struct.pack("!H", len(body)) + body


def v2_tcp4(src: str, sport: int, tlvs: bytes = b"") -> bytes:
    addresses = ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address("192.0.2.1").packed
    return v2(1, 0x11, addresses + struct.pack("!HH", sport, 7777) + tlvs)


def v2_tcp6(src: str, sport: int) -> bytes:
    addresses = ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address("2001:db8::1").packed
    return v2(1, 0x21, addresses + struct.pack("!HH", sport, 7777))


def feed(stream: bytes, *, step: int | None = None) -> tuple[ProxyHeader, int]:
    """Feed ``stream`` as a socket would hold it (all at once, or ``step`` bytes more each time);
    the header and how many bytes were taken in all."""
    reader = ProxyHeaderReader()
    taken = 0
    held = len(stream) if step is None else step
    while reader.header is None:
        assert taken < len(stream), "the parser wants more than the header"
        taken += reader.take(stream[taken : min(len(stream), held)])
        held += step or 0
    return reader.header, taken


GOOD = {
    "v1 TCP4": (b"PROXY TCP4 198.51.100.7 192.0.2.1 40000 7777\r\n", ("198.51.100.7", 40000), 1),
    "v1 TCP6": (b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 7777\r\n", ("2001:db8::7", 65535), 1),
    "v1 UNKNOWN": (b"PROXY UNKNOWN anything at all\r\n", None, 1),
    "v1 port 0": (b"PROXY TCP4 198.51.100.7 192.0.2.1 0 7777\r\n", ("198.51.100.7", 0), 1),
    "v2 TCP4": (v2_tcp4("198.51.100.7", 40000), ("198.51.100.7", 40000), 2),
    "v2 TCP4 with TLVs": (
        v2_tcp4("198.51.100.7", 40000, b"\x05\x00\x04abcd\x04\x00\x00"),
        ("198.51.100.7", 40000),
        2,
    ),
    "v2 TCP6": (v2_tcp6("2001:db8::7", 1234), ("2001:db8::7", 1234), 2),
    "v2 LOCAL": (v2(0, 0x00, b""), None, 2),
    "v2 LOCAL with addresses": (v2(0, 0x11, bytes(12)), None, 2),
    "v2 PROXY UNSPEC": (v2(1, 0x00, b""), None, 2),
}


@pytest.mark.parametrize(("header", "client", "version"), list(GOOD.values()), ids=list(GOOD))
@pytest.mark.parametrize("step", [None, 1, 5])
def test_a_header_is_read_exactly(
    header: bytes, client: tuple[str, int] | None, version: int, step: int | None
) -> None:
    parsed, taken = feed(header + AFTER, step=step)
    assert parsed == ProxyHeader(client, version)
    assert taken == len(header)  # not one byte of the hello behind it


BAD = {
    "a hello instead": (b"\x00\x00\x00\x05hello", "does not start with a PROXY protocol header"),
    "HTTP": (b"GET / HTTP/1.1\r\n", "does not start with a PROXY protocol header"),
    "POST, which starts with P": (b"POST / HTTP/1.1\r\n", "does not start with a PROXY protocol header"),
    "v1 without CR": (b"PROXY TCP4 198.51.100.7 192.0.2.1 1 2\n", "must end with CRLF"),
    "v1 too long": (b"PROXY UNKNOWN " + b"x" * MAX_V1, f"at most {MAX_V1} bytes"),
    "v1 double space": (b"PROXY TCP4  198.51.100.7 192.0.2.1 1 2\r\n", "single spaces"),
    "v1 UDP": (b"PROXY UDP4 198.51.100.7 192.0.2.1 1 2\r\n", "TCP4|TCP6"),
    "v1 v6 address for TCP4": (b"PROXY TCP4 ::1 ::1 1 2\r\n", "not TCP4"),
    "v1 leading zero in address": (b"PROXY TCP4 198.051.100.7 192.0.2.1 1 2\r\n", "not TCP4"),
    "v1 port 65536": (b"PROXY TCP4 198.51.100.7 192.0.2.1 65536 2\r\n", "0-65535"),
    "v1 port 080": (b"PROXY TCP4 198.51.100.7 192.0.2.1 080 2\r\n", "0-65535"),
    "v1 port -1": (b"PROXY TCP4 198.51.100.7 192.0.2.1 -1 2\r\n", "0-65535"),
    "v1 missing port": (b"PROXY TCP4 198.51.100.7 192.0.2.1 1\r\n", "TCP4|TCP6"),
    "v2 bad signature": (V2_SIGNATURE[:-1] + b"X" + bytes(4), "does not start with a PROXY"),
    "v2 version 3": (v2(1, 0x11, bytes(12), version=3), "version 3"),
    "v2 command 2": (v2(2, 0x11, bytes(12)), "command 2"),
    "v2 UDP": (v2(1, 0x12, bytes(12)), "family 0x12"),
    "v2 unix socket": (v2(1, 0x31, bytes(216)), "family 0x31"),
    "v2 too short for its addresses": (v2(1, 0x21, bytes(12)), "too short"),
    "v2 TLV past the end": (v2_tcp4("198.51.100.7", 1, b"\x05\x00\x09abc"), "TLVs do not fit"),
    "v2 TLV header cut": (v2_tcp4("198.51.100.7", 1, b"\x05\x00"), "TLVs do not fit"),
}


@pytest.mark.parametrize(("stream", "why"), list(BAD.values()), ids=list(BAD))
@pytest.mark.parametrize("step", [None, 1])
def test_a_bad_header_is_refused_saying_why(stream: bytes, why: str, step: int | None) -> None:
    with pytest.raises(ProxyHeaderError, match=why.replace("|", r"\|")):
        feed(stream + AFTER, step=step)


def test_an_oversized_v2_header_is_refused_before_its_body_is_read() -> None:
    reader = ProxyHeaderReader()
    fixed = V2_SIGNATURE + bytes([0x21, 0x11]) + struct.pack("!H", MAX_V2)  # 16 + MAX_V2 > MAX_V2
    with pytest.raises(ProxyHeaderError, match=f"at most {MAX_V2}"):
        reader.take(fixed + bytes(100))


def test_a_v1_header_never_takes_more_than_its_limit_while_it_waits_for_crlf() -> None:
    reader = ProxyHeaderReader()
    assert reader.wanted() == MAX_V1
    assert reader.take(b"PROXY TCP4 198.51.100.7") == 23
    assert reader.header is None and reader.wanted() == MAX_V1 - 23


# ------------------------------------------------------------------------------------------ the list
def test_trusted_proxies_are_addresses_or_networks() -> None:
    proxies = TrustedProxies.parse(["127.0.0.1", "10.0.0.0/8", "::1"])
    assert proxies.trusts("127.0.0.1") and proxies.trusts("10.200.3.4") and proxies.trusts("::1")
    assert proxies.trusts("::ffff:10.1.2.3")  # an IPv4 peer on a dual-stack socket
    assert not proxies.trusts("127.0.0.2") and not proxies.trusts("11.0.0.1") and not proxies.trusts("?")
    assert not TrustedProxies() and not TrustedProxies().trusts("127.0.0.1")
    for bad in ("10.0.0.1/8", "localhost", "300.1.1.1", ""):
        with pytest.raises(ValueError, match="is not an IP address or network"):
            parse_network(bad)


def test_forwarded_for_believes_only_what_trusted_proxies_vouch_for() -> None:
    proxies = TrustedProxies.parse(["127.0.0.1", "10.0.0.0/8"])
    # client -> 10.0.0.5 (a trusted proxy) -> 127.0.0.1 (another) -> the server
    assert proxies.client_of("127.0.0.1", ["198.51.100.7", "10.0.0.5"]) == "198.51.100.7"
    # The client wrote an address itself: the first untrusted hop from the server's side wins.
    assert proxies.client_of("127.0.0.1", ["1.2.3.4", "198.51.100.7"]) == "198.51.100.7"
    # Not from a trusted proxy: the header is the client's own word, and ignored.
    assert proxies.client_of("198.51.100.9", ["1.2.3.4"]) == "198.51.100.9"
    assert proxies.client_of("127.0.0.1", ["junk"]) == "127.0.0.1"
    assert proxies.client_of("127.0.0.1", []) == "127.0.0.1"
