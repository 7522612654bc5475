"""The Rezzo engine: agents, moves, viewports and results around the bit-plane CA in `ca`.

A decision point at tick t shows the world W_t. `apply()` runs tick t's agent phase on W_t, then
tick t+1's CA transition and loss processing. `new()` takes the map as W_0 and runs tick 1's
transition, so the first thing any bot sees is a world that has already stepped once, as in the
rulebook's tick order (transition, losses, agents).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.rezzo import (
    FORWARD,
    MAX_DAMAGE,
    MAX_PLAYERS,
    RIGHTWARD,
    VIEW_AGENT_COL,
    VIEW_AGENT_ROW,
    VIEW_SIZE,
    Cell,
    Facing,
    Move,
)
from cellarena.sdk.protocol import is_int
from cellarena.server.games import causes
from cellarena.server.games.base import (
    ConfigError,
    DebugPlacing,
    Events,
    EventsHistory,
    OlderHashSchemes,
    Result,
    event,
    sole_first,
)
from cellarena.server.games.config import GameConfig, option
from cellarena.server.games.rezzo.ca import BitWorld
from cellarena.server.games.rezzo.maps import parse_embedded_map, parse_map, read_map
from cellarena.server.games.rezzo.planes import AT_BASE, BURNT
from cellarena.server.games.rezzo.viewports import Viewports

HITTABLE = frozenset({Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL})
VIEW_CELLS = VIEW_SIZE * VIEW_SIZE
MOVE_CODES = frozenset(int(m) for m in Move)
_NOOP, _ADVANCE, _LEFT, _RIGHT, _BUILD = (
    int(m) for m in (Move.NOOP, Move.ADVANCE, Move.LEFT, Move.RIGHT, Move.BUILD)
)


def decode_moves(request: Mapping[str, Any], answer: Any) -> dict[int, Any] | None:
    """One move per agent the request listed, in its order, as {agent index: move}.

    A list of the wrong length is malformed as a whole: the agents it would pair up are unknown.
    A bad code for one agent is left for `parse_moves` to count, so the others still move.
    """
    agents = request["agents"]
    if not isinstance(answer, list) or len(answer) != len(agents):
        return None
    return dict(zip(agents, answer, strict=True))


def parse_moves(seat: int, raw: Any, events: Events, agents_per_player: int) -> dict[int, int]:
    """A seat's moves other than no-ops as {agent index: move code}; anything unreadable counts as
    malformed in ``events``."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        items: Any = raw.items()
    elif isinstance(raw, (list, tuple)):
        items = enumerate(raw)
    else:
        events.count(events.malformed, seat)
        return {}
    moves: dict[int, int] = {}
    n = agents_per_player
    for k, m in items:
        # type() first, inline: wire values are plain ints, and this runs per agent per tick.
        ok_k = (type(k) is int or is_int(k)) and 0 <= k < n
        ok_m = (type(m) is int or is_int(m)) and m in MOVE_CODES
        if ok_k and ok_m:
            if m != _NOOP:
                moves[k] = int(m)
            else:
                moves.pop(k, None)
        else:
            events.count(events.malformed, seat)
    return moves


#: `RezzoEngine.state_hash`'s scheme: 2 hashes public codes (1, before 2026-11, hashed bit planes).
HASH_VERSION = 2


