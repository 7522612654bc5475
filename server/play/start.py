"""A match that does not start fresh (`replay fork`): its first engine, and its scripted seats."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cellarena.server.games.base import Engine

#: A seat played in the server's own process: the engine's tick -> the seat's action (None: it passes).
Script = Callable[[int], Any]


@dataclass(frozen=True)
class MatchStart:
    """How a lobby's one match starts instead of from ``Engine.new`` (`LobbyConfig.start`)."""

    #: Makes the match's first engine (a fork's: the replay's state at its tick).
    engine: Callable[[], Engine]
    #: Seats no bot plays, by seat: their actions come from the script (a fork's recorded moves);
    #: they are never asked over the wire, never late and never forfeit.
    scripted: Mapping[int, Script] = field(default_factory=dict)
