"""Builder: lays wire by an enemy's geyser so that the enemy's flags grow towards a base.

A player loses when one of its flags touches a base. Flags form where signals pass a geyser, and
tangled, thick wire next to a geyser lets new flags spread from cell to cell. So each agent:

1. explores (it only ever sees 13x13 cells ahead of it) until it has seen an enemy geyser
   (``Cell.GEYSER`` with an owner other than 0);
2. walks to a blank cell next to the wire nearest to that geyser. If no wire runs near the geyser,
   it starts from the nearest wire it has seen carry a signal, and builds a wire from there to the
   geyser, so that the signal reaches it;
3. scribbles wire around the geyser, leaning towards the nearest base it knows of. Every new cell
   joins the wire it touches, so the tangle fills with signals and the enemy's flags creep out.

It remembers what it has seen with the SDK's `Tracker`, and seeds its dice from the tick, so the same
views always give the same moves. It is a starting point: its tangles make enemy flags, but on the
built-in maps they seldom reach a base yet. Denser signals by the geyser are the thing to work on.

    python example_bots/rezzo/builder.py --port 7777
"""

from __future__ import annotations

import functools
import random

from cellarena.sdk import WIRE, Bot, Cell, MatchInfo, Move, Tracker, View, Viewport, run

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
            found = self.landmarks[kind].items()
        else:
            found = ((p, c) for p, c in self.tracker.memory.items() if Viewport.kind(c) == kind)
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
        if self.geyser is None or Viewport.kind(t.known(*self.geyser) or 0) != Cell.GEYSER:
            enemy = self.cells(Cell.GEYSER, mine=False)
            self.geyser = enemy[0] if enemy else None
        move = self.explore() if self.geyser is None else self.build(self.geyser, rng)
        return t.commit(move)

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

    def scribble(self, zone: set[Pos], geyser: Pos, lean: Pos, rng: random.Random) -> int:
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
        for index, viewport in view:
            agent = self.agents.setdefault(index, Agent(index, own_base_counts))
            out.append(agent.decide(viewport, view.tick))
        return out


if __name__ == "__main__":
    raise SystemExit(run(Builder))
