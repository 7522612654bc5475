"""Replays: writing, reading, verification by re-simulation, clear errors for bad files, and the CLI.

The file is read here with a reader written from `docs/replays.md` alone (length-prefixed msgpack
maps), so the tests also hold the spec to what the writer produces.
"""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from cellarena_cli import invoke
from rich.console import Console

from cellarena.server.games import Result
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.maps import read_map
from cellarena.server.games.rezzo.render import render
from cellarena.server.replay import (
    ReplayError,
    ReplayWriter,
    board_at,
    read_replay,
    verify,
)

TICKS = 300


# ------------------------------------------------------------------------------------ helpers
def random_moves(rng: np.random.Generator, engine: RezzoEngine, as_dict: bool = False) -> dict[int, Any]:
    """Seeded random moves for every seat that must act: a list per seat, or {agent index: move}."""
    moves: dict[int, Any] = {}
    for seat, request in engine.pending().items():
        codes = [int(m) for m in rng.integers(0, 6, size=len(request["agents"]))]
        moves[seat] = dict(zip(request["agents"], codes, strict=True)) if as_dict else codes
    return moves


def play(
    path: Path,
    *,
    seed: int = 7,
    config: dict[str, Any] | None = None,
    ticks: int = TICKS,
    finish: bool = True,
    as_dict: bool = False,
) -> list[dict[int, Any]]:
    """Play a Rezzo match with random moves, writing its replay; returns the moves of every tick."""
    engine = RezzoEngine.new(config or {"map": "duel", "max_ticks": TICKS}, seed)
    rng = np.random.default_rng(seed)
    names = [f"bot{i}" for i in range(engine.players)]
    played = []
    writer = ReplayWriter(path, engine, seed=seed, names=names, extra={"match": 1}, events=True)
    for _ in range(ticks):
        if engine.result() is not None:
            break
        tick = engine.tick
        moves = random_moves(rng, engine, as_dict)
        log = engine.apply(moves).log
        writer.record(tick, moves, engine, late={0: 1} if tick % 50 == 0 else None, events=log)
        played.append(moves)
    if finish:
        result = engine.result()
        assert result is not None, "the match should end within the ticks played"
        writer.finish(result, late={0: TICKS // 50}, invalid={1: 0})
    else:
        writer.close()
    return played


def frames(path: Path) -> list[bytes]:
    """The record bodies, read as the spec describes: 4-byte big-endian length, then the body."""
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    assert pos == len(data)
    return out


def records(path: Path) -> list[dict[Any, Any]]:
    return [msgpack.unpackb(b, raw=False, strict_map_key=False) for b in frames(path)]


def write_records(path: Path, recs: list[dict[Any, Any]]) -> None:
    out = bytearray()
    for rec in recs:
        body = msgpack.packb(rec, use_bin_type=True)
        out += struct.pack(">I", len(body)) + body
    path.write_bytes(bytes(out))


def drive(moves: list[dict[int, Any]], until: int, seed: int = 7) -> RezzoEngine:
    """An engine driven directly (no replay involved) to decision point ``until``."""
    engine = RezzoEngine.new({"map": "duel", "max_ticks": TICKS}, seed)
    for m in moves:
        if engine.tick >= until:
            break
        engine.apply(m)
    assert engine.tick == until
    return engine


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[int, Any]]]:
    path = tmp_path_factory.mktemp("replay") / "match.replay"
    return path, play(path)


@pytest.fixture
def copy(made: tuple[Path, list[dict[int, Any]]], tmp_path: Path) -> Path:
    """A private copy of the module's replay, free to tamper with."""
    out = tmp_path / "copy.replay"
    out.write_bytes(made[0].read_bytes())
    return out


