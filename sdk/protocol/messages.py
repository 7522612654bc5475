"""Every message of the protocol: one TypedDict each, its constructor, and its check.

Why TypedDicts and not classes: a message stays the plain dict msgpack gives us and takes. The
server's hot paths, a ``tick`` request encoded per seat per tick and a ``moves`` message decoded per
seat per tick (some 20,000 messages a second), pay for no conversion to and from objects, while
mypy still checks every field name and type statically. The runtime check is derived from the same
definitions (`fields.spec_of`), so the static and the runtime view of a message cannot disagree,
and tests/test_protocol_docs.py holds docs/protocol.md's tables to them as well.

The constructors build exactly the dicts, and so the bytes, that the server and the SDK have always
sent: key order included, since msgpack keeps it. A ``tick`` and a ``frame`` carry the game's own
fields beside the common ones; each game's SDK module declares those (e.g. `RezzoTick`).

Each check returns the message itself, typed, or raises `ProtocolError`: ``bad_hello`` for a bad
``hello``, ``bad_message`` for any other message, with one wording for every bad field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict, cast

import msgpack

from cellarena.sdk.protocol.codes import (
    BAD_HELLO,
    BAD_MESSAGE,
    BAD_VERSION,
    MAX_NAME,
    MAX_VERSION,
    PROTOCOL_VERSION,
    UNKNOWN_TYPE,
    ProtocolError,
)
from cellarena.sdk.protocol.fields import Length, Lenient, MessageSpec, Printable, is_int, spec_of
from cellarena.sdk.protocol.framing import HEADER
from cellarena.sdk.protocol.states import State, client_refusal

Role = Literal["bot", "spectator"]
#: A seat's result in ``end``.
Outcome = Literal["win", "loss", "draw"]


# ------------------------------------------------------------------ the messages
class Hello(TypedDict):
    """Client to server, first: who the client is and what it wants to play."""

    type: Literal["hello"]
    protocol: int
    name: Annotated[str, Printable(), Length(1, MAX_NAME)]
    game: str
    role: NotRequired[Role]
    # Only a server that reserves seats reads the token, and servers always ignored a malformed one.
    token: NotRequired[Annotated[str, Lenient()]]
    # A spectator's choice of running match (its number, as in `welcome`); bots leave it out.
    match: NotRequired[int]
    # Server messages beyond the first version's that the client handles (["redirect"]); a server
    # sends one only to a client that named it, so older clients never see it.
    accepts: NotRequired[list[str]]
    # The bot's version, as its author names it ("1.4.2", a commit): a ladder records it with each
    # match and shows results per version. Optional: a server that does not read it ignores it.
    version: NotRequired[Annotated[str, Printable(), Length(1, MAX_VERSION)]]


class Welcome(TypedDict):
    """Server to client, when the match begins: the seat and the game's settings (``config``)."""

    type: Literal["welcome"]
    protocol: int
    role: Role
    game: str
    match: int
    players: int
    names: list[str]
    tick_rate: float
    budget_ms: int
    config: dict[str, Any]
    seat: NotRequired[int]  # absent for spectators; a bot's welcome always has one
    # Each seat's time bank at the start, in ms; absent when the match has none.
    time_bank_ms: NotRequired[int]


class Tick(TypedDict):
    """Server to a seat that must act: the common fields. The game's observation rides along."""

    type: Literal["tick"]
    tick: int
    budget_ms: int
    # What is left of this seat's time bank, in ms; absent when the match has none.
    bank_ms: NotRequired[int]


class Moves(TypedDict):
    """A seat's answer to the ``tick`` request of the same number. ``moves`` is the game's to judge."""

    type: Literal["moves"]
    tick: int
    moves: Any
    # What the bot drew for its own eyes (`debug.clean` says what is kept); servers have always
    # ignored unknown fields, so a malformed one is dropped, never refused.
    debug: NotRequired[Annotated[dict[str, Any], Lenient()]]


class End(TypedDict):
    """Server to client: the match is over, and how it went for this connection."""

    type: Literal["end"]
    ticks: int
    result: Outcome
    rank: int
    ranks: list[int]
    winner: int | None
    reason: str
    late: int
    invalid: int
    illegal: int


class Error(TypedDict):
    """Server to client, before it closes the connection because of ``code``."""

    type: Literal["error"]
    code: str
    message: str


class Redirect(TypedDict):
    """Server to a bot that said ``accepts: ["redirect"]``: its match is played at another address.

    The bot connects there and says ``hello`` with ``token`` (a fresh secret for that one match);
    the server closes this connection after sending it."""

    type: Literal["redirect"]
    host: Annotated[str, Length(1, 255)]
    port: int
    token: str
    # Whether the match host speaks TLS; the client checks its certificate against ``host``.
    tls: bool


