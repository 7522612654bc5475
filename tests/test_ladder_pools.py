"""Separate pools for connected and submitted bots (`arena/ladder/matchmaking/pools.py`), on their own:
without a clock, as the matchmaker's tests are, then properties on random queues."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
from asgi_calls import call
from cellarena_cli import invoke, refused
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ladder_services import FakeConn, services, wait_for
from web_apps import LOOPBACK

from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy, Waiting, match_up
from cellarena.arena.ladder.matchmaking.pools import POOLS, Pool, PoolMode, may_meet, pool_of, pooled_match_up
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.services.house import HouseBots
from cellarena.arena.ladder.services.queue import MatchQueue, Queued
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.app import ladder_app
from cellarena.arena.ratings import Rating
from cellarena.sdk import protocol

TWO = Policy(seats=2, maps=("duel", "field"))
NOW = 1000.0


def bot(name: str, mu: float, waited: float = 0.0) -> Waiting:
    return Waiting(name, NOW - waited, Rating(mu, 8.0))


def groups(pairings: list[Pairing]) -> set[frozenset[str]]:
    return {frozenset(p.bots) for p in pairings}


def test_pool_of_a_bot() -> None:
    assert pool_of("house", launched=True) == "house"
    assert pool_of("outside", launched=True) == "submitted"
    assert pool_of("outside", launched=False) == "connected"
    assert may_meet("connected", "submitted", "mixed")
    assert not may_meet("connected", "submitted", "separate")
    assert may_meet("house", "submitted", "separate") and may_meet("connected", "house", "separate")


def test_mixed_is_the_matchmaker_alone() -> None:
    queue = [bot("c", 25), bot("s", 25.5), bot("h", 40)]
    pools: dict[str, Pool] = {"c": "connected", "s": "submitted", "h": "house"}
    assert pooled_match_up(queue, pools, NOW, TWO, 7) == match_up(queue, NOW, TWO, 7)
    assert groups(pooled_match_up(queue, pools, NOW, TWO, 7)) == {frozenset("cs")}


def test_separate_pools_keep_connected_and_submitted_apart() -> None:
    # c1 and s1 are closest, but may not meet: each meets its own kind, even starving.
    queue = [bot("c1", 25, 60), bot("s1", 25.1, 60), bot("c2", 30, 60), bot("s2", 31, 60)]
    pools: dict[str, Pool] = {"c1": "connected", "c2": "connected", "s1": "submitted", "s2": "submitted"}
    assert groups(pooled_match_up(queue, pools, NOW, TWO, 7, "separate")) == {
        frozenset({"c1", "c2"}),
        frozenset({"s1", "s2"}),
    }


def test_a_house_bot_meets_either_but_only_once() -> None:
    queue = [bot("c", 25), bot("h", 25.2), bot("s", 25.4)]
    pools: dict[str, Pool] = {"c": "connected", "h": "house", "s": "submitted"}
    # Connected bots go first: the house bot plays c; s waits for another submitted or house bot.
    assert groups(pooled_match_up(queue, pools, NOW, TWO, 7, "separate")) == {frozenset("ch")}
    # With no connected bot in reach, the house bot is left for the submitted one.
    pools["c"] = "submitted"
    assert len(pooled_match_up(queue, pools, NOW, TWO, 7, "separate")) == 1
    queue = [bot("c", 10), bot("h", 25.2), bot("s", 25.4)]
    pools["c"] = "connected"
    assert groups(pooled_match_up(queue, pools, NOW, TWO, 7, "separate")) == {frozenset("hs")}


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="none of mixed, separate"):
        pooled_match_up([bot("a", 25), bot("b", 25)], {}, NOW, TWO, 1, "split")  # type: ignore[arg-type]


names = st.sampled_from("abcdefghij")


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[Waiting], dict[str, Pool], int]:
    seats = draw(st.sampled_from([2, 2, 3]))
    bots = draw(st.lists(names, max_size=10, unique=True))
    queue = [bot(n, draw(st.floats(15, 35)), draw(st.sampled_from([0.0, 5.0, 20.0, 40.0]))) for n in bots]
    return queue, {n: draw(st.sampled_from(POOLS)) for n in bots}, seats


@settings(max_examples=200, deadline=None)
@given(queues(), st.integers(0, 2**31 - 1))
def test_random_queues_never_seat_a_bot_twice_nor_cross_pools(
    case: tuple[list[Waiting], dict[str, Pool], int], seed: int
) -> None:
    queue, pools, seats = case
    policy = Policy(seats=seats, maps=("m1", "m2"))
    assert pooled_match_up(queue, pools, NOW, policy, seed, "mixed") == match_up(queue, NOW, policy, seed)
    pairings = pooled_match_up(queue, pools, NOW, policy, seed, "separate")
    seated = [b for p in pairings for b in p.bots]
    assert len(seated) == len(set(seated)) and set(seated) <= {w.bot for w in queue}
    for p in pairings:
        kinds = {pools[b] for b in p.bots} - {"house"}
        assert len(kinds) <= 1, (p, kinds)
        assert all(may_meet(pools[a], pools[b], "separate") for a in p.bots for b in p.bots)
    assert pooled_match_up(list(reversed(queue)), pools, NOW, policy, seed, "separate") == pairings


# -- the queue and the house bots' launcher, wired to the rule ----------------------------------------


def record(name: str, kind: str = "outside") -> BotRecord:
    return BotRecord(1, name, "rezzo", kind, "./house" if kind == "house" else None, 1, None, None)  # type: ignore[arg-type]


class Starter:
    def busy(self, waiting: dict[str, Queued]) -> set[str]:
        return set()

    def playing(self) -> set[str]:
        return set()


async def test_the_queue_keeps_pools_apart_under_separate() -> None:
    def pairings(pools: PoolMode) -> set[frozenset[str]]:
        queue = MatchQueue(TWO, SimpleNamespace(ratings={}), SimpleNamespace(up=True), every=1, pools=pools)  # type: ignore[arg-type]
        queue.bind(Starter())  # type: ignore[arg-type]
        for name, launched in (("c1", False), ("s1", True), ("c2", False), ("s2", True)):
            queue.add(Queued(SimpleNamespace(peer="here"), record(name), -1.0, launched=launched))  # type: ignore[arg-type]
        return groups(queue.pairings())

    assert pairings("separate") == {frozenset({"c1", "c2"}), frozenset({"s1", "s2"})}
    assert len(pairings("mixed")) == 2


async def test_a_connected_bot_waiting_gets_a_house_bot_not_a_submitted_one_under_separate() -> None:
    def wanted(pools: PoolMode, launched: bool) -> str | None:
        queue = SimpleNamespace(
            pools=pools,
            waiting={"alice": Queued(SimpleNamespace(), record("alice"), -10.0, launched=launched)},
        )
        results = SimpleNamespace(
            ratings={"sub": Rating(25, 8), "house": Rating(40, 8)},
            house_bots=lambda: [record("house", "house")],
        )
        seating = SimpleNamespace(queue=queue, results=results, starter=Starter())
        house = HouseBots(None, seating, Path("."), after=0.0)  # type: ignore[arg-type]
        house.submitted = SimpleNamespace(candidates=lambda: [record("sub")])  # type: ignore[assignment]
        needed = house._needed()
        return None if needed is None else needed.name

    assert wanted("mixed", launched=False) == "sub"  # the closest in rating
    assert wanted("separate", launched=False) == "house"
    assert wanted("separate", launched=True) == "sub"


# -- the standings mark each bot's kind: page, API, command ---------------------------------------------


def kinds_ladder(folder: Path) -> LadderStore:
    """A rezzo ladder with a connected bot, a house bot, and a bot whose validated version is live."""
    store = LadderStore(folder / "ladder.sqlite")
    store.add_bot("alice", "rezzo")
    store.add_bot("builder", "rezzo", house_command="./house-bot")
    store.add_bot("up", "rezzo")
    store.add_version("up", "ab" * 32, 1, "zip")
    version = store.versions.next_to_build()
    assert version is not None
    store.versions.mark(version.id, "validating", log_text="built")
    assert store.versions.mark(version.id, "validated", log_text="played").state == "live"
    return store


WANT = {"alice": "connected", "builder": "house", "up": "submitted"}


async def test_the_standings_page_and_api_mark_each_bots_kind(tmp_path: Path) -> None:
    store = kinds_ladder(tmp_path)
    try:
        app, _ = ladder_app(store, ["rezzo"], allowed_hosts=LOOPBACK)
        page = await call(app, "GET", "/")
        api = await call(app, "GET", "/api/standings")
    finally:
        store.close()
    assert page.status == 200 and api.status == 200
    header = re.search(r"<table class=list id=standings><tr>(.*?)</tr>", page.text)
    assert header is not None and "<th>bot</th><th>kind</th>" in header.group(1)
    for bot, kind in WANT.items():
        assert re.search(rf'<td><a href="[^"]*{bot}">{bot}</a></td><td>{kind}</td>', page.text), (
            bot,
            page.text,
        )
    rows = api.json()["standings"]
    assert {r["bot"]: r["pool"] for r in rows} == WANT
    assert {r["bot"]: r["kind"] for r in rows}["alice"] == "outside"  # as old clients read it


def test_the_standings_command_marks_each_bots_kind(tmp_path: Path) -> None:
    kinds_ladder(tmp_path).close()
    code, out = invoke("ladder", "--dir", str(tmp_path), "standings", "rezzo")
    assert code == 0, out
    assert re.search(r"\bbot\s+kind\s+rating\b", out), out
    for bot, kind in WANT.items():
        assert re.search(rf"\b{bot}\s+{kind}\s", out), out
    code, out = invoke("ladder", "--dir", str(tmp_path), "standings", "rezzo", "--json")
    assert code == 0 and {r["bot"]: r["pool"] for r in json.loads(out)["standings"]} == WANT


def test_ladder_serve_refuses_an_unknown_pools_value() -> None:
    result = refused("ladder", "serve", "rezzo", "--pools", "split")
    assert "--pools" in result.output and "mixed" in result.output and "separate" in result.output


async def test_admission_queues_a_launched_bot_in_the_submitted_pool(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", "bob")
    ladder.admission.launch_token = lambda token: "alice" if token == "one-launch" else None
    async with trio.open_nursery() as nursery:
        await nursery.start(ladder.admission.run)
        launched, connected = FakeConn(), FakeConn()
        ladder.admission.admit(launched, {**protocol.hello("alice", "rezzo"), "token": "one-launch"})  # type: ignore[arg-type]
        ladder.admission.admit(connected, {**protocol.hello("bob", "rezzo"), "token": ladder.tokens["bob"]})  # type: ignore[arg-type]
        await wait_for(lambda: len(ladder.queue.waiting) == 2)
        nursery.cancel_scope.cancel()
    assert {n: q.pool for n, q in ladder.queue.waiting.items()} == {"alice": "submitted", "bob": "connected"}
    ladder.store.close()
