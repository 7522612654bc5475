"""Each game's public codes and bot-side helpers, one module per game, and what the bot loop needs.

A game module ``cellarena.sdk.games.<game>`` turns the server's ``tick`` message into what a bot's
``on_tick`` gets and the bot's answer back into the ``moves`` field of its reply, with the
functions of `GameAdapter`. `cellarena.sdk.bot` drives any game through them, so writing a bot
for a new game is the same as for Rezzo: subclass `Bot`, set ``game``, override ``on_tick``.

A game module may also read the ``welcome``'s ``config`` into typed settings, with a function
``parse_config(config) -> settings`` (see `GameSettings`); `MatchInfo.settings` holds the result.
This package is the SDK's registry of games, so it is where game names belong; the bot loop and
`MatchInfo` name none.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

#: Games the SDK knows, by name. The server's registry has the same names.
GAMES = ("rezzo", "cata", "drop2df", "colorblocks", "cloth")
#: The game a `Bot` plays unless it sets ``game``.
DEFAULT_GAME = "rezzo"


class MovesError(ValueError):
    """What ``on_tick`` returned cannot be sent; the message says why."""


class GameAdapter(Protocol):
    """The functions of a game module that the bot loop calls."""

    def make_view(self, message: dict[str, Any]) -> Any:
        """What ``on_tick`` gets for this ``tick`` message. Raises ValueError if it is malformed."""
        ...

    def encode_answer(self, answer: Any, message: dict[str, Any]) -> Any:
        """The ``moves`` field for what ``on_tick`` returned. Raises `MovesError` saying what is wrong."""
        ...

    def noop_answer(self, message: dict[str, Any]) -> Any:
        """The ``moves`` field that does nothing this tick (sent when ``on_tick`` fails)."""
        ...

    def idle_answer(self, view: Any) -> Any:
        """What ``on_tick`` returns to do nothing this tick: `Bot.on_tick`'s default."""
        ...


def adapter(game: str) -> GameAdapter:
    """The SDK module of ``game``; ValueError names the known games."""
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}; this SDK knows {', '.join(GAMES)}")
    return importlib.import_module(f"cellarena.sdk.games.{game}")


class GameSettings(Protocol):
    """What a game module's ``parse_config`` returns: the game's settings, as typed attributes."""

    def summary(self) -> str:
        """A few words for the bot's log line when the match starts (e.g. "map duel"), or ""."""
        ...


def parse_settings(game: str, config: Mapping[str, Any]) -> GameSettings | None:
    """``game``'s typed settings from a ``welcome``'s ``config``, or None when the SDK has no reader
    for them (an unknown game, or a game module without ``parse_config``)."""
    if game not in GAMES:
        return None
    parse = getattr(adapter(game), "parse_config", None)
    if parse is None:
        return None
    settings: GameSettings = parse(config)
    return settings
