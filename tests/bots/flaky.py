"""A ladder bot whose author can break and fix it with a file (tests/test_web_ladder_owner.py).

It runs under a supervisor, as a bot on a server would under systemd's ``Restart=on-failure``: the
script starts itself as a child and starts it again each time it crashes (exit status 3). The child is
an SDK bot that, at each tick, reads the file named by ``FLAKY_FILE``: while it says ``crash`` the
process dies on the spot (no goodbye: the ladder sees the connection drop mid-match); otherwise it
plays no-ops. Any other end of the child (a refusal such as ``paused``) ends the supervisor too, and
SIGTERM to the supervisor stops the child first.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from cellarena.sdk import Bot, Move, View, run

CRASHED = 3


class Flaky(Bot):
    def on_tick(self, view: View) -> list[Move]:
        if Path(os.environ["FLAKY_FILE"]).read_text().strip() == "crash":
            os._exit(CRASHED)  # a crash: no clean close, no answer
        return [Move.NOOP] * len(view.agents)


def supervise() -> int:
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def stop(signum: int, frame: object) -> None:
        # Stopping the supervisor stops the bot it runs: no orphan left retrying the ladder. (Only
        # a signal here: the loop below is in the child's wait.)
        nonlocal stopping
        stopping = True
        if child is not None:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        child = subprocess.Popen(
            [sys.executable, __file__, *sys.argv[1:]], env={**os.environ, "FLAKY_CHILD": "1"}
        )
        if child.wait() != CRASHED or stopping:
            return child.returncode
        print("flaky: crashed; starting it again", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(Flaky) if os.environ.get("FLAKY_CHILD") else supervise())
