"""Submitted bots' versions in the ladder's database (schema version 12), on SQLite and PostgreSQL
(the `ladder_db` fixture), the one table of their states' moves, and the archive store."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ladder_checks import raw
from test_ladder_store import make_v1_database

from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, MIGRATIONS
from cellarena.arena.ladder.store.version_tables import RevokedBotError, UnknownVersionError, UploadQuotaError
from cellarena.arena.ladder.submissions.archives import ArchiveStore, ArchiveStoreError, digest_of
from cellarena.arena.ladder.submissions.versions import (
    MAX_LOG,
    MOVES,
    STATES,
    VersionMoveError,
    capped_log,
    check_move,
)

GAME = "rezzo"
SHA = "ab" * 32
#: Version 12 as released, frozen.
V12 = (
    "CREATE TABLE versions ( id {id}, bot_id BIGINT NOT NULL REFERENCES bots (id), number INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL, size BIGINT NOT NULL,"
    " archive_kind TEXT NOT NULL CHECK (archive_kind IN ('tar.gz', 'zip')),"
    " state TEXT NOT NULL CHECK (state IN"
    " ('received', 'building', 'validating', 'validated', 'live', 'failed', 'retired')),"
    " build_log TEXT, validation_log TEXT, uploaded_by BIGINT REFERENCES owners (id),"
    " created TEXT NOT NULL, changed TEXT NOT NULL, reason TEXT, UNIQUE (bot_id, number))",
    "CREATE INDEX versions_by_state ON versions (state, id)",
    "CREATE INDEX versions_by_uploader ON versions (uploaded_by, created)",
    "ALTER TABLE bots ADD COLUMN live_version BIGINT REFERENCES versions (id)",
)

#: Version 14 as written, frozen (its notices' lease is tested in test_ladder_mail_store.py).
V14 = (
    "CREATE TABLE builds ( id {id}, version_id BIGINT NOT NULL REFERENCES versions (id),"
    " started TEXT NOT NULL, ended TEXT NOT NULL, seconds DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX builds_by_end ON builds (ended)",
    "ALTER TABLE notices ADD COLUMN claimed_at TEXT",
)


@pytest.fixture
def store(ladder_db: str) -> Iterator[LadderStore]:
    with LadderStore(ladder_db) as s:
        yield s


# -- the states' moves (pure) --------------------------------------------------------------------------
def test_version_9_is_frozen() -> None:
    assert [" ".join(s.split()) for s in MIGRATIONS[11].statements] == [" ".join(s.split()) for s in V12]


def test_version_14_is_frozen() -> None:
    assert [" ".join(s.split()) for s in MIGRATIONS[13].statements] == [" ".join(s.split()) for s in V14]


def test_every_state_is_reached_and_left_by_the_one_table() -> None:
    reached = {"received"} | {s for after in MOVES.values() for s in after}
    assert reached == set(STATES)
    assert all(MOVES[s] for s in STATES)  # no dead end: a failed version can be built again
    assert "live" not in MOVES["received"] | MOVES["building"] | MOVES["validating"] | MOVES["failed"]


def test_a_move_the_table_refuses_says_what_may_follow() -> None:
    assert check_move("x version 1", "validated", "live") == "live"
    with pytest.raises(VersionMoveError, match=r"x version 1 is received: it cannot become live \(after "
                       r"received: building, failed\)"):  # fmt: skip
        check_move("x version 1", "received", "live")
    with pytest.raises(VersionMoveError, match="'done' is no version state"):
        check_move("x version 1", "received", "done")


def test_a_long_log_keeps_its_end() -> None:
    text = "start\n" + "x" * (MAX_LOG * 2) + "\nthe error"
    kept = capped_log(text)
    assert kept is not None and kept.endswith("\nthe error") and len(kept) < MAX_LOG + 100
    assert kept.startswith(f"[... {len(text) - MAX_LOG} characters cut ...]")
    assert capped_log("short") == "short" and capped_log(None) is None


# -- the archive store ---------------------------------------------------------------------------------
def test_archives_are_kept_by_content_once_and_checked_when_read(tmp_path: Path) -> None:
    archives = ArchiveStore(tmp_path / "archives")
    data = b"\x1f\x8b archive bytes"
    sha = archives.put(data, "tar.gz")
    assert sha == digest_of(data)
    path = archives.path(sha, "tar.gz")
    assert path == tmp_path / "archives" / sha[:2] / f"{sha}.tar.gz" and path.read_bytes() == data
    assert archives.put(data, "tar.gz") == sha  # the same bytes: one file
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    assert archives.read(sha, "tar.gz") == data
    path.chmod(0o644)
    path.write_bytes(b"changed")
    with pytest.raises(ArchiveStoreError, match="no longer match its SHA-256"):
        archives.read(sha, "tar.gz")
    with pytest.raises(ValueError, match="not an archive's name"):
        archives.path("../../etc/passwd", "tar.gz")


def test_an_archive_store_that_cannot_write_says_where(tmp_path: Path) -> None:
    (tmp_path / "archives").write_text("a file where the folder goes")
    with pytest.raises(ArchiveStoreError, match="cannot keep the archive"):
        ArchiveStore(tmp_path / "archives").put(b"x", "zip")


# -- the versions table --------------------------------------------------------------------------------
def test_an_older_database_gains_versions_and_keeps_its_bots(ladder_db: str) -> None:
    make_v1_database(ladder_db)
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        assert store.versions_of("alice") == [] and store.live_version("alice") is None
        assert store.add_version("alice", SHA, 10, "zip").number == 1
    with raw(ladder_db) as db:
        assert db.query("SELECT name, live_version FROM bots ORDER BY name") == [
            ("alice", None),
            ("bob", None),
        ]


def test_uploads_are_numbered_per_bot_and_received(store: LadderStore) -> None:
    store.add_bot("ann", GAME)
    store.add_bot("bob", GAME)
    first = store.add_version("ann", SHA, 1234, "tar.gz", actor="ann (api)")
    store.add_version("bob", SHA, 1234, "tar.gz")
    second = store.add_version("ann", "cd" * 32, 99, "zip")
    assert (first.number, second.number, first.state, first.kind, first.size) == (
        1,
        2,
        "received",
        "tar.gz",
        1234,
    )
    assert [v.number for v in store.versions_of("ann")] == [2, 1]
    assert store.versions.version("ann", 1) == first and store.versions.version("ann", 3) is None
    assert store.audit_log(1)[0].action == "upload" and "version 1" in (store.audit_log(5)[-1].detail or "")
    assert first.to_json()["state"] == "received" and "build_log" not in first.to_json()
    with pytest.raises(LadderStoreError, match="no bot named 'nobody'"):
        store.add_version("nobody", SHA, 1, "zip")
    store.revoke("bob")
    with pytest.raises(RevokedBotError, match="bob is revoked: it takes no new versions"):
        store.add_version("bob", SHA, 1, "zip")


def _ann_with_bots_one_and_two(store: LadderStore) -> int:
    """Owner ann (written directly, with no password: argon2 takes a second) and her bots one and
    two; her id."""
    with store.database.writing("add an owner") as db:
        owner_id = int(
            db.query(
                "INSERT INTO owners (name, name_key, password_hash, status, created)"
                " VALUES ('ann', 'ann', 'none', 'active', ?) RETURNING id",
                (datetime.now(UTC).isoformat(),),
            )[0][0]
        )
    for name in ("one", "two"):
        store.add_bot(name, GAME, owner_id=owner_id)
    return owner_id


def test_the_upload_quota_counts_an_owner_across_their_bots(store: LadderStore) -> None:
    owner_id = _ann_with_bots_one_and_two(store)
    store.add_version("one", SHA, 1, "zip", uploaded_by=owner_id, per_day=2)
    assert store.versions.uploads_left("two", 2) == 1
    store.add_version("two", SHA, 1, "zip", per_day=2)  # the bot's owner by default
    refusal = (
        r"its owner has uploaded 2 version\(s\) in the last 24 hours, this ladder's quota of 2 "
        r"\(--uploads-per-day\); the next is possible after 20\d\d-"
    )
    with pytest.raises(UploadQuotaError, match=refusal):
        store.add_version("one", SHA, 1, "zip", uploaded_by=owner_id, per_day=2)
    assert store.versions.uploads_left("one", 2) == 0
    with pytest.raises(UploadQuotaError, match="its owner has uploaded 2"):
        store.versions.check_quota("two", 2)
    assert [v.uploaded_by for v in store.versions_of("two")] == [owner_id]
    store.add_bot("hosts", GAME)  # no owner: counted per bot
    store.add_version("hosts", SHA, 1, "zip", per_day=1)
    with pytest.raises(UploadQuotaError, match="hosts has uploaded 1"):
        store.add_version("hosts", SHA, 1, "zip", per_day=1)


def test_the_builder_takes_the_oldest_received_version_once(store: LadderStore) -> None:
    store.add_bot("ann", GAME)
    store.add_bot("cat", "cata")
    store.add_version("cat", SHA, 1, "zip")
    one = store.add_version("ann", SHA, 1, "zip")
    two = store.add_version("ann", SHA, 1, "zip")
    assert store.versions.next_to_build([GAME]) == store.versions.version_by_id(one.id)
    taken = store.versions.version_by_id(one.id)
    assert taken.state == "building"
    assert store.versions.next_to_build([GAME]).id == two.id  # type: ignore[union-attr]
    assert store.versions.next_to_build([GAME]) is None
    assert store.versions.next_to_build().bot == "cat"  # type: ignore[union-attr]
    assert store.versions.requeue_unfinished() == 3
    again = store.versions.version_by_id(one.id)
    assert again.state == "received" and "built again" in (again.reason or "")


def test_a_validated_version_goes_live_and_replaces_the_one_before(store: LadderStore) -> None:
    store.add_bot("ann", GAME)
    versions = store.versions
    before = store.last_change()
    ids = []
    for n in (1, 2):
        store.add_version("ann", SHA, 1, "zip")
        v = versions.next_to_build()
        assert v is not None and v.number == n
        versions.mark(v.id, "validating", log_text=f"build {n} ok")
        done = versions.mark(v.id, "validated", log_text="played 120 ticks")
        assert (done.state, done.build_log, done.validation_log) == (
            "live",
            f"build {n} ok",
            "played 120 ticks",
        )
        ids.append(v.id)
    assert store.live_version("ann").number == 2  # type: ignore[union-attr]
    first = versions.version_by_id(ids[0])
    assert first.state == "retired" and first.reason == "replaced by version 2"
    assert [c.kind for c in store.changes_since(before)].count("bot_changed") == 2
    # A roll back, then forward again.
    assert store.make_live("ann", 1, actor="ann (owner)").state == "live"
    assert store.live_version("ann").number == 1 and versions.version("ann", 2).state == "retired"  # type: ignore[union-attr]
    assert store.audit_log(1)[0].action == "make live"
    store.make_live("ann", 2)
    assert store.live_version("ann").number == 2  # type: ignore[union-attr]
    # A version validated without going live waits for its owner.
    store.add_version("ann", SHA, 1, "zip")
    third = store.versions.next_to_build()
    assert third is not None
    store.versions.mark(third.id, "validating")
    assert store.versions.mark(third.id, "validated", go_live=False).state == "validated"
    assert store.live_version("ann").number == 2  # type: ignore[union-attr]


def test_a_version_that_is_not_validated_cannot_go_live(store: LadderStore) -> None:
    store.add_bot("ann", GAME)
    store.add_version("ann", SHA, 1, "zip")
    v = store.versions.next_to_build()
    assert v is not None
    with pytest.raises(VersionMoveError, match="ann version 1 is building: it cannot become live"):
        store.make_live("ann", 1)
    failed = store.versions.mark(
        v.id, "failed", reason="the build failed: exit status 2", log_text="E" * (MAX_LOG + 9)
    )
    assert failed.state == "failed" and failed.reason == "the build failed: exit status 2"
    assert failed.build_log is not None and failed.build_log.startswith("[... 9 characters cut ...]")
    assert failed.to_json(logs=True)["build_log"] == failed.build_log
    with pytest.raises(VersionMoveError, match="is failed: it cannot become live"):
        store.make_live("ann", 1)
    with pytest.raises(VersionMoveError, match="it cannot become validating"):
        store.versions.mark(v.id, "validating")
    with pytest.raises(UnknownVersionError, match="ann has no version 7"):
        store.make_live("ann", 7)
    assert store.live_version("ann") is None
    assert store.versions.mark(v.id, "received").state == "received"  # the host builds it again


def test_builders_at_once_never_take_one_version_twice(ladder_db: str, store: LadderStore) -> None:
    """Four builders (four connections) asking at once: each version is taken once, none is lost."""
    store.add_bot("ann", GAME)
    made = {store.add_version("ann", SHA, 1, "zip").id for _ in range(12)}
    builders = [LadderStore(ladder_db) for _ in range(4)]
    try:

        def take(builder: LadderStore) -> list[int]:
            taken = []
            while (version := builder.versions.next_to_build()) is not None:
                taken.append(version.id)
            return taken

        with ThreadPoolExecutor(4) as pool:
            taken = [i for ids in pool.map(take, builders) for i in ids]
    finally:
        for builder in builders:
            builder.close()
    assert sorted(taken) == sorted(made)
    assert {v.state for v in store.versions_of("ann")} == {"building"}


def _built(store: LadderStore, bot: str, minutes: float, hours_ago: float = 0.0) -> None:
    """A version of ``bot`` built (to ``validating``) as the builder does, then made to have taken
    ``minutes`` and ended ``hours_ago`` (the clock is not waited on)."""
    version = store.add_version(bot, SHA, 1, "zip")
    store.versions.mark(version.id, "building")
    store.versions.mark(version.id, "validating", log_text="built")
    ended = (datetime.now(UTC) - timedelta(hours=hours_ago)).isoformat(timespec="microseconds")
    with store.database.writing("age a build") as db:
        db.execute(
            "UPDATE builds SET seconds = ?, ended = ? WHERE version_id = ?", (minutes * 60, ended, version.id)
        )


def test_each_build_is_kept_with_its_duration(store: LadderStore) -> None:
    store.add_bot("ann", GAME)
    version = store.add_version("ann", SHA, 1, "zip")
    store.versions.mark(version.id, "building")
    store.versions.mark(version.id, "received")  # cut short by a stopped server: not a build
    store.versions.mark(version.id, "building")
    store.versions.mark(version.id, "failed", reason="the build failed", log_text="error")
    store.versions.mark(version.id, "received")
    assert store.versions.next_to_build() is not None
    store.versions.mark(version.id, "validating", log_text="built")
    with store.database.reading("read the builds") as db:
        rows = db.query("SELECT version_id, started, ended, seconds FROM builds ORDER BY id")
    assert [r[0] for r in rows] == [version.id, version.id]  # two builds ran to their end
    for _, started, ended, seconds in rows:
        assert started < ended and 0 <= float(seconds) < 60
        took = datetime.fromisoformat(ended) - datetime.fromisoformat(started)
        assert float(seconds) == pytest.approx(took.total_seconds())


def test_the_build_minutes_count_an_owners_builds_of_the_last_day(store: LadderStore) -> None:
    _ann_with_bots_one_and_two(store)
    store.add_bot("hosts", GAME)
    _built(store, "one", 50, hours_ago=30)  # a day ago: not counted
    _built(store, "one", 20, hours_ago=20)
    assert store.versions.build_minutes_left("two", 30) == pytest.approx(10)
    store.add_version("two", SHA, 1, "zip", build_minutes=30)  # 20 of 30 used: taken
    _built(store, "two", 15, hours_ago=1)
    refusal = (
        r"its owner has used 35\.0 build minutes in the last 24 hours, this ladder's quota of 30 "
        r"\(--build-minutes-per-day\); the next upload is possible after 20\d\d-"
    )
    with pytest.raises(UploadQuotaError, match=refusal) as refused:
        store.add_version("one", SHA, 1, "zip", build_minutes=30)
    assert 4 * 3600 - 60 < refused.value.retry_after <= 4 * 3600  # when the 20 minutes leave the window
    with pytest.raises(UploadQuotaError, match="build minutes"):
        store.versions.check_quota("two", None, 30)
    store.versions.check_quota("two", None, 40)  # a larger quota: room left
    assert store.versions.build_minutes_left("one", 30) == 0
    store.add_version("hosts", SHA, 1, "zip", build_minutes=1)  # an owner-less bot: its own builds
    _built(store, "hosts", 1)
    with pytest.raises(UploadQuotaError, match=r"hosts has used 1\.0 build minutes"):
        store.add_version("hosts", SHA, 1, "zip", per_day=10, build_minutes=1)
