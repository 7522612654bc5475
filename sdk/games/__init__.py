"""Each game's public codes and bot-side helpers, one module per game, and what the bot loop needs.

A game module ``cellarena.sdk.games.<game>`` turns the server's ``tick`` message into what a bot's
``on_tick`` gets and the bot's answer back into the ``moves`` field of its reply, with the
functions of `GameAdapter`. `cellarena.sdk.bot` drives any game through them, so writing a bot
for a new game is the same as for Rezzo: subclass the game's bot class (``CataBot``, ...), which sets
``game`` and types ``on_tick``, and override ``on_tick``.

Each game module also names its ``View`` (what ``on_tick`` gets), its ``Answer`` (the type of what
``on_tick`` returns) and its bot class, ``GameBot[View, Answer]`` with ``game`` set. mypy checks
each module against `GameAdapter` with those types (a ``TYPE_CHECKING`` block at each module's end, so
that this registry imports no game module but by name, at run time).

A game module may also read the ``welcome``'s ``config`` into typed settings, with a function
``parse_config(config) -> settings`` (see `GameSettings`); `MatchInfo.settings` holds the result.
This package is the SDK's registry of games, so it is where game names belong; the bot loop and
`MatchInfo` name none.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

#: Games the SDK knows, by name. The server's registry has the same names.
GAMES = ("rezzo", "cata", "drop2df", "colorblocks", "cloth")
#: The game a `Bot` plays unless it sets ``game``.
DEFAULT_GAME = "rezzo"


class MovesError(ValueError):
    """What ``on_tick`` returned cannot be sent; the message says why."""


ViewT = TypeVar("ViewT")
AnswerT_co = TypeVar("AnswerT_co", covariant=True)


class GameAdapter(Protocol[ViewT, AnswerT_co]):
    """The functions of a game module that the bot loop calls, typed with the module's ``View`` and
    ``Answer``. ``encode_answer`` takes any object: it is where a wrong answer is caught at run time,
    whatever the bot's types said."""

    def make_view(self, message: dict[str, Any]) -> ViewT:
        """What ``on_tick`` gets for this ``tick`` message. Raises ValueError if it is malformed."""
        ...

    def encode_answer(self, answer: object, message: dict[str, Any]) -> Any:
        """The ``moves`` field for what ``on_tick`` returned. Raises `MovesError` saying what is wrong."""
        ...

    def noop_answer(self, message: dict[str, Any]) -> Any:
        """The ``moves`` field that does nothing this tick (load generators send it)."""
        ...

    def idle_answer(self, view: ViewT) -> AnswerT_co:
        """What ``on_tick`` returns to do nothing this tick: `GameBot.on_tick`'s default."""
        ...


def adapter(game: str) -> GameAdapter[Any, Any]:
    """The SDK module of ``game``; ValueError names the known games. Which game a name means is known
    only at run time, hence ``Any``: a bot's own types come from its game's bot class."""
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}; this SDK knows {', '.join(GAMES)}")
    module: GameAdapter[Any, Any] = importlib.import_module(f"cellarena.sdk.games.{game}")
    return module


def bank_ms_of(message: Mapping[str, Any]) -> int | None:
    """A ``tick``'s ``bank_ms`` (what is left of the seat's time bank), or None when the match has no
    bank (the field is absent); a malformed value reads as None rather than failing the tick, since
    the bank is advice to the bot, not part of what it must answer."""
    value = message.get("bank_ms")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return max(0, value)


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
