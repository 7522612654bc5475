"""The contract every registered engine keeps, checked the same way for each game.

A new game gets these checks by adding its line to the registry: a default config that plays,
determinism of its hashes, garbage answers that never raise, a match that ends by itself when nobody
acts, and a replay of it that verifies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cellarena.server.cli.game_cli import game_cli
from cellarena.server.games import Engine, game_names, get_engine, plugin
from cellarena.server.replay import ReplayWriter, read_replay, verify

#: Decision points a game may take to end when nobody acts (every game has a cap below this).
MAX_DECISIONS = 5000

GARBAGE: list[Any] = [None, 7, -1, "advance", b"\x00" * 9, [], [None], [[1, 2]], {"x": 1}, {1: "y"}, 3.5]


def games() -> list[str]:
    return game_names()


def play_out(engine: Engine, garbage: bool = False) -> int:
    decisions = 0
    while engine.result() is None:
        assert decisions < MAX_DECISIONS, f"{engine.name} did not end in {MAX_DECISIONS} decision points"
        requests = engine.pending()
        assert requests, "a running match must ask someone to act"
        actions: dict[int, Any] = {}
        if garbage:
            for seat, request in requests.items():
                answer = GARBAGE[(decisions + seat) % len(GARBAGE)]
                action = engine.decode(seat, request, answer)
                if action is not None:
                    actions[seat] = action
        engine.apply(actions)
        decisions += 1
    assert engine.pending() == {}
    return decisions


@pytest.mark.parametrize("game", games())
def test_default_config_implements_the_interface(game: str) -> None:
    cls = get_engine(game)
    engine = cls.new({}, seed=3)
    assert isinstance(engine, Engine)
    assert engine.name == game
    assert isinstance(cls.default_tick_rate, float) and cls.default_tick_rate > 0
    assert cls.default_budget_ms is None or cls.default_budget_ms > 0
    assert engine.players >= 1
    public = engine.public_config()
    assert isinstance(public, dict)
    cli = game_cli(game)
    assert cli.config() is not None  # every option has a default


@pytest.mark.parametrize("game", games())
def test_garbage_answers_never_raise_and_the_match_ends(game: str) -> None:
    engine = get_engine(game).new({}, seed=1)
    play_out(engine, garbage=True)
    result = engine.result()
    assert result is not None
    assert sorted(result.ranks) == list(range(engine.players))
    assert all(r >= 1 for r in result.ranks.values())


@pytest.mark.parametrize("game", games())
def test_same_seed_same_hashes(game: str) -> None:
    cls = get_engine(game)
    a, b = cls.new({}, seed=11), cls.new({}, seed=11)
    for _ in range(40):
        if a.result() is not None:
            break
        assert a.state_hash() == b.state_hash()
        assert a.pending().keys() == b.pending().keys()
        a.apply({})
        b.apply({})
    assert a.state_hash() == b.state_hash()


@pytest.mark.parametrize("game", games())
def test_a_noop_match_replays_and_verifies(game: str, tmp_path: Path) -> None:
    engine = get_engine(game).new({}, seed=5)
    path = tmp_path / f"{game}.replay"
    writer = ReplayWriter(path, engine, seed=5, names=[f"p{i}" for i in range(engine.players)])
    while engine.result() is None:
        tick = engine.tick
        engine.apply({})
        writer.record(tick, {}, engine)
    writer.finish(engine.result(), {})  # type: ignore[arg-type]
    report = verify(read_replay(path))
    assert report.ok, report


@pytest.mark.parametrize("game", games())
def test_the_horizon_bounds_every_match(game: str) -> None:
    # The arena's wall-clock limit per match is built on it: a match outlasting it would be cut.
    engine = get_engine(game).new({}, seed=2)
    assert play_out(engine, garbage=True) <= plugin(game).max_decisions({})


@pytest.mark.parametrize("game", games())
def test_the_stored_config_rebuilds_the_same_match(game: str) -> None:
    # Replays store ``config.to_mapping()``; validating it again must give it back unchanged.
    engine = get_engine(game).new({}, seed=4)
    stored = engine.config.to_mapping()
    again = plugin(game).config_class().from_mapping(stored)
    assert again == engine.config and again.to_mapping() == stored
    assert get_engine(game).new(stored, seed=4).state_hash() == engine.state_hash()


@pytest.mark.parametrize("game", games())
def test_everything_the_plugin_names_loads(game: str) -> None:
    p = plugin(game)
    assert p.name == game and p.summary
    assert p.engine_class().name == game
    assert p.config_class().game == game
    assert p.game_cli() is game_cli(game)
    for group in p.commands:
        assert p.command(group).name == game
    render = p.renderer()
    if render is not None:
        assert str(render(get_engine(game).new({}, seed=1)))
