"""Raider: goes looking for the enemy's flags and the wires by the enemy's geysers, and hits them.

Each agent explores until it has seen a target, walks up to it and hits it until it is gone (four
hits blank a cell). Its targets, most urgent first:

1. its own player's flags next to or one cell from a base, which would soon lose us the match;
2. the enemy's flags, and the wire right next to an enemy geyser (where the enemy's flags form).

A flag or wire right in front of it that is a target is hit at once. It remembers what it has seen
with the SDK's `Tracker`, so the same views always give the same moves.

    python example_bots/rezzo/raider.py --port 7777
"""

from __future__ import annotations

from cellarena.sdk import HITTABLE, WIRE, Bot, Cell, MatchInfo, Move, Tracker, View, Viewport, run

#: Places to look, in the agent's own frame (it starts at (0, 0) facing -y): ahead first, then wider.
WAYPOINTS = [(0, -16), (-12, -24), (12, -24), (0, -32), (-24, -40), (24, -40)]
WAYPOINTS += [(0, -52), (-36, -52), (36, -52), (0, 0)]
#: Ticks to leave a target alone after finding no way to it.
GIVE_UP = 40
#: Cells a path search may look at: keeps a tick's work well inside the budget.
SEARCH = 2500

Pos = tuple[int, int]
#: What a raider keeps track of: flags to cut, bases and geysers that say where flags matter.
LANDMARKS = frozenset((Cell.FLAG, Cell.BASE, Cell.GEYSER))


def cheb(a: Pos, b: Pos) -> int:
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]))


def neighbours4(p: Pos) -> list[Pos]:
    x, y = p
    return [(x, y - 1), (x + 1, y), (x, y + 1), (x - 1, y)]


class Agent:
    """One agent's memory and plan."""

    def __init__(self, own_base_counts: bool) -> None:
        self.own_base_counts = own_base_counts
        self.tracker = Tracker()
        self.waypoint = 0
        self.target: Pos | None = None
        self.unreachable: dict[Pos, int] = {}  # target -> tick until which it is left alone
        #: Flags, bases and geysers as last seen: a scan of each view keeps these up to date.
        self.seen: dict[Pos, int] = {}

    def remember(self, viewport: Viewport) -> None:
        seen = self.seen
        for pos, code in zip(self.tracker.view_positions(), viewport.cells, strict=True):
            if Viewport.kind(code) in LANDMARKS:
                seen[pos] = code
            elif seen:
                seen.pop(pos, None)

    def targets(self) -> tuple[list[Pos], list[Pos]]:
        """(urgent, raid) targets from memory, each nearest first."""
        memory = self.tracker.memory
        flags_mine: list[Pos] = []
        flags_theirs: list[Pos] = []
        bases: list[Pos] = []
        geysers: list[Pos] = []
        for pos, code in self.seen.items():
            k = Viewport.kind(code)
            if k == Cell.FLAG:
                (flags_mine if Viewport.is_mine(code) else flags_theirs).append(pos)
            elif k == Cell.BASE and (self.own_base_counts or Viewport.is_theirs(code)):
                bases.append(pos)
            elif k == Cell.GEYSER and Viewport.is_theirs(code):
                geysers.append(pos)
        urgent = [f for f in flags_mine if any(cheb(f, b) <= 2 for b in bases)]
        by_geysers = {
            (gx + dx, gy + dy)
            for gx, gy in geysers
            for dx in (-1, 0, 1)
            for dy in (-1, 0, 1)
            if memory.get((gx + dx, gy + dy)) in WIRE
        }
        raid = flags_theirs + sorted(by_geysers)
        here = self.tracker.pos
        nearest = lambda p: (cheb(p, here), p)  # noqa: E731
        return sorted(urgent, key=nearest), sorted(raid, key=nearest)

    def decide(self, viewport: Viewport, tick: int) -> int:
        t = self.tracker
        t.observe(viewport)
        self.remember(viewport)
        urgent, raid = self.targets()
        ahead = viewport.ahead()
        if t.world(1) in urgent or (Viewport.kind(ahead) == Cell.FLAG and Viewport.is_theirs(ahead)):
            return t.commit(Move.HIT)
        if t.world(1) in raid and Viewport.kind(ahead) in HITTABLE:
            return t.commit(Move.HIT)
        # Keep at the current target while it can still be hit; switch at once if something is urgent.
        if self.target is not None and Viewport.kind(t.known(*self.target) or 0) not in HITTABLE:
            self.target = None
        if urgent and self.target not in urgent:
            self.target = None
        if self.target is None:
            for candidate in urgent + raid:
                if self.unreachable.get(candidate, -1) < tick:
                    self.target = candidate
                    break
        if self.target is not None:
            move = self.attack(self.target)
            if move is not None:
                return t.commit(move)
            self.unreachable[self.target] = tick + GIVE_UP
            self.target = None
        return t.commit(self.explore())

    def attack(self, target: Pos) -> int | None:
        """The next move towards hitting ``target``, or None if there is no way to it."""
        t = self.tracker
        if target in neighbours4(t.pos):
            return t.turn_toward(*target) or Move.HIT
        spots = {n for n in neighbours4(target) if t.known(*n) in (None, Cell.BLANK)}
        return t.step_to(spots, limit=SEARCH) if spots else None

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
        return Move.ADVANCE if t.known(*t.world(1)) == Cell.BLANK else Move.RIGHT


class Raider(Bot):
    """Hits the enemy's flags and the wires by the enemy's geysers; see the module docstring."""

    def __init__(self) -> None:
        self.agents: dict[int, Agent] = {}

    def on_start(self, info: MatchInfo) -> None:
        self.agents.clear()

    def on_tick(self, view: View) -> list[int]:
        own_base_counts = self.info.own_base_counts if self.info else True
        out = []
        for index, viewport in view:
            agent = self.agents.setdefault(index, Agent(own_base_counts))
            out.append(agent.decide(viewport, view.tick))
        return out


if __name__ == "__main__":
    raise SystemExit(run(Raider))