# ------------------------------------------------------------------------------------ round trip
def test_replay_reads_back_what_was_written(made: tuple[Path, list[dict[int, Any]]]) -> None:
    path, played = made
    rep = read_replay(path)
    assert rep.game == "rezzo" and rep.seed == 7 and rep.players == 2
    assert rep.names == ["bot0", "bot1"]
    assert rep.header["format"] == "cellarena-replay" and rep.header["version"] == 2
    assert rep.header["extra"] == {"match": 1}
    assert rep.config["map_text"] == read_map("duel")[0]  # self-contained
    assert rep.start_tick == 1
    assert [t.tick for t in rep.ticks] == list(range(1, TICKS + 1))
    assert [t.moves for t in rep.ticks] == played
    assert rep.ticks[49].late == {0: 1} and rep.ticks[0].late == {}
    assert rep.complete and rep.truncated is None
    assert rep.result is not None
    assert rep.result["reason"] == f"tick cap {TICKS} reached"
    assert rep.result["late"] == {0: TICKS // 50} and rep.result["invalid"] == {}


def test_verify_passes(made: tuple[Path, list[dict[int, Any]]]) -> None:
    report = verify(read_replay(made[0]))
    assert report.ok and report.complete
    assert report.ticks_verified == TICKS
    assert report.summary() == f"ok: {TICKS} ticks verified"


@pytest.mark.parametrize("map_", ["duel2", "quad"])
def test_verify_passes_with_several_agents_or_players_and_dict_moves(tmp_path: Path, map_: str) -> None:
    path = tmp_path / "m.replay"
    play(path, config={"map": map_, "max_ticks": 80}, ticks=80, as_dict=True, seed=3)
    rep = read_replay(path)
    assert rep.players == RezzoEngine.new({"map": map_}).players
    assert isinstance(rep.ticks[0].moves[0], dict)
    report = verify(rep)
    assert report.ok and report.complete and report.ticks_verified == 80


def test_gzipped_replay_reads_and_verifies(made: tuple[Path, list[dict[int, Any]]], tmp_path: Path) -> None:
    gz = tmp_path / "match.replay.gz"
    gz.write_bytes(gzip.compress(made[0].read_bytes()))
    report = verify(read_replay(gz))
    assert report.ok and report.complete and report.ticks_verified == TICKS


def test_replay_from_a_map_file_verifies_after_the_file_is_gone(tmp_path: Path) -> None:
    map_file = tmp_path / "mine.txt"
    map_file.write_text(read_map("duel")[0])
    path = tmp_path / "mine.replay"
    play(path, config={"map": str(map_file), "max_ticks": 100}, ticks=100)
    map_file.unlink()
    report = verify(read_replay(path))
    assert report.ok and report.complete and report.ticks_verified == 100


def test_same_seed_and_moves_give_identical_tick_records(tmp_path: Path) -> None:
    a, b = tmp_path / "a.replay", tmp_path / "b.replay"
    play(a)
    play(b)
    fa, fb = frames(a), frames(b)
    assert fa[1:] == fb[1:]  # every tick record and the result, byte for byte
    ha, hb = (msgpack.unpackb(f[0], raw=False) for f in (fa, fb))
    ha.pop("created"), hb.pop("created")
    assert ha == hb


# ------------------------------------------------------------------------------------ tampering
def test_changed_move_fails_at_exactly_that_tick(copy: Path) -> None:
    recs = records(copy)
    k = 120  # records[k] is the tick record of decision point k (the header is records[0])
    move = recs[k]["moves"][0][0]
    recs[k]["moves"][0][0] = 3 if move == 2 else 2  # a turn always changes the agent's facing
    write_records(copy, recs)
    report = verify(read_replay(copy))
    assert not report.ok
    assert report.mismatch is not None
    assert report.mismatch.tick == k and report.mismatch.what == "state hash"
    assert report.mismatch.expected == recs[k]["hash"]
    assert report.ticks_verified == k - 1
    assert report.summary().startswith(f"mismatch at tick {k}: state hash")


def test_changed_hash_fails_at_exactly_that_tick(copy: Path) -> None:
    recs = records(copy)
    k = 77
    real = recs[k]["hash"]
    recs[k]["hash"] = "0" * len(real)
    write_records(copy, recs)
    report = verify(read_replay(copy))
    assert report.mismatch is not None
    assert (report.mismatch.tick, report.mismatch.expected, report.mismatch.got) == (k, "0" * len(real), real)


def test_changed_start_hash_fails_before_any_tick(copy: Path) -> None:
    recs = records(copy)
    recs[0]["start_hash"] = "f" * 32
    write_records(copy, recs)
    report = verify(read_replay(copy))
    assert report.mismatch is not None and report.mismatch.what == "starting state hash"
    assert report.ticks_verified == 0


def test_changed_engine_result_is_a_mismatch(copy: Path) -> None:
    recs = records(copy)
    recs[-1]["engine_result"]["winner"] = 0
    write_records(copy, recs)
    report = verify(read_replay(copy))
    assert report.mismatch is not None and report.mismatch.what == "engine result"
    assert report.mismatch.tick == TICKS and report.ticks_verified == TICKS


def test_ticks_after_the_end_are_a_mismatch(copy: Path) -> None:
    recs = records(copy)
    extra = dict(recs[-2], tick=TICKS + 1)
    write_records(copy, [*recs[:-1], extra, recs[-1]])
    report = verify(read_replay(copy))
    assert report.mismatch is not None and report.mismatch.tick == TICKS + 1
    assert report.mismatch.what == "match state"


def test_changed_config_is_a_clear_error(copy: Path) -> None:
    recs = records(copy)
    recs[0]["config"]["max_ticks"] = "lots"
    write_records(copy, recs)
    with pytest.raises(
        ReplayError, match=r"copy\.replay: the rezzo engine rejects the replay's config: .*max_ticks"
    ):
        verify(read_replay(copy))


def test_match_result_may_differ_from_the_engines(tmp_path: Path) -> None:
    """A match the server decides (every other seat left) before the game does: both results are kept."""
    path = tmp_path / "forfeit.replay"
    engine = RezzoEngine.new({"map": "duel"})
    writer = ReplayWriter(path, engine, seed=0, names=["stayed", "left"], events=True)
    for _ in range(20):
        tick = engine.tick
        log = engine.apply({0: [2]}).log
        writer.record(tick, {0: [2]}, engine, events=log)
    told = Result(ranks={0: 1, 1: 2}, winner=0, reason="every other seat disconnected", ticks=engine.tick)
    # As the match server calls it: extra positionally, late/invalid as lists by seat.
    writer.finish(told, {"late": [0, 20], "invalid": [0, 0], "illegal": [0, 0], "forfeits": [1]})
    rep = read_replay(path)
    assert rep.result is not None
    assert rep.result["winner"] == 0 and rep.result["reason"] == "every other seat disconnected"
    assert rep.result["engine_result"] is None  # the game itself had not ended
    assert rep.result["late"] == {1: 20} and rep.result["invalid"] == {}
    assert rep.result["extra"] == {"illegal": [0, 0], "forfeits": [1]}
    report = verify(rep)
    assert report.ok and report.complete and report.ticks_verified == 20
    code, out = invoke("replay", "show", str(path))
    assert code == 0, out
    assert "match result at tick 21: player 0 (stayed) wins (every other seat disconnected)" in out

    recs = records(path)
    recs[-1]["engine_result"] = {"ticks": 21, "ranks": {0: 1, 1: 2}, "winner": 0, "reason": "x", "scores": {}}
    write_records(path, recs)
    report = verify(read_replay(path))
    assert report.mismatch is not None and report.mismatch.what == "engine result"
    assert report.mismatch.got is None


# ------------------------------------------------------------------------------------ incomplete files
def test_file_cut_mid_record_reads_as_incomplete(copy: Path) -> None:
    sizes = [4 + len(f) for f in frames(copy)]
    cut = sum(sizes[:101]) + sizes[101] // 2  # header and 100 ticks whole, tick 101 cut in half
    copy.write_bytes(copy.read_bytes()[:cut])
    rep = read_replay(copy)
    assert not rep.complete
    assert len(rep.ticks) == 100
    assert rep.truncated is not None
    assert rep.truncated.startswith(f"truncated in record 102 at byte {sum(sizes[:101])}")
    report = verify(rep)
    assert report.ok and not report.complete and report.ticks_verified == 100
    assert report.summary().startswith("incomplete: 100 ticks verified; truncated in record 102")


def test_file_cut_inside_a_length_prefix_reads_as_incomplete(copy: Path) -> None:
    sizes = [4 + len(f) for f in frames(copy)]
    copy.write_bytes(copy.read_bytes()[: sum(sizes[:11]) + 2])
    rep = read_replay(copy)
    assert len(rep.ticks) == 10 and rep.truncated is not None and "length prefix" in rep.truncated


def test_writer_flushes_every_tick_and_an_unfinished_file_is_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "live.replay"
    engine = RezzoEngine.new({"map": "duel"})
    writer = ReplayWriter(path, engine, seed=0, names=["a", "b"])
    for _ in range(5):
        tick = engine.tick
        engine.apply({})
        writer.record(tick, {}, engine)
    # Still open, as in a server that just crashed: every recorded tick is already in the file.
    rep = read_replay(path)
    assert len(rep.ticks) == 5 and not rep.complete and rep.truncated is None
    assert "without a result record" in verify(rep).summary()
    writer.close()


def test_writer_refuses_moves_it_cannot_store_and_writes_nothing_for_them(tmp_path: Path) -> None:
    path = tmp_path / "np.replay"
    engine = RezzoEngine.new({"map": "duel"})
    with ReplayWriter(path, engine, seed=0, names=["a", "b"]) as writer:
        with pytest.raises(TypeError, match="moves of tick 1 cannot be stored"):
            writer.record(1, {0: [np.int64(1)]}, engine)
        writer.record(1, {0: [1]}, engine)
    assert [t.moves for t in read_replay(path).ticks] == [{0: [1]}]


# ------------------------------------------------------------------------------------ bad files
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file; not a cellarena replay"),
        (b"\x00\x01", r"not a cellarena replay \(only 2 bytes long\)"),
        (b"hello, this is a text file\n" * 10, "not a cellarena replay"),
        (bytes(range(256)) * 4, "not a cellarena replay"),
        (struct.pack(">I", 3) + b"\xc1\xc1\xc1", r"not a cellarena replay \(the first record is not msgpack"),
        (struct.pack(">I", 1) + b"\x05", "the first record is a int, not a map"),
        (struct.pack(">I", 100) + b"\x80", "cut off inside its header"),
        (b"\x1f\x8b\x08\x00" + bytes(6) + b"\xff\xfe garbage", "corrupt gzip data"),
        (b"\x1f\x8b\x08\x00garbage", "gzip stream is cut off before any record"),
    ],
)
def test_garbage_is_a_replay_error_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.replay"
    path.write_bytes(content)
    with pytest.raises(ReplayError, match=message) as info:
        read_replay(path)
    assert str(info.value).startswith(f"{path}: ")


