"""Which bots may meet: one pool, or separate pools for connected and submitted bots (``--pools``).

A connected bot runs on its owner's machine, a submitted one on the ladder's, under its limits: their
compute is not equal, so a host may keep them apart (``separate``). House bots are started by the
ladder like submitted ones and meet either kind: they are what a bot waiting alone is given.

`pooled_match_up` is pure, as `matchmaker.match_up` is, and adds one rule in front of its rules:

- ``mixed`` (the default): exactly `match_up` over the whole queue, same seed, same pairings.
- ``separate``: `match_up` over the connected bots and the house bots first, then over the submitted
  bots and the house bots left over. Connected bots go first because their owners keep a process
  online to wait, while a submitted bot is started only when it is wanted; and since the second call
  sees only bots the first left free, one pass never pairs a bot twice. Each call gets a seed of its
  own drawn from ``seed``, so the two pools do not draw the same maps.

Challenges (`challenges.challenge_pairings`) are asked for by an owner and may cross pools.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Literal

from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy, Waiting, match_up

#: Where a queued bot comes from: its owner's process, the ladder's start of its live version, or a
#: house bot.
Pool = Literal["connected", "submitted", "house"]
POOLS: tuple[Pool, ...] = ("connected", "submitted", "house")
#: How a host keeps them (`ladder serve --pools`).
PoolMode = Literal["mixed", "separate"]
POOL_MODES: tuple[PoolMode, ...] = ("mixed", "separate")


def pool_mode(value: str) -> PoolMode:
    """``value`` as a pool mode; ValueError naming the modes for anything else."""
    for mode in POOL_MODES:
        if value == mode:
            return mode
    raise ValueError(f"pool mode {value!r} is none of {', '.join(POOL_MODES)}")


def pool_of(kind: str, launched: bool) -> Pool:
    """The pool of a bot of ``kind`` (`records.BotKind`) whose connection the ladder started or not."""
    if kind == "house":
        return "house"
    return "submitted" if launched or kind == "submitted" else "connected"


def may_meet(a: Pool, b: Pool, mode: PoolMode) -> bool:
    """Whether bots of pools ``a`` and ``b`` may be paired by the matchmaker under ``mode``."""
    return mode == "mixed" or a == b or "house" in (a, b)


def pooled_match_up(
    queue: Sequence[Waiting],
    pools: Mapping[str, Pool],
    now: float,
    policy: Policy,
    seed: int,
    mode: PoolMode = "mixed",
) -> list[Pairing]:
    """`match_up` with the pool rule of this module's docstring. ``pools`` gives each queued bot's
    pool by name; a bot it does not name is a connected one."""
    if pool_mode(mode) == "mixed":
        return match_up(queue, now, policy, seed)
    rng = random.Random(seed)
    first_seed, second_seed = rng.getrandbits(31), rng.getrandbits(31)
    first = [w for w in queue if pools.get(w.bot, "connected") != "submitted"]
    pairings = match_up(first, now, policy, first_seed)
    taken = {name for p in pairings for name in p.bots}
    second = [
        w for w in queue if w.bot not in taken and pools.get(w.bot, "connected") in ("submitted", "house")
    ]
    return pairings + match_up(second, now, policy, second_seed)
