"""The community ladder over real TCP: versions, automatic pausing, challenges, the host's commands from
another process (through the database's change log), and the SDK following the ``paused`` code.

Each test runs a ladder in this process (`test_ladder_server.open_ladder`) and bots written from
docs/protocol.md; a command whose change the server must see runs as a process of its own, as a host
runs it beside the server; one whose output alone is checked runs in this process (`run_here`).
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import trio
from cellarena_cli import ROOT, run_here
from test_ladder_server import (
    CHANGE_MARGIN,
    join,
    open_ladder,
    other_process,
    play_one,
    wait_for,
)
from wire_client import Client

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.sdk import protocol
from cellarena.server.play.match import TickSettings

#: Fast matches, and a connection that drops forfeits at once (no grace): a crash is a failure.
NO_GRACE = TickSettings(fast=True, budget_ms=1000, reconnect_grace=0.0)


async def test_a_hello_may_say_its_version_and_the_seat_keeps_it(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ladder = await open_ladder(nursery, tmp_path)
    alice = await Client.connect(ladder.port)
    await alice.hello("alice", token=ladder.tokens["alice"], version="1.4.2")
    bob = await join(ladder, "bob")  # an older client: no version, plays as before
    async with trio.open_nursery() as bots:
        bots.start_soon(play_one, alice)
        bots.start_soon(play_one, bob)
    await wait_for(lambda: [m.status for m in ladder.store.matches("rezzo")] == ["finished"])
    (match,) = ladder.store.matches("rezzo")
    assert {s.bot: s.version for s in match.seats} == {"alice": "1.4.2", "bob": None}


async def test_a_10_kb_version_is_refused_with_a_clear_error(nursery: trio.Nursery, tmp_path: Path) -> None:
    ladder = await open_ladder(nursery, tmp_path)
    client = await Client.connect(ladder.port)
    await client.hello("alice", token=ladder.tokens["alice"], version="v" * 10_240)
    msg = await client.expect_error(protocol.BAD_HELLO)
    assert "'version' must be a printable string of 1 to 64 characters" in msg["message"]
    assert len(msg["message"]) < 400  # the 10 KB is not echoed back
    assert not ladder.seating.queue.waiting


async def test_failed_matches_in_a_row_pause_a_bot_until_it_is_resumed(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # starve_after=0: alice's wins part the two ratings, and the matchmaker would otherwise keep them
    # apart for up to 30 s before pairing them again (what matchmaking is tested for elsewhere).
    ladder = await open_ladder(nursery, tmp_path, settings=NO_GRACE, ticks=40, starve_after=0.0)
    ladder.store.set_policy(CommunityPolicy(pause_after=3))
    for n in range(3):  # bob hangs up mid-match three times: a disconnect not back within the grace
        alice, bob = await join(ladder, "alice"), await join(ladder, "bob")
        async with trio.open_nursery() as bots:
            bots.start_soon(play_one, alice)
            bots.start_soon(partial(play_one, bob, drop_at=3))
        await wait_for(
            lambda n=n: len([m for m in ladder.store.matches("rezzo") if m.status == "finished"]) > n
        )
    paused = ladder.store.bot("bob")
    assert paused is not None and paused.paused == "3 failed matches in a row, the last one disconnected"
    assert ladder.store.bot("alice").failures == 0  # type: ignore[union-attr]  # she won: no failure
    await wait_for(lambda: ladder.seating.queue.stats.pauses == 1)  # the server read it in the change log
    msg = await (await join(ladder, "bob")).expect_error(protocol.PAUSED)
    assert "bob is paused: 3 failed matches in a row, the last one disconnected" in msg["message"]
    assert "resume" in msg["message"] and protocol.PAUSED not in protocol.RETRY_LATER
    await other_process(tmp_path, "resume", "bob")  # the host, from another process
    bob = await join(ladder, "bob")  # held: a dropped client would close its connection
    await wait_for(lambda: "bob" in ladder.seating.queue.waiting)
    audit = run_here("ladder", "--dir", str(tmp_path), "audit")
    assert audit.returncode == 0 and "resume bob" in audit.stdout.splitlines()[0]


# Real time: asserts the pause reached the server within 5 s of real time (it polls every 0.5 s).
@pytest.mark.realtime
async def test_a_bot_paused_by_hand_while_queued_is_told_within_one_poll(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ladder = await open_ladder(nursery, tmp_path, settings=NO_GRACE, ticks=40)
    bob = await join(ladder, "bob")
    await wait_for(lambda: "bob" in ladder.seating.queue.waiting)
    # Paused by hand while queued: the queued connection ends within one poll, saying why.
    paused_at = await other_process(tmp_path, "pause", "bob", "--reason", "eats too much memory")
    with trio.fail_after(CHANGE_MARGIN):
        msg = await bob.expect_error(protocol.PAUSED)
    assert trio.current_time() - paused_at < CHANGE_MARGIN
    assert "eats too much memory" in msg["message"]
    audit = run_here("ladder", "--dir", str(tmp_path), "audit")
    assert audit.returncode == 0 and "pause bob (eats too much memory)" in audit.stdout.splitlines()[0]


async def test_a_banned_bot_is_refused_and_an_unbanned_one_plays(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ladder = await open_ladder(nursery, tmp_path)
    alice = await join(ladder, "alice")
    await wait_for(lambda: "alice" in ladder.seating.queue.waiting)
    await other_process(tmp_path, "ban", "alice", "--reason", "hard-coded opponents' moves")
    with trio.fail_after(CHANGE_MARGIN):
        msg = await alice.expect_error(protocol.PAUSED)
    assert "banned alice: hard-coded opponents' moves" in msg["message"]
    await (await join(ladder, "alice")).expect_error(protocol.PAUSED)
    await other_process(tmp_path, "unban", "alice")
    async with trio.open_nursery() as bots:
        bots.start_soon(play_one, await join(ladder, "alice"))
        bots.start_soon(play_one, await join(ladder, "bob"))
    await wait_for(lambda: [m.status for m in ladder.store.matches("rezzo")] == ["finished"])


async def test_a_pending_challenge_is_played_when_both_bots_are_free(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Three bots wait; carol's challenge of alice is made from another process, and the next pass
    plays it (unrated, by default) before the matchmaker pairs the rest. The pass timer is stopped
    (once an hour) so that the test runs the pass itself, with all three waiting."""
    ladder = await open_ladder(nursery, tmp_path, ("alice", "bob", "carol"), match_every=3600.0)
    queue = ladder.seating.queue
    await other_process(tmp_path, "challenge", "carol", "alice")
    await wait_for(lambda: [(c.challenger, c.opponent) for c in queue.challenges] == [("carol", "alice")])
    clients = {name: await join(ladder, name) for name in ("alice", "bob", "carol")}
    await wait_for(lambda: len(queue.waiting) == 3)
    (pairing,) = queue.pairings()  # bob, alone, waits
    assert pairing.bots == ("carol", "alice") and pairing.challenge is not None
    await queue._start(pairing)
    async with trio.open_nursery() as bots:
        bots.start_soon(play_one, clients["carol"])
        bots.start_soon(play_one, clients["alice"])
    await wait_for(lambda: [m.status for m in ladder.store.matches("rezzo")] == ["finished"])
    (match,) = ladder.store.matches("rezzo")
    assert not match.rated and all(s.before == s.after for s in match.seats)
    (played,) = ladder.store.challenges_of("carol")
    assert (played.status, played.match_id) == ("played", match.id)
    assert "bob" in queue.waiting and not queue.challenges


