"""The builder as a task of `ladder serve` (arena/ladder/services/builds.py, wired in
arena/ladder/ops/wiring.py): at start, versions a stopped server left half-built go back to the queue;
then each received version is taken and built from the ladder folder's ``archives/`` into its
``versions/``; versions that cannot be unpacked or built fail with their reason, logged, and the
ladder goes on serving bots. In process, over a real SQLite store and a real lobby; no build here
reaches the sandbox (the folders are refused before), so no clock but the deadlines of the waits.
"""

from __future__ import annotations

import io
import logging
import shutil
import sqlite3
import tarfile
from functools import partial
from pathlib import Path

import pytest
import trio
from game_servers import processes_in
from wire_client import Client

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.ops.wiring import LadderConfig, run_ladder
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.builds import BuildSettings, validation_opponent
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.server.play.match import TickSettings


def _archive(files: dict[str, str]) -> bytes:
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"bot/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return packed.getvalue()


def _upload(store: LadderStore, archives: ArchiveStore, bot: str, data: bytes) -> int:
    return store.versions.add_version(bot, archives.put(data, "tar.gz"), len(data), "tar.gz").id


async def _wait_for(condition: partial[bool], timeout: float = 20.0) -> None:
    with trio.fail_after(timeout):
        while not await trio.to_thread.run_sync(condition):
            await trio.sleep(0.05)


def _settled(store: LadderStore, ids: list[int]) -> bool:
    return all(store.versions.version_by_id(i).state == "failed" for i in ids)


async def test_failed_builds_leave_the_ladder_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A version whose archive was damaged on disk, one with a bot.toml that cannot be read and one a
    stopped server left building all end ``failed`` with their reason; the log names each; a bot
    connecting afterwards is queued as ever."""
    caplog.set_level(logging.INFO, logger="cellarena.ladder")
    store = LadderStore(tmp_path / "ladder.sqlite")
    alice = store.add_bot("alice", "rezzo")[1].secret
    store.add_bot("up", "rezzo")
    archives = ArchiveStore(tmp_path / "archives")
    damaged_data = _archive({"bot.toml": 'command = "python a.py"\n', "a.py": "pass\n"})
    damaged = _upload(store, archives, "up", damaged_data)
    path = archives.path(store.versions.version_by_id(damaged).sha256, "tar.gz")
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    bad_toml = _upload(store, archives, "up", _archive({"bot.toml": "command = [unclosed\n", "a.py": ""}))
    half_built = _upload(store, archives, "up", _archive({"bot.toml": "nonsense = 1\n"}))
    assert store.versions.next_to_build(["rezzo"]) is not None  # the damaged one, taken by a "stopped server"
    assert store.versions.next_to_build(["rezzo"]) is not None  # and the bad bot.toml
    assert store.versions.version_by_id(bad_toml).state == "building"
    store.add_bot("elsewhere", "cata")  # another game's server, on the same database, is building it
    theirs = _upload(store, archives, "elsewhere", _archive({"bot.toml": 'command = "python a.py"\n'}))
    assert store.versions.next_to_build(["cata"]) is not None
    config = LadderConfig(
        "rezzo",
        {"map": "duel", "max_ticks": 20},
        map_key="map",
        maps=("duel",),
        settings=TickSettings(fast=True, budget_ms=1000),
        port=0,
        rules=LadderRules(match_every=0.02),
        builds=BuildSettings(tmp_path, every=0.05),
    )
    ports: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run_ladder, store, config, on_listening=ports.append))
        await _wait_for(partial(_settled, store, [damaged, bad_toml, half_built]))
        with trio.fail_after(10):
            while not ports:
                await trio.sleep(0.01)
        client = await Client.connect(ports[0])
        await client.hello("alice", token=alice)
        with trio.fail_after(10):
            while "alice (127.0.0.1" not in caplog.text or "joins the queue" not in caplog.text:
                await trio.sleep(0.02)
        await client.stream.aclose()
        nursery.cancel_scope.cancel()
    reasons = {i: store.versions.version_by_id(i).reason or "" for i in (damaged, bad_toml, half_built)}
    assert "cannot be unpacked" in reasons[damaged], reasons
    assert "bot.toml" in reasons[bad_toml] and "TOML" in reasons[bad_toml], reasons
    assert "nonsense" in reasons[half_built], reasons
    text = caplog.text
    assert "2 version(s) a stopped server left unfinished will be built again" in text
    for number in (1, 2, 3):
        assert f"builder: up version {number} failed" in text, text
    assert store.versions.live_version("up") is None
    assert store.versions.version_by_id(theirs).state == "building"  # not this server's to requeue
    store.close()


def test_a_version_is_validated_against_the_games_house_bot_else_its_example(tmp_path: Path) -> None:
    """The validation opponent: the game's first house bot by name that may play; without one, the
    game's example opponent; a game with neither has none."""
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        example = validation_opponent(store, "rezzo")
        assert example is not None and example.command == "python -m cellarena.sdk.opponents rezzo"
        store.add_bot("zed", "rezzo", house_command="python zed.py")
        store.add_bot("amy", "rezzo", house_command="python amy.py")
        store.add_bot("outside", "rezzo")
        chosen = validation_opponent(store, "rezzo")
        assert chosen is not None and (chosen.name, chosen.command) == ("amy", "python amy.py")
        assert validation_opponent(store, "no-such-game") is None