def test_missing_file_and_directory_are_replay_errors(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match=r"nope\.replay: cannot open"):
        read_replay(tmp_path / "nope.replay")
    with pytest.raises(ReplayError, match="cannot open"):
        read_replay(tmp_path)


@pytest.mark.parametrize(
    ("record", "change", "message"),
    [
        (0, {"version": 3}, "replay format version 3 is not supported; this cellarena reads versions 1, 2"),
        (0, {"game": "chess"}, "unknown game 'chess'; known games: cata, cloth, colorblocks, drop2df, rezzo"),
        (0, {"seed": "x"}, "header: field 'seed' must be int, got str 'x'"),
        (0, {"names": ["only one"]}, "header: field 'names' must list 2 strings"),
        (0, {"format": "something-else"}, "not a cellarena replay"),
        (5, {"hash": 12}, "record 6 at byte [0-9]+: field 'hash' must be str, got int 12"),
        (5, {"moves": {"zero": [1]}}, "record 6 at byte [0-9]+: field 'moves' must map seat numbers"),
        (5, {"tick": 2}, "record 6 at byte [0-9]+: tick 2 does not come after tick 4"),
        (5, {"type": 5}, "record 6 at byte [0-9]+: unknown record type 5"),
        (-1, {"ranks": {0: "first"}}, "field 'ranks': seat 0 must map to int"),
        (-1, {"engine_result": {"ticks": 1}}, "engine_result: missing field 'ranks'"),
        (-1, {"engine_result": 5}, "field 'engine_result' must be map or nil"),
    ],
)
def test_bad_fields_name_the_file_the_record_and_the_field(
    copy: Path, record: int, change: dict[str, Any], message: str
) -> None:
    recs = records(copy)
    recs[record].update(change)
    write_records(copy, recs)
    with pytest.raises(ReplayError, match=message) as info:
        read_replay(copy)
    assert str(info.value).startswith(f"{copy}: ")


