"""Replay format version 2 (issue 27): game events in tick records, each seat's cause in the result,
optional sections; and the version 1 files users already have, kept as fixtures, still load, play
and verify."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest

from cellarena.server.games import get_engine
from cellarena.server.replay import ReplayWriter, board_at, read_replay, verify

FIXTURES = Path(__file__).parent / "fixtures" / "replays_v1"
GAMES = ["cata", "cloth", "colorblocks", "drop2df", "rezzo"]


@pytest.mark.parametrize("game", GAMES)
def test_version_1_replays_still_load_play_and_verify(game: str) -> None:
    rep = read_replay(FIXTURES / f"{game}.replay")
    assert rep.version == 1 and rep.game == game and rep.complete
    assert rep.events() == [] and rep.causes() == {}  # version 1 kept neither
    assert all(t.events is None for t in rep.ticks)
    report = verify(rep)
    assert report.ok and report.complete, report.summary()
    assert board_at(rep).result() is not None  # plays to its end
    assert board_at(rep, rep.ticks[len(rep.ticks) // 2].tick).result() is None


def write(path: Path, game: str) -> None:
    """A version 2 replay of the match of ``game``'s version 1 fixture: the same config, seed and
    moves, played by this cellarena with its events recorded."""
    old = read_replay(FIXTURES / f"{game}.replay")
    engine = get_engine(game).new(old.config, old.seed)
    writer = ReplayWriter(path, engine, seed=old.seed, names=old.names, events=True)
    for t in old.ticks:
        writer.record(t.tick, t.moves, engine, events=engine.apply(t.moves).log)
    result = engine.result()
    assert result is not None
    writer.finish(result)


def frames(path: Path) -> list[dict[Any, Any]]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        out.append(msgpack.unpackb(data[pos + 4 : pos + 4 + size], raw=False, strict_map_key=False))
        pos += 4 + size
    return out


def rewrite(path: Path, records: list[dict[Any, Any]]) -> None:
    out = bytearray()
    for rec in records:
        body = msgpack.packb(rec, use_bin_type=True)
        out += struct.pack(">I", len(body)) + body
    path.write_bytes(bytes(out))


@pytest.mark.parametrize("game", GAMES)
def test_version_2_replays_carry_events_and_causes_and_verify_them(game: str, tmp_path: Path) -> None:
    path = tmp_path / f"{game}.replay"
    write(path, game)
    rep = read_replay(path)
    assert rep.version == 2 and rep.sections == ["events"]
    assert rep.events(), "every game reports events in a whole match"
    causes = rep.causes()
    assert sorted(causes) == list(range(rep.players)) and all(
        isinstance(c["cause"], str) for c in causes.values()
    )
    assert rep.result is not None and rep.result["engine_result"]["causes"] == rep.result["causes"]
    report = verify(rep)
    assert report.ok and report.complete, report.summary()


def test_an_event_changed_in_the_file_is_a_mismatch_at_its_tick(tmp_path: Path) -> None:
    path = tmp_path / "rezzo.replay"
    write(path, "rezzo")
    records = frames(path)
    at = next(i for i, r in enumerate(records) if r.get("events"))
    records[at]["events"][0]["seat"] = 5
    rewrite(path, records)
    report = verify(read_replay(path))
    assert report.mismatch is not None and report.mismatch.what == "events"
    assert report.mismatch.tick == records[at]["tick"]
    # Events left out altogether, where the header promises them, are a mismatch too.
    del records[at]["events"]
    rewrite(path, records)
    report = verify(read_replay(path))
    assert report.mismatch is not None and report.mismatch.what == "events"


def test_a_changed_cause_is_a_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "cata.replay"
    write(path, "cata")
    records = frames(path)
    records[-1]["engine_result"]["causes"][0]["cause"] = "tick_cap"
    rewrite(path, records)
    report = verify(read_replay(path))
    assert report.mismatch is not None and report.mismatch.what == "engine result"


def test_version_2_readers_skip_sections_and_fields_they_do_not_know(tmp_path: Path) -> None:
    """The next issue's debug layer adds per-seat, per-tick records (or fields) without a version step."""
    path = tmp_path / "drop2df.replay"
    write(path, "drop2df")
    records = frames(path)
    records[0]["sections"].append("debug")
    records.insert(2, {"type": "debug", "tick": 0, "seat": 0, "notes": ["went left"]})
    records[3]["debug"] = {0: "thinking"}
    rewrite(path, records)
    rep = read_replay(path)
    assert rep.sections == ["events", "debug"]
    report = verify(rep)
    assert report.ok and report.complete, report.summary()


