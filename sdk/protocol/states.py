"""Which message may come when: the protocol's states and transitions, in one table.

Everything that decides whether a message is in order lives here (as h11's ``_state.py`` keeps
HTTP's), so the server's connection owners and the SDK's client refuse the same things with the same
codes and words. The server reads the client's side of the table (`client_refusal`), the SDK the
server's (`server_refusal`); both follow a connection with `advance`.

A connection, seen by either end::

    HELLO --hello(bot)--> WAITING --welcome--> PLAYING --end--> DONE
          \\                     \\--redirect--> DONE
           \\--hello(spectator)--> WATCHING_SOON --welcome--> WATCHING --end--> DONE

    any state --error--> DONE

In PLAYING the server sends ``tick`` and the bot ``moves``; in WATCHING the server sends ``frame``.
A peer that sends what its state does not allow is refused: the server fails the connection with the
code the table gives; the SDK raises `ProtocolError`. A message type one side does not know is the
other's addition: the server refuses it (``unknown_type``), while a client ignores it, since a later
server may add messages (docs/protocol.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

from cellarena.sdk.protocol.codes import BAD_HELLO, BAD_MESSAGE, UNKNOWN_TYPE

Sender = Literal["client", "server"]
#: Which message types each side sends.
CLIENT_TYPES: Final = ("hello", "moves")
SERVER_TYPES: Final = ("welcome", "tick", "end", "error", "redirect", "frame")


class State(StrEnum):
    """Where a connection is, for both of its ends."""

    #: Connected; the client's first message must be ``hello``.
    HELLO = "hello"
    #: A bot's hello was accepted: it waits (in a queue, or for its match's other seats).
    WAITING = "waiting"
    #: A bot in its match: ticks and moves.
    PLAYING = "playing"
    #: A spectator's hello was accepted: it waits for a match to watch.
    WATCHING_SOON = "watching_soon"
    #: A spectator watching a match: frames.
    WATCHING = "watching"
    #: ``end``, ``error`` or ``redirect`` was sent: the connection closes.
    DONE = "done"


#: (state, sender, message type) -> the state after it. What is not here is out of order.
TRANSITIONS: Final[dict[tuple[State, Sender, str], State]] = {
    (State.WAITING, "server", "welcome"): State.PLAYING,
    (State.WAITING, "server", "redirect"): State.DONE,
    (State.PLAYING, "server", "tick"): State.PLAYING,
    (State.PLAYING, "client", "moves"): State.PLAYING,
    (State.PLAYING, "server", "end"): State.DONE,
    (State.WATCHING_SOON, "server", "welcome"): State.WATCHING,
    (State.WATCHING, "server", "frame"): State.WATCHING,
    (State.WATCHING, "server", "end"): State.DONE,
    # The server may fail a connection at any point before it is done.
    **{(state, "server", "error"): State.DONE for state in State if state is not State.DONE},
}
#: The hello's transition depends on its role.
_HELLO_TO: Final[dict[str, State]] = {"bot": State.WAITING, "spectator": State.WATCHING_SOON}

#: (state, message type) -> (code, what to do), for a client message out of order; the server fails
#: the connection with it. ``None`` as the type: any other type the client may send.
_CLIENT_REFUSALS: Final[dict[tuple[State, str | None], tuple[str, str]]] = {
    (State.HELLO, None): (BAD_HELLO, "the first message must be 'hello', got {type!r}"),
    (State.WAITING, None): (BAD_MESSAGE, "{type!r} before the match started; wait for 'welcome'"),
    (State.PLAYING, "hello"): (BAD_MESSAGE, "hello was already received; send moves"),
    (State.WATCHING_SOON, None): (UNKNOWN_TYPE, "spectators send nothing after hello, got {type!r}"),
    (State.WATCHING, None): (UNKNOWN_TYPE, "spectators send nothing after hello, got {type!r}"),
}
#: (state, message type) -> what is wrong, for a server message out of order (the SDK's view).
_SERVER_REFUSALS: Final[dict[tuple[State, str], str]] = {
    (State.WAITING, "tick"): "a tick arrived before the welcome",
    (State.PLAYING, "redirect"): "a redirect arrived in the middle of a match",
    (State.PLAYING, "welcome"): "a second welcome arrived in the middle of a match",
}


def advance(state: State, sender: Sender, kind: str, *, role: str = "bot") -> State:
    """The state after ``sender`` sent a message of type ``kind`` (``role``: a hello's role). A
    message the table does not allow leaves the state as it is: the caller has refused it (see
    `client_refusal`, `server_refusal`) or, for a type it does not know, ignored it."""
    if state is State.HELLO and sender == "client" and kind == "hello":
        return _HELLO_TO.get(role, state)
    return TRANSITIONS.get((state, sender, kind), state)


def client_sends(state: State) -> frozenset[str]:
    """The message types a client may send in ``state``, for a hot path to test one message against
    (a set lookup) before it asks `client_refusal` what to answer."""
    if state is State.HELLO:
        return frozenset({"hello"})
    return frozenset(kind for (at, sender, kind) in TRANSITIONS if at is state and sender == "client")


def client_refusal(state: State, kind: object) -> tuple[str, str] | None:
    """(code, message) if a client may not send a ``kind`` message in ``state``; None if it may.
    ``kind`` is the message's ``type`` as it came, whatever it is (a str in a well-formed message)."""
    known = kind if isinstance(kind, str) else None  # a list or a number cannot be a key
    if state is State.HELLO:
        if known == "hello":
            return None
    elif (state, "client", known) in TRANSITIONS:
        return None
    refusal = _CLIENT_REFUSALS.get((state, known)) if known is not None else None
    if refusal is None and known not in CLIENT_TYPES and state is State.PLAYING:
        refusal = (UNKNOWN_TYPE, "unknown message type {type!r}; a bot sends 'moves'")
    if refusal is None:
        refusal = _CLIENT_REFUSALS.get((state, None), (BAD_MESSAGE, "{type!r} is out of order here"))
    code, text = refusal
    return code, text.format(type=kind)


def server_refusal(state: State, kind: str) -> str | None:
    """What is wrong if the server sends a ``kind`` message in ``state`` (the client raises
    `ProtocolError` with code ``bad_message`` and this text); None if it is in order, or a type this
    side does not know (a later server's addition, which a client ignores)."""
    if kind not in SERVER_TYPES or (state, "server", kind) in TRANSITIONS:
        return None
    return _SERVER_REFUSALS.get((state, kind), f"a {kind!r} message arrived while {state.value}")
