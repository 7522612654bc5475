"""`Lobby.start_match` takes a match's replay writer and what it is to its seating as arguments (a
ladder names each replay for its own match id, and its log links the lobby's number to that id)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from cellarena.server.games.base import Engine
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import Recorder, TickSettings


@pytest.mark.usefixtures("virtual_wall")
async def test_start_match_uses_the_recorder_and_meta_it_is_given(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock
) -> None:
    made: list[tuple[str, int, list[str], int]] = []

    def maker(which: str) -> Any:
        def recorder(number: int, engine: Engine, names: list[str], seed: int) -> Recorder | None:
            made.append((which, number, names, seed))
            return None

        return recorder

    config = LobbyConfig(
        "rezzo",
        {"map": "duel", "max_ticks": 5},
        TickSettings(fast=True, budget_ms=1000),
        port=0,
        recorder=maker("config's"),
    )
    lobby = Lobby(config)
    caplog.set_level(logging.INFO, logger="cellarena.server")
    async with trio.open_nursery() as nursery:
        await nursery.start(lobby.serve)
        first = lobby.start_match(
            [None, None], ["a", "b"], seed=3, recorder=maker("given"), meta={"ladder match": 41}
        )
        second = lobby.start_match([None, None], ["c", "d"], seed=4)
        assert first is not None and second is not None
        nursery.cancel_scope.cancel()
    # The given maker replaces the config's for that match alone; the next match uses the config's.
    assert made == [("given", 1, ["a", "b"], 3), ("config's", 2, ["c", "d"], 4)]
    said = [r.getMessage() for r in caplog.records]
    assert "match 1 starts: a, b (ladder match 41)" in said and "match 2 starts: c, d" in said
