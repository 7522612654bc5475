"""Matches as a dataset (issue 45, point 3): `cellarena replay export` writes one row per seat and tick
of the replays as hive-partitioned Parquet, with a card whose schema is the files' schema; debug
drawings never reach it; bad input is a clear error and writes nothing.

The replays are made here, in-process, from the version 1 fixtures' matches (one short match per
game), and exported once for the module.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from cellarena_cli import here

from cellarena.sdk.games import cata, cloth, colorblocks, drop2df, rezzo
from cellarena.server.dataset.export import DatasetError, DatasetWriter, export_replays
from cellarena.server.dataset.fields import (
    FIELDS,
    METADATA_KEY,
    PARTITIONS,
    SCHEMA_VERSION,
    arrow_type,
    partitioning,
)
from cellarena.server.games import get_engine
from cellarena.server.replay import Replay, ReplayWriter, read_replay, strip_debug

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "replays_v1"
GAMES = ["cata", "cloth", "colorblocks", "drop2df", "rezzo"]
DOC = ROOT / "docs" / "datasets.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
SECRET = "my-secret-plan"


def write_replay(path: Path, game: str, debug_every: int = 0) -> Replay:
    """A version 2 replay (events recorded) of the match of ``game``'s fixture; with ``debug_every``,
    seat 0 draws on every such tick."""
    old = read_replay(FIXTURES / f"{game}.replay")
    engine = get_engine(game).new(old.config, old.seed)
    writer = ReplayWriter(path, engine, seed=old.seed, names=old.names, events=True)
    for i, t in enumerate(old.ticks):
        drawn = {0: {"text": [f"{SECRET} {i}"]}} if debug_every and i % debug_every == 0 else None
        writer.record(t.tick, t.moves, engine, events=engine.apply(t.moves).log, debug=drawn)
    result = engine.result()
    assert result is not None
    writer.finish(result)
    return read_replay(path)


def load(out: Path) -> Any:
    return ds.dataset(
        out, format="parquet", partitioning=partitioning(), ignore_prefixes=[".", "_", "README"]
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Replay]]:
    root = tmp_path_factory.mktemp("dataset")
    (root / "replays" / "more").mkdir(parents=True)
    replays = {
        g: write_replay(root / "replays" / ("more" if g == "rezzo" else "") / f"{g}.replay", g) for g in GAMES
    }
    export_replays([root / "replays"], root / "matches")
    return root, replays


def test_one_row_per_seat_and_tick_of_each_game(exported: tuple[Path, dict[str, Replay]]) -> None:
    root, replays = exported
    table = load(root / "matches").to_table()
    for game, rep in replays.items():
        rows = table.filter(ds.field("game") == game).to_pylist()
        assert len(rows) == rep.players * len(rep.ticks), game
        assert sorted((r["tick"], r["seat"]) for r in rows) == sorted(
            (t.tick, s) for t in rep.ticks for s in range(rep.players)
        )
        assert {r["match"] for r in rows} == {game} and {r["bot"] for r in rows} == set(rep.names)
        assert all(r["seed"] == rep.seed and r["players"] == rep.players for r in rows)
        # Every tick someone was asked, and what was applied is the replay's move.
        by_tick = {t.tick: t for t in rep.ticks}
        assert {r["tick"] for r in rows if r["observation"] is not None} == set(by_tick)
        for r in rows:
            move = by_tick[r["tick"]].moves.get(r["seat"])
            got = None if r["action"] is None else msgpack.unpackb(r["action"], strict_map_key=False)
            assert got == move
        # The outcome: on each seat's last row, as the result ranks the seats.
        assert rep.result is not None
        last = [r for r in rows if r["done"]]
        assert sorted(r["seat"] for r in last) == list(range(rep.players))
        for r in last:
            rank = rep.result["ranks"][r["seat"]]
            assert r["rank"] == rank and r["reward"] == {"win": 1.0, "loss": -1.0, "draw": 0.0}[r["outcome"]]
        assert all(r["reward"] == 0.0 for r in rows if not r["done"])


def test_observations_are_what_the_server_sends(exported: tuple[Path, dict[str, Replay]]) -> None:
    """The match server sends each seat the engine's ``pending()`` request; re-simulating the cata
    match by hand gives the very bytes exported, tick by tick."""
    root, replays = exported
    rep = replays["cata"]
    table = load(root / "matches").to_table(filter=ds.field("game") == "cata").to_pylist()
    got = {(r["tick"], r["seat"]): r["observation"] for r in table}
    engine = get_engine("cata").new(rep.config, rep.seed)
    for t in rep.ticks:
        pending = engine.pending()
        for seat in range(rep.players):
            want = msgpack.packb(pending[seat], use_bin_type=True) if seat in pending else None
            assert got[(t.tick, seat)] == want
        engine.apply(t.moves)


def sdk_view(game: str, message: dict[str, Any]) -> tuple[np.ndarray, list[int] | None]:
    """What a bot or a training environment makes of a request with the SDK: the arrays ``view`` holds."""
    if game == "rezzo":
        view = rezzo.View.from_message(message)
        ports = [np.frombuffer(rezzo.observation(p), np.uint8).reshape(2, 13, 13) for p in view.viewports]
        return np.array(ports, np.uint8), list(view.agents)
    sdk = {"cata": cata, "cloth": cloth, "colorblocks": colorblocks, "drop2df": drop2df}[game]
    view = sdk.make_view(message)
    if game == "cata":
        return np.asarray(view.board, np.uint8), None
    planes = sdk.observation(view)
    return (np.frombuffer(planes, np.uint8) if game == "drop2df" else planes), None


def test_views_are_the_sdks_arrays_of_the_observation(exported: tuple[Path, dict[str, Replay]]) -> None:
    """Schema 1.1's ``view`` (with ``view_shape``, and Rezzo's ``agents``) is each row's observation as
    the game's SDK module decodes it; rows without an observation have none."""
    root, _ = exported
    shapes = {"rezzo": (1, 2, 13, 13), "cata": (64, 64), "cloth": (2, 64, 64), "colorblocks": (4, 9, 9)}
    for game in GAMES:
        rows = load(root / "matches").to_table(filter=ds.field("game") == game).to_pylist()
        asked = [r for r in rows if r["observation"] is not None]
        assert len(asked) >= 4, game
        unasked = [r for r in rows if r["observation"] is None]
        assert all(r["view"] is r["view_shape"] is r["agents"] is None for r in unasked)
        for r in asked:
            message = {"tick": r["tick"], **msgpack.unpackb(r["observation"], strict_map_key=False)}
            want, agents = sdk_view(game, message)
            got = np.asarray(r["view"], np.uint8).reshape(r["view_shape"])
            assert np.array_equal(got, want) and r["agents"] == agents, (game, r["tick"], r["seat"])
        assert tuple(asked[0]["view_shape"]) == shapes.get(game, (14,)), game