def test_records_after_the_result_and_corrupt_bodies_are_errors(copy: Path) -> None:
    recs = records(copy)
    write_records(copy, [*recs, recs[-1]])
    with pytest.raises(ReplayError, match=f"record {len(recs) + 1} at byte [0-9]+ follows the result record"):
        read_replay(copy)
    body = b"\xc1"
    write_records(copy, recs[:3])
    with copy.open("ab") as f:
        f.write(struct.pack(">I", len(body)) + body)
    with pytest.raises(ReplayError, match=r"record 4 at byte [0-9]+ is not valid msgpack"):
        read_replay(copy)
    write_records(copy, recs[:3])
    with copy.open("ab") as f:
        f.write(struct.pack(">I", 0xFFFFFFF0))
    with pytest.raises(ReplayError, match=r"record 4 at byte [0-9]+ claims 4294967280 bytes"):
        read_replay(copy)


# ------------------------------------------------------------------------------------ boards
def board_text(engine: RezzoEngine) -> str:
    buf = io.StringIO()
    console = Console(file=buf, highlight=False, width=200)
    console.print(render(engine.cells(), [(a.x, a.y, a.facing) for a in engine.agents() if a.alive]))
    return buf.getvalue()


@pytest.mark.parametrize("tick", [1, 2, 150, TICKS])
def test_board_at_matches_an_engine_driven_directly(
    made: tuple[Path, list[dict[int, Any]]], tick: int
) -> None:
    path, played = made
    engine = board_at(read_replay(path), tick)
    direct = drive(played, tick)
    assert engine.tick == tick
    assert engine.state_hash() == direct.state_hash()


