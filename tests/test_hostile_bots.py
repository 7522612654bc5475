"""Bots that cellarena starts, written by someone hostile: they cannot take another bot's seat, leave
processes behind, or use more than their limits (docs/security.md).

Each hostile bot is a small script written to the test's tmp folder and started by the real launcher.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
import trio
from bot_files import RAW_BOT
from bot_processes import alive

from cellarena.server.confinement import Limits
from cellarena.server.launcher import BotSpec, play_match
from cellarena.server.match import TickSettings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

QUICK = {"map": "duel", "max_ticks": 30}

THIEF = """
import json, os, socket, sys, time
from cellarena.sdk import protocol

out, victim = sys.argv[1], sys.argv[2]
fd = os.environ.get("CELLARENA_TOKEN_FD")
mine = os.fdopen(int(fd), "rb").readline().decode().strip() if fd else os.environ.get("CELLARENA_TOKEN")
report = {"victim_seen": False, "stolen": None}
deadline = time.time() + 10
while time.time() < deadline and not report["victim_seen"]:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
        except OSError:
            continue
        if ("CELLARENA_NAME=" + victim).encode() in env:
            report["victim_seen"] = True
            for kv in env:
                if kv.startswith(b"CELLARENA_TOKEN="):
                    report["stolen"] = kv.split(b"=", 1)[1].decode()
    time.sleep(0.002)

def hello(token, name):
    sock = socket.create_connection((os.environ["CELLARENA_HOST"], int(os.environ["CELLARENA_PORT"])))
    sock.sendall(protocol.encode(protocol.hello(name, "rezzo", token=token)))
    return sock

def reply(sock):
    reader = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
    sock.settimeout(5)
    while True:
        data = sock.recv(65536)
        if not data:
            return None
        got = reader.feed(data)
        if got:
            return got[0].get("code", got[0]["type"])

held = []
if report["stolen"]:
    held.append(hello(report["stolen"], victim))  # sits in the victim's seat if the token works
own = hello(mine, "thief")
time.sleep(0.3)  # the first hello is seated before the second arrives
second = hello(mine, "thief-again")
report["second"] = reply(second)
with open(out, "w") as f:
    json.dump(report, f)
time.sleep(0.5)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_bot_cannot_read_another_bots_token_and_take_its_seat(tmp_path: Path) -> None:
    thief = _write(tmp_path, "thief.py", THIEF)
    report_file = tmp_path / "thief.json"
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [
                BotSpec("thief", f"python {shlex.quote(str(thief))} {report_file} victim"),
                BotSpec("victim", RAW_BOT),
            ],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
        )
    )
    report = json.loads(report_file.read_text())
    assert report["victim_seen"], launched.logs["thief"].read_text()
    assert report["stolen"] is None  # nothing secret in the victim's environment
    assert report["second"] == "seat_taken"  # a second hello for a seat says so
    assert launched.outcome.forfeits == [0]  # the thief left; the victim played its own seat to the end
    assert launched.outcome.result.winner == 1


ORPHANER = """
import os, sys, time
pids = sys.argv[1]
# A double fork: the grandchild, in a session of its own, outlives its parent and the bot.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\\n")
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
# And a plain child that ignores SIGTERM.
if os.fork() == 0:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(300)
    os._exit(0)
time.sleep(0.5)
os.execvp(sys.executable, [sys.executable] + sys.argv[2:])
"""


def test_every_process_a_bot_starts_is_gone_when_its_match_ends(tmp_path: Path) -> None:
    orphaner = _write(tmp_path, "orphaner.py", ORPHANER)
    pids = tmp_path / "pids"
    raw = shlex.split(RAW_BOT)[1]
    trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [
                BotSpec("orphaner", f"python {shlex.quote(str(orphaner))} {pids} {shlex.quote(raw)}"),
                BotSpec("plain", RAW_BOT),
            ],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
        )
    )
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    time.sleep(0.2)
    assert [p for p in started if alive(p)] == []


HOG = """
import resource, subprocess, sys, time
what = sys.argv[1]
print("open files", resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
if what == "processes":
    children = []
    while True:
        children.append(subprocess.Popen(["sleep", "60"]))
        time.sleep(0.01)
elif what == "memory":
    blocks = []
    while True:
        blocks.append(bytearray(8 * 2**20))  # bytearray writes its zeros: resident at once
        time.sleep(0.01)
else:
    while True:
        pass
"""