def _live_version(store: LadderStore, archives: ArchiveStore, folder: Path, bot: str, source: Path) -> None:
    """A version of ``bot`` made live as the builder would: its archive kept, its folder built."""
    data = _archive({"bot.toml": (source / "bot.toml").read_text()})
    added = _upload(store, archives, bot, data)
    assert store.versions.next_to_build(["rezzo"]) is not None
    store.versions.mark(added, "validating")
    store.versions.mark(added, "validated", go_live=True)
    shutil.copytree(source, folder / "versions" / bot / "1" / bot)


async def test_a_submitted_bot_is_started_for_its_match_and_logs_privately(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bot with a live version holds no connection while nobody waits; once a connected bot waits,
    the ladder starts its version (as it starts a house bot), they play a rated match, its output is
    its owner's private log of that match, and no process of it is left; its exit mid-match is its
    seat's cause. It starts with a
    token of its own for that launch: its owner's token was never rotated. The log calls it what it
    is: a submitted bot, not a house bot."""
    caplog.set_level(logging.INFO, "cellarena.ladder")
    store = LadderStore(tmp_path / "ladder.sqlite")
    alice = store.add_bot("alice", "rezzo")[1].secret
    owners = store.add_bot("up", "rezzo")[1].secret
    write_bot("rezzo", "up", "python", tmp_path / "source")
    (tmp_path / "source" / "bot.toml").write_text('command = "python up.py"\n')
    main = tmp_path / "source" / "up.py"
    said = "\nimport os\nimport sys\n\nprint('up: my private words', file=sys.stderr)\n"
    crash = "    def on_tick(self, view: View) -> list[int]:\n        if view.tick >= 3:\n"
    crash += "            os._exit(5)\n"
    text = main.read_text().replace(
        "from __future__ import annotations\n", f"from __future__ import annotations{said}", 1
    )
    # It exits mid-match: its seat says so (``exited``), as a house bot's would, not ``disconnected``.
    main.write_text(text.replace("    def on_tick(self, view: View) -> list[int]:\n", crash, 1))
    _live_version(store, ArchiveStore(tmp_path / "archives"), tmp_path, "up", tmp_path / "source")
    (tmp_path / "logs").mkdir()
    config = LadderConfig(
        "rezzo",
        {"map": "duel", "max_ticks": 20},
        map_key="map",
        maps=("duel",),
        settings=TickSettings(fast=True, budget_ms=1000),
        port=0,
        rules=LadderRules(match_every=0.02),
        log_dir=tmp_path / "logs",
        house_after=0.5,
        builds=BuildSettings(tmp_path, every=0.05),
    )
    ports: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run_ladder, store, config, on_listening=ports.append))
        with trio.fail_after(10):
            while not ports:
                await trio.sleep(0.01)
        assert not processes_in(tmp_path / "versions")
        client = await Client.connect(ports[0])
        await client.hello("alice", token=alice)
        with trio.fail_after(30):
            end = await client.play()
        assert end["type"] == "end"
        await client.stream.aclose()
        with trio.fail_after(30):
            while processes_in(tmp_path / "versions"):
                await trio.sleep(0.05)
        with trio.fail_after(30):  # its result is written a moment after the bots are told the end
            while not [m for m in store.matches("rezzo") if m.status == "finished"]:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert store.authenticate(owners) is not None  # its owner's token was never rotated
    kinds = {s.bot: s.kind for s in store.standings("rezzo")}
    assert kinds == {"alice": "outside", "up": "submitted"}  # as the standings JSON and bot page say
    (played,) = store.matches("rezzo")
    assert played.status == "finished" and played.seq is not None  # rated
    assert sorted(seat.bot for seat in played.seats) == ["alice", "up"]
    causes = {seat.bot: (seat.cause or {}).get("cause") for seat in played.seats}
    assert causes["up"] == "exited", played.seats
    kept = tmp_path / "private-logs" / "up" / f"match-{played.id}.log"
    assert "up: my private words" in kept.read_text()
    assert not list((tmp_path / "private-logs" / "up").glob("launch-*"))
    assert (
        "started submitted bot up for a bot that waited" in caplog.text and "house bot up" not in caplog.text
    )
    store.close()


def test_the_builders_idle_look_at_the_store_is_a_read(tmp_path: Path) -> None:
    """With no version waiting, `next_to_build` (the builder's poll every 2 s) takes no write lock: it
    answers while another process holds the database's (SQLite's) write lock, and only then."""
    path = tmp_path / "ladder.sqlite"
    with LadderStore(path) as store:
        store.add_bot("ann", "rezzo")
        other = sqlite3.connect(path, isolation_level=None, timeout=0.0)
        other.execute("BEGIN IMMEDIATE")  # a writer elsewhere, mid-transaction
        try:
            assert store.versions.next_to_build(["rezzo"]) is None
        finally:
            other.execute("ROLLBACK")
            other.close()
        archives = ArchiveStore(tmp_path / "archives")
        version = _upload(store, archives, "ann", _archive({"bot.toml": 'command = "python bot.py"\n'}))
        taken = store.versions.next_to_build(["rezzo"])
        assert taken is not None and taken.id == version and taken.state == "building"
