"""CPU time of other processes, for the load benchmarks: the server's process tree (its front and
its worker processes) and the load generator's, read apart over the same window.

`resource.getrusage(RUSAGE_CHILDREN)` counts a child only once it is reaped, and counts every child
together; /proc/PID/stat gives each live process's own user and system time (Linux; elsewhere the
figures are None).

`host_loop_ms` says what a CPU second is worth at the moment: on a shared virtual machine the same
work can take nearly twice as long from one second to the next, and a report that shows it says how
far its figures can be trusted.
"""

from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid`` so far; None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    # After the command name: state is field 3 of stat(5), so utime (14) and stime (15) are 11 and 12.
    return (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu(pids: list[int]) -> float | None:
    """The CPU seconds of these processes together; None if any cannot be read."""
    total = 0.0
    for pid in pids:
        seconds = cpu_seconds(pid)
        if seconds is None:
            return None
        total += seconds
    return total


#: Iterations of `host_loop_ms`'s loop: about 10 ms of one core on a 2.6 GHz machine.
HOST_LOOP = 300_000


def host_loop_ms(iterations: int = HOST_LOOP) -> float:
    """Milliseconds this process takes for a fixed pure-Python loop right now (wall time, so that a
    core taken by the host or a neighbour shows as a slower loop)."""
    start = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i
    return (time.perf_counter() - start) * 1000.0
