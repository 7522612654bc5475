"""Builder: lays wire by an enemy's geyser so that the enemy's flags grow into a base.

A player loses when one of its flags touches a base. Flags form where signals pass a geyser, and
wire next to a geyser lets new flags spread from cell to cell. But most wire shapes only make flags
that stay by the geyser. So the builder first tries a trap: a fixed shape of about 20 wire cells,
found by an offline search with the engine's rules, that leads the flags into the base.

The trap fits one layout: an enemy geyser with a straight wire running past it that feeds it
signals, and a base 4 to 5 cells away on the far side of the geyser from that wire. The duel and
field maps have it. So each agent:

1. explores (it only ever sees 13x13 cells ahead of it) until it has seen an enemy geyser
   (``Cell.GEYSER`` with an owner other than 0);
2. checks the layout around that geyser, in all eight turns and mirrors, and walks up to look
   closer if part of it is not in sight yet;
3. if it fits, walks the trap's two fixed paths, leaving wire where the trap needs it, and then
   stands still. It cuts any wire that lies on the paths. The trap only works in step with the
   pulses on the feed wire, so before it lays the wire that joins the trap to the feed it waits
   for a pulse to pass a fixed point. The pulses then push the enemy's flags into the base, usually
   within 60 ticks of the last wire;
4. if nothing fits (or it gets stuck, or the trap has not worked after a long wait), it plays as
   before: it walks to the wire by the geyser and scribbles wire around it, leaning towards the
   nearest base, so that the tangle fills with signals and the enemy's flags creep out.

With several agents, only the first builds traps; the others scribble at the other geysers.

It remembers what it has seen with the SDK's `Tracker`, and seeds its dice from the tick, so the same
views always give the same moves. The trap is fragile: an enemy agent that stands in it or cuts it
spoils it, its timing was tuned on the duel and field maps only, and on other layouts (the duel2
map's, for one) the builder seldom wins.

    python example_bots/rezzo/builder.py --port 7777
"""

from __future__ import annotations

import functools
import random
from typing import NamedTuple

from cellarena.sdk import HITTABLE, WIRE, Bot, Cell, MatchInfo, Move, Tracker, View, Viewport, run

SEED = 7
#: The builder scribbles within RING cells of the geyser (Chebyshev), and in the band between the
#: geyser and a base, SLACK cells wider than the straight line.
RING = 3
SLACK = 3
#: The share of steps inside the zone that lay wire.
DENSITY = 0.5
#: Places to look, in the agent's own frame (it starts at (0, 0) facing -y): ahead first, then wider.
WAYPOINTS = [(0, -20), (-14, -20), (14, -20), (0, -36), (-24, -36), (24, -36)]
WAYPOINTS += [(0, -52), (-36, -52), (36, -52), (0, 0)]
#: Cells a path search may look at: keeps a tick's work well inside the budget.
SEARCH = 2500

Pos = tuple[int, int]

# A trap. Its shape came from an offline random search with the engine's rules, and the order of
# its walks was checked with the engine too. It fits a common layout: an enemy
# geyser at (0, 0), a straight wire that feeds it running past at x = +1 and ending at y = -2, and a
# base 4 to 5 cells away towards (-4, -4). Two walks lay it; each step goes to the next cell and
# says whether to leave wire (True) in the cell it leaves. Once it is built, the pulses on the feed
# wire push the enemy's flags through it into the base. The same layout turned or mirrored matches
# too, so the trap is tried in all eight orientations.
TRAP_WALKS: tuple[tuple[tuple[Pos, bool], ...], ...] = (
    (
        ((-4, -1), False),
        ((-3, -1), True),
        ((-3, -2), False),
        ((-3, -3), True),
        ((-2, -3), True),
        ((-2, -2), True),
        ((-1, -2), True),
        ((-1, -1), True),
        ((-2, -1), True),
        ((-2, 0), True),
        ((-1, 0), True),
        ((-1, 1), True),
        ((-2, 1), False),
        ((-3, 1), True),
        ((-3, 0), True),
        ((-4, 0), True),
    ),
    (
        ((-1, -3), False),
        ((0, -3), False),
        ((0, -4), True),
        ((0, -5), True),
        ((1, -5), True),
        ((1, -4), True),
        ((1, -3), True),
        ((2, -3), True),
        ((2, -4), False),
        ((3, -4), True),
    ),
)
#: What must be there for the trap to fit: the feed wire (flags and photons form on it), its blank
#: end, and the base.
FEED = (*WIRE, Cell.PHOTON, Cell.FLAG)
TRAP_WIRE = ((1, -2), (1, -1), (1, 0), (1, 1))
TRAP_BLANK = ((1, -3),)
TRAP_BASE = ((-4, -4), (-5, -5))
#: Where to look round from when the base is not in sight yet.
TRAP_LOOK = (-2, -2)
#: The trap works only if it meets the feed's pulses in step: joined to the feed a tick or two
#: off, it fills with signals that never push a flag out. Nothing in it carries a signal until the
#: step SYNC (walk, step) lays the wire that joins it to the feed. So at that step the agent waits
#: until a pulse is on the feed at PULSE (in sight from there), and lays that wire PULSE_DELAY ticks
#: later (the delay that wins on duel and field whenever the agent gets there, found with the
#: engine). It goes on anyway if no pulse shows within SYNC_WAIT ticks.
SYNC = (1, 2)
PULSE = (1, 2)
PULSE_DELAY = 2
SYNC_WAIT = 40
#: The eight turns and mirrors, as (x, y) -> (a*x + b*y, c*x + d*y).
ORIENTATIONS = [(a, b, c, d) for a, b, c, d in ((1, 0, 0, 1), (0, -1, 1, 0), (-1, 0, 0, -1), (0, 1, -1, 0))]
ORIENTATIONS += [(-a, -b, c, d) for a, b, c, d in ORIENTATIONS]
#: Ticks an agent may be stuck on its trap before it gives up, and ticks it waits by a finished
#: trap before it goes back to scribbling.
STUCK = 40
PATIENCE = 300
#: Ticks an agent may spend going to look at a geyser before it gives up on a trap there.
LOOK = 150


