"""Replays record the version of the game's rules they were played under, so that a replay from
before a rule change that no longer re-simulates says why instead of looking corrupt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cellarena.server.games import get_engine
from cellarena.server.replay import (
    ReplayError,
    ReplayWriter,
    hash_version,
    read_replay,
    rules_version,
    verify,
)


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
    assert replay.rules == rules_version(get_engine("drop2df").new({})) == 2
    assert rules_version(get_engine("rezzo").new({"map": "duel"})) == 1
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


# ------------------------------------------------------------------ hash schemes
def rezzo_replay(path: Path, ticks: int = 40) -> Path:
    """A short Rezzo duel of every agent advancing, recorded."""
    engine = get_engine("rezzo").new({"map": "duel", "max_ticks": ticks}, 0)
    writer = ReplayWriter(path, engine, seed=0, names=["a", "b"])
    while (result := engine.result()) is None:
        tick = engine.tick
        moves = {s: engine.decode(s, r, [1] * len(r["agents"])) for s, r in engine.pending().items()}
        engine.apply(moves)
        writer.record(tick, moves, engine)
    writer.finish(result)
    return path


def test_a_replay_records_its_hash_scheme_and_files_in_the_old_one_still_verify(tmp_path: Path) -> None:
    """Rezzo's hashes moved from bit planes (1) to public codes (2); a file written before says
    nothing of its scheme, and is checked in scheme 1."""
    replay = read_replay(rezzo_replay(tmp_path / "m.replay"))
    assert replay.hashes == hash_version(get_engine("rezzo").new({"map": "duel"})) == 2
    assert verify(replay).ok
    # The same match as the older cellarena wrote it: scheme-1 hashes and no 'hashes' field.
    rebuilt = get_engine("rezzo").new(replay.config, replay.seed)
    start = rebuilt.state_hash_of(1)
    assert start != replay.header["start_hash"]
    old_ticks = []
    for record in replay.ticks:
        rebuilt.apply(record.moves)
        old_ticks.append(replace(record, hash=rebuilt.state_hash_of(1)))
    header = {k: v for k, v in replay.header.items() if k != "hashes"} | {"start_hash": start}
    old = replace(replay, header=header, ticks=old_ticks)
    assert old.hashes == 1
    assert verify(old).ok
    new_hash = replace(old_ticks[5], hash=replay.ticks[5].hash)  # a scheme-2 hash where 1 is due
    wrong = replace(old, ticks=[*old_ticks[:5], new_hash, *old_ticks[6:]])
    report = verify(wrong)
    assert not report.ok and report.mismatch is not None and report.mismatch.tick == old_ticks[5].tick


def test_a_hash_scheme_this_cellarena_does_not_know_is_a_clear_error(tmp_path: Path) -> None:
    replay = read_replay(rezzo_replay(tmp_path / "m.replay", ticks=5))
    newer = replace(replay, header={**replay.header, "hashes": 3})
    said = r"m\.replay: its state hashes are in rezzo hash scheme 3.*knows up to 2"
    with pytest.raises(ReplayError, match=said):
        verify(newer)
