"""The cellarena SDK for bot authors: everything a Python bot needs, without trio.

Importing this package (and writing a Rezzo bot) needs neither trio nor numpy. The modules of games
whose bots simulate the automaton (`cellarena.sdk.games.cata`, `cloth`, `drop2df`, `colorblocks`) use
numpy, which cellarena installs; they load only when a bot imports them.

    from cellarena.sdk import Bot, Cell, Move, run

`Bot` is Rezzo's bot class, `RezzoBot`: the tutorial's game. Every game's SDK module has its own,
typed with the game's view and answer (`cellarena.sdk.games.cata.CataBot`, ...), all made from the
generic `GameBot`. The package is typed (it ships ``py.typed``): mypy or pyright check a bot's
``on_tick`` against its game.

`docs/sdk.md` is the five-minute tutorial; `docs/protocol.md` the wire protocol underneath.
"""

from cellarena.sdk.bot import GameBot, MatchInfo, MatchResult, play, run
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
from cellarena.sdk.games.rezzo import (
    HITTABLE,
    WIRE,
    Cell,
    Facing,
    Move,
    RezzoBot,
    Tracker,
    View,
    Viewport,
    moves_for,
)
from cellarena.sdk.games.rezzo import Answer as RezzoAnswer
from cellarena.sdk.protocol import ProtocolError

#: Rezzo's bot class under the name the tutorial uses: ``class MyBot(Bot)`` is a typed Rezzo bot.
Bot = RezzoBot

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
    "GameBot",
    "MatchInfo",
    "MatchResult",
    "Move",
    "MovesError",
    "ProtocolError",
    "RezzoAnswer",
    "RezzoBot",
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
