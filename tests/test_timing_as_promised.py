"""The default budget leaves the server room in every period, and a host may give a longer first tick.

No test here times the server: the achieved rate is measured by `cellarena bench server`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import trio
from cellarena_cli import cellarena, invoke
from game_servers import add_ladder_bot, ladder_serve
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import SERVER_MARGIN_MS, TickSettings


@pytest.mark.parametrize("rate", [1.0, 2.0, 10.0, 15.0, 20.0, 30.0, 60.0, 100.0])
def test_the_default_budget_leaves_the_server_its_margin_of_every_period(rate: float) -> None:
    settings = TickSettings(tick_rate=rate)
    period_ms = 1000.0 / rate
    assert settings.tick_budget_ms == math.floor(period_ms) - SERVER_MARGIN_MS
    assert settings.tick_budget_ms + SERVER_MARGIN_MS <= period_ms
    assert settings.budget == settings.tick_budget_ms / 1000
    assert settings.first_tick_budget_ms == settings.tick_budget_ms
    assert settings.fast is False


def test_15_hz_gets_63_ms_as_docs_say() -> None:
    assert TickSettings().tick_budget_ms == 63
    assert SERVER_MARGIN_MS >= 1


def test_a_rate_too_high_for_a_margin_still_gets_a_budget_of_1_ms() -> None:
    assert TickSettings(tick_rate=1000.0).tick_budget_ms == 1


@pytest.mark.parametrize(("given", "enforced"), [(50.0, 50), (50.4, 50), (50.5, 51), (50.6, 51), (1.2, 1)])
def test_a_fractional_budget_is_enforced_as_the_whole_ms_the_wire_says(given: float, enforced: int) -> None:
    settings = TickSettings(budget_ms=given, first_budget_ms=given * 10)
    assert settings.tick_budget_ms == enforced and settings.budget == enforced / 1000
    assert settings.first_tick_budget_ms == math.floor(given * 10 + 0.5)


def test_the_cli_help_quotes_the_margin() -> None:
    code, out = invoke("serve", "rezzo", "--help")
    assert code == 0, out
    assert f"one tick less {SERVER_MARGIN_MS} ms for the server" in " ".join(out.split())
    assert "--first-budget-ms" in out


@pytest.mark.usefixtures("virtual_wall")
@pytest.mark.parametrize("fast", [True, False])
async def test_the_first_tick_has_its_own_budget_and_the_schedule_goes_on(
    fast: bool, autojump_clock: MockClock
) -> None:
    """The first tick's `budget_ms` says the first budget; an answer within it is in time; later
    ticks get the normal budget, and the match plays every tick after a long first one (in virtual
    time, so the first answer is exactly 200 ms after its tick and every other one at once)."""
    ticks, first_ms, budget_ms = 6, 400, 60
    config = LobbyConfig(
        "rezzo",
        {"map": "duel", "max_ticks": ticks},
        TickSettings(tick_rate=20.0, budget_ms=budget_ms, first_budget_ms=first_ms, fast=fast),
        host="127.0.0.1",
        port=0,
        matches=1,
    )
    seen: dict[str, list[int]] = {}
    ends: dict[str, dict[str, Any]] = {}
    async with trio.open_nursery() as nursery:
        lobby = Lobby(config, None)
        await nursery.start(lobby.serve)

        async def bot(name: str) -> None:
            c = await Client.connect(lobby.port)
            await c.hello(name)
            while True:
                msg = await c.recv()
                assert msg is not None
                if msg["type"] == "welcome":
                    assert msg["budget_ms"] == budget_ms
                elif msg["type"] == "tick":
                    seen.setdefault(name, []).append(msg["budget_ms"])
                    if msg["tick"] == 0:
                        await trio.sleep(0.2)  # past every later tick's budget, within the first's
                    await c.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
                elif msg["type"] == "end":
                    ends[name] = msg
                    return

        nursery.start_soon(bot, "a")
        nursery.start_soon(bot, "b")
    for name in "ab":
        assert seen[name] == [first_ms] + [budget_ms] * (ticks - 1)
        assert ends[name]["ticks"] == ticks and ends[name]["late"] == 0


async def test_a_ladder_gives_the_first_tick_its_own_budget(tmp_path: Path) -> None:
    """`ladder serve --first-budget-ms`: a ladder bot that loads a model gets the longer first tick."""
    tokens = {name: add_ladder_bot(tmp_path, name).read_text().strip() for name in ("alice", "bob")}
    server = ladder_serve(tmp_path, "--first-budget-ms", "700", numba=True)
    try:
        firsts = []
        for name, token in tokens.items():
            client = await Client.connect(server.port)
            await client.hello(name, token=token)
            firsts.append(client)
        budgets = []
        for client in firsts:
            while (msg := await client.recv(timeout=20)) is not None and msg["type"] != "tick":
                pass
            assert msg is not None
            budgets.append(msg["budget_ms"])
        assert budgets == [700, 700]
    finally:
        server.stop()


SLOW_START = """
import time

from cellarena.sdk import Bot, run


class SlowStart(Bot):
    started = False

    def on_tick(self, view):
        if not self.started:
            self.started = True
            time.sleep(0.4)  # loads a model
        return [0 for _ in view.agents]


raise SystemExit(run(SlowStart))
"""


# Real bot processes on the real clock: the slow one's 400 ms first tick must overrun a 100 ms budget
# (without a first budget), and the random one must answer every tick within 100 ms.
@pytest.mark.realtime
@pytest.mark.parametrize("first_budget", [None, 1500])
def test_a_tournament_gives_the_first_tick_its_own_budget(tmp_path: Path, first_budget: int | None) -> None:
    """`tournament --first-budget-ms`: a bot that loads a model in its first tick is not late then."""
    bot = tmp_path / "slow_start.py"
    bot.write_text(SLOW_START)
    bots = ["--bot", f"slow=python {bot}", "--bot", "random=python -m cellarena.sdk.opponents rezzo"]
    pacing = ["--rounds", "1", "--max-ticks", "20", "--budget-ms", "100"]
    if first_budget is not None:
        pacing += ["--first-budget-ms", str(first_budget)]
    done = cellarena("tournament", "rezzo", *bots, *pacing, "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    late = {s["bot"]: s["late_rate"] for s in json.loads(done.stdout)["standings"]}
    assert late["random"] == 0
    assert (late["slow"] == 0) == (first_budget is not None), late
