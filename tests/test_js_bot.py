"""The JavaScript example bot (`example_bots/rezzo/js_random`) against a fake server speaking the protocol.

The bot was written from `docs/protocol.md` and `docs/games/rezzo.md` alone, so these tests check
that the documentation is enough to write a client in another language. The fake server
(`fake_server.py`) sends real Rezzo viewports from `RezzoEngine`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from fake_server import IO_TIMEOUT, Conn, FakeServer, Session
from game_servers import Process, add_ladder_bot, exited, js_bot_folder, ladder_serve, serve, start, wait_for
from scripted_server import ScriptedServer, match, refuse
from tls_proxy import TLSProxy, certificates

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol
from cellarena.server.games.rezzo.engine import RezzoEngine

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are needed to run the JavaScript example bot",
)

BOT_DIR = Path(__file__).resolve().parent.parent / "example_bots" / "rezzo" / "js_random"
PY_BOT = BOT_DIR.parent / "random_walker.py"
MOVE_CODES = range(6)
TICKS = 20
ERROR_TEXT = "field 'moves' must be an array (test)"


# ------------------------------------------------------------------ npm install, once per module
@pytest.fixture(scope="module")
def bot_dir() -> Path:
    """The bot's folder with its dependencies installed."""
    return js_bot_folder()


# ------------------------------------------------------------------ messages and the match script
def welcome(engine: RezzoEngine, names: list[str], seat: int = 0) -> protocol.Welcome:
    return protocol.welcome(
        seat=seat,
        game="rezzo",
        match=1,
        players=engine.players,
        names=names,
        tick_rate=0.0,
        budget_ms=1000,
        config={
            "map": engine.map_name or "duel",
            "width": engine.width,
            "height": engine.height,
            "agents_per_player": engine.agents_per_player,
            "view_size": 13,
            "max_ticks": engine.max_ticks,
            "torus": engine.torus,
            "own_base_counts": True,
        },
    )


def tick_message(engine: RezzoEngine, seat: int) -> protocol.Tick:
    return protocol.tick(engine.tick, 1000, engine.pending()[seat])


def end_message(ticks: int, players: int) -> protocol.End:
    return protocol.end(
        ticks=ticks, result="draw", rank=1, ranks=[1] * players, winner=None, reason="tick cap reached"
    )


def play_match(conn: Conn, *, game_map: str = "duel", batch: int = 1, ticks: int = TICKS) -> None:
    """welcome, `ticks` ticks, end. With batch 1 the bot's moves are applied to the world; with a
    larger batch, `batch` ticks go out in one write (the first with the welcome, the last with the
    end) and the world advances with noops, since their answers are not in yet."""
    session = conn.session
    engine = RezzoEngine.new({"map": game_map})
    seat = 0
    names = [session.hello["name"]] + [f"idle{p}" for p in range(1, engine.players)]
    pending: list[dict[str, Any]] = [welcome(engine, names, seat)]
    sent = 0
    while sent < ticks:
        group = []
        for _ in range(min(batch, ticks - sent)):
            req = tick_message(engine, seat)
            group.append(req)
            session.requests.append(req)
            sent += 1
            if batch > 1:
                engine.apply({})
        tail = [end_message(ticks, engine.players)] if batch > 1 and sent == ticks else []
        conn.send(*pending, *group, *tail)
        pending = []
        for req in group:
            answer = conn.recv()
            assert answer is not None, f"the bot closed instead of answering tick {req['tick']}"
            session.answers.append(answer)
            if batch == 1:
                moves = answer.get("moves")
                engine.apply({seat: moves if isinstance(moves, list) else []})
    if batch == 1:
        conn.send(end_message(ticks, engine.players))
    conn.sock.shutdown(socket.SHUT_WR)  # the server closes after `end`
    while (extra := conn.recv()) is not None:
        session.after_end.append(extra)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    session: Session