@pytest.mark.parametrize(
    ("what", "limits", "words"),
    [
        ("memory", Limits(memory_mb=200), "memory limit exceeded"),
        ("cpu", Limits(cpu_seconds=1.0), "CPU time limit exceeded"),
        ("processes", Limits(processes=10, open_files=77), "process limit exceeded"),
    ],
)
def test_a_bot_over_a_limit_is_stopped_with_the_limit_named(
    tmp_path: Path, what: str, limits: Limits, words: str
) -> None:
    hog = _write(tmp_path, "hog.py", HOG)
    started = time.monotonic()
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            {"map": "duel", "max_ticks": 100_000},
            [BotSpec("hog", f"python {shlex.quote(str(hog))} {what}"), BotSpec("plain", RAW_BOT)],
            TickSettings(fast=True, budget_ms=20_000),
            seed=0,
            log_dir=tmp_path / "logs",
            limits=limits,
        )
    )
    assert time.monotonic() - started < 60
    assert words in launched.stopped["hog"], launched.stopped
    assert launched.outcome.forfeits == [0]
    said = launched.logs["hog"].read_text()
    assert words in said
    assert f"open files ({limits.open_files}, {limits.open_files})" in said  # a kernel limit per process
    assert "plain" not in launched.stopped
    cause = launched.causes[0]  # the forfeit is named by its cause, the limit in its detail
    assert cause["cause"] == "limit" and words in cause["detail"], cause


def test_a_bot_that_cannot_start_is_named_with_the_reason(tmp_path: Path) -> None:
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [BotSpec("ghost", "/nonexistent/bot --play"), BotSpec("plain", RAW_BOT)],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
        )
    )
    assert "cannot start" in launched.stopped["ghost"] and "No such file" in launched.stopped["ghost"]
    assert launched.outcome.forfeits == [0]
    cause = launched.causes[0]
    assert cause["cause"] == "never_connected" and "cannot start" in cause["detail"], cause


def test_the_token_is_not_in_a_launched_bots_environment(tmp_path: Path) -> None:
    probe = _write(
        tmp_path,
        "probe.py",
        "import os, sys\n"
        "fd = int(os.environ['CELLARENA_TOKEN_FD'])\n"
        "token = os.fdopen(fd, 'rb').readline().decode().strip()\n"
        "env = open(f'/proc/{os.getpid()}/environ', 'rb').read().decode()\n"
        "open(sys.argv[1], 'w').write(f'{len(token)} {token in env}')\n",
    )
    out = tmp_path / "probe.txt"
    os.environ.pop("CELLARENA_TOKEN", None)
    trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [BotSpec("probe", f"python {shlex.quote(str(probe))} {out}"), BotSpec("plain", RAW_BOT)],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
            connect_timeout=3,
        )
    )
    assert out.read_text() == "32 False"


PEEKER = """
import json, os, sys, time
results = sys.argv[1]
fd = os.environ["CELLARENA_TOKEN_FD"]
mine = os.fdopen(int(fd), "rb").readline().decode().strip()
report = {"read": [], "results_writable": None, "home_writable": None}
deadline = time.time() + 1.5
while time.time() < deadline and not report["read"]:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for path in (f"/proc/{pid}/fd/{fd}", f"/proc/{pid}/environ"):
            try:  # non-blocking: another process's fd may be a pipe nobody writes to
                handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                text = os.read(handle, 4096).decode("latin-1")
            except OSError:
                continue
            finally:
                os.close(handle)
            if len(text.strip()) == 32 and text.strip() != mine:
                report["read"].append(path)
    time.sleep(0.01)
try:
    with open(results, "r+b") as f:
        f.write(b"x")
    report["results_writable"] = True
except OSError:
    report["results_writable"] = False
try:
    with open(os.path.join(os.environ["HOME"], "scratch"), "w") as f:
        f.write("mine")
    report["home_writable"] = True
except OSError:
    report["home_writable"] = False
print("REPORT " + json.dumps(report), flush=True)  # to its log: with bubblewrap it may write nothing else
"""

HOLDER = """
import os, sys, time
time.sleep(1.5)  # holds its token unread in its inherited pipe meanwhile
token = os.fdopen(int(os.environ["CELLARENA_TOKEN_FD"]), "rb").readline().decode().strip()
print("read my token:", len(token) == 32)
"""