def test_rezzo_rows_carry_its_reward_terms(exported: tuple[Path, dict[str, Replay]]) -> None:
    root, replays = exported
    rows = load(root / "matches").to_table().to_pylist()
    rezzo = [r for r in rows if r["game"] == "rezzo"]
    assert all(r["reward_terms"] is None for r in rows if r["game"] != "rezzo")
    terms = [dict(r["reward_terms"]) for r in rezzo]
    assert all(set(t) == {"own_flags", "enemy_flags", "flag_formed", "own_flag_destroyed",
                          "enemy_flag_destroyed"} for t in terms)  # fmt: skip
    events = replays["rezzo"].events()
    formed = sum(e["kind"] == "flag_formed" for e in events)
    destroyed = sum(e["kind"] == "flag_destroyed" for e in events)
    assert formed and destroyed, "the fixture's match forms and destroys flags"
    assert sum(t["flag_formed"] for t in terms) == formed
    assert sum(t["own_flag_destroyed"] for t in terms) == destroyed
    # Two seats: one's enemy flags are the other's own, tick by tick.
    pairs: dict[int, dict[int, dict[str, float]]] = {}
    for r, t in zip(rezzo, terms, strict=True):
        pairs.setdefault(r["tick"], {})[r["seat"]] = t
    assert all(p[0]["enemy_flags"] == p[1]["own_flags"] for p in pairs.values())


def card_fields(card: str) -> list[tuple[str, str, bool]]:
    return [
        (m[1], m[2], m[3] == "yes")
        for m in re.finditer(r"^\| `(\w+)` \| `([^`]+)` \| (yes|no) \|", card, re.M)
    ]


def test_the_card_states_the_files_schema(exported: tuple[Path, dict[str, Replay]]) -> None:
    root, _ = exported
    card = (root / "matches" / "README.md").read_text()
    assert f"Schema version: {SCHEMA_VERSION}\n" in card
    stated = card_fields(card)
    partitions, columns = stated[: len(PARTITIONS)], stated[len(PARTITIONS) :]
    files = sorted((root / "matches").rglob("*.parquet"))
    assert len(files) == len(GAMES)
    for f in files:
        schema = pq.read_schema(f)
        # Types compared as Arrow types: Parquet names a map's entries after its column when read back.
        assert [(x.name, x.type, x.nullable) for x in schema] == [
            (n, arrow_type(t), z) for n, t, z in columns
        ]
        assert schema.metadata[METADATA_KEY] == str(SCHEMA_VERSION).encode()
    whole = load(root / "matches").schema
    assert [(x.name, str(x.type)) for x in whole][-2:] == [(n, t) for n, t, _ in partitions]
    assert [f.name for f in FIELDS] == [n for n, _, _ in columns]
    # The card's own loader reads it.
    loader = next(b for lang, b in FENCE.findall(card) if lang == "python")
    printed: list[str] = []
    exec(loader.replace('"DATASET"', repr(str(root / "matches"))), {"print": lambda *a: printed.append(a)})
    assert printed == [(356, str(SCHEMA_VERSION).encode())]


