"""The ladder's matchmaker: which queued bots meet now, in which seats, on which map, with which seed.

`match_up` is a pure function of the queue, one clock reading, the policy and a seed: no I/O, no
global state, no clock of its own. So it is tested on its own, and a logged call can be replayed to
see why two bots met. The server calls it on every matchmaking pass with whatever is queued, through
`pools.pooled_match_up` (which, under ``--pools separate``, calls it once per pool).

The rules, in the order they apply (``k`` is ``Policy.seats``; ratings are the ladder's mu, `ratings.ladder`):

1. **Wait and window.** A bot's wait is ``now - since`` in the caller's clock, or 0 when that is
   negative or not a number (a clock that went backwards delays nobody and breaks nothing). Its window
   is ``base_window + widen_per_second * wait``, at most ``max_window``; windows are in **mu** units,
   not conservative ones (mu - 3 sigma): mu is the best guess of a bot's strength, which is what an
   even match is about, while the conservative rating also subtracts uncertainty and would put every
   newcomer (mu 25, sigma 8.3, conservative 0) far below established bots of the same strength.
   With ``Policy.uncertainty_window`` u > 0 a bot's window also holds u times its own sigma (beyond
   ``max_window``): a bot that is unsure where it belongs accepts a wider range at once, so uncertain
   bots (newcomers above all) wait less and play more, which is where a
   match teaches the ratings most (Kaggle gives new submissions more games); settled bots keep their
   close matches, and nobody waits longer than before.
2. **In window.** A group may meet when its spread (highest mu minus lowest) is within the window of
   every member: each bot consents to its own range, so one that has just arrived is not thrown at a
   distant opponent because that opponent has waited long. Two bots meet when each is within the
   other's window.
3. **Starvation.** A bot whose wait reaches ``starve_after`` needs nobody's consent: starving bots go
   first, longest wait first, and each takes the k - 1 free bots nearest in rating whatever their
   windows (the nearest group that is not a rematch, when there is one). A starving bot stays queued
   only when fewer than k bots are left.
4. **Close ratings first.** Among the other bots, the in-window group with the smallest spread is
   formed first, then the next smallest among the bots still free, and so on (exactly; ties go to the
   lower-rated lowest member). The result is maximal: when it returns, no k bots left in the queue
   form an in-window group.
5. **No immediate rematch.** A group is a rematch when, for one of its members, the others are
   exactly the opponents of that member's previous match. Rule 4 runs first without rematches; only
   the bots it leaves over may then form rematch groups (in the same spread order). So a rematch
   happens only when none of its members has an in-window group with the other leftovers that is not
   a rematch, and a ladder of two bots still plays.
6. **Seats.** Each bot would like the seat after its previous one (``(last_seat + 1) % k``: sides
   swap with two seats, seats rotate with more). A bot gets its previous seat again only when every
   member of the group had that same seat last time, and then only one of them does (the seed picks
   which); bots with no previous seat are placed by the seed, so no rating order favours a side.
7. **Maps and seeds.** Each match's map is drawn from ``Policy.maps`` and its seed (a non-negative
   31-bit int, as every engine accepts) from ``random.Random(seed)``, in the order the matches are
   formed. Give a fresh seed per call, or the same maps come up call after call.

The matching draws no random numbers (ties break by rating, then name), and the queue's order does
not matter: it is sorted by (mu, name) first. So the same inputs give the same pairings, and rule 6-7
randomness cannot change who meets whom.

Speed, measured on the ladder's 2-core host (Python 3.11, one core, `timeit`, random queues of two-
seat bots with mu ~ N(25, 5) and waits 0-30 s, the default policy): 500 queued bots 0.8 ms per call,
2,000 bots 3.4 ms (see the ladder issue's report for the cases measured). The work is a sort plus a
greedy over each bot's nearest free neighbours in rating order, not over all pairs.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import combinations
from operator import attrgetter
from typing import NamedTuple

from cellarena.arena.ratings import Rating
from cellarena.sdk.protocol import is_int

#: Match seeds are non-negative 31-bit ints, as every engine accepts.
_SEED_MASK = (1 << 31) - 1


@dataclass(frozen=True)
class Waiting:
    """One queued bot, as the server knows it when it asks for matches."""

    bot: str  # its ladder name, unique in the queue
    since: float  # when it joined the queue, in the caller's clock (seconds)
    rating: Rating  # its current rating in this queue's game
    last_seat: int | None = None  # its seat in its previous match; None (or out of range) if none
    last_opponents: tuple[str, ...] = ()  # who it met in its previous match

    def waited(self, now: float) -> float:
        """Seconds waited at ``now``: never negative, never NaN, whatever the clock did."""
        wait = now - self.since
        return wait if wait > 0.0 else 0.0  # NaN > 0 is false too


@dataclass(frozen=True)
class Policy:
    """How one queue matches: seats per match, the map pool, and how the rating window grows.

    The defaults suit a busy two-seat ladder on the ladder system's scale (a newcomer's sigma is
    8.3): a window of 2 at once, the newcomer's whole uncertainty (10) after 16 s, and anyone after
    30 s. A quiet ladder wants a shorter ``starve_after``.
    """

    seats: int  # bots per match
    maps: tuple[str | None, ...]  # the pool; None is the game's default map, as in tournaments
    base_window: float = 2.0  # mu difference accepted at zero wait
    widen_per_second: float = 0.5  # mu added to the window per second waited
    max_window: float = 10.0  # the window stops growing here
    starve_after: float | None = 30.0  # seconds after which a bot meets the nearest; None: never
    uncertainty_window: float = 0.0  # mu added to a bot's window per unit of its own sigma

    def __post_init__(self) -> None:
        # A bad ladder configuration is refused when it is read, not on the first matchmaking pass.
        if not is_int(self.seats) or self.seats < 2:
            raise ValueError(f"Policy.seats must be an int of at least 2, got {self.seats!r}")
        if not self.maps:
            raise ValueError("Policy.maps is empty: give at least one map (None for the game's default)")
        for name in ("base_window", "widen_per_second", "uncertainty_window"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"Policy.{name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(self.max_window) and self.max_window >= self.base_window):
            raise ValueError(
                f"Policy.max_window must be finite and >= base_window ({self.base_window!r}), "
                f"got {self.max_window!r}; use starve_after to let long waits reach everyone"
            )
        if self.starve_after is not None and not self.starve_after >= 0:
            raise ValueError(f"Policy.starve_after must be >= 0 or None, got {self.starve_after!r}")

    def window(self, waited: float, sigma: float = 0.0) -> float:
        """The mu difference a bot of uncertainty ``sigma`` accepts after waiting ``waited`` seconds
        (see `Waiting.waited`)."""
        extra = self.uncertainty_window * sigma if self.uncertainty_window else 0.0
        if not waited > 0.0 or self.widen_per_second == 0.0:
            return self.base_window + extra  # also keeps 0 * inf (a huge clock jump) from making a NaN
        return min(self.base_window + self.widen_per_second * waited, self.max_window) + extra

    def starving(self, waited: float) -> bool:
        """Whether a bot that waited ``waited`` seconds now meets the nearest bots, window or not."""
        return self.starve_after is not None and waited >= self.starve_after


class Pairing(NamedTuple):
    """One match to start: the bots in seat order, its map and its engine seed.

    A named tuple rather than a frozen dataclass: a busy pass builds a thousand of them, and a tuple
    is made several times faster."""

    bots: tuple[str, ...]
    map: str | None
    seed: int
    #: The pending challenge this pairing plays (`challenges.challenge_pairings`), or None.
    challenge: int | None = None


def match_up(queue: Sequence[Waiting], now: float, policy: Policy, seed: int) -> list[Pairing]:
    """The matches to start now from ``queue``, by the rules in this module's docstring.

    Each bot is in at most one pairing; the others stay queued for a later call. Raises ValueError
    only for a queue the server should never build: a bot queued twice, or a rating that is not a
    finite number.
    """
    k = policy.seats
    if len(queue) < k:
        return []
    entries = sorted(queue, key=_NAME)
    entries.sort(key=_MU)  # stable: by (mu, name), faster than one sort on tuples
    board = _Board(entries, now, policy)
    groups = board.starving_groups()
    closest = board.closest_pairs if k == 2 else board.closest_groups
    groups += closest(False)
    if board.saw_rematch and board.free_count >= k:
        groups += closest(True)
    return board.pairings(groups, policy.maps, random.Random(seed))


_NAME = attrgetter("bot")
_MU = attrgetter("rating.mu")


class _Board:
    """The queue sorted by rating, with which positions are still free, during one `match_up` call.

    Positions are indices in (mu, name) order. Free positions are found with two skip arrays (union-
    find with path halving): ``_right[p]`` leads to the first free position >= p (``n`` if none),
    ``_left[p + 1]`` to the last free position <= p (stored shifted by one, 0 meaning none). So
    scanning for the next free neighbour costs nearly O(1) however many bots were taken.
    """

    def __init__(self, entries: Sequence[Waiting], now: float, policy: Policy) -> None:
        n = len(entries)
        self.n = n
        self.k = policy.seats
        self.names = [e.bot for e in entries]
        if len(set(self.names)) != n:
            twice = Counter(self.names).most_common(1)[0][0]
            raise ValueError(f"bot {twice!r} is queued twice; a bot holds at most one place in the queue")
        self.mu = [e.rating.mu for e in entries]
        if not math.isfinite(sum(self.mu)):  # one C-speed pass; the precise search only on failure
            bad = next((e for e in entries if not math.isfinite(e.rating.mu)), None)
            if bad is not None:
                raise ValueError(f"bot {bad.bot!r} has rating mu {bad.rating.mu!r}; ratings must be finite")
        waits = [w if w > 0.0 else 0.0 for w in [now - e.since for e in entries]]  # as Waiting.waited
        self.waits = waits
        base, widen, cap = policy.base_window, policy.widen_per_second, policy.max_window
        if widen == 0.0:
            self.window = [base] * n
        else:
            # Capped: a huge wait (a clock jump) gives max_window. (Not min(): a call per bot.)
            self.window = [v if v < cap else cap for v in [base + widen * w for w in waits]]
        if policy.uncertainty_window:
            self.window = _widened(self.window, entries, policy.uncertainty_window)
        starve = policy.starve_after
        self.starving = [] if starve is None else [p for p in range(n) if waits[p] >= starve]
        k = self.k
        self.last_seat = [s if s is not None and 0 <= s < k else None for s in [e.last_seat for e in entries]]
        # A group is a rematch if, for one member, the others are exactly the set of that member's
        # previous opponents. With two seats that set is one name, compared without building sets.
        opponents = [e.last_opponents for e in entries]
        if k == 2:
            self.last_single = [o[0] if len(o) == 1 else _only(o) for o in opponents]
        else:
            self.last_group = [frozenset(o) for o in opponents]
        self.free = [True] * n
        self.free_count = n
        self._right = list(range(n + 1))
        self._left = list(range(n + 1))
        self.saw_rematch = False

    # -- free positions -------------------------------------------------------------------------

    def next_free(self, p: int) -> int:
        """The first free position >= p, or n."""
        right = self._right
        while right[p] != p:
            right[p] = right[right[p]]
            p = right[p]
        return p

    def prev_free(self, p: int) -> int:
        """The last free position <= p, or -1."""
        left = self._left
        q = p + 1
        while left[q] != q:
            left[q] = left[left[q]]
            q = left[q]
        return q - 1

    def take(self, group: Sequence[int]) -> None:
        """Mark a group taken (`closest_pairs` does this inline, and no longer keeps ``_left``)."""
        for p in group:
            self.free[p] = False
            self._right[p] = p + 1
            self._left[p + 1] = p
        self.free_count -= len(group)

    def is_rematch(self, group: Sequence[int]) -> bool:
        names = self.names
        if self.k == 2:
            a, b = group
            return self.last_single[a] == names[b] or self.last_single[b] == names[a]
        members = frozenset(names[p] for p in group)
        last_group = self.last_group
        return any(last_group[p] == members - {names[p]} for p in group)

    # -- rule 3: starving bots ------------------------------------------------------------------

    def starving_groups(self) -> list[tuple[int, ...]]:
        groups: list[tuple[int, ...]] = []
        waits = self.waits
        for s in sorted(self.starving, key=lambda p: (-waits[p], p)):
            if not self.free[s]:
                continue
            if self.free_count < self.k:
                break  # the free set only shrinks: no later starving bot finds a group either
            group = self.nearest_group(s)
            self.take(group)
            groups.append(group)
        return groups

    def nearest_group(self, s: int) -> tuple[int, ...]:
        """``s`` and the k - 1 free bots nearest in rating: the first group that is not a rematch
        when candidates are added nearest first (ties to the lower rating), else the nearest group."""
        k, mu, n = self.k, self.mu, self.n
        nearest: list[int] = []
        lo, hi = self.prev_free(s - 1), self.next_free(s + 1)
        while lo >= 0 or hi < n:
            if hi >= n or (lo >= 0 and mu[s] - mu[lo] <= mu[hi] - mu[s]):
                nearest.append(lo)
                lo = self.prev_free(lo - 1)
            else:
                nearest.append(hi)
                hi = self.next_free(hi + 1)
            if len(nearest) >= k - 1:
                # Groups holding the newest candidate; those without it were tried before.
                for others in combinations(nearest[:-1], k - 2):
                    group = tuple(sorted((s, *others, nearest[-1])))
                    if not self.is_rematch(group):
                        return group
        return tuple(sorted((s, *nearest[: k - 1])))  # every group is a rematch: the nearest one

    # -- rules 4 and 5: closest in-window groups first ------------------------------------------

    def closest_pairs(self, allow_rematch: bool) -> list[tuple[int, ...]]:
        """`closest_groups` for two seats, inlined: this loop is most of a busy pass."""
        n, mu, window, free, right = self.n, self.mu, self.window, self.free, self._right
        names, single, next_free, partner = self.names, self.last_single, self.next_free, self.partner
        heap: list[tuple[float, int, int]] = []
        for p in range(n):
            if not free[p]:
                continue
            q = p + 1 if right[p + 1] == p + 1 else next_free(p + 1)
            if q < n:
                d = mu[q] - mu[p]
                if (
                    d <= window[p]
                    and d <= window[q]
                    and (allow_rematch or (single[p] != names[q] and single[q] != names[p]))
                ):
                    heap.append((d, p, q))  # the common case: the next free bot up suits p
                    continue
            found = partner(p, q, allow_rematch)
            if found is not None:
                heap.append(found)
        heapify(heap)
        pairs: list[tuple[int, ...]] = []
        while heap:
            _, p, q = heappop(heap)
            if not free[p]:
                continue
            if not free[q]:
                found = partner(p, q + 1, allow_rematch)  # bots between p and q were refused already
                if found is not None:
                    heappush(heap, found)
                continue
            free[p] = free[q] = False
            right[p] = p + 1
            right[q] = q + 1
            pairs.append((p, q))
        self.free_count -= 2 * len(pairs)
        return pairs

    def closest_groups(self, allow_rematch: bool) -> list[tuple[int, ...]]:
        """Greedy by spread, exactly: a heap holds, for each free bot, the best in-window group in
        which it is the lowest-rated member; the free set only shrinks, so an entry whose members
        are all still free is still that bot's best, and one that lost a member is recomputed."""
        free = self.free
        heap: list[tuple[float, int, tuple[int, ...]]] = []
        for p in range(self.n):
            if free[p]:
                found = self.group_from(p, allow_rematch)
                if found is not None:
                    heap.append(found)
        heapify(heap)
        groups: list[tuple[int, ...]] = []
        while heap:
            _, p, group = heappop(heap)
            if not free[p]:
                continue
            if not all(free[q] for q in group):
                found = self.group_from(p, allow_rematch)
                if found is not None:
                    heappush(heap, found)
                continue
            self.take(group)
            groups.append(group)
        return groups

    def partner(self, p: int, start: int, allow_rematch: bool) -> tuple[float, int, int] | None:
        """(distance, p, q) for p's nearest free in-window partner q above it, scanning from ``start``."""
        mu, window, n = self.mu, self.window, self.n
        reach = window[p]
        low = mu[p]
        q = self.next_free(start)
        while q < n:
            d = mu[q] - low
            if d > reach:
                return None
            if window[q] >= d:
                if allow_rematch or not self.is_rematch((p, q)):
                    return (d, p, q)
                self.saw_rematch = True
            q = self.next_free(q + 1)
        return None

    def group_from(self, p: int, allow_rematch: bool) -> tuple[float, int, tuple[int, ...]] | None:
        """(spread, p, group) for the smallest-spread in-window group of free bots whose lowest is p."""
        mu, window, n, middle = self.mu, self.window, self.n, self.k - 2
        reach = window[p]
        low = mu[p]
        inner: list[int] = []  # bots scanned so far that can still sit between p and the farthest
        q = self.next_free(p + 1)
        while q < n:
            d = mu[q] - low
            if d > reach:
                return None
            if window[q] >= d:  # q can be the farthest member; bots whose window is below d drop out
                inner = [c for c in inner if window[c] >= d]
                if len(inner) >= middle:
                    for others in combinations(inner, middle):
                        group = (p, *others, q)
                        if allow_rematch or not self.is_rematch(group):
                            return (d, p, group)
                        self.saw_rematch = True
                inner.append(q)
            q = self.next_free(q + 1)
        return None

    # -- rules 6 and 7: seats, maps, seeds ------------------------------------------------------

    def pairings(
        self, groups: list[tuple[int, ...]], maps: tuple[str | None, ...], rng: random.Random
    ) -> list[Pairing]:
        """The groups as pairings. One 64-bit draw per match gives its seed (bits 1-31), its map
        (bits 32-63, modulo the pool: a bias below one in 10**8) and, with two seats, who sits
        first when the history does not say (bit 0)."""
        names, last, draw, m = self.names, self.last_seat, rng.getrandbits, len(maps)
        out = []
        for group in groups:
            bits = draw(64)
            bots: tuple[str, ...]
            if self.k == 2:
                p, q = group
                lp, lq = last[p], last[q]
                if lp == lq:  # no history either side, or both sat in the same seat: one must stay
                    swap = bool(bits & 1)
                elif lp is not None:
                    swap = lp == 0  # p wants seat 1
                else:
                    swap = lq == 1  # q wants seat 0
                bots = (names[q], names[p]) if swap else (names[p], names[q])
            else:
                bots = tuple(names[p] for p in self.seat_order(group, rng))
            out.append(Pairing(bots, maps[(bits >> 32) % m], (bits >> 1) & _SEED_MASK))
        return out

    def seat_order(self, group: tuple[int, ...], rng: random.Random) -> list[int]:
        """The group's positions in seat order for more than two seats: each bot in the seat after
        its last if it can, and in its last seat only when the whole group sat there (one of them)."""
        last = self.last_seat
        k = self.k
        order = list(group)
        rng.shuffle(order)  # who wins a contested seat, and where bots with no history go
        seated: list[int | None] = [None] * k
        rest = []
        for p in order:
            want = _wants(last[p], k)
            if want is not None and seated[want] is None:
                seated[want] = p
            else:
                rest.append(p)
        for p in rest:
            empty = [s for s in range(k) if seated[s] is None]
            seat = next((s for s in empty if s != last[p]), empty[0])
            seated[seat] = p
        seats: list[int] = [p for p in seated if p is not None]
        for s in range(k):
            x = seats[s]
            if last[x] != s:
                continue
            # Swap with a bot that may take seat s, preferring one that is not in its wanted seat.
            swaps = [t for t in range(k) if t != s and last[seats[t]] != s]
            if swaps:
                t = min(swaps, key=lambda t: (_wants(last[seats[t]], k) == t, t))
                seats[s], seats[t] = seats[t], x
        return seats


def _widened(windows: list[float], entries: Sequence[Waiting], u: float) -> list[float]:
    """``windows`` with u times each bot's sigma added (rule 1); refuses a sigma that is not a finite
    number >= 0, which would make a window NaN or shrink it."""
    sigmas = [e.rating.sigma for e in entries]
    if not (math.isfinite(sum(sigmas)) and min(sigmas) >= 0.0):
        bad = next(e for e in entries if not (math.isfinite(e.rating.sigma) and e.rating.sigma >= 0.0))
        sigma = bad.rating.sigma
        raise ValueError(f"bot {bad.bot!r} has rating sigma {sigma!r}; sigmas must be finite and >= 0")
    return [w + u * s for w, s in zip(windows, sigmas, strict=True)]


def _wants(last_seat: int | None, seats: int) -> int | None:
    """The seat a bot would like next: the one after its last (sides swap, seats rotate)."""
    return None if last_seat is None else (last_seat + 1) % seats


def _only(opponents: tuple[str, ...]) -> str | None:
    """The one name in ``opponents`` (repeated or not), or None: a two-seat rematch is with it."""
    names = set(opponents)
    return next(iter(names)) if len(names) == 1 else None
