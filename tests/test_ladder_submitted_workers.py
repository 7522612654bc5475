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
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from game_servers import ladder_serve, processes_in, start, wait_for

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.arena.ladder.submissions.unpack import unpack

CONFIG = {"map": "duel", "max_ticks": 20}


@dataclass(frozen=True)
class Ladder:
    folder: Path
    #: The live version's archive and its SHA-256.
    archive: bytes
    sha256: str
    #: bob's token file: a bot that connects and follows redirects.
    bob: Path


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


@pytest.mark.parametrize(
    "hosting", [("--workers", "2"), ("--cluster", "local:1")], ids=["workers", "cluster"]
)
def test_the_process_that_plays_the_match_starts_the_submitted_bot(
    ladder: Ladder, hosting: tuple[str, str], tmp_path: Path
) -> None:
    """As a host runs it: `ladder serve --isolate` with two local workers, or with a local Dask
    cluster; a connected bot and annbot play a rated match, annbot built and started where it ran."""
    folder = tmp_path / "ladder"
    shutil.copytree(ladder.folder, folder)  # each run's own ladder: one match to find
    server = ladder_serve(folder, "--house-after", "0.5", "--isolate", *hosting)
    bob = None
    try:
        script = [sys.executable, "example_bots/rezzo/random_walker.py", "--token-file", str(ladder.bob)]
        bob = start([*script, "--port", str(server.port), "--matches", "1"], tmp_path, "bob")
        wait_for(lambda: bool(_finished(folder)), "a rated match of annbot's", 120)
        assert bob.wait(30) == 0, bob.stderr()
        # bob (the Python SDK) followed the ladder's redirect to the worker, in plain TCP: for the
        # cluster, the path test_ladder_cluster.py's plain twin of its TLS ladder ran.
        assert bob.stderr().count("playing this match at 127.0.0.1:") == 1, bob.stderr()
        (match_id,) = _finished(folder)
        # Built where the match ran, into the cache by the archive's hash; its output is its owner's.
        assert (folder / "bot-cache" / ladder.sha256 / "annbot" / "bot.toml").is_file()
        played = folder / "private-logs" / "annbot" / f"match-{match_id}.log"
        wait_for(lambda: played.is_file() and played.stat().st_size > 0, "annbot's log of its match", 30)
        assert "redirect" not in played.read_text()  # it was handed its seat, not sent there
        # The ladder's own start of it only held its place in the queue: its log is not kept.
        assert sorted(p.name for p in played.parent.iterdir()) == [played.name]
        wait_for(lambda: not processes_in(folder), "annbot's processes to end", 30)
    finally:
        if bob is not None and bob.proc.poll() is None:
            bob.stop()
        server.stop()
    assert not processes_in(folder)
    err = server.stderr()
    assert "Traceback" not in err, err
    if hosting[0] == "--workers":
        workers = [int(pid) for pid in re.findall(r"worker \d \(pid (\d+)\) ready", err)]
        assert len(workers) == 2, err
        wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the workers to end", 30)
    else:
        assert "matches played on the cluster local:1" in err and "(TLS)" not in err, err
