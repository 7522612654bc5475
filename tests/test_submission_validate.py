"""Validating a built bot by one unrated match against a house bot (arena/ladder/submissions/validate.py),
over a real local match server and the one launcher, isolated: a good bot passes; one that crashes or
never says hello fails with its seat's cause and its own log, kept where its owner alone may read it.

The bots are built once per module; each match is of 40 ticks at full speed.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
import trio

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.services.builder import Builder
from cellarena.arena.ladder.services.submitted import VersionCheck, check_version
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.arena.ladder.submissions.validate import ValidationResult, may_read_log, private_log
from cellarena.server.bots.launcher import BotSpec

HOUSE = BotSpec("random", "python -m cellarena.sdk.opponents rezzo")
CRASH = """import sys
if __name__ == "__main__":
    print("my bot: about to crash", file=sys.stderr)
    raise SystemExit(3)
"""
PEEK = """import sys
if __name__ == "__main__":
    try:
        print("read:", open(SECRET).read(), file=sys.stderr)
    except OSError as exc:
        print("cannot read:", exc, file=sys.stderr)
    raise SystemExit(3)
"""
SILENT = """import time
if __name__ == "__main__":
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is not installed (.ci/run installs it); CI must have it", pytrace=False)
        pytest.skip("bubblewrap is not installed")
    base = tmp_path_factory.mktemp("validate")
    write_bot("rezzo", "good", "python", base / "good")
    (base / "ladder" / "secret").mkdir(parents=True)
    (base / "ladder" / "secret" / "db").write_text("the ladder's own")
    peek = PEEK.replace("SECRET", repr(str(base / "ladder" / "secret" / "db")))
    for name, text in {"crash": CRASH, "silent": SILENT, "peek": peek}.items():
        (base / name).mkdir()
        (base / name / f"{name}.py").write_text(text)
    return base


def _validate(root: Path, name: str, **kw: Any) -> ValidationResult:
    """The version in ``root/name`` checked as the ladder checks one (built, then validated), with
    the states it went through; ``kw`` are `VersionCheck`'s."""
    states: list[tuple[str, str | None, str]] = []
    check = VersionCheck("rezzo", HOUSE, root / "ladder", game_values={"max_ticks": 40}, **kw)

    async def told(*said: Any) -> None:
        states.append(said)

    verdict = trio.run(check_version, root / name, "v1", check, told)
    assert verdict.validation is not None, verdict.reason
    assert states == [
        ("validating", None, verdict.built.log),
        (verdict.state, verdict.reason, verdict.validation.log),
    ]
    assert verdict.state == ("validated" if verdict.validation.ok else "failed")
    assert verdict.log == verdict.validation.log
    return verdict.validation


def test_a_good_bot_passes_its_validation_match(root: Path) -> None:
    result = _validate(root, "good")
    assert result.ok, f"{result.reason}\n{result.log}"
    assert result.cause == {"cause": "tick_cap", "tick": 40}
    assert result.reason == (
        "good played the validation match to its end "
        "(good was still in when the match reached its tick cap at tick 40)"
    )
    assert result.log_path == private_log(root / "ladder", "good", "validation-v1")
    assert result.log_path.is_file()
    assert [p.name for p in result.log_path.parent.iterdir()] == ["validation-v1.log"]


def test_a_bot_that_crashes_fails_with_its_exit_and_its_log(root: Path) -> None:
    result = _validate(root, "crash")
    assert not result.ok
    assert result.cause["cause"] == "exited" and result.cause["status"] == 3
    assert result.reason.startswith("crash forfeits")
    assert "exited with status 3" in result.reason and "my bot: about to crash" in result.reason
    assert "my bot: about to crash" in result.log
    assert result.log_path == private_log(root / "ladder", "crash", "validation-v1")


def test_a_bot_that_never_says_hello_fails_as_never_connected(root: Path) -> None:
    result = _validate(root, "silent", connect_timeout=2.0)
    assert not result.ok
    assert result.cause["cause"] == "never_connected", result.cause
    assert "silent" in result.reason


def test_a_submitted_bot_sees_nothing_of_the_ladders_folder(root: Path) -> None:
    result = _validate(root, "peek", hidden=(root / "ladder",))
    assert "cannot read: [Errno 2] No such file or directory" in result.log, result.log
    assert "the ladder's own" not in result.log


def test_a_version_that_does_not_build_is_never_played(root: Path) -> None:
    folder = root / "unbuildable"
    folder.mkdir()
    (folder / "bot.py").write_text('import pandas\nif __name__ == "__main__":\n    pass\n')
    states: list[tuple[str, str | None, str]] = []
    check = VersionCheck("rezzo", HOUSE, root / "ladder")

    async def told(*said: Any) -> None:
        states.append(said)

    verdict = trio.run(check_version, folder, "v2", check, told)
    assert states == [("failed", verdict.reason, verdict.built.log)] and verdict.validation is None
    assert verdict.reason is not None and verdict.reason.startswith("bot.py:1: imports pandas")
    assert verdict.log == verdict.built.log and "pandas" in verdict.log
    assert not private_log(root / "ladder", "unbuildable", "validation-v2").exists()


def test_a_private_log_is_its_owners_and_the_hosts_alone() -> None:
    assert may_read_log("ada", "ada")
    assert not may_read_log("bob", "ada")
    assert not may_read_log(None, "ada")
    assert may_read_log(None, "ada", viewer_is_host=True)
    assert not may_read_log("ada", None)  # a house bot's log is the host's
    assert private_log(Path("/l"), "../evil", "m/1") == Path("/l/private-logs/_evil/m_1.log")


def test_the_builder_takes_a_received_version_from_its_archive_to_live(root: Path) -> None:
    """A version uploaded as the store keeps one (its archive by digest, `received`) is taken by the
    builder, unpacked into its own folder, built, validated and, as its bot's first, made live;
    every state and log is in the store."""
    source = root / "upload"
    write_bot("rezzo", "up", "python", source)
    (source / "bot.toml").write_text('command = "python up.py"\n')
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(source, arcname="up")
    data = packed.getvalue()
    archives = ArchiveStore(root / "archives")
    with LadderStore(root / "ladder.db") as store:
        store.add_bot("up", "rezzo")
        added = store.versions.add_version("up", archives.put(data, "tar.gz"), len(data), "tar.gz")
        check = VersionCheck("rezzo", HOUSE, root / "ladder", game_values={"max_ticks": 40})
        builder = Builder(store, archives, root / "versions", check)
        taken = trio.run(builder.build_next)
        assert taken is not None
        version, verdict = taken
        assert version.id == added.id and verdict is not None and verdict.state == "validated"
        assert (builder.version_folder(version) / "up" / "up.py").is_file()
        stored = store.versions.version_by_id(added.id)
        assert stored.state == "live", stored.reason
        assert stored.validation_log and "tick cap 40 reached" in stored.validation_log
        assert trio.run(builder.build_next) is None  # nothing else waits
