"""Which process holds a loopback TCP connection: how a reserved seat tells its own bot's
connection from another process that came with the bot's token (docs/security.md).

The kernel lists every TCP socket of this network namespace in /proc/net/tcp and tcp6, with the
inode that names it in a holder's /proc/PID/fd. A bot's connection to the match server is the
entry whose local port is the connection's peer port and whose remote port is the server's; the
seat is the bot's only if one of the bot's processes has that inode open.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from dataclasses import dataclass

#: The state of an established connection in /proc/net/tcp.
_ESTABLISHED = "01"
#: The state of a listening socket in /proc/net/tcp.
LISTEN = "0A"


@dataclass(frozen=True)
class TcpSocket:
    """One row of /proc/net/tcp or tcp6."""

    #: The local address as the kernel writes it: hex, each 32-bit word in host (little-endian) order.
    local_hex: str
    local_port: int
    remote_port: int
    #: The kernel's state code (`_ESTABLISHED`, `LISTEN`, ...).
    state: str
    inode: int

    @property
    def local_address(self) -> str:
        """The local address as a person writes it (127.0.0.1, ::)."""
        raw = bytes.fromhex(self.local_hex)
        return str(ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))))


def tcp_sockets() -> Iterator[TcpSocket]:
    """Every TCP socket of this network namespace (IPv4, then IPv6); a table that cannot be read,
    or a row that does not parse, is skipped."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            try:
                local_hex, local = fields[1].rsplit(":", 1)
                yield TcpSocket(
                    local_hex, int(local, 16), int(fields[2].rsplit(":", 1)[1], 16), fields[3], int(fields[9])
                )
            except (IndexError, ValueError):
                continue


def tcp_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the established TCP socket from ``local_port`` to ``remote_port``, or None."""
    for sock in tcp_sockets():
        if (
            sock.state == _ESTABLISHED
            and (sock.local_port, sock.remote_port) == (local_port, remote_port)
            and sock.inode != 0
        ):
            return sock.inode
    return None


def holds(pids: list[int], inode: int) -> bool:
    """Whether one of ``pids`` has the socket ``inode`` open."""
    wanted = f"socket:[{inode}]"
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return True
            except OSError:
                continue
    return False
