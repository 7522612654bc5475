"""Submitted bots started where their matches run (issue 41; arena/ladder/hosting/seat_launch.py):
an isolated submitted bot cannot follow a redirect, so the worker that plays its match, a local
worker process (`ladder serve --workers 2`) or a Dask cluster's worker, gets its archive with the
match, builds it into its cache by hash and starts it on a connection to its own lobby, confined.
Real processes: bubblewrap, a ladder with two workers, a local Dask cluster. The ladder's folder
(a live version of a Python bot, and a connected bot) is made once for the module.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from game_servers import ladder_serve, start, wait_for

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.cluster import ClusterSpec
from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffConfig, open_hand_off
from cellarena.arena.ladder.hosting.seat_launch import LaunchingMatch, SeatLaunch
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.arena.ladder.submissions.unpack import unpack
from cellarena.server.play.hosted import token_digest
from cellarena.server.play.match import TickSettings

CONFIG = {"map": "duel", "max_ticks": 20}


@dataclass(frozen=True)
class Ladder:
    folder: Path
    #: The live version's archive and its SHA-256.
    archive: bytes
    sha256: str
    #: bob's token file: a bot that connects and follows redirects.
    bob: Path


def _running_in(folder: Path) -> list[int]:
    """Processes whose working folder is under ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(folder)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> Ladder:
    """A ladder's folder where annbot (Python, `cellarena new-bot`) has a live version 1, built on the
    ladder's machine as its builder leaves it, and bob is a bot that connects."""
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is not installed (.ci/run installs it); CI must have it", pytrace=False)
        pytest.skip("bubblewrap is not installed")
    root = tmp_path_factory.mktemp("submitted-workers")
    folder = root / "ladder"
    folder.mkdir()
    write_bot("rezzo", "annbot", "python", root / "annbot")
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(root / "annbot", arcname="annbot")
    data = packed.getvalue()
    sha256 = ArchiveStore(folder / "archives").put(data, "tar.gz")
    with LadderStore(folder / "ladder.sqlite") as store:
        store.add_bot("annbot", "rezzo")
        store.versions.add_version("annbot", sha256, len(data), "tar.gz")
        version = store.versions.next_to_build(["rezzo"])
        assert version is not None
        store.versions.mark(version.id, "validating")
        store.versions.mark(version.id, "validated", go_live=True)
        _, bob = store.add_bot("bob", "rezzo")
    (folder / "versions" / "annbot").mkdir(parents=True)
    unpack(data, "tar.gz", folder / "versions" / "annbot" / "1")
    (root / "bob.token").write_text(bob.secret + "\n")
    return Ladder(folder, data, sha256, root / "bob.token")


def _finished(folder: Path) -> list[int]:
    """Finished matches with annbot in a seat."""
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return [
            m.id
            for m in store.matches("rezzo")
            if m.status == "finished" and "annbot" in {s.bot for s in m.seats}
        ]


def test_with_workers_a_worker_starts_the_submitted_bot_of_its_match(ladder: Ladder, tmp_path: Path) -> None:
    server = ladder_serve(ladder.folder, "--house-after", "0.5", "--isolate", "--workers", "2")
    bob = None
    try:
        script = [sys.executable, "example_bots/rezzo/random_walker.py", "--token-file", str(ladder.bob)]
        bob = start([*script, "--port", str(server.port), "--matches", "1"], tmp_path, "bob")
        wait_for(lambda: bool(_finished(ladder.folder)), "a rated match of annbot's", 90)
        assert bob.wait(30) == 0, bob.stderr()
        (match_id,) = _finished(ladder.folder)
        # Built where the match ran, into the cache by the archive's hash; its output is its owner's.
        assert (ladder.folder / "bot-cache" / ladder.sha256 / "annbot" / "bot.toml").is_file()
        played = ladder.folder / "private-logs" / "annbot" / f"match-{match_id}.log"
        wait_for(lambda: played.is_file() and played.stat().st_size > 0, "annbot's log of its match", 30)
        assert "redirect" not in played.read_text()  # it was handed its seat, not sent there
        # The ladder's own start of it only held its place in the queue: its log is not kept.
        assert sorted(p.name for p in played.parent.iterdir()) == [played.name]
        wait_for(lambda: not _running_in(ladder.folder), "annbot's processes to end", 30)
    finally:
        if bob is not None and bob.proc.poll() is None:
            bob.stop()
        server.stop()
    assert not _running_in(ladder.folder)
    err = server.stderr()
    workers = [int(pid) for pid in re.findall(r"worker \d \(pid (\d+)\) ready", err)]
    assert len(workers) == 2 and "Traceback" not in err, err
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the workers to end", 30)


def test_on_a_dask_cluster_the_worker_builds_and_starts_the_submitted_bot(
    ladder: Ladder, tmp_path: Path
) -> None:
    """A `LaunchingMatch` handed to a local Dask cluster's worker, as `ladder serve --cluster` hands
    one: bob comes by redirect with his seat token, annbot is started there, isolated."""
    log = tmp_path / "annbot.log"
    launch = SeatLaunch(
        "annbot", "v1", ladder.sha256, "tar.gz", ladder.archive,
        isolate=True, cache=str(tmp_path / "cache"), hidden=(str(ladder.folder),), log=str(log),
    )  # fmt: skip
    token = secrets.token_urlsafe(32)
    job = LaunchingMatch(
        7, "rezzo", CONFIG, 11, ("bob", "annbot"),
        (token_digest(token), token_digest(secrets.token_urlsafe(32))),
        TickSettings(fast=True, budget_ms=1000), launches=(None, launch),
    )  # fmt: skip
    (tmp_path / "seat.token").write_text(token + "\n")

    async def play() -> tuple[object, tuple[bool, ...]]:
        with open_hand_off(ClusterSpec(local=1), "rezzo", [CONFIG], HandOffConfig()) as hand_off:
            where = await hand_off.start(job)
            script = [
                sys.executable,
                "example_bots/rezzo/random_walker.py",
                "--token-file",
                str(tmp_path / "seat.token"),
            ]
            bob = start([*script, "--host", where.host, "--port", str(where.port)], tmp_path, "bob")
            try:
                with trio.fail_after(90):
                    result = await hand_off.result(job.ladder_id)
            finally:
                bob.stop()
            return result.outcome, result.connected

    outcome, connected = trio.run(play)
    assert outcome is not None and connected == (True, True)
    assert (tmp_path / "cache" / ladder.sha256 / "annbot" / "bot.toml").is_file()
    assert log.is_file() and log.stat().st_size > 0
    assert not _running_in(tmp_path / "cache")
