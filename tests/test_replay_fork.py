"""`cellarena replay fork`: a new match from a replay's state at tick N.

The origins are short matches played in-process (`replay_fork_play`). A fork whose seats all replay
their recorded moves runs through the match server in this process (a listener, no bot process);
a fork with a new bot is one end-to-end run of the command; bad requests go through click's runner.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest
import trio
from cellarena_cli import ROOT, cellarena, invoke
from replay_fork_play import ENVS, play

from cellarena.server.play.match import TickSettings
from cellarena.server.replay import (
    LENGTH,
    Replay,
    ReplayError,
    board_at,
    file_digest,
    read_replay,
    verify,
)
from cellarena.server.replay_fork import plan_fork, play_fork

PLANNER = f"python {ROOT / 'example_bots' / 'drop2df' / 'planner.py'}"


@pytest.fixture(scope="module")
def origins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fork-origins")
    made = {}
    for game in ENVS:
        made[game] = folder / f"{game}.replay"
        play(game, made[game])
    return made


def fork_in_process(origin: Path, tick: int, out: Path) -> Replay:
    """Every seat replaying its recorded moves from ``tick``, through the match server."""
    plan = plan_fork(str(origin), tick, ())
    settings = TickSettings(fast=True, budget_ms=1000)
    trio.run(lambda: play_fork(plan, out, settings, log_dir=out.parent / f"{out.name}.logs"))
    return read_replay(out)


def middle(replay: Replay) -> int:
    return replay.ticks[len(replay.ticks) // 2].tick


@pytest.mark.parametrize("game", sorted(ENVS))
def test_a_fork_replaying_every_seat_reproduces_the_hashes_from_its_tick(
    game: str, origins: dict[str, Path], tmp_path: Path
) -> None:
    origin = read_replay(origins[game])
    tick = middle(origin)
    fork = fork_in_process(origins[game], tick, tmp_path / "fork.replay")
    assert [(t.tick, t.hash) for t in fork.ticks] == [
        (t.tick, t.hash) for t in origin.ticks if t.tick >= tick
    ]
    assert [t.moves for t in fork.ticks] == [t.moves for t in origin.ticks if t.tick >= tick]
    assert fork.start_tick == tick and fork.names == origin.names
    assert fork.header["forked_from"]["tick"] == tick
    assert fork.header["forked_from"]["replay"] == origins[game].name
    assert fork.header["forked_from"]["sha256"] == file_digest(origins[game])
    assert fork.result is not None and origin.result is not None
    assert fork.result["engine_result"] == origin.result["engine_result"]
    report = verify(fork)
    assert report.ok and report.complete, report.summary()


def test_a_fork_of_a_fork_verifies_from_the_first_origins_start(
    origins: dict[str, Path], tmp_path: Path
) -> None:
    first = fork_in_process(origins["cata"], 4, tmp_path / "first.replay")
    second = fork_in_process(tmp_path / "first.replay", 10, tmp_path / "second.replay")
    assert [m["tick"] for m in second.header["forked_from"]["moves"]] == list(range(10))
    assert second.ticks[0].hash == next(t.hash for t in first.ticks if t.tick == 10)
    assert verify(second).ok
    assert board_at(second, 12).state_hash() == board_at(read_replay(origins["cata"]), 12).state_hash()


def test_a_fork_whose_prefix_was_changed_does_not_verify(origins: dict[str, Path], tmp_path: Path) -> None:
    fork_in_process(origins["drop2df"], 6, tmp_path / "fork.replay")
    records = _records(tmp_path / "fork.replay")
    moves = records[0]["forked_from"]["moves"]
    moves[2]["moves"] = {s: m for s, m in moves[3]["moves"].items()}  # another tick's moves
    changed = tmp_path / "changed.replay"
    _write(changed, records)
    report = verify(read_replay(changed))
    assert not report.ok and report.mismatch is not None
    assert report.mismatch.what == "starting state hash"


def test_a_bad_forked_from_field_is_named(origins: dict[str, Path], tmp_path: Path) -> None:
    fork_in_process(origins["drop2df"], 6, tmp_path / "fork.replay")
    records = _records(tmp_path / "fork.replay")
    records[0]["forked_from"]["moves"][1] = {"tick": "one", "moves": {}}
    _write(tmp_path / "bad.replay", records)
    with pytest.raises(ReplayError, match=r"header, forked_from, moves\[1\]: field 'tick' must be int"):
        read_replay(tmp_path / "bad.replay")


def test_old_replays_fork_and_the_fork_reads_as_any_version_2_replay(tmp_path: Path) -> None:
    old = ROOT / "tests" / "fixtures" / "replays_v1" / "drop2df.replay"
    fork = fork_in_process(old, 5, tmp_path / "fork.replay")
    assert read_replay(old).version == 1 and fork.version == 2
    assert verify(fork).ok
    # A reader that knows nothing of forks sees a version 2 replay starting at tick 5: every record
    # is of a known type with every field it requires; `forked_from` is one more optional field.
    records = _records(tmp_path / "fork.replay")
    assert [r["type"] for r in records] == ["header"] + ["tick"] * len(fork.ticks) + ["result"]
    assert records[0]["start_tick"] == 5
    code, out = invoke("replay", "show", str(tmp_path / "fork.replay"))
    assert code == 0, out


def test_the_command_forks_with_a_new_bot_which_plays_on(origins: dict[str, Path], tmp_path: Path) -> None:
    origin = read_replay(origins["drop2df"])
    out = tmp_path / "fork.replay"
    proc = cellarena(
        "replay", "fork", str(origins["drop2df"]), "--tick", "3", "--bot", f"1:planner={PLANNER}",
        "--out", str(out), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["forked_from"] == {"replay": str(origins["drop2df"]), "tick": 3}
    assert summary["failed"] == [] and summary["out"] == str(out)
    fork = read_replay(out)
    assert fork.names == ["p0", "planner"]
    assert fork.header["forked_from"]["replay"] == "drop2df.replay"
    assert fork.header["forked_from"]["sha256"] == file_digest(origins["drop2df"])
    assert fork.start_tick == 3 and fork.complete
    assert fork.ticks[-1].tick == origin.ticks[-1].tick  # played on to the end
    # Seat 0 replays its recorded moves; seat 1 is the planner's, which chose otherwise.
    recorded = {t.tick: t.moves for t in origin.ticks}
    assert all(t.moves.get(0) == recorded[t.tick].get(0) for t in fork.ticks)
    assert any(t.moves.get(1) != recorded[t.tick].get(1) for t in fork.ticks)
    report = verify(fork)
    assert report.ok and report.complete, report.summary()


@pytest.mark.parametrize(
    ("args", "option", "words"),
    [
        (["--tick", "99"], "--tick", "tick 99 is past the end; the last tick is 12"),
        (["--tick", "-1"], "--tick", "the tick must be 0 or more"),
        (["--tick", "12"], "--tick", "the match is over at tick 12"),
        (["--tick", "3", "--bot", "2=python x.py"], "--bot", "the replay has no seat 2; its seats are 0..1"),
        (["--tick", "3", "--bot", "one=python x.py"], "--bot", "is not SEAT=COMMAND"),
        (["--tick", "3", "--bot", "0=no-such-program-x"], "--bot", "cannot start 'no-such-program-x'"),
        (["--tick", "3", "--bot", "0=python a.py", "--bot", "0=python b.py"], "--bot", "seat 0 is given two"),
        (["--tick", "3", "--bot", "1:p0=python a.py"], "--bot", "repeated: p0"),
    ],
)
def test_bad_requests_name_the_option(
    args: list[str], option: str, words: str, origins: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "fork.replay"
    code, text = invoke("replay", "fork", str(origins["drop2df"]), *args, "--out", str(out))
    assert code == 2, text
    assert f"Invalid value for {option}" in text and words in text
    assert not out.exists()


def test_a_replay_that_fails_verification_is_refused(origins: dict[str, Path], tmp_path: Path) -> None:
    records = _records(origins["drop2df"])
    records[5]["hash"] = "0" * len(records[5]["hash"])
    bad = tmp_path / "bad.replay"
    _write(bad, records)
    code, text = invoke("replay", "fork", str(bad), "--tick", "2", "--out", str(tmp_path / "fork.replay"))
    assert code == 1
    assert f"error: {bad}: does not verify (mismatch at tick 4: state hash" in text
    code, text = invoke("replay", "fork", str(bad), "--tick", "2", "--out", str(bad))
    assert code == 2 and "Invalid value for --out" in text


def _records(path: Path) -> list[dict]:
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (size,) = LENGTH.unpack_from(data, at)
        out.append(msgpack.unpackb(data[at + LENGTH.size : at + LENGTH.size + size], strict_map_key=False))
        at += LENGTH.size + size
    return out


def _write(path: Path, records: list[dict]) -> None:
    with open(path, "wb") as f:
        for record in records:
            body = msgpack.packb(record, use_bin_type=True)
            f.write(LENGTH.pack(len(body)) + body)
