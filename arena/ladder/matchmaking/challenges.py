"""Which pending challenges the queue plays now: before each matchmaking pass, oldest first.

A challenge is played when both its bots wait in the queue and are free (not at their limit of
matches), each bot in at most one match per pass; the matchmaker then pairs the bots left. Challenges
are for two-seat games: in a game of more seats a challenge waits (docs/ladder.md says so).
The challenger takes seat 0. The map and seed are drawn like the matchmaker's (``random.Random``
from the pass's seed), so a pass stays a function of its inputs. An owner asked for the opponent, so a
challenge may pair a connected bot with a submitted one under ``--pools separate`` (`pools`).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy
from cellarena.arena.ladder.records import Challenge

_SEED_MASK = (1 << 31) - 1


def challenge_pairings(
    pending: Sequence[Challenge], free: Collection[str], policy: Policy, seed: int
) -> list[Pairing]:
    """The pairings that play ``pending`` challenges (oldest first) among the ``free`` bots."""
    if policy.seats != 2:
        return []
    rng = random.Random(seed)
    taken: set[str] = set()
    out = []
    for c in sorted(pending, key=lambda c: c.id):
        if c.status != "pending" or c.challenger in taken or c.opponent in taken:
            continue
        if c.challenger not in free or c.opponent not in free:
            continue
        taken.update((c.challenger, c.opponent))
        out.append(
            Pairing(
                (c.challenger, c.opponent), rng.choice(policy.maps), rng.getrandbits(31) & _SEED_MASK, c.id
            )
        )
    return out