class Frame(TypedDict):
    """Server to spectators, every tick: the common fields. The game's world rides along."""

    type: Literal["frame"]
    tick: int
    final: bool
    # The bots' debug drawings of the tick before, by seat; only where the host shows them to
    # spectators (a local match), never on a public server.
    debug: NotRequired[dict[int, dict[str, Any]]]
    # The tick those drawings were made for (the frame's tick less one, as a rule).
    debug_tick: NotRequired[int]


Message = Hello | Welcome | Tick | Moves | End | Error | Redirect | Frame

#: Every message type's fields, by its ``type``; a bad hello is refused as bad_hello.
SPECS: dict[str, MessageSpec] = {
    spec.kind: spec
    for spec in (
        spec_of(Hello, BAD_HELLO),
        spec_of(Welcome, BAD_MESSAGE),
        spec_of(Tick, BAD_MESSAGE),
        spec_of(Moves, BAD_MESSAGE),
        spec_of(End, BAD_MESSAGE),
        spec_of(Error, BAD_MESSAGE),
        spec_of(Redirect, BAD_MESSAGE),
        spec_of(Frame, BAD_MESSAGE),
    )
}
#: What this SDK's bots say they accept in ``hello`` (`Hello.accepts`).
ACCEPTS = ("redirect",)


# ------------------------------------------------------------------ constructors
def hello(
    name: str,
    game: str,
    *,
    token: str | None = None,
    role: Role = "bot",
    match: int | None = None,
    accepts: Sequence[str] = (),
    version: str | None = None,
) -> Hello:
    """The client's first message; a spectator may name the running ``match`` it wants to watch, a
    client lists the later server messages it handles in ``accepts``, and a bot may say its
    ``version``."""
    msg: Hello = {"type": "hello", "protocol": PROTOCOL_VERSION, "name": name, "game": game, "role": role}
    if token is not None:
        msg["token"] = token
    if match is not None:
        msg["match"] = match
    if accepts:
        msg["accepts"] = list(accepts)
    if version is not None:
        msg["version"] = version
    return msg


def welcome(
    *,
    seat: int | None,
    game: str,
    match: int,
    players: int,
    names: list[str],
    tick_rate: float,
    budget_ms: int,
    config: dict[str, Any],
    time_bank_ms: int | None = None,
) -> Welcome:
    """A seat's welcome, or a spectator's when ``seat`` is None; ``time_bank_ms`` only when the
    match has a time bank."""
    msg: Welcome = {
        "type": "welcome",
        "protocol": PROTOCOL_VERSION,
        "role": "bot" if seat is not None else "spectator",
        "game": game,
        "match": match,
        "players": players,
        "names": names,
        "tick_rate": tick_rate,
        "budget_ms": budget_ms,
        "config": config,
    }
    if seat is not None:
        msg["seat"] = seat
    if time_bank_ms is not None:
        msg["time_bank_ms"] = time_bank_ms
    return msg


def tick(tick: int, budget_ms: int, observation: Mapping[str, Any]) -> Tick:
    """A seat's request: the common fields, then the game's ``observation`` (which may repeat ``tick``)."""
    return {"type": "tick", "tick": tick, "budget_ms": budget_ms, **observation}  # type: ignore[typeddict-item]


_pack = msgpack.Packer(use_bin_type=True).pack
_pack_header = HEADER.pack


def encode_tick(
    tick: int, budget_ms: int, observation: Mapping[str, Any], *, bank_ms: int | None = None
) -> bytes:
    """The frame of ``tick(tick, budget_ms, observation)``, built in one call: the server's hot path.
    ``bank_ms``: what is left of the seat's time bank, sent only when the match has one."""
    if bank_ms is None:
        body: bytes = _pack({"type": "tick", "tick": tick, "budget_ms": budget_ms, **observation})
    else:
        common = {"type": "tick", "tick": tick, "budget_ms": budget_ms, "bank_ms": bank_ms}
        body = _pack({**common, **observation})
    return _pack_header(len(body)) + body


def moves(tick: int, moves: Any) -> Moves:
    """The answer to the ``tick`` request ``tick``; ``moves`` in the game's shape (Rezzo: a move code
    per agent, in the request's order)."""
    return {"type": "moves", "tick": tick, "moves": moves}


def end(
    *,
    ticks: int,
    result: Outcome,
    rank: int,
    ranks: list[int],
    winner: int | None,
    reason: str,
    late: int = 0,
    invalid: int = 0,
    illegal: int = 0,
) -> End:
    """How the match ended for one connection (a spectator's: a draw, rank 0, zero counts)."""
    return {
        "type": "end",
        "ticks": ticks,
        "result": result,
        "rank": rank,
        "ranks": ranks,
        "winner": winner,
        "reason": reason,
        "late": late,
        "invalid": invalid,
        "illegal": illegal,
    }


def outcome_of(rank: int, ranks: Sequence[int]) -> Outcome:
    """A seat's ``result`` in `end` from its rank among every seat's: first alone is a win, first
    shared a draw, anything else a loss. The one rule: the match server's `end` and the ladder's
    records of finished matches both count by it."""
    if rank != 1:
        return "loss"
    return "win" if list(ranks).count(1) == 1 else "draw"


