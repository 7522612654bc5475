"""``python -m cellarena.sdk.opponents GAME [bot options]``: a random opponent for GAME.

The options after GAME are any SDK bot's (``--host``, ``--port``, ``--name``, ``--matches``, ...);
`cellarena match` and `cellarena tournament` pass the connection through the environment.
"""

from __future__ import annotations

import sys

from cellarena.sdk import run
from cellarena.sdk.opponents import games, random_bot


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in games():
        got = f"got {argv[0]!r}" if argv else "got none"
        print(
            f"usage: python -m cellarena.sdk.opponents GAME [bot options]; GAME is one of "
            f"{', '.join(games())} ({got})",
            file=sys.stderr,
        )
        return 2
    bot = random_bot(argv[0])
    return run(bot, argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
