"""The time bank (docs/protocol.md#the-time-bank): an answer after its budget is taken while the
seat's bank lasts, the tick waits for it, and the replay and the results say what each seat drew."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from bot_files import RAW_BOT
from cellarena_cli import cellarena, run_here
from test_rezzo_batched import use
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import read_replay, verify

#: 20 ticks at 10 a second with a 50 ms budget; the slow bot answers every fifth tick 80 ms after it
#: arrived, so at least 30 ms over budget (a busy machine only makes it later, never earlier).
TICKS, BUDGET_MS, SLOW_MS, EVERY = 20, 50, 80, 5


def _play(tmp_path: Path, *extra: str, fast: bool = False) -> tuple[dict[str, Any], Path]:
    replay = tmp_path / "m.replay"
    proc = cellarena(
        "match", "rezzo",
        "--bot", f"slow={RAW_BOT} slow:{SLOW_MS}:{EVERY}",
        "--bot", f"quick={RAW_BOT} random",
        "--max-ticks", str(TICKS), "--budget-ms", str(BUDGET_MS),
        *(["--fast"] if fast else ["--tick-rate", "10"]),
        "--max-late-in-a-row", "0",
        "--replay", str(replay), "--log-dir", str(tmp_path / "logs"), "--json", *extra,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), replay


# A real bot process answers 30 ms over its budget on the real clock, and the match runs at 10 Hz.
@pytest.mark.realtime
@pytest.mark.parametrize("fast", [False, True], ids=["fixed-rate", "fast"])
def test_a_bot_30ms_over_one_tick_in_five_keeps_its_moves_with_a_bank_and_loses_them_without(
    tmp_path: Path, fast: bool
) -> None:
    slow_ticks = [t for t in range(1, TICKS + 1) if t % EVERY == 0]
    without, path = _play(tmp_path / "none", fast=fast)
    assert without["late"]["slow"] >= len(slow_ticks)
    assert "bank_drawn_ms" not in without
    rep = read_replay(path)
    lost = [t.tick for t in rep.ticks if 0 not in t.moves]
    assert set(slow_ticks) <= set(lost)  # each slow tick's move is lost (a busy machine may lose more)

    banked, path = _play(tmp_path / "bank", "--time-bank-ms", "1000", fast=fast)
    assert banked["late"]["slow"] == 0  # the bank pays for every late answer, even the machine's
    rep = read_replay(path)
    assert all(0 in t.moves for t in rep.ticks) and len(rep.ticks) == TICKS  # every move kept
    drawn = banked["bank_drawn_ms"]["slow"]
    # Each slow tick draws on the bank. By about 30 ms, but not exactly: the server stamps a send
    # right after its syscall, and a busy machine may deschedule it in between, which starts the
    # budget later (in the bot's favour) and charges the bank less.
    drawn_by_tick = {t.tick: t.bank.get(0, 0) for t in rep.ticks}
    assert all(drawn_by_tick[t] > 0 for t in slow_ticks), drawn_by_tick
    assert 0 < drawn <= 1000 and banked["bank_drawn_ms"]["quick"] <= 1000
    assert sum(t.bank.get(0, 0) for t in rep.ticks) == drawn
    assert rep.result is not None and rep.result["extra"]["bank_drawn_ms"][0] == drawn
    assert verify(rep).ok


@pytest.mark.usefixtures("virtual_wall")
async def test_bank_matches_are_not_batched_and_every_seat_is_told_its_bank(
    autojump_clock: MockClock,
) -> None:
    """The server steps a slot's Rezzo matches as one batch (`ticking`), where one match drawing on a
    bank would stretch the tick of all: a match with a time bank is never batched, so its drawn bank
    stretches its own tick only. The same matches without a bank are batched (the control). Each
    seat is told its bank in its welcome and what is left of it in every tick. In virtual time: the
    slow seat is exactly 30 ms over, and the control's matches start their ticks at the same moment."""
    use("numba")
    seen: dict[str, list[dict[str, Any]]] = {}

    async def bot(port: int, name: str, slow: bool) -> None:
        client = await Client.connect(port)
        await client.hello(name)
        while (msg := await client.recv(timeout=30)) is not None:
            seen.setdefault(name, []).append(msg)
            if msg["type"] == "tick":
                if slow and msg["tick"] % EVERY == 0:
                    await trio.sleep(SLOW_MS / 1000)
                await client.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
            elif msg["type"] == "end":
                return

    async def serve(bank_ms: float) -> Lobby:
        settings = TickSettings(tick_rate=10.0, budget_ms=BUDGET_MS, time_bank_ms=bank_ms)
        config = LobbyConfig(
            "rezzo", {"map": "duel", "max_ticks": 25}, settings, host="127.0.0.1", port=0, matches=2
        )
        lobby = Lobby(config)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                await nursery.start(lobby.serve)
                for i in range(4):
                    nursery.start_soon(bot, lobby.port, f"b{bank_ms:g}-{i}", i == 0)
        return lobby

    banked = await serve(1000)
    assert banked.driver is not None and banked.driver.batched_ticks == 0
    assert sorted(o.late[0] + o.late[1] for o in banked.outcomes) == [0, 0]
    msgs = seen["b1000-0"]
    assert msgs[0]["type"] == "welcome" and msgs[0]["time_bank_ms"] == 1000
    banks = [m["bank_ms"] for m in msgs if m["type"] == "tick"]
    assert banks[0] == 1000 and banks == sorted(banks, reverse=True) and banks[-1] < 1000
    control = await serve(0)
    assert control.driver is not None and control.driver.batched_ticks > 0
    assert all("time_bank_ms" not in m and "bank_ms" not in m for m in seen["b0-1"])