def test_a_bad_event_names_the_record(tmp_path: Path) -> None:
    path = tmp_path / "rezzo.replay"
    write(path, "rezzo")
    records = frames(path)
    records[1]["events"] = [{"tick": 1}]
    rewrite(path, records)
    from cellarena.server.replay import ReplayError

    with pytest.raises(
        ReplayError, match=r"record 2 at byte \d+: event 0 must be a map with a string 'kind'"
    ):
        read_replay(path)


def test_the_web_players_data_carries_events_and_causes(tmp_path: Path) -> None:
    """What the browser player reads (its meta and frames): every event with the frame it leads to,
    for timeline marks, and the causes as sentences; an old file gives none and still plays."""
    import json
    import zlib

    from cellarena.server.web.timeline import Timeline

    path = tmp_path / "rezzo.replay"
    write(path, "rezzo")
    timeline = Timeline(read_replay(path))
    meta = timeline.meta()
    out = [e for e in meta["events"] if e["kind"] == "flag_at_base"]
    assert len(out) == 1 and out[0]["seat"] == 1 and out[0]["flag"] and out[0]["base"]
    said = meta["result"]["causes"]
    assert said["1"]["cause"] == "flag_at_base" and said["1"]["text"].startswith("raider is out at tick")
    last = json.loads(zlib.decompress(timeline._frame(out[0]["frame"])))
    assert any(e["kind"] == "out" for e in last["step"]["events"])
    old = Timeline(read_replay(FIXTURES / "rezzo.replay")).meta()
    assert old["events"] == [] and old["result"]["causes"] == {}


def test_a_replay_written_before_blocked_events_still_verifies(tmp_path: Path) -> None:
    """Rezzo's ``blocked`` events (EVENTS_VERSION 2) came after replays began to carry events: a file
    without them, and without ``events_version`` in its header, verifies as it was written."""
    import numpy as np

    path = tmp_path / "rezzo.replay"
    engine = get_engine("rezzo").new({"map": "duel", "max_ticks": 60}, 0)
    writer = ReplayWriter(path, engine, seed=0, names=["a", "b"], events=True)
    rng = np.random.default_rng(1)
    while engine.result() is None:  # mostly advances: agents walk into walls and wire
        moves = {p: [int(m) for m in rng.choice([1, 1, 1, 2, 4], size=2)] for p in (0, 1)}
        writer.record(engine.tick, moves, engine, events=engine.apply(moves).log)
    writer.finish(engine.result())
    rep = read_replay(path)
    assert rep.header["events_version"] == 2 == rep.event_kinds
    assert any(e["kind"] == "blocked" for e in rep.events()), "the match has blocked agents"
    assert verify(rep).ok
    from cellarena.server.web.timeline import Timeline

    # The web player lists them like the others, each with the frame it leads to.
    shown = [e for e in Timeline(rep).meta()["events"] if e["kind"] == "blocked"]
    assert shown and all(e["count"] >= 1 and isinstance(e["frame"], int) for e in shown)
    records = frames(path)
    del records[0]["events_version"]
    for r in records:
        if r.get("events"):
            r["events"] = [e for e in r["events"] if e["kind"] != "blocked"]
            if not r["events"]:
                del r["events"]
    rewrite(path, records)
    old = read_replay(path)
    assert old.event_kinds == 1 and not any(e["kind"] == "blocked" for e in old.events())
    report = verify(old)
    assert report.ok and report.complete, report.summary()
    # A file that says it has them must have them.
    records[0]["events_version"] = 2
    rewrite(path, records)
    report = verify(read_replay(path))
    assert report.mismatch is not None and report.mismatch.what == "events"
