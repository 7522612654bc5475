"""The Colorblocks engine: config and maps, turns and refusals, the turn cap, the example bots."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgpack
import pytest
from bot_files import example_bot, load_example_bot
from cellarena_cli import cellarena, invoke

from cellarena.sdk import protocol
from cellarena.sdk.games import MovesError
from cellarena.sdk.games import colorblocks as cb
from cellarena.server.games import ConfigError
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.colorblocks.maps import MapError, parse_map

greedy_turn = load_example_bot("colorblocks", "greedy").greedy_turn


def wire(engine: ColorblocksEngine) -> tuple[int, dict[str, Any]]:
    """The seat to move and its tick message, through msgpack as a bot gets it."""
    ((seat, request),) = engine.pending().items()
    message = protocol.tick(engine.tick, 1000, request)
    return seat, msgpack.unpackb(msgpack.packb(message))


def test_default_match_layout_and_first_request() -> None:
    e = ColorblocksEngine.new({})
    seat, msg = wire(e)
    assert seat == 0 and msg["turn"] == 1 and msg["max_turns"] == 100
    view = cb.make_view(msg)
    b = view.board
    assert (b.width, b.height) == (9, 9)
    assert b.find(cb.Block.OBJECTIVE_RED) == [(4, 8)] and b.find(cb.Block.OBJECTIVE_BLUE) == [(4, 0)]
    # Point-symmetric: rotating by 180 degrees swaps the colours.
    swap = {1: 2, 2: 1, 5: 6, 6: 5, 7: 8, 8: 7}
    rotated = [[swap.get(int(c), int(c)) for c in r[::-1]] for r in b.blocks[::-1]]
    assert rotated == b.blocks.tolist()
    # Red's first fighter stands on its spawn, and may act at once.
    assert [u.to_list() for u in b.units.values()] == [[0, 0, "fighter", 4, 7]]
    assert msg["reserves"] == [2, 2] and msg["guards"] == [] and msg["refused"] == []


def test_refusals_are_counted_and_reported_back_with_reasons() -> None:
    e = ColorblocksEngine.new({})
    seat, msg = wire(e)
    actions = [["place", 0, 0], "junk", ["fly", 1], ["place", 2, 1], ["place", 6, 1], ["spawn", "paver"]]
    events = e.apply({seat: e.decode(seat, msg, actions)})
    assert events.illegal == {0: 2} and events.malformed == {0: 2}
    assert e.board.blocks[1, 2] == cb.Block.RED  # the legal placement went through
    e.apply({})  # blue passes
    _, msg = wire(e)
    reasons = dict(msg["refused"])
    assert sorted(reasons) == [0, 1, 2, 4]
    assert "place on a neutral or your own block" in reasons[0]
    assert "unknown action 'fly'" in reasons[2] and "only one colour block" in reasons[4]
    assert e.board.next_spawn == ["paver", "fighter"]  # red's fighter still blocks its spawn


def test_decode_rejects_non_lists_and_over_long_turns() -> None:
    e = ColorblocksEngine.new({})
    seat, msg = wire(e)
    for garbage in (None, 3, "place", {"a": 1}, [["spawn", "paver"]] * (cb.MAX_ACTIONS + 1)):
        assert e.decode(seat, msg, garbage) is None
    assert e.decode(seat, msg, []) == []


def test_the_turn_limit_draws() -> None:
    e = ColorblocksEngine.new({"max_turns": 3})
    for _ in range(5):
        e.apply({})
        assert e.result() is None
    e.apply({})
    result = e.result()
    assert result is not None and result.draw and result.ranks == {0: 1, 1: 1} and result.ticks == 6
    assert "turn limit" in result.reason and e.pending() == {}


def test_capture_wins_at_once_and_later_actions_are_ignored() -> None:
    text = "R R 2 B\n. s . t\n1 . . .\n"
    e = ColorblocksEngine.new({"map": "tiny", "map_text": text})
    fighter = e.board.units[0]
    assert (fighter.x, fighter.y) == (1, 1)
    events = e.apply({0: [["move", 0, 1, 0], ["place", 9, 9]]})
    assert events.illegal == {0: 1}  # off the board
    e.apply({})
    e.apply({0: [["move", 0, 2, 0], ["place", 9, 9]]})
    result = e.result()
    assert result is not None and result.winner == 0 and result.ranks == {0: 1, 1: 2}
    assert e.refused[0] == [] and e.pending() == {}


def test_config_and_map_errors_say_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown colorblocks option"):
        ColorblocksEngine.new({"size": 9})
    with pytest.raises(ConfigError, match="max_turns must be between 1 and 10000"):
        ColorblocksEngine.new({"max_turns": 0})
    with pytest.raises(ConfigError, match="guards must be a whole number"):
        ColorblocksEngine.new({"guards": True})
    with pytest.raises(MapError, match="built-in maps: classic"):
        ColorblocksEngine.new({"map": str(tmp_path / "nope.txt")})
    bad = tmp_path / "bad.txt"
    bad.write_text("; a comment\nR R 2\n. Q t\n1 s .\n")
    with pytest.raises(MapError, match=r"bad.txt:3:3: unknown block 'Q'"):
        ColorblocksEngine.new({"map": str(bad)})
    cases = {
        "R R 2\n. . t\n1 s\n": r"m:3:3: this row has 2 blocks but the first \(line 1\) has 3",
        "R R 2 s\n. . t s\n1 s . .\n": "m:2:7: seat 0 needs exactly one spawn block 's', found 3",
        "R R 2\n. . .\n1 s .\n": "m:1:1: seat 1 needs exactly one spawn block 't', found 0",
        "R R R\n. . t\n1 s .\n": "m:1:1: seat 1 needs at least one objective '2'",
        "R 2\n1 s\n": "m:1:1: the map is 2x2",
        "; nothing\n": "m:1:1: the map has no rows",
    }
    for text, message in cases.items():
        with pytest.raises(MapError, match=message):
            parse_map(text, "m")


def test_map_files_play(tmp_path: Path) -> None:
    path = tmp_path / "small.txt"
    path.write_text("B 2 B\n. t .\n. . .\n. s .\nR 1 R\n")
    e = ColorblocksEngine.new({"map": str(path), "max_turns": 2})
    assert e.public_config() == {"map": str(path), "width": 3, "height": 5, "max_turns": 2, "guards": 2}
    assert e.config.map_text == path.read_text()


def test_sdk_adapter_checks_answers() -> None:
    e = ColorblocksEngine.new({})
    _, msg = wire(e)
    assert cb.noop_answer(msg) == []
    assert cb.encode_answer((["place", 2, 1],), msg) == [["place", 2, 1]]
    with pytest.raises(MovesError, match="list of actions"):
        cb.encode_answer("place", msg)
    with pytest.raises(MovesError, match="action 1"):
        cb.encode_answer([["spawn", "paver"], 7], msg)
    with pytest.raises(ValueError, match="malformed"):
        cb.make_view({"type": "tick", "width": 9, "height": 9, "board": b"x"})


def test_legal_actions_are_all_accepted_by_the_engine() -> None:
    rng = random.Random(4)
    e = ColorblocksEngine.new({})
    for _ in range(40):
        seat, msg = wire(e)
        view = cb.make_view(msg)
        legal = view.legal_actions()
        assert any(a[0] == "place" for a in legal)
        for action in rng.sample(legal, min(len(legal), 25)):  # each alone, on a fresh copy
            trial = view.board.copy()
            trial.play(seat, action)
        events = e.apply({seat: cb.random_turn(view, rng)})
        assert not events.illegal and not events.malformed


def play(red: Any, blue: Any, max_turns: int = 100) -> tuple[int | None, int]:
    """A whole match with each side's turn function called on the decoded message."""
    e = ColorblocksEngine.new({"max_turns": max_turns})
    sides = (red, blue)
    while e.result() is None:
        seat, msg = wire(e)
        events = e.apply({seat: e.decode(seat, msg, cb.encode_answer(sides[seat](cb.make_view(msg)), msg))})
        assert not events.illegal and not events.malformed, e.refused
    result = e.result()
    assert result is not None
    return result.winner, result.ticks


