"""Which process holds a loopback TCP connection: how a reserved seat tells its own bot's
connection from another process that came with the bot's token (docs/security.md).

The kernel lists every TCP socket of this network namespace in /proc/net/tcp and tcp6, with the
inode that names it in a holder's /proc/PID/fd. A bot's connection to the match server is the
entry whose local port is the connection's peer port and whose remote port is the server's; the
seat is the bot's only if one of the bot's processes has that inode open.
"""

from __future__ import annotations

import os

#: The state of an established connection in /proc/net/tcp.
_ESTABLISHED = "01"


def tcp_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the established TCP socket from ``local_port`` to ``remote_port``, or None."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _ESTABLISHED:
                continue
            try:
                local = int(fields[1].rsplit(":", 1)[1], 16)
                remote = int(fields[2].rsplit(":", 1)[1], 16)
                inode = int(fields[9])
            except (IndexError, ValueError):
                continue
            if local == local_port and remote == remote_port and inode != 0:
                return inode
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