def test_the_docs_commands_and_loader_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/datasets.md: its `replay export` command on a folder of replays, then its pyarrow loader."""
    blocks = FENCE.findall(DOC.read_text())
    command = next(b for lang, b in blocks if lang == "sh" and "replay export" in b)
    loader = next(b for lang, b in blocks if lang == "python")
    (tmp_path / "replays").mkdir()
    write_replay(tmp_path / "replays" / "match-00001.replay", "rezzo")
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command.strip())
    assert args[0] == "cellarena"
    ran = here(*args[1:])
    assert ran.exit_code == 0, ran.output
    assert "1 matches, 356 rows" in ran.output
    printed: list[str] = []
    monkeypatch.setattr("builtins.print", lambda *a: printed.append(" ".join(map(str, a))))
    exec(compile(loader, str(DOC), "exec"), {})
    assert printed == [
        "356 rows; the first seat saw ['agents', 'cells', 'damage', 'tick']",
        "its view: (1, 2, 13, 13) for agents [0]",
    ]


def test_debug_drawings_are_never_exported(tmp_path: Path) -> None:
    drawn = write_replay(tmp_path / "drawn.replay", "colorblocks", debug_every=2)
    assert sum(bool(t.debug) for t in drawn.ticks) > 5
    (tmp_path / "stripped").mkdir()
    strip_debug(drawn.path, tmp_path / "stripped" / "drawn.replay")
    export_replays([tmp_path / "drawn.replay"], tmp_path / "a")
    export_replays([tmp_path / "stripped"], tmp_path / "b")
    a, b = load(tmp_path / "a").to_table(), load(tmp_path / "b").to_table()
    assert a.num_rows == b.num_rows and a.equals(b)
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes()
    assert SECRET not in json.dumps(a.drop_columns(["observation", "action"]).to_pylist())


def run(*args: str) -> tuple[int, dict[str, Any]]:
    ran = here("replay", "export", *args, "--json")
    return ran.exit_code, json.loads(ran.output)


def test_bad_input_is_a_clear_error_and_writes_nothing(
    exported: tuple[Path, dict[str, Replay]], tmp_path: Path
) -> None:
    root, replays = exported
    out = tmp_path / "out"
    (tmp_path / "notes.replay").write_text("not a replay\n")
    code, said = run(str(tmp_path / "notes.replay"), "--out", str(out))
    assert (
        code == 1
        and said["error"]
        == f"{tmp_path / 'notes.replay'}: not a cellarena replay (it does not start with a replay header)"
    )
    (tmp_path / "empty").mkdir()
    code, said = run(str(tmp_path / "empty"), "--out", str(out))
    assert code == 1 and "empty: no replay files (*.replay, *.replay.gz) in this folder" in said["error"]
    code, said = run(str(tmp_path / "absent"), "--out", str(out))
    assert code == 1 and "absent: no such file or folder" in said["error"]
    code, said = run(replays["cata"].path, "--out", str(root / "matches"))
    assert code == 1 and "matches: exists and is not empty; give --out a new folder" in said["error"]
    # A replay changed after it was written does not re-simulate: nothing is written at all.
    changed = tmp_path / "changed.replay"
    data = bytearray(Path(replays["cata"].path).read_bytes())
    at = data.rfind(b"hash") + 6
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    changed.write_bytes(bytes(data))
    code, said = run(replays["drop2df"].path, str(changed), "--out", str(out))
    assert code == 1 and said["error"].startswith(
        f"{changed}: does not re-simulate (the state hash differs at tick"
    )
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    # Two replays of one name would be one match.
    (tmp_path / "twin").mkdir()
    (tmp_path / "twin" / "cata.replay").write_bytes(Path(replays["cata"].path).read_bytes())
    code, said = run(replays["cata"].path, str(tmp_path / "twin"), "--out", str(out))
    assert code == 1 and "match 'cata' of cata is already exported from" in said["error"]
    assert not out.exists()


def test_without_pyarrow_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DatasetError, match=r"needs pyarrow: install cellarena\[data\]"):
        DatasetWriter(tmp_path / "out", "test")
    assert not (tmp_path / "out").exists()
