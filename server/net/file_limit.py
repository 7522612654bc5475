"""The server's own limit on open files: raised to what the host allows, once, at start.

Every client is a descriptor. Many systems start processes with a soft ``RLIMIT_NOFILE`` of 1024
(or less) under a hard limit of tens of thousands: a server left at the soft limit runs out of
descriptors long before its host does, and then cannot accept anyone, not even a bot coming back
to its match. Raising the soft limit to the hard one needs no privilege. Bots that cellarena starts
get their own, lower limit from the launcher (`confinement`), whatever the server's.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("cellarena.server")

#: What to ask for when the hard limit is unlimited (macOS refuses RLIM_INFINITY as a soft limit).
UNLIMITED_FALLBACK = 1 << 20


def raise_file_limit() -> int:
    """Raise the soft limit on open files to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    wanted = UNLIMITED_FALLBACK if hard == resource.RLIM_INFINITY else hard
    for target in (wanted, min(wanted, 10240)):  # 10240: macOS's OPEN_MAX, when it refuses more
        if soft != resource.RLIM_INFINITY and target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        log.info("open files: the soft limit is raised from %d to %d", soft, target)
        return target
    log.warning(
        "open files: cannot raise the soft limit %d towards the hard limit %s; the server may run out "
        "of descriptors (raise `ulimit -n` before starting it)",
        soft,
        "unlimited" if hard == resource.RLIM_INFINITY else hard,
    )
    return soft