def _public_python() -> str | None:
    """An interpreter every user may run (a bot's user must reach it), or None."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        real = Path(candidate).resolve()
        folders_open = all(p.stat().st_mode & 0o001 for p in real.parents)
        if real.exists() and folders_open and real.stat().st_mode & 0o001:
            return str(real)
    return None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="runs bots as other users")
@pytest.mark.parametrize("method", ["user", "bwrap", None])
def test_an_isolated_bot_cannot_read_another_bots_token_or_write_the_results(
    method: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile

    isolate = method is not None
    if method == "bwrap":
        # CI installs bubblewrap (.ci/run); as root cellarena would pick "user", so bubblewrap is asked for.
        assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
        monkeypatch.setattr("cellarena.server.confinement.isolation_method", lambda: "bwrap")

    python = _public_python()
    assert python is not None, "no Python that another user may run (/usr/bin/python3 on Debian)"
    # A folder everyone may enter, as a tournament's --out usually is (pytest's tmp_path is private).
    shared = Path(tempfile.mkdtemp(prefix="cellarena-isolate-test-"))
    try:
        shared.chmod(0o755)
        peeker = _write(shared, "peeker.py", PEEKER)
        holder = _write(shared, "holder.py", HOLDER)
        results = shared / "results.sqlite"
        results.write_bytes(b"SQLite format 3\0")
        launched = trio.run(
            lambda: play_match(
                "rezzo",
                QUICK,
                [
                    BotSpec("peeker", f"{python} {peeker} {results}"),
                    BotSpec("holder", f"{python} {holder}"),
                ],
                TickSettings(fast=True, budget_ms=2000),
                seed=0,
                log_dir=shared / "logs",
                isolate=isolate,
                connect_timeout=3,
            )
        )
        said = launched.logs["peeker"].read_text()
        assert "REPORT " in said, (launched.stopped, said)
        report = json.loads(said.split("REPORT ", 1)[1].splitlines()[0])
        assert report["home_writable"] is True
        if isolate:
            assert report["read"] == [] and report["results_writable"] is False
            assert "read my token: True" in launched.logs["holder"].read_text()
        else:
            # Without --isolate every bot runs as this user, here root: a token not yet read can be taken
            # from the pipe, and files written (docs/security.md says so).
            assert report["read"] and report["results_writable"] is True
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_the_sdk_reads_its_token_from_the_pipe_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from cellarena.sdk.bot import parse_args

    read_end, write_end = os.pipe()
    os.write(write_end, b"0123456789abcdef0123456789abcdef\n")
    os.close(write_end)
    monkeypatch.setenv("CELLARENA_TOKEN_FD", str(read_end))
    monkeypatch.setenv("CELLARENA_TOKEN", "not-this-one")
    assert parse_args([], "bot").token == "0123456789abcdef0123456789abcdef"
    with pytest.raises(OSError):
        os.fstat(read_end)  # closed once read


async def test_a_token_whose_seat_has_played_is_refused_with_seat_taken() -> None:
    """The seat's bot took its seat and the match started: the token seats nobody else, and the one
    who comes with it hears why (before, `shutdown`, as if the server were stopping)."""
    from wire_client import Client

    from cellarena.sdk import protocol
    from cellarena.server.lobby import Lobby, LobbyConfig
    from cellarena.server.seating import ReservedSeating

    config = LobbyConfig(
        "rezzo",
        {"map": "duel", "max_ticks": 500},
        TickSettings(tick_rate=30),
        host="127.0.0.1",
        port=0,
        matches=1,
    )
    lobby = Lobby(config, ReservedSeating({"t0": 0, "t1": 1}, ["a", "b"]))
    async with trio.open_nursery() as nursery:
        await nursery.start(lobby.serve)
        a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await a.hello("a", token="t0")
        await b.hello("b", token="t1")
        assert (await a.recv())["type"] == "welcome"  # the match started
        late = await Client.connect(lobby.port)
        await late.hello("a", token="t0")
        reply = await late.recv()
        assert reply is not None and reply["code"] == protocol.SEAT_TAKEN
        nursery.cancel_scope.cancel()


def test_a_tournament_names_the_limit_a_bot_went_over(tmp_path: Path) -> None:
    from cellarena_cli import cellarena

    hog = _write(tmp_path, "hog.py", HOG)
    proc = cellarena(
        "tournament", "rezzo", "--bot", f"a={RAW_BOT}", "--bot", f"b={RAW_BOT}",
        "--bot", f"hog=python {shlex.quote(str(hog))} memory", "--memory-mb", "100",
        "--maps", "duel", "--max-ticks", "5", "--out", str(tmp_path / "out"), "--jobs", "2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert len(result["problems"]["hog"]) == 1, result["problems"]
    [problem] = result["problems"]["hog"]
    assert problem["matches"] == 4 and problem["reason"].startswith("memory limit exceeded")
    assert "(100 MiB resident)" in problem["reason"] and set(result["problems"]) == {"hog"}
    assert next(s for s in result["standings"] if s["bot"] == "hog")["crashes"] == 4