def test_board_at_default_is_the_final_state(made: tuple[Path, list[dict[int, Any]]]) -> None:
    rep = read_replay(made[0])
    engine = board_at(rep)
    assert engine.state_hash() == rep.ticks[-1].hash and engine.result() is not None


@pytest.mark.parametrize(
    ("tick", "message"), [(TICKS + 1, f"past the end; the last tick is {TICKS}"), (0, "starts at tick 1")]
)
def test_board_at_outside_the_replay_says_where_it_ends(
    made: tuple[Path, list[dict[int, Any]]], tick: int, message: str
) -> None:
    with pytest.raises(ReplayError, match=message):
        board_at(read_replay(made[0]), tick)


def test_board_at_refuses_a_replay_that_does_not_reproduce(copy: Path) -> None:
    recs = records(copy)
    recs[10]["hash"] = "0" * 32
    write_records(copy, recs)
    rep = read_replay(copy)
    assert board_at(rep, 10).tick == 10  # before the bad record
    with pytest.raises(ReplayError, match=r"does not re-simulate .*tick 10: state hash"):
        board_at(rep, 20)


# ------------------------------------------------------------------------------------ command line
def test_cli_show_prints_the_board_at_tick_t(made: tuple[Path, list[dict[int, Any]]]) -> None:
    path, played = made
    code, out = invoke("replay", "show", str(path), "--tick", "150")
    assert code == 0, out
    direct = drive(played, 150)
    assert board_text(direct) in out
    assert "tick 150" in out
    assert "alive players: 0 (bot0), 1 (bot1)" in out
    for a in direct.agents():
        assert (
            f"player {a.player} (bot{a.player}) agent {a.index}: ({a.x}, {a.y}) facing {a.facing.name}" in out
        )


def test_cli_show_end_shows_the_result(made: tuple[Path, list[dict[int, Any]]]) -> None:
    code, out = invoke("replay", "show", str(made[0]))
    assert code == 0, out
    assert f"game ended at tick {TICKS}: draw (tick cap {TICKS} reached)" in out
    assert "match result" not in out  # the same as the game's


def test_cli_show_errors(made: tuple[Path, list[dict[int, Any]]], tmp_path: Path) -> None:
    code, out = invoke("replay", "show", str(made[0]), "--tick", "9999")
    assert code == 1 and f"the last tick is {TICKS}" in out
    bad = tmp_path / "bad.replay"
    bad.write_bytes(b"nonsense")
    code, out = invoke("replay", "show", str(bad), "--tick", "3")
    assert code == 1 and f"error: {bad}: not a cellarena replay" in out


def test_cli_verify_exit_codes(made: tuple[Path, list[dict[int, Any]]], copy: Path, tmp_path: Path) -> None:
    code, out = invoke("replay", "verify", str(made[0]))
    assert (code, out.strip()) == (0, f"ok: {TICKS} ticks verified")

    recs = records(copy)
    recs[42]["hash"] = "0" * 32
    write_records(copy, recs)
    code, out = invoke("replay", "verify", str(copy))
    assert code == 1 and out.startswith("mismatch at tick 42: state hash")

    empty = tmp_path / "empty.replay"
    empty.write_bytes(b"")
    code, out = invoke("replay", "verify", str(empty))
    assert code == 1 and f"error: {empty}: empty file" in out

    code, out = invoke("replay", "verify", str(made[0]), str(empty))
    assert code == 1 and f"{made[0]}: ok: {TICKS} ticks verified" in out

    code, out = invoke("replay", "verify")
    assert code == 2  # usage error: no PATH


def test_cli_verify_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "cut.replay"
    play(path, ticks=40, finish=False)
    code, out = invoke("replay", "verify", str(path))
    assert code == 1 and out.startswith(
        "incomplete: 40 ticks verified; the file ends without a result record"
    )
    code, _ = invoke("replay", "verify", "--allow-incomplete", str(path))
    assert code == 0


def test_gzipped_replay_cut_short_reads_as_incomplete(
    made: tuple[Path, list[dict[int, Any]]], tmp_path: Path
) -> None:
    data = gzip.compress(made[0].read_bytes())
    gz = tmp_path / "cut.replay.gz"
    gz.write_bytes(data[: len(data) * 2 // 3])
    rep = read_replay(gz)
    assert not rep.complete and 0 < len(rep.ticks) < TICKS
    assert rep.truncated is not None and rep.truncated.endswith("(the gzip stream is cut off)")
    assert verify(rep).ok
