"""A ladder bot whose author can break and fix it with a file (tests/test_web_ladder_owner.py).

It runs under a supervisor, as a bot on a server would under systemd's ``Restart=on-failure``: the
script starts itself as a child and starts it again each time it crashes (exit status 3). The child is
an SDK bot that, at each tick, reads the file named by ``FLAKY_FILE``: while it says ``crash`` the
process dies on the spot (no goodbye: the ladder sees the connection drop mid-match); otherwise it
plays no-ops. Any other end of the child (a refusal such as ``paused``) ends the supervisor too.
"""

import os
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
    while True:
        child = subprocess.run(
            [sys.executable, __file__, *sys.argv[1:]], check=False, env={**os.environ, "FLAKY_CHILD": "1"}
        )
        if child.returncode != CRASHED:
            return child.returncode
        print("flaky: crashed; starting it again", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(run(Flaky) if os.environ.get("FLAKY_CHILD") else supervise())
