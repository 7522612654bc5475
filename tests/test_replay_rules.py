"""Replays record the version of the game's rules they were played under, so that a replay from
before a rule change that no longer re-simulates says why instead of looking corrupt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cellarena.server.games import get_engine
from cellarena.server.replay import ReplayWriter, read_replay, rules_version, verify


def drop2df_replay(path: Path) -> Path:
    """A short drop2df match of passes, recorded."""
    engine = get_engine("drop2df").new({"turns": 6}, 3)
    writer = ReplayWriter(path, engine, seed=3, names=["a", "b"])
    while (result := engine.result()) is None:
        tick = engine.tick
        moves = {seat: engine.decode(seat, request, []) for seat, request in engine.pending().items()}
        engine.apply(moves)
        writer.record(tick, moves, engine)
    writer.finish(result)
    return path


def test_a_replay_records_its_rules_and_old_files_read_as_version_1(tmp_path: Path) -> None:
    replay = read_replay(drop2df_replay(tmp_path / "m.replay"))
    assert replay.rules == rules_version(get_engine("drop2df")) == 2
    assert rules_version(get_engine("rezzo")) == 1
    old = replace(replay, header={k: v for k, v in replay.header.items() if k != "rules"})
    assert old.rules == 1
    assert verify(old).ok  # a match no rule change touched still re-simulates


def test_a_mismatch_in_a_replay_from_older_rules_names_the_changes(tmp_path: Path) -> None:
    replay = read_replay(drop2df_replay(tmp_path / "m.replay"))
    bad_tick = replace(replay.ticks[2], hash="0" * len(replay.ticks[2].hash))
    tampered = replace(replay, ticks=[*replay.ticks[:2], bad_tick, *replay.ticks[3:]])
    current = verify(tampered)
    assert not current.ok and current.rules_note == ""  # same rules: the file is at fault
    older = verify(replace(tampered, header={**replay.header, "rules": 1}))
    assert not older.ok
    assert "played under drop2df rules v1 and this cellarena plays v2" in older.summary()
    assert "no longer uses up the turn's edit or token" in older.summary()