def error(code: str, message: str) -> Error:
    """Sent before the server closes a connection because of ``code``."""
    return {"type": "error", "code": code, "message": message}


def redirect(host: str, port: int, token: str, *, tls: bool) -> Redirect:
    """Where a bot's match is played instead (see `Redirect`)."""
    return {"type": "redirect", "host": host, "port": port, "token": token, "tls": tls}


def frame(
    world: Mapping[str, Any],
    *,
    final: bool,
    debug: Mapping[int, Mapping[str, Any]] | None = None,
    debug_tick: int | None = None,
) -> Frame:
    """A spectator frame: the game's ``world`` (which carries ``tick``), and whether it is the last;
    ``debug``: the seats' drawings made for tick ``debug_tick``, for a spectator allowed them."""
    out: Frame = {"type": "frame", **world, "final": final}  # type: ignore[typeddict-item]
    if debug:
        out["debug"] = {int(s): dict(d) for s, d in debug.items()}
        if debug_tick is not None:
            out["debug_tick"] = debug_tick
    return out


# ------------------------------------------------------------------ checks
def check_hello(message: Mapping[str, Any], *, game: str) -> Hello:
    """A connection's first message, as the server of ``game`` accepts it; else a ProtocolError with
    code ``bad_hello`` (or ``bad_version`` for a protocol version this side does not speak).

    ``bad_version`` only for an int ``protocol`` other than ours (checked before the other fields, as
    a later version's hello may differ); a ``protocol`` that is missing or not an int (``"1"``,
    ``true``, ``1.0``) is a field of the wrong type, ``bad_hello`` like every other field of a hello.
    Seats and tokens are the lobby's business: it alone knows which tokens it gave out.
    """
    kind = message.get("type")
    refusal = client_refusal(State.HELLO, kind)
    if refusal is not None:
        raise ProtocolError(*refusal)
    version = message.get("protocol")
    if is_int(version) and version != PROTOCOL_VERSION:
        raise ProtocolError(
            BAD_VERSION, f"protocol {version!r} is not spoken here; this server speaks {PROTOCOL_VERSION}"
        )
    checked = cast(Hello, SPECS["hello"].check(message))
    if checked["game"] != game:
        raise ProtocolError(BAD_HELLO, f"this server plays {game!r}, not {checked['game']!r}")
    return checked


def check_welcome(message: Mapping[str, Any]) -> Welcome:
    """A ``welcome``, with its one rule across fields: a bot's welcome names its seat."""
    checked = cast(Welcome, SPECS["welcome"].check(message))
    if checked["role"] == "bot" and "seat" not in checked:
        raise ProtocolError(BAD_MESSAGE, "welcome: the field 'seat' is missing (a bot's welcome has one)")
    return checked


def check_tick(message: Mapping[str, Any]) -> Tick:
    """A ``tick``'s common fields; the game's SDK module reads the rest."""
    return cast(Tick, SPECS["tick"].check(message))


def check_moves(message: Mapping[str, Any]) -> Moves:
    """A ``moves``' fields, checked strictly (as a test or a proxy would). The server itself refuses a
    ``moves`` only for its ``tick`` (missing or not an int: ``bad_message``); a ``tick`` that is not the
    current one is only late, and ``moves`` (even missing) is the game's to judge: an invalid answer."""
    return cast(Moves, SPECS["moves"].check(message))


def check_end(message: Mapping[str, Any]) -> End:
    return cast(End, SPECS["end"].check(message))


def check_error(message: Mapping[str, Any]) -> Error:
    return cast(Error, SPECS["error"].check(message))


def check_redirect(message: Mapping[str, Any]) -> Redirect:
    """A ``redirect``, with its port in range."""
    checked = cast(Redirect, SPECS["redirect"].check(message))
    if not 0 < checked["port"] < 65536:
        raise ProtocolError(BAD_MESSAGE, f"redirect: the field 'port' must be 1-65535, got {checked['port']}")
    return checked


def check_frame(message: Mapping[str, Any]) -> Frame:
    """A spectator ``frame``'s common fields; the game's world rides along unchecked."""
    return cast(Frame, SPECS["frame"].check(message))


def validate(message: Mapping[str, Any]) -> Message:
    """Any message of this protocol, checked by its ``type``: `ProtocolError` ``unknown_type`` for a
    type the protocol does not have, else as the ``check_*`` function of that type says (``hello``:
    its fields only; the server's acceptance of a hello is `check_hello`)."""
    kind = message.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(BAD_MESSAGE, "every message needs a string field 'type'")
    spec = SPECS.get(kind)
    if spec is None:
        raise ProtocolError(UNKNOWN_TYPE, f"unknown message type {kind!r}")
    if kind == "welcome":
        return check_welcome(message)
    if kind == "redirect":
        return check_redirect(message)
    return cast(Message, spec.check(message))
