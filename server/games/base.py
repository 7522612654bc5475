"""The interface every game engine implements, so one match loop can drive all of them.

An engine instance is one match's state. It is pure and deterministic: no clocks, sockets, threads or
global randomness; the same config, seed and actions always give the same states. The match loop asks
`pending()` who must act and what each seat may see, gathers actions under its own deadline, then hands
them to `apply()`, which resolves them and advances the world to the next decision point. Missing,
malformed or illegal actions are the game's documented no-op, never an exception: a bot must not be
able to crash the server through its moves.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, TypeAlias, cast, runtime_checkable


class ConfigError(ValueError):
    """A game config (or map) the engine cannot run; the message says what to change."""


class MapError(ConfigError):
    """A map that cannot be used. ``str()`` is ``file:line:col: what is wrong and what to do``."""

    def __init__(self, source: str, line: int, col: int, message: str) -> None:
        super().__init__(f"{source}:{line}:{col}: {message}")
        self.source, self.line, self.col, self.detail = source, line, col, message

    def __reduce__(self) -> tuple[type[MapError], tuple[str, int, int, str]]:
        # Rebuilt from its parts when it crosses a process boundary (tournament workers).
        return (MapError, (self.source, self.line, self.col, self.detail))


@dataclass(frozen=True)
class Result:
    """How a match ended.

    ``ranks`` maps each seat to its place (1 is best; tied seats share a place). ``winner`` is the
    single seat ranked first, or None for a draw. ``reason`` is a short human explanation.
    """

    ranks: dict[int, int]
    winner: int | None
    reason: str
    ticks: int
    scores: dict[int, float] = field(default_factory=dict)
    #: Why each seat ended where it did: seat -> a cause (`causes.cause`), msgpack-ready, e.g.
    #: ``{"cause": "flag_at_base", "tick": 178, "flag": [12, 7], "base": [13, 7], "by": 0, "text": ...}``.
    #: Optional, so that a plugin written before causes still gives a valid result (its seats' cause
    #: reads "unknown"); `causes.sentence` makes the sentence a user reads.
    causes: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def draw(self) -> bool:
        return self.winner is None


def sole_first(ranks: Mapping[int, int]) -> int | None:
    """The one seat ranked first, or None when first place is shared (a draw): `Result.winner`."""
    firsts = [seat for seat, rank in ranks.items() if rank == 1]
    return firsts[0] if len(firsts) == 1 else None


@dataclass
class Events:
    """What happened in one `apply()`: per-seat counts of no-op'd actions, the seats that lost, and
    the game's own events (``log``) that decide or shape the match, for replays, the match's causes
    and a trained policy's rewards.

    Each entry of ``log`` is a msgpack-ready map made by `event`: at least ``kind`` (a snake_case
    name the game documents) and ``tick``, usually ``seat`` and cells as ``[x, y]``. A plugin written
    before ``log`` existed leaves it empty and still runs; its replays just carry no events.
    """

    malformed: dict[int, int] = field(default_factory=dict)
    illegal: dict[int, int] = field(default_factory=dict)
    losers: list[int] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)

    def count(self, which: dict[int, int], seat: int) -> None:
        which[seat] = which.get(seat, 0) + 1


def event(kind: str, tick: int, **fields: Any) -> dict[str, Any]:
    """One game event for `Events.log`: ``{"kind": kind, "tick": tick, **fields}`` (msgpack-ready
    values only: ints, strings, lists of them)."""
    return {"kind": kind, "tick": tick, **fields}


@runtime_checkable
class Engine(Protocol):
    """One match of one game. See docs/architecture.md for how the match loop drives it."""

    name: ClassVar[str]
    #: Pacing when the command line does not say: ticks per second in fixed-rate mode, and the
    #: per-move budget in ms (None: one tick period less the server's margin, `match.SERVER_MARGIN_MS`).
    #: A turn-based game whose bots search gives more.
    default_tick_rate: ClassVar[float]
    default_budget_ms: ClassVar[float | None]
    players: int
    tick: int

    @property
    def config(self) -> EngineConfig | None:
        """The effective config after defaults, msgpack-ready: replays store it so that
        ``new(config, seed)`` rebuilds the very same match. None for an engine made some other way
        than `new` (Rezzo's from a board), which a replay cannot record."""
        ...

    @classmethod
    def new(cls, config: Mapping[str, Any], seed: int = 0) -> Self:
        """Validate ``config`` (raising ConfigError with a clear message) and set up the match."""
        ...

    def pending(self) -> dict[int, dict[str, Any]]:
        """Who must act now: seat -> request (msgpack-ready). Empty once the match is over."""
        ...

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> Any | None:
        """Turn the ``moves`` field a seat sent in reply to ``request`` into its action for `apply`.

        None means the answer is malformed as a whole (wrong type or shape): the match loop counts
        it as invalid and the seat plays the no-op. Finer checks (an unknown code for one agent, an
        illegal placement) belong in `apply`, which reports them through `Events`. The returned
        action goes into replays, so it must be msgpack-ready.
        """
        ...

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """Resolve one decision point's actions (seat -> action) and advance to the next one."""
        ...

    def result(self) -> Result | None:
        """None while the match runs, then how it ended."""
        ...

    def frame(self) -> dict[str, Any]:
        """The full public state, for spectators and replays (msgpack-ready)."""
        ...

    def public_config(self) -> dict[str, Any]:
        """The settings every seat is told in its welcome (msgpack-ready)."""
        ...

    def state_hash(self) -> str:
        """A hex digest of the complete state; equal states give equal hashes across runs and machines."""
        ...


class ConfigMapping(Protocol):
    """A config object (`config.GameConfig`) that says its options as a mapping."""

    def to_mapping(self) -> Mapping[str, Any]: ...


#: What `Engine.config` holds: the options as a mapping, or an object that gives them as one.
EngineConfig: TypeAlias = Mapping[str, Any] | ConfigMapping


def config_mapping(engine: Engine) -> dict[str, Any]:
    """The options ``engine`` really runs with, as a plain dict (what a replay's header keeps)."""
    config = engine.config
    if config is None:
        raise TypeError(
            f"{type(engine).__name__} has no effective config (engine.config from new()); "
            "a replay needs it to rebuild the match"
        )
    return dict(config) if isinstance(config, Mapping) else dict(config.to_mapping())


# ------------------------------------------------------------------ optional capabilities
# What an engine may offer beyond `Engine`. Each is a protocol of class-level members (methods and
# class constants) that the engines offering it name as a base, so that mypy checks them against it,
# and that is read only through the function beside it, which checks the engine structurally (an
# engine of a third-party plugin written before the protocol still loads, and gets that function's
# default).


def _offers(engine: object, capability: type) -> bool:
    """Whether ``engine`` has every member of the runtime protocol ``capability``, checked once per
    class (the members are class-level): CPython 3.11 checks an object against a runtime protocol in
    15-45 µs, and the match asks for each seat's debug drawing of each tick."""
    key = (type(engine), capability)
    offered = _OFFERED.get(key)
    if offered is None:
        offered = _OFFERED[key] = isinstance(engine, capability)
    return offered


_OFFERED: dict[tuple[type, type], bool] = {}


@runtime_checkable
class HashScheme(Protocol):
    """An engine whose `Engine.state_hash` is not in scheme 1, the first: ``HASH_VERSION`` names its
    scheme, which a replay's header records (`Replay.hashes`)."""

    HASH_VERSION: ClassVar[int]


def hash_version(engine: Engine) -> int:
    """The scheme of ``engine``'s `state_hash` (`HashScheme`; 1 for an engine that never changed it)."""
    return cast(HashScheme, engine).HASH_VERSION if _offers(engine, HashScheme) else 1


@runtime_checkable
class OlderHashSchemes(HashScheme, Protocol):
    """An engine that changed how it hashes its state since replays were recorded, and still computes
    the schemes before: ``state_hash_of(v)``, so that a file in an older scheme verifies as written."""

    def state_hash_of(self, version: int) -> str:
        """The state's digest in hash scheme ``version``; ValueError for a scheme it does not know."""
        ...


def older_hash_scheme(engine: Engine) -> Callable[[int], str] | None:
    """``engine``'s hash in a scheme of one's choice (`OlderHashSchemes`), or None if it computes only
    the one of `Engine.state_hash`."""
    return cast(OlderHashSchemes, engine).state_hash_of if _offers(engine, OlderHashSchemes) else None


@runtime_checkable
class RulesHistory(Protocol):
    """An engine whose rules changed since replays were recorded: ``RULES_VERSION`` is the version it
    plays (a replay's header records it) and ``RULES_CHANGES`` says what changed at each version after
    1, so that a replay of older rules that no longer re-simulates says why. Without: version 1."""

    RULES_VERSION: ClassVar[int]
    RULES_CHANGES: ClassVar[Mapping[int, str]]


def rules_version(engine: Engine) -> int:
    """The version of the rules ``engine`` plays (`RulesHistory`; 1 if they never changed)."""
    return cast(RulesHistory, engine).RULES_VERSION if _offers(engine, RulesHistory) else 1


def rules_changes(engine: Engine) -> Mapping[int, str]:
    """What changed in ``engine``'s rules at each version after 1 (`RulesHistory`; none if none)."""
    return cast(RulesHistory, engine).RULES_CHANGES if _offers(engine, RulesHistory) else {}


@runtime_checkable
class EventsHistory(Protocol):
    """An engine that added event kinds after replays began to carry events: ``EVENTS_VERSION`` is the
    version of its kinds (a replay's header records it) and ``EVENT_KINDS_SINCE`` names the version
    that added each later kind, so that `replay verify` leaves out of an older file's comparison the
    kinds its writer did not report. Without: version 1."""

    EVENTS_VERSION: ClassVar[int]
    EVENT_KINDS_SINCE: ClassVar[Mapping[str, int]]


def events_version(engine: Engine) -> int:
    """The version of the event kinds ``engine`` reports (`EventsHistory`; 1 if they never grew)."""
    return cast(EventsHistory, engine).EVENTS_VERSION if _offers(engine, EventsHistory) else 1


def event_kinds_since(engine: Engine) -> Mapping[str, int]:
    """Each event kind ``engine`` added after version 1, with its version (`EventsHistory`)."""
    return cast(EventsHistory, engine).EVENT_KINDS_SINCE if _offers(engine, EventsHistory) else {}


@runtime_checkable
class Substeps(Protocol):
    """An engine that can show the states it passes through between two decision points, for the
    replay player (docs/web.md, "Between decision points"). Replays are unchanged: they hold
    decision points only, and these are computed again when shown."""

    def substeps(self) -> int:
        """How many states the last `Engine.apply` passed through before its decision point."""
        ...

    def substep_frames(self) -> Iterable[dict[str, Any]]:
        """Those states' public frames (as `Engine.frame` draws one), in order; may be lazy."""
        ...


def substeps(engine: Engine) -> int:
    """How many states ``engine``'s last apply passed through (`Substeps`; 0 for a game that does not say)."""
    return cast(Substeps, engine).substeps() if _offers(engine, Substeps) else 0


def shows_substeps(engine_class: type[Engine]) -> bool:
    """Whether ``engine_class``'s engines show substeps (`Substeps`), asked before one is built (a
    protocol of methods only: issubclass checks it, structurally)."""
    return issubclass(engine_class, Substeps)


def substep_frames(engine: Engine) -> Iterable[dict[str, Any]]:
    """The frames of those states (`Substeps`; none for a game that does not say)."""
    return cast(Substeps, engine).substep_frames() if _offers(engine, Substeps) else ()


#: Where a bot's debug cell, given in its own frame as (agent or None, ``[row, col]``), is on the board
#: as ``[x, y]``; None: nowhere (docs/protocol.md#debug).
DebugPlacer: TypeAlias = Callable[[int | None, list[int]], list[int] | None]


@runtime_checkable
class DebugPlacing(Protocol):
    """An engine whose bots draw their debug cells in a frame of their own (Rezzo's viewports), not
    in board cells: it places them on the board. Without: the cells are board cells already."""

    def debug_placer(self, seat: int, request: Mapping[str, Any]) -> DebugPlacer:
        """Where ``seat``'s debug cells are, for its answer to ``request`` (read before `apply`)."""
        ...


def debug_placer(engine: Engine, seat: int, request: Mapping[str, Any]) -> DebugPlacer | None:
    """``engine``'s `DebugPlacing` for ``seat`` and ``request``, or None if its cells are board cells."""
    return cast(DebugPlacing, engine).debug_placer(seat, request) if _offers(engine, DebugPlacing) else None


class BatchedEngine(Engine, Protocol):
    """A match's engine whose world lives in an `EngineBatch`: `apply` is split so that one step of
    the batch resolves the actions of every world in it."""

    def stage(self, actions: Mapping[int, Any]) -> Events:
        """Take this decision point's actions (as `apply` would) for the batch's next `step`. The
        events returned are complete only after that step (illegal moves are found in it)."""
        ...


#: Worlds per batch: a phase slot of a busy server holds about 16 matches (2,000 agents in 8-player
#: matches over 16 slots); a slot with more opens a second batch. The match server asks for batches
#: of this size and a game's batch defaults to it.
BATCH_CAPACITY = 32


class EngineBatch(Protocol):
    """Same-shape worlds of one game, stepped as one array operation (the per-call cost of numpy is
    paid once for all of them). A game offers batches through its plugin's `Batching`. The match
    server batches the matches of one phase slot (`ticking.FixedRateDriver`)."""

    @property
    def room(self) -> int:
        """How many more worlds the batch can take."""
        ...

    def join(self, engine: Engine) -> BatchedEngine | None:
        """Move ``engine``'s world into the batch: the engine to use from now on (a view of the world
        in the batch, equal in every answer), or None if this world cannot be batched."""
        ...

    def leave(self, engine: BatchedEngine) -> None:
        """Free ``engine``'s place; it keeps answering with its last state (a match ends with it)."""
        ...

    def step(self) -> None:
        """Apply the actions staged in every world since the last step, and advance those worlds."""
        ...


class Batching(Protocol):
    """How a game batches its worlds: the object its plugin names as ``batching``
    (`plugin.GamePlugin`). A plugin, not engine methods, so that an engine module need not import its
    batch modules (which import the engine), and a game without batches names nothing."""

    def key(self, engine: Engine) -> Hashable | None:
        """Engines with equal keys fit one batch; None: this one fits none (now)."""
        ...

    def batch_from(self) -> int:
        """The fewest worlds from which stepping them as one batch beats their engines one by one."""
        ...

    def new_batch(self, template: Engine, capacity: int) -> EngineBatch:
        """An empty batch for up to ``capacity`` worlds of ``template``'s key."""
        ...
