"""Plays fake ladder matches into a ladder database as fast as it can, until it is killed.

The subject of tests/test_ladder_crash.py, which SIGKILLs it at a random moment:

    python tests/ladder_writer.py DATABASE SEED

It starts as a ladder server does (`LadderStore.void_running`), then loops: begin a match, finish it
with random ranks. It prints ``voided ID...`` once, then ``begun ID`` and ``finished ID`` as each
call returns, so the test knows which results the store has acknowledged. Each line is one write:
under PYTHONUNBUFFERED (tests/suite.py sets it) `print`'s words are written one by one, and a kill
between two left the test a line ``finished`` without its number.
"""

from __future__ import annotations

import random
import sys

from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, SeatResult

GAME = "rezzo"
BOTS = [f"bot{i}" for i in range(5)]


def say(*words: object) -> None:
    """One line of the report, in one write: a kill leaves a whole line or none of it."""
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def main() -> None:
    target, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    store = LadderStore(target)
    voided = store.void_running()
    say("voided", *(m.id for m in voided))
    ids = [b.id for b in store.list_bots(GAME)] or [store.add_bot(name, GAME)[0].id for name in BOTS]
    while True:
        seats = rng.sample(ids, rng.choice((2, 2, 3, 4)))
        match_id = store.begin_match(GAME, "arena", rng.randrange(2**32), seats)
        say("begun", match_id)
        results = [SeatResult(rng.randint(1, len(seats)), late=rng.randrange(3)) for _ in seats]
        store.finish_match(match_id, results, reason="writer", ticks=rng.randrange(1, 1000), settle=settle)
        say("finished", match_id)


if __name__ == "__main__":
    main()
