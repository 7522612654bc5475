"""`ladder backup` and `ladder restore` (docs/ladder.md, "Backups"), on a SQLite file and on a real
PostgreSQL server: a ladder with owners, bots, matches, replays and an archive, backed up while its
database is held open by a writer, restored into an empty folder and database, is the same ladder
(standings, replays byte for byte and re-simulated, owners, bots and their tokens). Bad archives and
non-empty targets are refused, naming what is wrong. The doc's commands, the plain tools' included,
run as written."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellarena_cli import ROOT, invoke, line_within
from ladder_checks import assert_consistent
from postgres_server import PostgresServer, find_bindir

from cellarena.arena.cli.ladder.where import DB_FILE
from cellarena.arena.ladder.accounts.owners import Accounts
from cellarena.arena.ladder.ops import pg_tools
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, SeatResult
from cellarena.arena.ladder.store.replay_files import check_replays, replay_path, write_new
from cellarena.arena.ladder.store.schema import CURRENT_VERSION
from cellarena.arena.ladder.submissions.archives import ArchiveStore

GAME = "rezzo"
PASSWORD = "correct horse battery"
ARCHIVE = b"an uploaded bot's archive, by its bytes"


@pytest.fixture(scope="module")
def replay() -> bytes:
    """A real Rezzo replay (tests/fixtures/replays_v1), the bytes of every match's replay here."""
    return (ROOT / "tests" / "fixtures" / "replays_v1" / "rezzo.replay").read_bytes()


