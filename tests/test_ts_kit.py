"""The TypeScript kit (sdk/kits/typescript): its own node tests, run from here against this cellarena;
its lists of codes against the SDK's; a kit bot taking its ladder seat back after its connection drops;
and `new-bot --lang ts|js` folders, built by their own `npm ci`, in a tournament beside Python bots."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import trio
from cellarena_cli import ROOT, cellarena, invoke
from game_servers import WITHOUT_NUMBA, add_ladder_bot, ladder_serve, start
from node_kit import KIT, NODE_TESTS, build_bot_folders, built_kit, need_node
from test_sdk_ladder import CuttingProxy, exited

from cellarena.arena.cli.new_bot import GameTemplate
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk.protocol import codes


def test_the_kit_passes_its_own_node_tests(tmp_path: Path) -> None:
    """`npm test`: frames, back-off and the token handover, then real servers of this cellarena (every
    game's match, matches in a row, TLS, a ladder's refusals); and they leave nothing in the
    temporary folder, theirs or the servers'."""
    kit = built_kit()
    tests = sorted(str(p.relative_to(kit)) for p in kit.glob(NODE_TESTS))
    assert len(tests) >= 4, tests
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    # Its servers step Rezzo with numpy, as game_servers' do: the kit's subject is the protocol.
    env = {**os.environ, **WITHOUT_NUMBA, "CELLARENA_PYTHON": sys.executable, "TMPDIR": str(temporary)}
    proc = subprocess.run(
        ["node", "--test", *tests], cwd=kit, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    passed = re.search(r"^# pass (\d+)$", proc.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 18 and "\n# fail 0\n" in proc.stdout, report
    assert sorted(p.name for p in temporary.iterdir()) == []


def _ts_list(name: str) -> list[str]:
    """The strings of a constant list or set in the kit's protocol.ts."""
    source = (KIT / "src" / "protocol.ts").read_text()
    found = re.search(rf"export const {name}\b[^=]*= (?:new Set\()?\[(.*?)\]", source, re.DOTALL)
    assert found, f"protocol.ts has no {name}"
    return re.findall(r'"([a-z_]+)"', found.group(1))


def test_the_kit_has_the_sdk_s_error_codes_and_retry_rule() -> None:
    """One registry of refusal codes: the kit's lists are sdk/protocol/codes.py's."""
    assert _ts_list("ERROR_CODES") == list(codes.ERROR_CODES)
    assert sorted(_ts_list("RETRY_LATER")) == sorted(codes.RETRY_LATER)
    source = (KIT / "src" / "protocol.ts").read_text()
    for name in ("PROTOCOL_VERSION", "MAX_CLIENT_FRAME", "MAX_SERVER_FRAME", "MAX_NAME"):
        assert re.search(rf"export const {name} = {getattr(codes, name)};", source), name


async def test_a_kit_bot_whose_connection_drops_takes_its_ladder_seat_back(tmp_path: Path) -> None:
    kit = built_kit()
    bot = ["node", str(kit / "dist" / "test" / "bots" / "rezzo.js")]
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    ladder = ladder_serve(tmp_path, "--grace", "5", "--max-ticks", "120")
    try:
        async with trio.open_nursery() as nursery:
            proxy = CuttingProxy(ladder.port, after=0.5)
            port = await proxy.start(nursery)
            flags = ["--matches", "2", "--token-file"]
            alice = start(
                [*bot, "--port", str(port), "--name", "alice", *flags, str(tokens["alice"])],
                tmp_path,
                "alice",
            )
            bob = start(
                [*bot, "--port", str(ladder.port), "--name", "bob", *flags, str(tokens["bob"])],
                tmp_path,
                "bob",
            )
            assert await exited(alice, 90) == 0, alice.stderr()
            assert await exited(bob, 90) == 0, bob.stderr()
            nursery.cancel_scope.cancel()
    finally:
        ladder.stop()
    err = alice.stderr()
    assert "closed the connection before the match ended; taking the seat back" in err, err
    seated = [line for line in err.splitlines() if ": seat " in line]
    assert len(seated) == 3 and seated[0] == seated[1], seated  # the first match's welcome, twice
    assert err.count("REPORT end") == 2
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
    assert len(finished) == 2
    first = min(finished, key=lambda m: m.id)
    seat = next(s for s in first.seats if s.bot == "alice")
    assert not seat.forfeit and seat.late > 0  # back in time: the ticks it missed count as late


def test_new_ts_and_js_bots_build_by_npm_ci_and_play_a_tournament_beside_python_bots(
    tmp_path: Path,
) -> None:
    """From `new-bot` to standings as a user gets there: the tournament runs the TypeScript folder's
    bot.toml setup (a real `npm ci` from the folder's own lock, which builds the bot), then plays the
    TypeScript and JavaScript starters against a Python starter and the game's example bots over TCP.
    The JavaScript folder's lock and setup are the TypeScript one's but for the bot's name (asserted
    here), so one real `npm ci` (a dozen seconds of unpacking) stands for both: the JavaScript folder
    is built on the kit's packages beforehand (node_kit.build_bot_folders), and its setup skipped."""
    need_node()
    for name, lang in (("ts_bot", "ts"), ("js_bot", "js"), ("py_bot", "python")):
        # In this process: test_new_bot.py runs `new-bot` as a process.
        code, said = invoke("new-bot", "drop2df", name, "--lang", lang, "--dir", str(tmp_path / name))
        assert code == 0, said
    ts, js = tmp_path / "ts_bot", tmp_path / "js_bot"
    for same in ("package-lock.json", "bot.toml"):
        assert (js / same).read_text().replace("js_bot", "ts_bot") == (ts / same).read_text(), same
    build_bot_folders([js])
    dirs = [arg for name in ("ts_bot", "js_bot", "py_bot") for arg in ("--bots-dir", str(tmp_path / name))]
    proc = cellarena(
        "tournament", "drop2df", *dirs, "--bots-dir", str(ROOT / "example_bots"), "--exclude", "planner",
        *GameTemplate.of("drop2df").short, "--out", str(tmp_path / "runs"), "--json", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (ts / "dist" / "src" / "bot.js").is_file()  # built by its setup, on what its npm ci installed
    installed = ts / "node_modules"
    assert (installed / "typescript" / "package.json").is_file() and not installed.is_symlink()
    standings = json.loads(proc.stdout)["standings"]
    assert {s["bot"] for s in standings} == {"ts_bot", "js_bot", "py_bot", "passer"}
    assert all(s["crashes"] == 0 for s in standings), standings