def state_digest(
    size: tuple[int, int, int, int],
    world: Sequence[bytes],
    damage: bytes,
    agents: Sequence[Sequence[int]],
    alive: Sequence[int],
) -> str:
    """A state hash from its parts: ``size`` (tick, width, height, players), the world's bytes (its
    bit planes in scheme 1, its public codes in scheme 2), the damage, each agent's (player, index,
    x, y, facing, alive) and the players still in, ascending. `RezzoEngine` and a world stepped in
    a batch (`slot_batch.BatchedWorld`) both hash through this, so they agree by construction."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.array(size, "<i8").tobytes())
    for part in world:
        h.update(part)
    h.update(damage)
    h.update(np.array(agents, "<i8").tobytes())
    h.update(bytes(alive))
    return h.hexdigest()


_CELL_NAMES = {int(Cell.CONDUCTOR): "conductor", int(Cell.ELECTRON): "electron", int(Cell.TAIL): "tail"}


def hit_event(tick: int, hitter: int, x: int, y: int, code: int) -> dict[str, Any]:
    """The event of a hit that blanked cell (x, y), which held ``code``: a flag destroyed (its owner's
    event) or a wire cell destroyed (the hitter's)."""
    if Cell.FLAG <= code < Cell.GEYSER:
        return event("flag_destroyed", tick, seat=code & 7, cell=[x, y], how="hit", by=hitter)
    return event("cell_destroyed", tick, seat=hitter, cell=[x, y], was=_CELL_NAMES.get(code, str(code)))


def blocked_event(tick: int, seat: int, count: int) -> dict[str, Any]:
    """The event of ``count`` agents of ``seat`` that could not move at decision point ``tick``: an
    advance or build refused because the cell in front was not blank (or off the world). One per seat
    and tick, after the agent phase's hits, so a bot that walks into a wall shows without flooding."""
    return event("blocked", tick, seat=seat, count=count)


def base_touching(
    x: int,
    y: int,
    owner: int,
    bases: Sequence[tuple[int, int, int]],
    own_base_counts: bool,
    size: tuple[int, int, bool],
) -> tuple[int, int, int]:
    """The base (x, y, its owner) beside which ``owner``'s flag at (x, y) loses: the first in reading
    order of ``bases`` (x, y, owner, sorted by y then x) that counts against it. ``size``: (width,
    height, torus)."""
    width, height, torus = size
    for bx, by, bo in bases:
        if bo == owner and not own_base_counts:
            continue
        dx, dy = abs(bx - x), abs(by - y)
        if torus:
            dx, dy = min(dx, width - dx), min(dy, height - dy)
        if dx <= 1 and dy <= 1:
            return bx, by, bo
    raise ValueError(f"no base beside the flag of player {owner} at ({x}, {y})")  # a bug, never input


def transition_events(
    found: Sequence[tuple[int, int, int, int]],
    tick: int,
    bases: Sequence[tuple[int, int, int]],
    own_base_counts: bool,
    size: tuple[int, int, bool],
) -> list[dict[str, Any]]:
    """The events of one transition from the flags it touched, (kind, player, x, y) as `BitWorld.step`
    finds them, in one order whatever found them: by cell (row, then column), then kind. Every
    path that steps Rezzo (the engine, `batched` with numpy or numba) reports through this."""
    out = []
    for kind, o, x, y in sorted(found, key=lambda f: (f[3], f[2], f[0])):
        if kind == AT_BASE:
            bx, by, bo = base_touching(x, y, o, bases, own_base_counts, size)
            out.append(event("flag_at_base", tick, seat=o, flag=[x, y], base=[bx, by], by=bo))
        elif kind == BURNT:
            out.append(event("flag_destroyed", tick, seat=o, cell=[x, y], how="electron"))
        else:
            out.append(event("flag_formed", tick, seat=o, cell=[x, y]))
    return out


def loss_events(
    log: list[dict[str, Any]], losers: Sequence[int], tick: int, lost: dict[int, dict[str, Any]]
) -> None:
    """Append an ``out`` event per loser to ``log``, and put each loser's cause in ``lost``: its first
    flag beside a base (in `transition_events`' order)."""
    for o in sorted(losers):
        first = next(e for e in log if e["kind"] == "flag_at_base" and e["seat"] == o)
        log.append(event("out", tick, seat=o, cause="flag_at_base"))
        fx, fy = first["flag"]
        bx, by = first["base"]
        whose = "its own base" if first["by"] == o else f"{{{first['by']}}}'s base"
        text = f"{{{o}}} is out at tick {tick}: its flag at ({fx}, {fy}) touched {whose} at ({bx}, {by})"
        lost[o] = causes.cause("flag_at_base", tick, flag=[fx, fy], base=[bx, by], by=first["by"], text=text)


def end_causes(
    players: int, alive: Sequence[int], lost: Mapping[int, dict[str, Any]], capped: bool, tick: int
) -> dict[int, dict[str, Any]]:
    """Every seat's cause at the end: the losers' own, and for the players still in the tick cap or
    last player standing."""
    out = {}
    for i in range(players):
        if i in lost:
            out[i] = dict(lost[i])
        elif capped:
            out[i] = causes.cause(causes.TICK_CAP, tick)
        else:
            out[i] = causes.cause(causes.LAST_STANDING, tick)
    return out


def loss_reason(players_left: int) -> str:
    """Why a match ended once losses left ``players_left`` (0 or 1) players in."""
    return "last player standing" if players_left else "all remaining players lost in the same tick"


def cap_reason(max_ticks: int) -> str:
    """Why a match ended at its tick cap."""
    return f"tick cap {max_ticks} reached"


@dataclass(frozen=True)
class RezzoConfig(GameConfig):
    """Options of a Rezzo match; `docs/games/rezzo.md` explains each."""

    game: ClassVar[str] = "rezzo"

    map: str = option("duel", "a built-in map's name or the path of a map file")
    max_ticks: int = option(3000, "the tick cap", min=1)
    own_base_counts: bool = option(True, "whether a flag next to its owner's own base loses too")
    torus: bool = option(False, "whether the world wraps at its edges")
    #: The map's text. When given, it is used instead of loading ``map``, which then only names it;
    #: replays carry it so that they still verify after a map file changes.
    map_text: str | None = option(None, "the map's text, used instead of loading map")

    def max_decisions(self) -> int:
        return self.max_ticks


@dataclass
class Agent:
    player: int
    index: int
    x: int
    y: int
    facing: Facing
    alive: bool = True


def board_agents(
    cells: np.ndarray, players: int, agents: Sequence[tuple[int, int, int, int]] | None
) -> list[Agent]:
    """The agents of `RezzoEngine.from_board`, sorted by (player, index): ``agents`` as (player, x,
    y, facing), or without it the AGENT cells of ``cells`` in reading order, all facing north."""
    if agents is None:
        ys, xs = np.nonzero((cells >= Cell.AGENT) & (cells < Cell.FLAG))
        agents = [
            (int(cells[y, x]) - Cell.AGENT, int(x), int(y), int(Facing.N))
            for y, x in zip(ys, xs, strict=True)
        ]
    counts = [0] * players
    made = []
    for player, x, y, facing in agents:
        if cells[y, x] != Cell.AGENT + player:
            raise ConfigError(f"agent of player {player} at ({x}, {y}) stands on code {cells[y, x]}")
        made.append(Agent(player, counts[player], x, y, Facing(facing)))
        counts[player] += 1
    n_agent_cells = int(np.count_nonzero((cells >= Cell.AGENT) & (cells < Cell.FLAG)))
    if n_agent_cells != len(made):
        raise ConfigError(f"{n_agent_cells} agent cells but {len(made)} agents listed")
    made.sort(key=lambda a: (a.player, a.index))
    return made


def bases_of(grid: np.ndarray, players: int) -> list[tuple[int, int, int]]:
    """Every base of ``grid`` (H, W codes) as (x, y, owner), in reading order."""
    ys, xs = np.nonzero((grid >= Cell.BASE) & (grid < Cell.BASE + players))
    return [(int(x), int(y), int(grid[y, x]) & 7) for y, x in zip(ys, xs, strict=True)]


def positions(agents: Sequence[Agent]) -> np.ndarray:
    """(n, 3): x, y and facing of each of ``agents``, as `Viewports` takes them."""
    return np.array([(a.x, a.y, int(a.facing)) for a in agents], np.intp).reshape(len(agents), 3)


def resolution_order(agents: Sequence[Agent], t: int, players: int, per_player: int) -> list[Agent]:
    """The live ``agents`` in the order their moves resolve at tick ``t``: slot k of every player, the
    player whose turn it is first."""
    by_key = {(a.player, a.index): a for a in agents if a.alive}
    out = []
    for k in range(per_player):
        for i in range(players):
            a = by_key.get(((t + i) % players, k))
            if a is not None:
                out.append(a)
    return out


def move_agent(
    world: BitWorld, damage: np.ndarray, a: Agent, move: int
) -> tuple[bool, tuple[int, int, int] | None]:
    """Carry out one agent's move (not a no-op) on the live ``world`` with its ``damage``: whether it
    was legal (an illegal move is a no-op), and the cell (x, y, code) a hit blanked, if one did."""
    if move in (_LEFT, _RIGHT):
        a.facing = Facing((a.facing + (3 if move == _LEFT else 1)) % 4)
        return True, None
    dx, dy = FORWARD[a.facing]
    fx, fy = a.x + dx, a.y + dy
    if world.torus:
        fx, fy = fx % world.width, fy % world.height
    elif not (0 <= fx < world.width and 0 <= fy < world.height):
        return False, None
    target = world.code_at(fx, fy)
    if move in (_ADVANCE, _BUILD):
        if target != Cell.BLANK:
            return False, None
        world.set_code(fx, fy, Cell.AGENT + a.player)
        world.set_code(a.x, a.y, Cell.CONDUCTOR if move == _BUILD else Cell.BLANK)
        damage[a.y, a.x] = 0
        a.x, a.y = fx, fy
        return True, None
    # HIT
    if not (target in HITTABLE or Cell.FLAG <= target < Cell.GEYSER):
        return False, None
    if damage[fy, fx] < MAX_DAMAGE:
        damage[fy, fx] += 1
        return True, None
    world.set_code(fx, fy, Cell.BLANK)
    damage[fy, fx] = 0
    return True, (fx, fy, target)


def viewport_placer(
    agents: Sequence[Agent], seat: int, request: Mapping[str, Any], size: tuple[int, int, bool]
) -> Callable[[int | None, list[int]], list[int] | None]:
    """A bot's debug cells, ``[row, col]`` of one of its agents' viewports (the wire layout), as
    board cells ``[x, y]`` (the match's ``debug_placer``). ``agent`` None: the request's first agent;
    an agent not in the request, or a cell off the viewport or off a bounded board, places nowhere.

    Read before ``apply()``, so each agent stands where its viewport was taken."""
    width, height, torus = size
    asked = request.get("agents") or []
    mine = {a.index: a for a in agents if a.player == seat and a.alive and a.index in asked}
    first = asked[0] if asked else None

    def place(agent: int | None, cell: list[int]) -> list[int] | None:
        k = first if agent is None else agent
        a = mine.get(k) if k is not None else None
        row, col = cell
        if a is None or not (0 <= row < VIEW_SIZE and 0 <= col < VIEW_SIZE):
            return None
        (fx, fy), (rx, ry) = FORWARD[a.facing], RIGHTWARD[a.facing]
        ahead, right = VIEW_AGENT_ROW - row, col - VIEW_AGENT_COL
        x, y = a.x + ahead * fx + right * rx, a.y + ahead * fy + right * ry
        if torus:
            return [x % width, y % height]
        return [x, y] if 0 <= x < width and 0 <= y < height else None

    return place


class RezzoEngine(OlderHashSchemes, EventsHistory, DebugPlacing):
    """One Rezzo match. See the module docstring for the tick order."""

    name: ClassVar[str] = "rezzo"
    #: The scheme of `state_hash` (replays record it, and verify older files in theirs: `OlderHashSchemes`).
    HASH_VERSION: ClassVar[int] = HASH_VERSION
    #: Event kinds added since replays began to carry events (2: ``blocked``): a replay written before
    #: verifies without them (`games.base.EventsHistory`).
    EVENTS_VERSION: ClassVar[int] = 2
    EVENT_KINDS_SINCE: ClassVar[dict[str, int]] = {"blocked": 2}
    default_tick_rate: ClassVar[float] = 15.0
    default_budget_ms: ClassVar[float | None] = None

    def __init__(
        self,
        world: BitWorld,
        agents: list[Agent],
        *,
        tick: int,
        max_ticks: int,
        map_name: str = "",
        damage: np.ndarray | None = None,
    ) -> None:
        self.world = world
        self.players = world.players
        self.height, self.width = world.height, world.width
        self.torus = world.torus
        self.tick = tick
        self.max_ticks = max_ticks
        self.map_name = map_name
        self._viewports = Viewports(world, damage)
        self._damage = self._viewports.damage  # the world's, in place
        self._agents = agents
        self.agents_per_player = max((a.index + 1 for a in agents), default=0)
        self._alive_players = set(range(self.players))
        self._lost_at: dict[int, int] = {}
        #: Each loser's cause (`loss_events`), and the events of the `apply` under way.
        self._lost: dict[int, dict[str, Any]] = {}
        self._log: list[dict[str, Any]] = []
        #: The bases of the players still in, (x, y, owner) in reading order: only a loss changes them.
        self._base_cells = bases_of(self.world.codes_view(), self.players)
        self._result: Result | None = None
        # Per-tick work that only changes when an agent moves, turns or dies is cached:
        self._live: list[Agent] | None = None  # live agents, sorted by (player, index)
        self._seat_slices: dict[int, tuple[int, int, list[int]]] = {}
        self._view_index: np.ndarray | None = None  # flat indices into the padded arrays
        self._order_cache: dict[int, list[Agent]] = {}
        #: The effective options, map text included, that `new()` was given (None from `from_board`).
        self.config: RezzoConfig | None = None

    # ----------------------------------------------------------------- construction
    @classmethod
    def new(cls, config: Mapping[str, Any] | RezzoConfig, seed: int = 0) -> RezzoEngine:
        """Load the map, then run tick 1's transition. Rezzo has no randomness: ``seed`` is unused."""
        cfg = config if isinstance(config, RezzoConfig) else RezzoConfig.from_mapping(config)
        if cfg.map_text is None:
            text, source = read_map(cfg.map)
            cfg = replace(cfg, map_text=text)
            m = parse_map(text, source)
        else:
            # A replay's or a worker's copy of the text: replays older than the strict format hold
            # spellings it refuses, and must still rebuild their match.
            m = parse_embedded_map(cfg.map_text, f"<map {cfg.map}>")
        agents = [(a.player, a.x, a.y, int(a.facing)) for a in m.agents]
        engine = cls.from_board(
            m.cells,
            players=m.players,
            agents=agents,
            tick=0,
            max_ticks=cfg.max_ticks,
            own_base_counts=cfg.own_base_counts,
            torus=cfg.torus,
            map_name=m.name,
        )
        engine.config = cfg
        engine._advance()
        return engine

    @classmethod
    def from_board(
        cls,
        cells: np.ndarray,
        *,
        players: int,
        agents: Sequence[tuple[int, int, int, int]] | None = None,
        damage: np.ndarray | None = None,
        tick: int = 0,
        max_ticks: int = 3000,
        own_base_counts: bool = True,
        torus: bool = False,
        map_name: str = "",
    ) -> RezzoEngine:
        """A match whose world at the decision point of ``tick`` is ``cells`` (no transition is run).

        ``agents`` lists (player, x, y, facing); an agent's index is its order among its player's
        entries. Without it, agents are read off the AGENT cells in reading order, all facing north.
        """
        cells = np.asarray(cells, dtype=np.uint8)
        if not 1 <= players <= MAX_PLAYERS:
            raise ConfigError(f"players must be 1..{MAX_PLAYERS}, got {players}")
        world = BitWorld.from_codes(cells, players, torus=torus, own_base_counts=own_base_counts)
        made = board_agents(cells, players, agents)
        return cls(world, made, tick=tick, max_ticks=max_ticks, map_name=map_name, damage=damage)

    # ----------------------------------------------------------------- reading the state
    def cells(self) -> np.ndarray:
        """The world as (H, W) public codes with absolute owners."""
        return self.world.codes()

    def damage(self) -> np.ndarray:
        return self._damage.copy()

    def agents(self) -> list[Agent]:
        return [Agent(a.player, a.index, a.x, a.y, a.facing, a.alive) for a in self._agents]

    def result(self) -> Result | None:
        return self._result

    # ----------------------------------------------------------------- viewports
    def viewport(self, player: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One agent's (13, 13) viewport: codes with relative owners, and damage."""
        agent = self._agent(player, k)
        codes, dmg = self._viewports.views(positions([agent]))
        return self._viewports.relative(codes[0], player), dmg[0]

    def _live_agents(self) -> list[Agent]:
        """Live agents sorted by (player, index), and each seat's slice of them (cached until a death)."""
        if self._live is None:
            live = [a for a in self._agents if a.alive]
            self._seat_slices = {}
            for seat in self._alive_players:
                # Agents are sorted by player, so a seat's are contiguous (or there are none).
                idx = [i for i, a in enumerate(live) if a.player == seat]
                lo, hi = (idx[0], idx[-1] + 1) if idx else (0, 0)
                self._seat_slices[seat] = (lo, hi, [a.index for a in live[lo:hi]])
            self._live = live
            self._view_index = None
        return self._live

    def pending(self) -> dict[int, dict[str, Any]]:
        """Seat -> {"tick", "agents": [k...], "cells": bytes, "damage": bytes}, 169 bytes per agent."""
        if self._result is not None:
            return {}
        live = self._live_agents()
        if not live:
            return {}
        views = self._viewports
        if views.decodes(len(live)):
            if self._view_index is None:
                self._view_index = views.padded_index(positions(live))
            codes, dmg = views.views_padded(self._view_index)
        else:
            codes, dmg = views.views(positions(live))
        codes = views.relative_rows(codes, np.array([a.player for a in live], np.intp))
        out: dict[int, dict[str, Any]] = {}
        tick, slices = self.tick, self._seat_slices
        for seat in sorted(self._alive_players):
            lo, hi, indices = slices[seat]
            out[seat] = {
                "tick": tick,
                "agents": list(indices),
                "cells": codes[lo:hi].tobytes(),
                "damage": dmg[lo:hi].tobytes(),
            }
        return out

    # ----------------------------------------------------------------- moves
    def _agent(self, player: int, k: int) -> Agent:
        for a in self._agents:
            if a.player == player and a.index == k:
                return a
        raise KeyError(f"no agent {k} of player {player}")

    def order(self, tick: int | None = None) -> list[Agent]:
        """Live agents in the order their moves resolve at ``tick`` (default: now)."""
        return list(self._order(self.tick if tick is None else tick))

    def _order(self, t: int) -> list[Agent]:
        """`order`, cached per rotation until an agent dies; the caller must not change the list."""
        first = t % self.players if self.players else 0
        cached = self._order_cache.get(first)
        if cached is not None:
            return cached
        out = resolution_order(self._agents, t, self.players, self.agents_per_player)
        self._order_cache[first] = out
        return out

    def _move(self, a: Agent, move: int) -> bool:
        """Carry out one agent's move on the live world; False if it was illegal (a no-op)."""
        if move == _NOOP:
            return True
        self._view_index = None  # the agent turns or acts: its viewport (or another's) may change
        legal, cut = move_agent(self.world, self._damage, a, move)
        if cut is not None:
            self._log.append(hit_event(self.tick, a.player, *cut))
        return legal

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> dict[int, Any] | None:
        return decode_moves(request, answer)

    def debug_placer(
        self, seat: int, request: Mapping[str, Any]
    ) -> Callable[[int | None, list[int]], list[int] | None]:
        """Where a seat's debug cells are on the board (`viewport_placer`)."""
        return viewport_placer(self._agents, seat, request, (self.width, self.height, self.torus))

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """Tick t's agent phase on W_t, then tick t+1's transition and losses (see module docstring)."""
        events = Events()
        if self._result is not None:
            return events
        self._log = events.log
        moves: dict[int, dict[int, int]] = {}
        for seat, raw in actions.items():
            if seat in self._alive_players:
                parsed = parse_moves(seat, raw, events, self.agents_per_player)
                if parsed:
                    moves[seat] = parsed
            else:
                events.count(events.malformed, seat)
        if moves:  # no-ops are always legal and change nothing: skip the walk when all are no-ops
            blocked: dict[int, int] = {}
            for a in self._order(self.tick):
                seat_moves = moves.get(a.player)
                if seat_moves is None:
                    continue
                move = seat_moves.get(a.index, _NOOP)
                if not self._move(a, move):
                    events.count(events.illegal, a.player)
                    if move in (_ADVANCE, _BUILD):
                        events.count(blocked, a.player)
            if len(events.log) > 1:  # one order on every path: by cell (a cell is blanked once a phase)
                events.log.sort(key=lambda e: (e["cell"][1], e["cell"][0]))
            events.log.extend(blocked_event(self.tick, seat, blocked[seat]) for seat in sorted(blocked))
        if self.tick >= self.max_ticks:
            self._finish(cap_reason(self.max_ticks))
            return events
        events.losers = self._advance()
        return events

    def _advance(self) -> list[int]:
        """The next tick's transition and loss processing."""
        found: list[tuple[int, int, int, int]] = []
        losers = self.world.step(found)
        self.tick += 1
        if found:
            size = (self.width, self.height, self.torus)
            own = self.world.own_base_counts
            self._log.extend(transition_events(found, self.tick, self._base_cells, own, size))
        if losers:
            loss_events(self._log, losers, self.tick, self._lost)
            self._base_cells = [b for b in self._base_cells if b[2] not in losers]
            for a in self._agents:
                if a.player in losers and a.alive:
                    a.alive = False
                    self._damage[a.y, a.x] = 0
            self._live, self._view_index, self._order_cache = None, None, {}
            # Geysers and bases carry no damage; flags keep theirs as they become conductors.
            for i in losers:
                self._alive_players.discard(i)
                self._lost_at[i] = self.tick
            if len(self._alive_players) <= 1:
                self._finish(loss_reason(len(self._alive_players)))
        if self._result is None and self.tick > self.max_ticks:
            self._finish(cap_reason(self.max_ticks))
        return losers

    def _finish(self, reason: str) -> None:
        # Survivors share first place; the eliminated rank by how late they lost.
        key = {
            i: (self.tick + 1 if i in self._alive_players else self._lost_at[i]) for i in range(self.players)
        }
        ranks = {i: 1 + sum(1 for j in key if key[j] > key[i]) for i in key}
        capped = reason == cap_reason(self.max_ticks)
        ends = end_causes(self.players, sorted(self._alive_players), self._lost, capped, self.tick)
        self._result = Result(
            ranks=ranks, winner=sole_first(ranks), reason=reason, ticks=self.tick, causes=ends
        )

    # ----------------------------------------------------------------- batches
    def batch_key(self) -> tuple[Any, ...] | None:
        """Engines with equal keys fit one `slot_batch.SlotBatch` (None: a torus, which the batched
        step does not wrap, or a world with a player out)."""
        if self.torus or self._result is not None or len(self._alive_players) < self.players:
            return None
        counts = [0] * self.players
        for a in self._agents:
            counts[a.player] += 1
        if any(a.index >= counts[a.player] for a in self._agents):
            return None  # a batch keeps each player's agents as rows 0..n-1
        size = (self.height, self.width, self.players, self.agents_per_player)
        return ("rezzo", *size, self.world.own_base_counts)

    # ----------------------------------------------------------------- frames and hashes
    def frame(self) -> dict[str, Any]:
        """The full public state: absolute owners, every agent with its facing."""
        return {
            "tick": self.tick,
            "width": self.width,
            "height": self.height,
            "cells": self.world.codes_view().tobytes(),
            "damage": self._damage.tobytes(),
            "agents": [[a.player, a.index, a.x, a.y, int(a.facing), a.alive] for a in self._agents],
            "alive": sorted(self._alive_players),
        }

    def public_config(self) -> dict[str, Any]:
        """What every seat learns at the start: the world's size and the rule options."""
        return {
            "map": self.map_name,
            "width": self.width,
            "height": self.height,
            "agents_per_player": self.agents_per_player,
            "view_size": VIEW_SIZE,
            "max_ticks": self.max_ticks,
            "torus": self.torus,
            "own_base_counts": self.world.own_base_counts,
        }

    def state_hash(self) -> str:
        """The state's digest in this cellarena's scheme (`HASH_VERSION`): see `state_hash_of`."""
        return self.state_hash_of(HASH_VERSION)

    def state_hash_of(self, version: int) -> str:
        """BLAKE2b over the complete state in hash scheme ``version``.

        2 (now): the public codes and damage of every cell, the agents, the tick and the players
        still in, i.e. what `frame` holds. A world stepped in a batch (`batched.BatchedRezzo`) holds
        exactly these, so the server's batched matches hash the same as this engine without
        converting their state. 1 (files from before): the bit planes of `ca.BitWorld`.
        """
        world: tuple[bytes, ...]
        if version == 1:
            world = (self.world.dyn.tobytes(), self.world.static.tobytes())
        elif version == HASH_VERSION:
            world = (self.world.codes_view().tobytes(),)
        else:
            raise ValueError(f"Rezzo state hash scheme {version} is unknown (this cellarena knows 1 and 2)")
        return state_digest(
            (self.tick, self.width, self.height, self.players),
            world,
            self._damage.tobytes(),
            [[a.player, a.index, a.x, a.y, int(a.facing), a.alive] for a in self._agents],
            sorted(self._alive_players),
        )
