"""The interface every game engine implements, so one match loop can drive all of them.

An engine instance is one match's state. It is pure and deterministic: no clocks, sockets, threads or
global randomness; the same config, seed and actions always give the same states. The match loop asks
`pending()` who must act and what each seat may see, gathers actions under its own deadline, then hands
them to `apply()`, which resolves them and advances the world to the next decision point. Missing,
malformed or illegal actions are the game's documented no-op, never an exception: a bot must not be
able to crash the server through its moves.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, runtime_checkable


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
    #: The effective config after defaults (a Mapping, or an object with ``to_mapping()``), msgpack-ready:
    #: replays store it so that ``new(config, seed)`` rebuilds the very same match.
    config: Any

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