@pytest.mark.parametrize("game", ["rezzo", "cata", "drop2df", "colorblocks", "cloth"])
def test_every_games_view_shows_what_is_left_of_the_bank(game: str) -> None:
    """``view.bank_ms`` is the tick's ``bank_ms``, read from the bytes the server sends (its engine's
    request, encoded as the match server encodes it), in every game; None when the match has none."""
    from cellarena.sdk.games import adapter
    from cellarena.server.games import get_engine

    engine = get_engine(game).new({}, seed=3)
    seat, request = next(iter(engine.pending().items()))
    sdk = adapter(game)
    for bank, want in ((750, 750), (0, 0), (None, None)):
        sent = protocol.encode_tick(4, 60, request, bank_ms=bank)
        message = protocol.decode_body(sent[protocol.HEADER.size :])
        view = sdk.make_view(message)
        assert view.bank_ms == want, (game, seat, bank)
        assert view.budget_ms == 60


# The slow bot's real 80 ms answers must overrun a real 50 ms budget for the bank to be drawn.
@pytest.mark.realtime
def test_a_tournament_and_its_results_show_the_time_bank_drawn(tmp_path: Path) -> None:
    """A tournament with a bank keeps what each seat drew: per match seat and summed per bot in
    `results --json`, and said under the standings in `results` and the tournament's own table."""
    out = tmp_path / "cup"
    proc = cellarena(
        "tournament", "rezzo", "--maps", "duel", "--rounds", "1", "--max-ticks", "20",
        "--bot", f"slow={RAW_BOT} slow:{SLOW_MS}:{EVERY}", "--bot", f"quick={RAW_BOT} random",
        "--fast", "--budget-ms", str(BUDGET_MS), "--time-bank-ms", "1000",
        "--jobs", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = run_here("results", str(out), "--json")  # in this process: it only reads the folder
    assert results.returncode == 0, results.stderr
    data = json.loads(results.stdout)
    seats = [s for m in data["matches"] for s in m["seats"]]
    slow = [s["bank_drawn_ms"] for s in seats if s["bot"] == "slow"]
    assert slow and all(d > 0 for d in slow), seats  # each match has slow ticks (every fifth)
    assert all(isinstance(s["bank_drawn_ms"], int) for s in seats)
    standing = {s["bot"]: s for s in data["standings"]}
    assert standing["slow"]["bank_drawn_ms"] == sum(slow)
    assert "time bank drawn" in proc.stdout and f"slow {sum(slow)} ms" in proc.stdout
    text = run_here("results", str(out))
    assert f"slow {sum(slow)} ms" in text.stdout, text.stdout