def run_bot(
    bot_dir: Path,
    script: Callable[[Conn], None],
    *,
    write: str = "whole",
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    server = FakeServer(script, write)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CELLARENA_")}
    full_env.update({"CELLARENA_HOST": "127.0.0.1", "CELLARENA_PORT": str(server.port)})
    full_env.update(env or {})
    proc = subprocess.Popen(
        ["node", "bot.js", *(args or [])],
        cwd=bot_dir,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=IO_TIMEOUT * 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the bot did not exit; stderr:\n{err}")
    session = server.join()
    return Run(proc.returncode, out, err, session)


# ------------------------------------------------------------------ checks
def check_hello(hello: dict[str, Any] | None, name: str, token: str | None) -> None:
    assert hello is not None
    protocol.check_hello(hello, game="rezzo")  # exactly as the server checks it
    assert hello["name"] == name
    assert hello.get("role", "bot") == "bot"
    if token is None:
        assert "token" not in hello
    else:
        assert hello["token"] == token


def check_answers(session: Session) -> list[list[int]]:
    """Every tick answered once, in order, with its tick number and one valid code per agent."""
    assert len(session.answers) == len(session.requests)
    all_moves = []
    for req, answer in zip(session.requests, session.answers, strict=True):
        assert answer["type"] == "moves", answer
        assert protocol.check_moves(answer)["tick"] == req["tick"]
        moves = answer["moves"]
        assert isinstance(moves, list) and len(moves) == len(req["agents"]), (req["agents"], moves)
        assert all(protocol.is_int(m) and m in MOVE_CODES for m in moves), moves
        all_moves.append(moves)
    assert session.after_end == [], "the bot sent something after `end`"
    return all_moves


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("game_map", ["duel", "duel2", "quad"])
def test_plays_a_match_and_exits_zero(bot_dir: Path, game_map: str) -> None:
    run = run_bot(bot_dir, lambda c: play_match(c, game_map=game_map))
    assert run.returncode == 0, run.stderr
    check_hello(run.session.hello, "js_random", None)
    moves = check_answers(run.session)
    assert [r["tick"] for r in run.session.requests] == list(range(1, TICKS + 1))
    flat = [m for ms in moves for m in ms]
    assert 1 in flat or 4 in flat, f"the bot never walked: {flat}"


def test_name_and_token_from_environment(bot_dir: Path) -> None:
    run = run_bot(
        bot_dir,
        lambda c: play_match(c, ticks=3),
        env={"CELLARENA_NAME": "envbot", "CELLARENA_TOKEN": "s3at-token"},
    )
    assert run.returncode == 0, run.stderr
    check_hello(run.session.hello, "envbot", "s3at-token")
    check_answers(run.session)


def test_flags_override_environment(bot_dir: Path, free_port: int) -> None:
    def script(conn: Conn) -> None:
        play_match(conn, ticks=3)

    # The port comes from --port; the environment points at a port where nothing listens.
    server = FakeServer(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELLARENA_")}
    env.update({"CELLARENA_PORT": str(free_port), "CELLARENA_NAME": "ignored", "CELLARENA_TOKEN": "ignored"})
    flags = ["--host", "127.0.0.1", "--port", str(server.port), "--name", "flagbot", "--token=tok"]
    proc = subprocess.run(
        ["node", "bot.js", *flags],
        cwd=bot_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=IO_TIMEOUT * 2,
        check=False,
    )
    session = server.join()
    assert proc.returncode == 0, proc.stderr
    check_hello(session.hello, "flagbot", "tok")
    check_answers(session)


def test_plays_on_the_connection_it_was_handed(bot_dir: Path, free_port: int) -> None:
    """How `cellarena match` starts it: an open connection on standard input (CELLARENA_SOCKET_FD=0)
    that owns its seat. It plays there, sends no token, and leaves the token pipe and the port of its
    environment alone (nothing listens on that port)."""
    server = FakeServer(lambda c: play_match(c, ticks=3))
    handed = socket.create_connection(("127.0.0.1", server.port))
    read_end, write_end = os.pipe()
    os.write(write_end, b"0123456789abcdef0123456789abcdef\n")
    os.close(write_end)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELLARENA_")}
    env.update(
        CELLARENA_SOCKET_FD="0",
        CELLARENA_HOST="127.0.0.1",
        CELLARENA_PORT=str(free_port),
        CELLARENA_TOKEN_FD=str(read_end),
        CELLARENA_NAME="handed",
    )
    try:
        proc = subprocess.run(
            ["node", "bot.js"],
            cwd=bot_dir,
            env=env,
            stdin=handed.fileno(),
            pass_fds=(read_end,),
            capture_output=True,
            text=True,
            timeout=IO_TIMEOUT * 2,
            check=False,
        )
    finally:
        handed.close()
    session = server.join()
    assert proc.returncode == 0, proc.stderr
    check_hello(session.hello, "handed", None)
    check_answers(session)
    assert os.read(read_end, 100) == b"0123456789abcdef0123456789abcdef\n"  # not read
    os.close(read_end)


def test_frames_split_into_single_bytes(bot_dir: Path) -> None:
    run = run_bot(bot_dir, lambda c: play_match(c, game_map="duel2", ticks=8), write="bytewise")
    assert run.returncode == 0, run.stderr
    check_answers(run.session)
    assert len(run.session.answers) == 8


def test_several_frames_in_one_write(bot_dir: Path) -> None:
    run = run_bot(bot_dir, lambda c: play_match(c, batch=4))
    assert run.returncode == 0, run.stderr
    check_answers(run.session)
    assert len(run.session.answers) == TICKS


def test_same_seed_same_moves(bot_dir: Path) -> None:
    def moves_for(seed: str) -> list[list[int]]:
        run = run_bot(bot_dir, play_match, args=["--seed", seed])
        assert run.returncode == 0, run.stderr
        return check_answers(run.session)

    assert moves_for("7") == moves_for("7")


@pytest.mark.parametrize("when", ["before_welcome", "mid_match"])
def test_server_error_is_reported_and_exit_is_nonzero(bot_dir: Path, when: str) -> None:
    def script(conn: Conn) -> None:
        if when == "mid_match":
            engine = RezzoEngine.new({"map": "duel"})
            conn.send(welcome(engine, ["js_random", "idle"]))
            req = tick_message(engine, 0)
            conn.session.requests.append(req)
            conn.send(req)
            conn.session.answers.append(conn.recv())
        conn.send(protocol.error(protocol.BAD_MESSAGE, ERROR_TEXT))
        conn.sock.shutdown(socket.SHUT_WR)
        while conn.recv() is not None:
            pass

    run = run_bot(bot_dir, script)
    assert run.returncode != 0
    assert "bad_message" in run.stderr
    assert ERROR_TEXT in run.stderr
    if when == "mid_match":
        check_answers(run.session)


def test_connection_closed_before_end_exits_nonzero(bot_dir: Path) -> None:
    def script(conn: Conn) -> None:
        engine = RezzoEngine.new({"map": "duel"})
        conn.send(welcome(engine, ["js_random", "idle"]), tick_message(engine, 0))
        conn.recv()

    run = run_bot(bot_dir, script)
    assert run.returncode != 0
    assert run.stderr.strip()


def test_connection_refused_exits_nonzero(bot_dir: Path, free_port: int) -> None:
    proc = subprocess.run(
        ["node", "bot.js", "--port", str(free_port)],
        cwd=bot_dir,
        capture_output=True,
        text=True,
        timeout=IO_TIMEOUT,
        check=False,
    )
    assert proc.returncode != 0
    assert "ECONNREFUSED" in proc.stderr or "refused" in proc.stderr.lower()


# ------------------------------------------------------------------ many matches, ladders, TLS
PLAYED = "played; connecting for the next"


def js_bot(
    bot_dir: Path, folder: Path, name: str, port: int, *flags: str, token: str | None = None
) -> Process:
    """bot.js as its author starts it; a token goes through the environment, never the command line."""
    env = {"CELLARENA_TOKEN": token} if token is not None else None
    command = ["node", "bot.js", "--port", str(port), "--name", name, *flags]
    return start(command, folder, name, cwd=bot_dir, env=env)


def ends(proc: Process) -> int:
    return proc.stderr().count(": end after ")


def test_matches_2_against_cellarena_serve(bot_dir: Path, tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        bots = [js_bot(bot_dir, tmp_path, name, server.port, "--matches", "2") for name in ("js1", "js2")]
        for b in bots:
            assert b.wait(120) == 0, b.stderr()
        time.sleep(0.5)
        results = [line for line in server.stdout().splitlines() if line.startswith("{")]
    finally:
        server.stop()
    assert len(results) == 2, server.stdout()
    for b in bots:
        assert ends(b) == 2 and b.stderr().count(PLAYED) == 1, b.stderr()


def test_ladder_mode_against_a_real_ladder(bot_dir: Path, tmp_path: Path) -> None:
    js_token = add_ladder_bot(tmp_path, "jsbot")
    py_token = add_ladder_bot(tmp_path, "pybot")
    ladder = ladder_serve(tmp_path)
    token = js_token.read_text().strip()
    js = js_bot(bot_dir, tmp_path / "bots", "jsbot", ladder.port, "--ladder", token=token)
    py = start(
        [sys.executable, str(PY_BOT), "--ladder", "--port", str(ladder.port), "--token-file", str(py_token)],
        tmp_path / "bots",
        "pybot",
    )
    try:
        wait_for(lambda: js.stderr().count(PLAYED) >= 2, "two ladder matches of the JS bot", 120)
        assert js.stop() == 0
        assert py.stop() == 0
    finally:
        for proc in (js, py):
            if proc.proc.poll() is None:
                proc.proc.kill()
        ladder.stop()
    err = js.stderr()
    assert err.strip().splitlines()[-1].startswith("js_random: stopped by SIGTERM after ")
    assert token not in err and token not in ladder.stderr()
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
    assert len(finished) >= 2 and all(sorted(m.bots) == ["jsbot", "pybot"] for m in finished)


async def test_refusals_that_mean_not_now_are_retried_with_back_off(bot_dir: Path, tmp_path: Path) -> None:
    server = ScriptedServer(
        [
            refuse(protocol.BUSY, "js_random already has a connection in the queue"),
            refuse(protocol.LOCKED_OUT, "too many wrong tokens from 127.0.0.1; refused for another 2 s"),
            match(3),
            match(3, drop_after=1),
            refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back in a few seconds"),
            match(3),
        ],
        expect="js_random",
    )
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = js_bot(bot_dir, tmp_path, "js_random", port, "--matches", "2")
        code = await exited(
            bot, 60, lambda: f"; the server saw {len(server.seen)} connections: {server.failures}"
        )
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert code == 0, err
    assert server.failures == [] and len(server.seen) == 6
    times = [t for t, _ in server.seen]
    assert times[1] - times[0] >= 0.5  # the first failure in a row waits 0.5-1 s
    assert times[2] - times[1] >= 2.0  # the lock-out said 2 s: no sooner
    assert 0.5 <= times[4] - times[3] < 1.5  # a match was played: the count started again
    assert times[5] - times[4] >= 1.0  # the second failure in a row: 1-2 s
    assert "server error busy" in err and "trying again in" in err and ends(bot) == 2


@pytest.mark.parametrize("matches", [1, 2])
async def test_ladder_with_matches_n_rides_out_refusals_and_stops_after_n(
    bot_dir: Path, tmp_path: Path, matches: int
) -> None:
    """docs/ladder.md: the SDK's flags work for the JavaScript example, `--ladder --matches N` too."""
    scripts = [refuse(protocol.BUSY, "js_random already has a connection in the queue")]
    for _ in range(matches):
        scripts += [match(3), refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back later")]
    server = ScriptedServer(
        scripts[:-1], expect="js_random"
    )  # nothing after the last match: a connection more would fail
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = js_bot(bot_dir, tmp_path, "js_random", port, "--ladder", "--matches", str(matches))
        code = await exited(bot, 60)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert code == 0, err
    assert server.failures == [] and len(server.seen) == len(scripts) - 1
    assert ends(bot) == matches and err.count("trying again in") == matches
    assert err.count(f"of {matches} played; connecting for the next") == matches - 1


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (protocol.BAD_HELLO, "check the bot's token"),
        (protocol.REVOKED, "current token"),
        (protocol.PAUSED, "fix the bot, then resume it"),
        (protocol.INTERNAL, ""),
    ],
)
async def test_an_error_that_waiting_cannot_fix_stops_the_bot(
    bot_dir: Path, tmp_path: Path, code: str, fix: str
) -> None:
    server = ScriptedServer([refuse(code, "as the test says")], expect="js_random")
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = js_bot(bot_dir, tmp_path, "js_random", port, "--ladder", token="cla_wrong")
        status = await exited(bot, 30)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert status == 2
    assert f"server error {code}: as the test says" in err and fix in err and "not trying again" in err
    assert len(server.seen) == 1 and "cla_wrong" not in err


async def test_tls_through_a_terminating_proxy(bot_dir: Path, tmp_path: Path) -> None:
    certs = certificates(tmp_path, "127.0.0.1")
    server = serve(tmp_path)
    try:
        proxy = TLSProxy(certs.server, server.port)
        async with trio.open_nursery() as nursery:
            port = await proxy.start(nursery)
            flags = ["--host", "127.0.0.1", "--tls-ca", str(certs.ca_file)]
            bots = [js_bot(bot_dir, tmp_path, name, port, *flags) for name in ("js1", "js2")]
            codes = [await exited(b, 60) for b in bots]
            nursery.cancel_scope.cancel()
        await trio.sleep(0.3)
        results = [line for line in server.stdout().splitlines() if line.startswith("{")]
    finally:
        server.stop()
    assert codes == [0, 0], [b.stderr() for b in bots]
    assert proxy.handshakes == 2 and len(results) == 1 and all(ends(b) == 1 for b in bots)


@pytest.mark.parametrize(
    ("names", "flags", "reason"),
    [
        (
            ["127.0.0.1"],
            ["--tls-ca", "{other}"],
            "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
        ),  # a CA that signed nothing
        (["127.0.0.1"], ["--tls"], "UNABLE_TO_VERIFY_LEAF_SIGNATURE"),  # Node's store knows no trustme CA
        (["localhost"], ["--tls-ca", "{ca}"], "ERR_TLS_CERT_ALTNAME_INVALID"),  # the name is checked
    ],
)
async def test_a_refused_tls_handshake_says_why_and_stops(
    bot_dir: Path, tmp_path: Path, names: list[str], flags: list[str], reason: str
) -> None:
    certs = certificates(tmp_path, *names)
    proxy = TLSProxy(certs.server, 9)  # never reached: the handshake fails first
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        argv = [f.format(other=certs.other_ca_file, ca=certs.ca_file) for f in flags]
        bot = js_bot(bot_dir, tmp_path, "js_random", port, "--ladder", *argv)
        status = await exited(bot, 30)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert status == 1
    assert f"TLS handshake with 127.0.0.1:{port} failed" in err and reason in err and "--tls-ca" in err
    assert "trying again" not in err


def test_bad_new_flags_are_usage_errors(bot_dir: Path, tmp_path: Path) -> None:
    def usage(*flags: str) -> str:
        proc = subprocess.run(
            ["node", "bot.js", *flags], cwd=bot_dir, capture_output=True, text=True, timeout=30, check=False
        )
        assert proc.returncode == 64, proc.stderr
        return proc.stderr

    assert "--matches must be 1 or more" in usage("--matches", "0")
    assert "--tls-ca" in usage("--tls-ca", str(tmp_path / "missing.pem"))


async def test_a_plain_bot_at_a_tls_port_is_told_to_use_tls(bot_dir: Path, tmp_path: Path) -> None:
    certs = certificates(tmp_path, "127.0.0.1")
    proxy = TLSProxy(certs.server, 9)
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        bot = js_bot(bot_dir, tmp_path, "js_random", port)
        status = await exited(bot, 30)
        nursery.cancel_scope.cancel()
    assert status == 1
    assert f"127.0.0.1:{port}" in bot.stderr() and "connect with --tls" in bot.stderr()


async def test_a_ladder_whose_database_is_down_is_retried(bot_dir: Path, tmp_path: Path) -> None:
    """During a database outage a ladder refuses hellos with `shutdown`: the JS bot comes back and plays."""
    outage = "the ladder cannot reach its database now; come back in a few seconds"
    server = ScriptedServer([refuse(protocol.SHUTDOWN, outage), match(3), match(3)], expect="js_random")
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = js_bot(bot_dir, tmp_path, "js_random", port, "--matches", "2")
        code = await exited(bot, 60)
        nursery.cancel_scope.cancel()
    assert code == 0, bot.stderr()
    assert len(server.seen) == 3 and "trying again in" in bot.stderr() and ends(bot) == 2