class Trap(NamedTuple):
    """A trap laid out in an agent's frame: its walks of (cell, lay wire?) steps, and its PULSE cell."""

    walks: list[list[tuple[Pos, bool]]]
    pulse: Pos


def place(geyser: Pos, orientation: tuple[int, int, int, int], p: Pos) -> Pos:
    """Trap cell ``p`` (relative to the geyser) in the world, turned or mirrored by ``orientation``."""
    a, b, c, d = orientation
    return geyser[0] + a * p[0] + b * p[1], geyser[1] + c * p[0] + d * p[1]


def cheb(a: Pos, b: Pos) -> int:
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]))


def neighbours4(p: Pos) -> list[Pos]:
    x, y = p
    return [(x, y - 1), (x + 1, y), (x, y + 1), (x - 1, y)]


def neighbours8(p: Pos) -> list[Pos]:
    x, y = p
    return [(x + dx, y + dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dx or dy]


class Agent:
    """One agent's memory and plan."""

    def __init__(self, index: int, own_base_counts: bool) -> None:
        self.index = index
        self.own_base_counts = own_base_counts
        self.tracker = Tracker()
        self.waypoint = 0
        self.geyser: Pos | None = None
        #: Geysers and bases seen, by kind: they never move, so a scan of each view keeps these up to date.
        self.landmarks: dict[int, dict[Pos, int]] = {Cell.GEYSER: {}, Cell.BASE: {}}
        #: The trap to build, in this agent's frame.
        self.trap: Trap | None = None
        self.trap_geyser: Pos | None = None
        self.walk = 0  # which walk of the trap
        self.step = 0  # the next step of that walk
        self.stuck = 0
        self.waited = 0  # ticks spent waiting for a pulse at SYNC
        self.join_at: int | None = None  # the tick to lay the wire at SYNC
        self.done_at: int | None = None
        self.inspected: set[Pos] = set()  # enemy geysers already checked for the trap
        self.looked = 0
        self.look_ticks = 0  # ticks spent looking at the current geyser

    # ------------------------------------------------------------------ what it remembers
    def remember(self, viewport: Viewport) -> None:
        for pos, code in zip(self.tracker.view_positions(), viewport.cells, strict=True):
            k = Viewport.kind(code)
            for kind, seen in self.landmarks.items():
                if k == kind:
                    seen[pos] = code
                elif seen:
                    seen.pop(pos, None)  # gone: its owner lost

    def cells(self, kind: int, mine: bool | None = None) -> list[Pos]:
        """Known cells of ``kind`` (nearest first); only electrons and tails need a memory scan."""
        if kind in self.landmarks:
            found = list(self.landmarks[kind].items())
        else:
            found = [(p, c) for p, c in self.tracker.memory.items() if Viewport.kind(c) == kind]
        out = [p for p, c in found if mine is None or Viewport.is_mine(c) == mine]
        return sorted(out, key=lambda p: (cheb(p, self.tracker.pos), p))

    def is_wire(self, pos: Pos) -> bool:
        return self.tracker.known(*pos) in WIRE

    def deadly_base(self, geyser: Pos) -> Pos | None:
        """The nearest known base where this geyser owner's flags would lose them."""
        owner = Viewport.owner(self.tracker.memory[geyser])
        bases = [
            p
            for p in self.cells(Cell.BASE)
            if self.own_base_counts or Viewport.owner(self.tracker.memory[p]) != owner
        ]
        return min(bases, key=lambda p: (cheb(p, geyser), p), default=None)

    # ------------------------------------------------------------------ deciding
    def decide(self, viewport: Viewport, tick: int) -> int:
        t = self.tracker
        t.observe(viewport)
        self.remember(viewport)
        rng = random.Random(f"{SEED}:{tick}:{self.index}")
        if self.trapper:
            move = self.trap_move(tick)
            if move is not None:
                return t.commit(move)
            done = self.trap is not None and self.done_at is not None
            avoid = {self.trap_geyser} if done and self.trap_geyser is not None else set()
        else:
            self.avoid_traps()
            avoid = self.inspected
        if self.geyser is None or Viewport.kind(t.known(*self.geyser) or 0) != Cell.GEYSER:
            enemy = [g for g in self.cells(Cell.GEYSER, mine=False) if g not in avoid]
            self.geyser = enemy[0] if enemy else None
        move = self.explore() if self.geyser is None else self.build(self.geyser, rng)
        return t.commit(move)

    # ------------------------------------------------------------------ the trap
    #: Only one agent of a player builds traps (set by the bot): two would get in each other's way.
    trapper = True

    def fit_trap(self, geyser: Pos) -> tuple[Trap | None, Pos | None]:
        """The trap laid out by this geyser, if the layout around it fits one orientation.

        Else None, and a place to look from when the layout fits but for a base not seen yet.
        """
        known = self.tracker.known
        ours = self.cells(Cell.GEYSER, mine=True)
        look = None
        best: tuple[int, Trap] | None = None
        for orientation in ORIENTATIONS:
            at = functools.partial(place, geyser, orientation)
            wire = [known(*at(p)) for p in TRAP_WIRE]
            blank = [known(*at(p)) for p in TRAP_BLANK]
            bases = [known(*at(p)) for p in TRAP_BASE]
            if (
                any(code is not None and Viewport.kind(code) not in FEED for code in wire)
                or any(code not in (None, Cell.BLANK) for code in blank)
                or any(Viewport.kind(code) != Cell.BASE for code in bases if code is not None)
            ):
                continue
            if None in wire + blank + bases:
                look = look or at(TRAP_LOOK)  # fits as far as it has seen: have a better look
                continue
            walks = [[(at(p), lay) for p, lay in walk] for walk in TRAP_WALKS]
            cells = [p for walk in walks for p, _ in walk]
            kinds = [Viewport.kind(known(*p) or 0) for p in cells]
            if any(k not in (Cell.BLANK, Cell.AGENT, *HITTABLE) for k in kinds):
                continue
            if any(cheb(p, g) <= 2 for p in cells for g in ours):
                continue  # it would grow our own flags
            # Wire someone left on the trap's cells is cut on the way: fewer such cells is better.
            clutter = sum(k in HITTABLE for k in kinds)
            if best is None or clutter < best[0]:
                best = clutter, Trap(walks, at(PULSE))
        return (best[1], None) if best is not None else (None, look)

    def trap_move(self, tick: int) -> int | None:
        """The next move towards building a trap, or None to play as a plain builder."""
        t = self.tracker
        if self.trap is None:
            return self.look_for_trap()
        if self.walk >= len(self.trap.walks):
            self.done_at = tick if self.done_at is None else self.done_at
            return Move.NOOP if tick - self.done_at < PATIENCE else None
        if self.stuck > STUCK:
            return None
        walk = self.trap.walks[self.walk]
        if self.step == 0:
            if t.pos != walk[0][0]:
                return self.go_to_start(walk[0][0])
            self.step = 1
        while self.step < len(walk) and t.pos == walk[self.step][0]:
            self.step += 1
        if self.step >= len(walk):
            self.walk, self.step = self.walk + 1, 0
            return self.trap_move(tick)
        cell, lay = walk[self.step]
        if abs(cell[0] - t.x) + abs(cell[1] - t.y) != 1:
            self.stuck = STUCK + 1  # pushed off the walk: give up
            return None
        if (self.walk, self.step) == SYNC:
            move = self.wait_for_pulse(cell, self.trap.pulse, tick)
            if move is not None:
                return move
        turn = t.turn_toward(*cell)
        if turn is not None:
            return turn
        ahead = t.known(*cell)
        if ahead == Cell.BLANK:
            self.stuck = 0
            return Move.BUILD if lay else Move.ADVANCE
        self.stuck += 1
        # Someone else's wire or a flag in the way: cut it. An agent in the way moves on by itself.
        return Move.HIT if Viewport.kind(ahead or 0) in HITTABLE else Move.NOOP

    def go_to_start(self, start: Pos) -> int:
        """A move towards the first cell of the current walk."""
        t = self.tracker
        move = t.step_to({start}, limit=SEARCH)
        if move is None and t.world(1) == start and Viewport.kind(t.known(*start) or 0) in HITTABLE:
            move = Move.HIT  # wire on the start cell: cut it
        self.stuck = 0 if move is not None else self.stuck + 1
        return Move.NOOP if move is None else move

    def wait_for_pulse(self, cell: Pos, pulse: Pos, tick: int) -> int | None:
        """At SYNC: a move that waits to lay the wire towards ``cell`` in step with the pulses seen at
        ``pulse``, or None when it is time."""
        t = self.tracker
        if self.join_at is None:
            if self.waited >= SYNC_WAIT:
                return None
            if t.known(*pulse) != Cell.ELECTRON or pulse not in t.view_positions():
                self.waited += 1
                return Move.NOOP
            self.join_at = tick + PULSE_DELAY
        if tick < self.join_at:
            return t.turn_toward(*cell) or Move.NOOP
        return None

    def look_for_trap(self) -> int | None:
        """Check each enemy geyser for the trap's layout; None once none is left to check."""
        t = self.tracker
        for geyser in self.cells(Cell.GEYSER, mine=False):
            if geyser in self.inspected:
                continue
            trap, look = self.fit_trap(geyser)
            if trap is not None:
                self.trap, self.trap_geyser = trap, geyser
                return self.trap_move(0)
            self.look_ticks += 1
            if look is not None and self.looked < 4 and self.look_ticks < LOOK:
                # It fits as far as it has seen: go to where the rest should be in sight, look round.
                near = {(look[0] + dx, look[1] + dy) for dx in range(-2, 3) for dy in range(-2, 3)}
                if t.pos not in near and self.looked == 0:
                    move = t.step_to(near, limit=SEARCH)
                    if move is not None:
                        return move
                self.looked += 1
                return Move.RIGHT
            self.inspected.add(geyser)
            self.looked = self.look_ticks = 0
        return None

    def avoid_traps(self) -> None:
        """For the agents that do not build traps: leave the geysers that fit one to the agent that does."""
        for geyser in self.cells(Cell.GEYSER, mine=False):
            if geyser not in self.inspected and self.fit_trap(geyser)[0] is not None:
                self.inspected.add(geyser)

    def explore(self) -> int:
        t = self.tracker
        # One search per tick at most, so that a waypoint we cannot reach costs no more than one turn.
        if self.waypoint >= len(WAYPOINTS):
            self.waypoint = 0  # seen everything we planned to: start the round again
        goal = WAYPOINTS[self.waypoint]
        if cheb(goal, t.pos) > 2 and t.known(*goal) in (None, Cell.BLANK):
            move = t.step_to({goal}, limit=SEARCH)
            if move is not None:
                return move
        self.waypoint += 1
        return Move.RIGHT if t.known(*t.world(1)) != Cell.BLANK else Move.ADVANCE

    @staticmethod
    @functools.lru_cache(maxsize=64)  # the same few geysers and bases, tick after tick
    def zone(geyser: Pos, base: Pos | None) -> frozenset[Pos]:
        """Where to scribble: around the geyser, and all the way to the base when we know one."""
        gx, gy = geyser
        zone = {(gx + dx, gy + dy) for dx in range(-RING, RING + 1) for dy in range(-RING, RING + 1)}
        if base is not None:
            reach = cheb(geyser, base) + SLACK
            bx, by = base
            for x in range(min(gx, bx) - SLACK, max(gx, bx) + SLACK + 1):
                for y in range(min(gy, by) - SLACK, max(gy, by) + SLACK + 1):
                    if cheb((x, y), geyser) + cheb((x, y), base) <= reach:
                        zone.add((x, y))
        return frozenset(zone)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def safe_zone(geyser: Pos, base: Pos | None, ours: tuple[Pos, ...]) -> frozenset[Pos]:
        """The zone without the cells near our own geysers: wire there would grow our own flags."""
        return frozenset(p for p in Agent.zone(geyser, base) if all(cheb(p, g) > 2 for g in ours))

    def build(self, geyser: Pos, rng: random.Random) -> int:
        t = self.tracker
        base = self.deadly_base(geyser)
        lean = base if base is not None else geyser
        zone = self.safe_zone(geyser, base, tuple(self.cells(Cell.GEYSER, mine=True)))
        near_wire = [p for p in zone if self.is_wire(p)]
        inside = t.pos in zone or any(n in zone for n in neighbours8(t.pos))
        if inside and any(self.is_wire(p) for p in neighbours8(t.pos)):
            return self.scribble(zone, geyser, lean, rng)
        # Step 2: stand next to the wire by the geyser, on the side nearest the base.
        starts = {n for p in near_wire for n in neighbours8(p) if n in zone and t.known(*n) == Cell.BLANK}
        if starts:
            closest = min(cheb(n, lean) for n in starts)
            starts = {n for n in starts if cheb(n, lean) <= closest + 1}
        move = t.step_to(starts, limit=SEARCH) if starts else None
        if move is not None:
            return move
        if not near_wire:
            # No wire by the geyser: bring a signal there from the nearest live wire we know.
            live = [p for p in self.cells(Cell.ELECTRON) + self.cells(Cell.TAIL) if p not in zone]
            if live and not any(self.is_wire(n) for n in neighbours8(t.pos)):
                source = min(live, key=lambda p: (cheb(p, geyser), p))
                move = t.step_to({n for n in neighbours8(source) if t.known(*n) == Cell.BLANK}, limit=SEARCH)
                if move is not None:
                    return move
            beside = {n for n in neighbours8(geyser) if t.known(*n) in (None, Cell.BLANK)}
            building = any(self.is_wire(n) for n in neighbours8(t.pos))
            move = t.step_to(beside, build=building, limit=SEARCH)
            if move is not None:
                return move
        # The zone is full of wire, or out of reach: go and rework it from its edge.
        move = t.step_to({p for p in near_wire if cheb(p, geyser) >= 2}, limit=SEARCH)
        if move is not None:
            return move
        return self.scribble(zone, geyser, lean, rng) if inside else self.explore()

    def scribble(self, zone: frozenset[Pos], geyser: Pos, lean: Pos, rng: random.Random) -> int:
        """Step 3: a biased random walk that leaves wire behind it, inside the zone."""
        t = self.tracker
        options = [n for n in neighbours4(t.pos) if n in zone and t.known(*n) == Cell.BLANK]
        if options:
            # Mostly towards the base, with dice so the tangle grows thick rather than straight.
            best = min(options, key=lambda p: (cheb(p, lean) + rng.random() * 1.5, p))
            # Leave gaps: a half-filled tangle keeps more signals alive than a solid block.
            return t.turn_toward(*best) or (Move.BUILD if rng.random() < DENSITY else Move.ADVANCE)
        # Nothing blank next to us: walk on to blank cells of the zone, laying wire as we go.
        blank = {p for p in zone if t.known(*p) == Cell.BLANK}
        move = t.step_to(blank, build=t.pos in zone, unknown=False, limit=SEARCH) if blank else None
        if move is not None:
            return move
        # Nowhere left to build: cut a hole in the tangle (away from the geyser) and fill it again
        # later, which keeps the signals in it churning.
        cuttable = [
            n
            for n in neighbours4(t.pos)
            if n in zone and cheb(n, geyser) >= 2 and Viewport.kind(t.known(*n) or 0) in WIRE
        ]
        if cuttable:
            target = min(cuttable, key=lambda p: (cheb(p, lean) + rng.random() * 1.5, p))
            return t.turn_toward(*target) or Move.HIT
        free = [n for n in neighbours4(t.pos) if t.known(*n) == Cell.BLANK]
        if free:
            return t.turn_toward(*free[0]) or Move.ADVANCE
        return Move.HIT if Viewport.kind(t.known(*t.world(1)) or 0) in WIRE else Move.RIGHT


class Builder(Bot):
    """Lays wire by the enemy's geysers; see the module docstring."""

    def __init__(self) -> None:
        self.agents: dict[int, Agent] = {}

    def on_start(self, info: MatchInfo) -> None:
        self.agents.clear()

    def on_tick(self, view: View) -> list[int]:
        own_base_counts = self.info.own_base_counts if self.info else True
        out = []
        first = min(view.agents, default=0)
        for index, viewport in view:
            agent = self.agents.setdefault(index, Agent(index, own_base_counts))
            agent.trapper = index == first
            out.append(agent.decide(viewport, view.tick))
        return out


if __name__ == "__main__":
    raise SystemExit(run(Builder))
