"""The round-robin schedule: which bots meet, on which map, in which seats, with which seed.

Every group of N bots (N = the map's seats) plays every map, in every seat order, R times. For
N <= 3 "every seat order" is every permutation; beyond that the N rotations of the group, so each bot
still sits in each seat exactly once per group and map, without N! matches.

Each match has a **key** that names it independently of the rest of the schedule (round, map, bots in
seat order). Its seed is derived from the tournament seed and that key, and storage records finished
matches by key, so a resumed tournament plays exactly the missing ones with the seeds they would have
had.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scheduled:
    index: int
    round: int
    map: str | None
    bots: tuple[str, ...]
    seed: int

    @property
    def key(self) -> str:
        return match_key(self.round, self.map, self.bots)


def match_key(round_: int, map_: str | None, bots: Sequence[str]) -> str:
    return f"r{round_}|{map_ or '-'}|" + "|".join(bots)


def match_seed(tournament_seed: int, key: str) -> int:
    digest = hashlib.blake2b(f"{tournament_seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 33  # a non-negative 31-bit int, as every engine accepts


def seat_orders(group: Sequence[str]) -> list[tuple[str, ...]]:
    """Every seat order of a group: all permutations up to 3 bots, the rotations beyond."""
    if len(group) <= 3:
        return list(itertools.permutations(group))
    return [tuple(group[i:]) + tuple(group[:i]) for i in range(len(group))]


def schedule(
    bots: Sequence[str], maps: Sequence[tuple[str | None, int]], rounds: int, seed: int
) -> list[Scheduled]:
    """The whole tournament. ``maps`` lists (map name or None, seats) pairs.

    Rounds are the outer loop, so a tournament cut short has played whole rounds first.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    names = sorted(bots)
    if len(set(names)) != len(names):
        raise ValueError("bot names must be unique")
    out: list[Scheduled] = []
    for r in range(1, rounds + 1):
        for map_, seats in maps:
            if len(names) < seats:
                raise ValueError(
                    f"map {map_ or 'default'} has {seats} seats but only {len(names)} bots were given"
                )
            for group in itertools.combinations(names, seats):
                for order in seat_orders(group):
                    key = match_key(r, map_, order)
                    out.append(Scheduled(len(out), r, map_, order, match_seed(seed, key)))
    return out
