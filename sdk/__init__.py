"""The cellarena SDK for bot authors: everything a Python bot needs, without trio.

Importing this package (and writing a Rezzo bot) needs neither trio nor numpy. The modules of games
whose bots simulate the automaton (`cellarena.sdk.games.cata`, `cloth`, `drop2df`, `colorblocks`) use
numpy, which cellarena installs; they load only when a bot imports them.

    from cellarena.sdk import Bot, Cell, Move, run

`docs/sdk.md` is the five-minute tutorial; `docs/protocol.md` the wire protocol underneath.
"""

from cellarena.sdk.bot import Bot, MatchInfo, MatchResult, play, run
from cellarena.sdk.client import (
    Client,
    ClientError,
    ConnectError,
    ConnectionClosedError,
    ServerError,
    TLSError,
    connect,
    tls_context,
)
from cellarena.sdk.games import MovesError
from cellarena.sdk.games.rezzo import HITTABLE, WIRE, Cell, Facing, Move, Tracker, View, Viewport, moves_for
from cellarena.sdk.protocol import ProtocolError

__all__ = [
    "HITTABLE",
    "WIRE",
    "Bot",
    "Cell",
    "Client",
    "ClientError",
    "ConnectError",
    "ConnectionClosedError",
    "Facing",
    "MatchInfo",
    "MatchResult",
    "Move",
    "MovesError",
    "ProtocolError",
    "ServerError",
    "TLSError",
    "Tracker",
    "View",
    "Viewport",
    "connect",
    "moves_for",
    "play",
    "run",
    "tls_context",
]
