"""The cellarena SDK for bot authors: everything a Python bot needs, without trio.

Importing this package (and writing a Rezzo bot) needs neither trio nor numpy. The modules of games
whose bots simulate the automaton (`cellarena.sdk.games.cata`, `cloth`, `drop2df`, `colorblocks`) use
numpy, which cellarena installs; they load only when a bot imports them.

    from cellarena.sdk import Bot, Cell, Move, run

`Bot` is Rezzo's bot class, `RezzoBot`: the tutorial's game. Every game's SDK module has its own,
typed with the game's view and answer (`cellarena.sdk.games.cata.CataBot`, ...), all made from the
generic `GameBot`. The package is typed (it ships ``py.typed``): mypy or pyright check a bot's
``on_tick`` against its game.

The names below load on first use (PEP 562): the server imports `cellarena.sdk.protocol` and the
games' codes, and must not load the bot loop and the socket client with them.

`docs/sdk.md` is the five-minute tutorial; `docs/protocol.md` the wire protocol underneath.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from cellarena.sdk.games.rezzo import RezzoBot as Bot
    from cellarena.sdk.protocol import ProtocolError

#: Each public name -> (the module that holds it, its name there). ``Bot`` is Rezzo's bot class under
#: the name the tutorial uses: ``class MyBot(Bot)`` is a typed Rezzo bot.
_WHERE: dict[str, tuple[str, str]] = {
    **{n: ("cellarena.sdk.bot", n) for n in ("GameBot", "MatchInfo", "MatchResult", "play", "run")},
    **{
        n: ("cellarena.sdk.client", n)
        for n in (
            "Client",
            "ClientError",
            "ConnectError",
            "ConnectionClosedError",
            "ServerError",
            "TLSError",
            "connect",
            "tls_context",
        )
    },
    "MovesError": ("cellarena.sdk.games", "MovesError"),
    **{
        n: ("cellarena.sdk.games.rezzo", n)
        for n in (
            "HITTABLE",
            "WIRE",
            "Cell",
            "Facing",
            "Move",
            "RezzoBot",
            "Tracker",
            "View",
            "Viewport",
            "moves_for",
        )
    },
    "RezzoAnswer": ("cellarena.sdk.games.rezzo", "Answer"),
    "Bot": ("cellarena.sdk.games.rezzo", "RezzoBot"),
    "ProtocolError": ("cellarena.sdk.protocol", "ProtocolError"),
}

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
assert sorted(_WHERE) == sorted(__all__)


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use, and keep the name here for the next."""
    try:
        module, attr = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'cellarena.sdk' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