@pytest.fixture(params=["sqlite", "postgresql"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def new_database(kind: str, request: pytest.FixtureRequest) -> str | None:
    """None for a SQLite ladder (the file in its folder), else a new, empty PostgreSQL database."""
    if kind == "sqlite":
        return None
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


def where(folder: Path, db: str | None) -> list[str]:
    return ["ladder", "--dir", str(folder), *(["--db", db] if db else [])]


def target(folder: Path, db: str | None) -> str:
    return db or str(folder / DB_FILE)


@dataclasses.dataclass
class Ladder:
    folder: Path
    db: str | None
    tokens: dict[str, str]
    archive: str


def make_ladder(folder: Path, db: str | None, replay: bytes) -> Ladder:
    """A ladder as `ladder serve` and `ladder web` leave it: an owner and their bot, two bots of the
    host, four matches with replays, one under way, an uploaded archive; and beside them what a
    backup leaves out (results in flight, logs, the session key, a replay newer than the database)."""
    (folder / "replays").mkdir(parents=True)
    with LadderStore(target(folder, db)) as store:
        accounts = Accounts(store)
        olive = accounts.sign_up("olive", PASSWORD, policy="open")
        alice, alice_token = accounts.create_bot(olive, "alice", GAME, max_bots=3)
        (bob, bob_token), (carol, carol_token) = store.add_bot("bob", GAME), store.add_bot("carol", GAME)
        for seats, ranks in (((alice, bob), (1, 2)), ((bob, carol), (1, 1)), ((carol, alice), (1, 2)),
                             ((alice, bob, carol), (2, 1, 3))):  # fmt: skip
            match_id = store.begin_match(GAME, "arena", 7, [b.id for b in seats])
            write_new(replay_path(folder / "replays", match_id), replay)
            results = [SeatResult(r) for r in ranks]
            store.finish_match(match_id, results, reason="the game ended", ticks=30, settle=settle)
        store.begin_match(GAME, "arena", 8, [alice.id, carol.id])  # under way at the backup
    archive = ArchiveStore(folder / "archives").put(ARCHIVE, "tar.gz")
    (folder / "pending-results" / GAME).mkdir(parents=True)
    (folder / "pending-results" / GAME / "000000001-match-5.result").write_bytes(b"in flight")
    (folder / "logs").mkdir()
    (folder / "logs" / "house-bob.log").write_text("a house bot's output")
    (folder / "session.key").write_bytes(b"k" * 32)
    tokens = {"alice": alice_token.secret, "bob": bob_token.secret, "carol": carol_token.secret}
    return Ladder(folder, db, tokens, archive)


def standings(folder: Path, db: str | None) -> list[dict[str, object]]:
    code, out = invoke(*where(folder, db), "standings", GAME, "--json")
    assert code == 0, out
    table: list[dict[str, object]] = json.loads(out)["standings"]
    return table


def run_json(*args: str) -> tuple[int, dict[str, object]]:
    code, out = invoke(*args, "--json")
    return code, json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------- a whole round trip
def test_a_restored_ladder_is_the_same_ladder(
    tmp_path: Path, kind: str, replay: bytes, request: pytest.FixtureRequest
) -> None:
    ladder = make_ladder(tmp_path / "ladder", new_database(kind, request), replay)
    out = tmp_path / "backups" / "ladder.tar.gz"
    out.parent.mkdir()
    # The ladder's server holds the database while the backup runs, and its last write is in SQLite's
    # WAL, not yet in the database's file.
    with LadderStore(target(ladder.folder, ladder.db)) as running:
        running.claim_server(GAME)
        ladder.tokens["dave"] = running.add_bot("dave", GAME)[1].secret
        before = standings(ladder.folder, ladder.db)
        if kind == "sqlite":
            assert (ladder.folder / f"{DB_FILE}-wal").stat().st_size > 0
        write_new(replay_path(ladder.folder / "replays", 99), replay)  # begun after the snapshot
        code, backed = run_json(*where(ladder.folder, ladder.db), "backup", "--out", str(out))
    assert code == 0, backed
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and not out.with_name("ladder.tar.gz.tmp").exists()
    manifest = backed["manifest"]
    assert isinstance(manifest, dict)
    assert (manifest["kind"], manifest["schema_version"], manifest["games"]) == (
        kind,
        CURRENT_VERSION,
        [GAME],
    )
    assert manifest["counts"] | {} == {
        "bots": 4, "owners": 1, "matches": 5, "versions": 0, "challenges": 0, "seasons": 0,
        "replays": 4, "archives": 1, "files": 5,
    }  # fmt: skip
    assert set(manifest["left_out"]) == {"pending-results", "logs", "session.key", "replays (newer)"}

    restored = tmp_path / "restored"
    restored_db = new_database(kind, request)
    code, said = run_json(*where(restored, restored_db), "restore", str(out))
    assert code == 0, said
    assert standings(restored, restored_db) == before
    assert_consistent(target(restored, restored_db), GAME)
    files = sorted(p.relative_to(restored).as_posix() for p in restored.rglob("*") if p.is_file())
    replays = [f"replays/ladder-{n:06d}.replay" for n in (1, 2, 3, 4)]
    assert files == sorted([f"archives/{ladder.archive[:2]}/{ladder.archive}.tar.gz", *replays]
                           + ([DB_FILE] if kind == "sqlite" else []))  # fmt: skip
    assert all((restored / r).read_bytes() == replay for r in replays)
    code, verified = run_json("replay", "verify", *(str(restored / r) for r in replays))
    assert code == 0 and verified["ok"] is True and len(verified["replays"]) == 4  # type: ignore[arg-type]
    assert ArchiveStore(restored / "archives").read(ladder.archive, "tar.gz") == ARCHIVE
    with LadderStore(target(restored, restored_db)) as store:
        for name, token in ladder.tokens.items():
            bot = store.authenticate(token)
            assert bot is not None and bot.name == name  # a bot's old token still works
        accounts = Accounts(store)
        assert accounts.check_password("olive", PASSWORD).name == "olive"
        assert accounts.owner_of("alice") == "olive"
        running = store.match(5)
        assert running is not None and running.status == "running"  # `serve` voids it, as after a stop
        assert store.highest_match_id() == 5
        check_replays(store, restored / "replays")  # `serve` starts: no replay beyond the database's ids


def test_a_backup_taken_while_results_are_written_is_consistent(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """tests/ladder_writer.py finishes matches as fast as it can while the backup runs: the restored
    database is one moment of it (every finished match settled, ratings that replay from its seats)."""
    db = new_database(kind, request)
    folder = tmp_path / "ladder"
    folder.mkdir()
    writer = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "ladder_writer.py"), target(folder, db), "7"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_results(writer, 20)
        code, backed = run_json(*where(folder, db), "backup", "--out", str(tmp_path / "b.tar.gz"))
        wait_for_results(writer, 5)  # it went on writing while the backup ran, and after
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert code == 0, backed
    restored, restored_db = tmp_path / "restored", new_database(kind, request)
    code, said = run_json(*where(restored, restored_db), "restore", str(tmp_path / "b.tar.gz"))
    assert code == 0, said
    assert_consistent(target(restored, restored_db), GAME)
    manifest = backed["manifest"]
    assert isinstance(manifest, dict) and manifest["counts"]["matches"] >= 20
    with LadderStore(target(restored, restored_db)) as store:
        assert store.highest_match_id() == manifest["highest_match"]


def wait_for_results(writer: subprocess.Popen[str], count: int) -> None:
    """Read the writer's output until ``count`` more matches are finished, under a deadline."""
    assert writer.stdout is not None
    deadline = time.monotonic() + 120
    while count > 0:
        left = max(0.0, deadline - time.monotonic())
        line = line_within(writer.stdout, left, f"{count} more finished matches from the writer")
        assert line, f"the writer stopped (exit status {writer.poll()})"
        count -= line.startswith("finished")


# ---------------------------------------------------------------------------------- refusals
@pytest.fixture(scope="module")
def sqlite_backup(tmp_path_factory: pytest.TempPathFactory, replay: bytes) -> Path:
    root = tmp_path_factory.mktemp("sqlite-backup")
    ladder = make_ladder(root / "ladder", None, replay)
    code, out = invoke(*where(ladder.folder, None), "backup", "--out", str(root / "ladder.tar.gz"))
    assert code == 0, out
    return root / "ladder.tar.gz"


def restore_fails(folder: Path, db: str | None, archive: Path) -> str:
    code, said = run_json(*where(folder, db), "restore", str(archive))
    assert code == 1, said
    error = said["error"]
    assert isinstance(error, str) and "Traceback" not in error
    return error


def test_a_non_empty_folder_or_database_is_refused_and_left_as_it_was(
    tmp_path: Path, sqlite_backup: Path, replay: bytes, request: pytest.FixtureRequest
) -> None:
    busy = tmp_path / "busy"
    (busy / "replays").mkdir(parents=True)
    (busy / "notes.txt").write_text("mine")
    error = restore_fails(busy, None, sqlite_backup)
    assert f"{busy}: the folder is not empty (it holds notes.txt, replays/)" in error and "move" in error
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt", "replays"]
    # A PostgreSQL backup into a database that has a ladder already.
    pg = make_ladder(tmp_path / "pg", new_database("postgresql", request), replay)
    code, out = invoke(*where(pg.folder, pg.db), "backup", "--out", str(tmp_path / "pg.tar.gz"))
    assert code == 0, out
    error = restore_fails(tmp_path / "new", pg.db, tmp_path / "pg.tar.gz")
    assert "the database is not empty (it has the tables audit, bots" in error and "createdb" in error
    assert not (tmp_path / "new").exists()
    # Each kind to its own kind.
    error = restore_fails(tmp_path / "new", None, tmp_path / "pg.tar.gz")
    assert "a backup of a PostgreSQL ladder" in error and "--db" in error
    error = restore_fails(tmp_path / "new", pg.db, sqlite_backup)
    assert "a backup of a SQLite ladder; restore it without --db" in error
    assert not (tmp_path / "new").exists()


def rewritten(archive: Path, out: Path, change: dict[str, object], extra: str | None = None) -> Path:
    """``archive`` with its manifest changed by ``change``, everything else as it was, and a file
    named ``extra`` at its end."""
    with tarfile.open(archive) as source, tarfile.open(out, "w:gz") as tar:
        for member in source:
            data = source.extractfile(member)
            assert data is not None
            body = data.read()
            if member.name == "manifest.json":
                body = json.dumps(json.loads(body) | change).encode()
                member.size = len(body)
            tar.addfile(member, io.BytesIO(body))
        if extra is not None:
            tar.addfile(tarfile.TarInfo(extra), io.BytesIO(b""))
    return out


def test_bad_archives_are_refused_naming_the_file(tmp_path: Path, sqlite_backup: Path) -> None:
    whole = sqlite_backup.read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    error = restore_fails(tmp_path / "a", None, truncated)
    assert error.startswith(f"{truncated}: the archive is truncated or damaged") and "whole copy" in error
    wrong = tmp_path / "notes.txt"
    wrong.write_text("not a backup at all\n" * 50)
    assert restore_fails(tmp_path / "b", None, wrong) == (
        f"{wrong}: not a cellarena ladder backup (not a tar archive, as `ladder backup --out` writes)"
    )
    other_tar = tmp_path / "other.tar.gz"
    with tarfile.open(other_tar, "w:gz") as tar:
        tar.add(wrong, arcname="notes.txt")
    assert "does not begin with manifest.json" in restore_fails(tmp_path / "c", None, other_tar)
    missing = restore_fails(tmp_path / "d", None, tmp_path / "nowhere.tar.gz")
    assert "nowhere.tar.gz: no such file" in missing
    newer = rewritten(sqlite_backup, tmp_path / "newer.tar.gz", {"schema_version": CURRENT_VERSION + 1,
                                                                  "cellarena": "99.0"})  # fmt: skip
    error = restore_fails(tmp_path / "e", None, newer)
    assert f"schema version {CURRENT_VERSION + 1}" in error and "cellarena>=99.0" in error
    tampered = rewritten(sqlite_backup, tmp_path / "tampered.tar.gz", {"database_sha256": "0" * 64})
    assert "does not match the manifest's SHA-256" in restore_fails(tmp_path / "f", None, tampered)
    hostile = rewritten(sqlite_backup, tmp_path / "hostile.tar.gz", {}, extra="folder/../../escaped")
    assert "an entry that may not be restored" in restore_fails(tmp_path / "g", None, hostile)
    assert not (tmp_path.parent / "escaped").exists()
    assert not any(p.name in "abcdefg" for p in tmp_path.iterdir())  # no folder, not even half of one
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    code, out = invoke(
        "ladder", "--dir", str(tmp_path / "none"), "backup", "--out", str(tmp_path / "x.tar.gz")
    )
    assert code == 1 and f"{tmp_path / 'none' / DB_FILE}: no ladder database there" in out


def test_an_older_schema_is_brought_forward(tmp_path: Path) -> None:
    """On SQLite: the migrations a restore runs are the store's, tested on both databases there."""
    from test_ladder_store import make_v1_database

    folder, db = tmp_path / "old", None
    folder.mkdir()
    alice_token, _ = make_v1_database(target(folder, db))
    code, backed = run_json(*where(folder, db), "backup", "--out", str(tmp_path / "v1.tar.gz"))
    assert code == 0, backed
    assert backed["manifest"]["schema_version"] == 1  # type: ignore[index]  # the backup changes nothing
    restored, restored_db = tmp_path / "restored", None
    code, said = run_json(*where(restored, restored_db), "restore", str(tmp_path / "v1.tar.gz"))
    assert code == 0, said
    with LadderStore(target(restored, restored_db), create=False) as store:
        assert store.schema_version == CURRENT_VERSION
        alice = store.authenticate(alice_token)
        assert alice is not None and alice.name == "alice"
        assert [(s.bot, s.matches) for s in store.standings(GAME)] == [("alice", 1), ("bob", 1)]


# ---------------------------------------------------------------------------------- PostgreSQL's tools
def test_the_password_reaches_pg_dump_in_a_private_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in pg_dump records what it was given: no password in its argv or environment, a
    PGPASSFILE of mode 0600 that holds it (':' and '\\' escaped), removed once the program ended."""
    seen = tmp_path / "seen.json"
    fake = tmp_path / "bin" / "pg_dump"
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, stat, sys\n"
        "f = os.environ['PGPASSFILE']\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ), 'file': open(f).read(),"
        f" 'mode': stat.S_IMODE(os.stat(f).st_mode)}}, open({str(seen)!r}, 'w'))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PGPASSWORD", "stale")
    pg_tools.run(
        "pg_dump", "postgresql://ladder:s3%3Acr%5Cet@dbhost:5433/ladder?sslmode=require", ["--format=custom"]
    )
    got = json.loads(seen.read_text())
    assert got["argv"][1:] == [
        "--format=custom",
        "--dbname=postgresql://ladder@dbhost:5433/ladder?sslmode=require",
    ]
    assert got["file"] == "*:*:*:*:s3\\:cr\\\\et\n" and got["mode"] == 0o600
    assert (
        not any("s3:cr" in v or "s3%3Acr" in v for v in got["env"].values())
        and "PGPASSWORD" not in got["env"]
    )
    assert not Path(got["env"]["PGPASSFILE"]).exists()


def test_a_missing_pg_dump_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither on PATH nor where Debian keeps it: the error names the program and its package."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(pg_tools, "DEBIAN_ROOT", tmp_path / "postgresql")
    (tmp_path / "postgresql" / "16" / "bin").mkdir(parents=True)
    (tmp_path / "postgresql" / "16" / "bin" / "psql").touch()  # another program only
    folder = tmp_path / "ladder"
    folder.mkdir()
    code, out = invoke(
        *where(folder, "postgresql://ladder@127.0.0.1:1/ladder"), "backup", "--out", str(tmp_path / "b")
    )
    assert code == 1 and "pg_dump was not found on PATH nor in /usr/lib/postgresql/*/bin" in out
    assert "postgresql-client" in out and not (tmp_path / "b").exists()
    (tmp_path / "postgresql" / "16" / "bin" / "pg_dump").touch()
    assert pg_tools.find_program("pg_dump") == tmp_path / "postgresql" / "16" / "bin" / "pg_dump"


# ---------------------------------------------------------------------------------- the doc's commands
def doc_blocks() -> list[str]:
    text = (ROOT / "docs" / "ladder.md").read_text()
    section = text.split("\n### Backups\n", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)


@pytest.fixture
def doc_shell(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """The doc's placeholders, each for a path under ``tmp_path``, and an environment that has this
    checkout's `cellarena` and PostgreSQL's programs on PATH."""
    bindir = find_bindir()
    path = [str(Path(sys.executable).parent), *([str(bindir)] if bindir else []), os.environ["PATH"]]
    (tmp_path / "backups").mkdir()
    names = {
        "/srv/ladder": "ladder",
        "/srv/ladder-restored": "restored",
        "/srv/ladder-restored-pg": "restored-pg",
    }
    names["/backups"] = "backups"
    yield {k: str(tmp_path / v) for k, v in names.items()}, os.pathsep.join(path)


def run_block(block: str, names: dict[str, str], path: str) -> None:
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    script = pattern.sub(lambda m: names[m[0]], block)
    env = {**os.environ, "PATH": path}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, f"{block}\n{proc.stdout}\n{proc.stderr}"


def test_the_docs_commands_run_as_written(
    doc_shell: tuple[dict[str, str], str], replay: bytes, request: pytest.FixtureRequest
) -> None:
    names, path = doc_shell
    server: PostgresServer = request.getfixturevalue("postgres_server")
    source, into, plain_into = (server.create_database() for _ in range(3))
    names |= {"postgresql://ladder@dbhost/ladder": source, "postgresql://ladder@dbhost/ladder_restored": into}
    blocks = doc_blocks()
    assert len(blocks) == 4, blocks
    # One folder serves both ladders here: the SQLite file and the PostgreSQL database beside it.
    folder = Path(names["/srv/ladder"])
    make_ladder(folder, None, replay)
    make_ladder(folder / "pg-half", source, replay)  # the database; its folder is a throwaway
    sqlite_table, pg_table = standings(folder, None), standings(folder, source)
    backup, restore, plain_sqlite, plain_pg = blocks
    run_block(backup, names, path)
    run_block(restore, names, path)
    assert standings(Path(names["/srv/ladder-restored"]), None) == sqlite_table
    assert standings(Path(names["/srv/ladder-restored-pg"]), into) == pg_table
    # SQLite's own backup, put back by hand: the file and the replays.
    run_block(plain_sqlite, names, path)
    by_hand = folder.parent / "by-hand"
    by_hand.mkdir()
    (by_hand / DB_FILE).write_bytes((folder.parent / "backups" / "ladder.sqlite").read_bytes())
    with tarfile.open(folder.parent / "backups" / "ladder-folder.tar.gz") as tar:
        tar.extractall(by_hand, filter="data")
    assert standings(by_hand, None) == sqlite_table
    assert (by_hand / "replays" / "ladder-000001.replay").read_bytes() == replay
    # pg_dump and pg_restore, into a third database.
    names["postgresql://ladder@dbhost/ladder_restored"] = plain_into
    names["/srv/ladder-restored"] = str(folder.parent / "restored-plain")
    run_block(plain_pg, names, path)
    assert standings(folder.parent / "restored-plain", plain_into) == pg_table