def test_greedy_beats_random_in_most_games() -> None:
    wins = 0
    for game in range(8):
        rng = random.Random(game)

        def rand(view: cb.View, rng: random.Random = rng) -> list[list[Any]]:
            return cb.random_turn(view, rng)

        greedy_seat = game % 2
        sides = (greedy_turn, rand) if greedy_seat == 0 else (rand, greedy_turn)
        winner, _ = play(*sides)
        wins += winner == greedy_seat
    assert wins >= 7


def test_greedy_against_itself_ends() -> None:
    _, ticks = play(greedy_turn, greedy_turn, max_turns=30)
    assert ticks <= 60


def test_match_between_the_example_bots_over_tcp() -> None:
    out = cellarena(
        "match",
        "colorblocks",
        "--bot",
        f"greedy={example_bot('colorblocks', 'greedy')}",
        "--bot",
        f"random={example_bot('colorblocks', 'random_legal')}",
        "--fast",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["winner"] == "greedy" and "captured the objective" in report["reason"]
    assert report["illegal"] == {"greedy": 0, "random": 0} and report["late"] == {"greedy": 0, "random": 0}


def test_bench_command_reports_ratios_as_json() -> None:
    code, out = invoke("bench", "colorblocks", "--sizes", "9", "--seconds", "0.05", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["gain_map"]["9"]["ratio"] > 0 and report["engine"]["turns_per_s"] > 0