async def test_a_storm_of_challenges_is_refused_by_the_quota(nursery: trio.Nursery, tmp_path: Path) -> None:
    ladder = await open_ladder(nursery, tmp_path, ("alice", "bob", "carol"))
    ladder.store.set_policy(CommunityPolicy(challenges_per_day=2))
    assert run_here("ladder", "--dir", str(tmp_path), "challenge", "alice", "bob").returncode == 0
    ladder.store.challenge("alice", "carol")
    storm = run_here("ladder", "--dir", str(tmp_path), "challenge", "alice", "carol", "--json")
    assert storm.returncode == 1
    assert "alice has made 2 challenge(s) in the last 24 hours" in storm.stdout
    assert "--challenges-per-day 2" in storm.stdout and "Traceback" not in storm.stderr
    refuse = run_here("ladder", "--dir", str(tmp_path), "bot", "challenges", "bob", "refuse")
    assert refuse.returncode == 0, refuse.stderr
    again = run_here("ladder", "--dir", str(tmp_path), "challenge", "carol", "bob")
    assert again.returncode == 1 and "bob refuses challenges" in again.stderr


async def test_the_sdk_says_its_version_and_stops_on_paused(nursery: trio.Nursery, tmp_path: Path) -> None:
    """An SDK bot says ``--version`` in its hello; paused, it stops at once (exit 1) with the reason and
    what to do, even with --ladder, which rides out every "not now"."""
    ladder = await open_ladder(nursery, tmp_path)
    (tmp_path / "alice.token").write_text(ladder.tokens["alice"])
    bot = [sys.executable, str(ROOT / "example_bots/rezzo/random_walker.py"), "--port", str(ladder.port)]
    bot += ["--token-file", str(tmp_path / "alice.token"), "--name", "alice", "--version", "walker-7"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*bot, *extra], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT
        )

    async with trio.open_nursery() as bots:
        bots.start_soon(lambda: trio.to_thread.run_sync(run))
        await wait_for(lambda: "alice" in ladder.seating.queue.waiting, timeout=30)
        bots.start_soon(play_one, await join(ladder, "bob"))
    await wait_for(lambda: [m.status for m in ladder.store.matches("rezzo")] == ["finished"])
    (match,) = ladder.store.matches("rezzo")
    assert {s.bot: s.version for s in match.seats} == {"alice": "walker-7", "bob": None}
    ladder.store.pause("alice", "crashed at tick 3, five times")
    stopped = await trio.to_thread.run_sync(lambda: run("--ladder"))
    assert stopped.returncode == 1
    assert "paused" in stopped.stderr and "crashed at tick 3, five times" in stopped.stderr
    assert "fix the bot, then resume it" in stopped.stderr
    long = await trio.to_thread.run_sync(lambda: run("--version", "x" * 10_240))
    assert long.returncode == 2 and "--version must be 1 to 64 printable characters" in long.stderr


