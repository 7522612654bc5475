"""Each game's public codes and bot-side helpers, one module per game, and what the bot loop needs.

A game module ``cellarena.sdk.games.<game>`` turns the server's ``tick`` message into what a bot's
``on_tick`` gets and the bot's answer back into the ``moves`` field of its reply, with three
functions (see `GameAdapter`). `cellarena.sdk.bot` drives any game through them, so writing a bot
for a new game is the same as for Rezzo: subclass `Bot`, set ``game``, override ``on_tick``.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

#: Games the SDK knows, by name. The server's registry has the same names.
GAMES = ("rezzo", "cata", "drop2df", "colorblocks", "cloth")


class MovesError(ValueError):
    """What ``on_tick`` returned cannot be sent; the message says why."""


class GameAdapter(Protocol):
    """The three functions of a game module that the bot loop calls."""

    def make_view(self, message: dict[str, Any]) -> Any:
        """What ``on_tick`` gets for this ``tick`` message. Raises ValueError if it is malformed."""
        ...

    def encode_answer(self, answer: Any, message: dict[str, Any]) -> Any:
        """The ``moves`` field for what ``on_tick`` returned. Raises `MovesError` saying what is wrong."""
        ...

    def noop_answer(self, message: dict[str, Any]) -> Any:
        """The ``moves`` field that does nothing this tick (sent when ``on_tick`` fails)."""
        ...


def adapter(game: str) -> GameAdapter:
    """The SDK module of ``game``; ValueError names the known games."""
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}; this SDK knows {', '.join(GAMES)}")
    return importlib.import_module(f"cellarena.sdk.games.{game}")