async def test_a_paused_house_bot_is_not_started_until_resumed(nursery: trio.Nursery, tmp_path: Path) -> None:
    ladder = await open_ladder(nursery, tmp_path, ("alice",))
    ladder.store.add_bot("builder", "rezzo", house_command=f'"{sys.executable}" -c "pass"')
    await wait_for(lambda: [b.name for b in ladder.seating.results.house_bots()] == ["builder"])
    await other_process(tmp_path, "pause", "builder")
    await wait_for(lambda: ladder.seating.results.house_bots() == [], timeout=CHANGE_MARGIN)
    listed = run_here("ladder", "--dir", str(tmp_path), "bot", "list")
    assert re.search(r"^builder\s+rezzo\s+paused", listed.stdout, re.MULTILINE), listed.stdout
    await other_process(tmp_path, "resume", "builder")
    await wait_for(
        lambda: [b.name for b in ladder.seating.results.house_bots()] == ["builder"], timeout=CHANGE_MARGIN
    )


def test_a_bot_says_its_version_from_its_class_or_instance() -> None:
    from cellarena.sdk import Bot

    class Walker(Bot):
        version = "class-1"

    assert Walker().version == "class-1" and Walker(version="2.0").version == "2.0"
    assert Bot().version is None
    hello = protocol.hello("w", "rezzo", version=Walker(version="2.0").version)
    assert protocol.check_hello(hello, game="rezzo")["version"] == "2.0"
    assert "version" not in protocol.hello("w", "rezzo")  # none given: the field is left out


async def test_metrics_count_each_connected_bot_once(nursery: trio.Nursery, tmp_path: Path) -> None:
    from cellarena.arena.ladder.ops.metrics import metrics_text

    ladder = await open_ladder(nursery, tmp_path, match_every=3600.0)  # nobody is paired
    clients = [await join(ladder, name) for name in ("alice", "bob")]
    await wait_for(lambda: len(ladder.seating.queue.waiting) == 2)
    text = metrics_text(ladder.seating).decode()
    assert (
        "\ncellarena_ladder_bots_connected 2.0\n" in text and "\ncellarena_ladder_queue_length 2.0\n" in text
    )
    assert (
        "\ncellarena_ladder_database_up 1.0\n" in text
        and "\ncellarena_ladder_matches_ended_total 0.0\n" in text
    )
    await clients[0].stream.aclose()
    await wait_for(lambda: "\ncellarena_ladder_bots_connected 1.0\n" in metrics_text(ladder.seating).decode())
