"""Bots that cellarena starts, written by someone hostile: they cannot take another bot's seat, leave
processes behind, or use more than their limits (docs/security.md).

Each hostile bot is a small script written to the test's tmp folder and started by the real launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from bot_files import RAW_BOT
from bot_processes import alive
from trio.testing import MockClock

from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec, play_match
from cellarena.server.play.match import TickSettings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

QUICK = {"map": "duel", "max_ticks": 30}


def _need_cgroups() -> None:
    """The cgroup path needs cgroups that this user may write (root on the project's machines, where
    cgroup v1's memory, pids, freezer and cpuacct are mounted); under CI their absence fails."""
    from cellarena.server.bots.cgroups import detect

    detect.cache_clear()
    if {"memory", "pids", "freezer", "cpuacct"} <= set(detect()) or "unified" in detect():
        return
    why = "no writable cgroups here (run as root on a host that mounts them)"
    if os.environ.get("CI") == "true":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


@pytest.fixture(params=["cgroups", "no cgroups"])
def cgroups(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """Both ways a host confines bots: a cgroup per bot, and the fallback without (CELLARENA_CGROUPS=off)."""
    from cellarena.server.bots.cgroups import detect

    with_cgroups = request.param == "cgroups"
    if with_cgroups:
        _need_cgroups()
    else:
        monkeypatch.setenv("CELLARENA_CGROUPS", "off")
    detect.cache_clear()
    yield with_cgroups
    monkeypatch.undo()
    detect.cache_clear()


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


PROC_THIEF = """
import json, os, socket, sys, time
from cellarena.sdk import protocol

out, victim = sys.argv[1], sys.argv[2]
report = {"victim_seen": False, "stolen": None, "stolen_reply": None}

def victim_pids():
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
        except OSError:
            continue
        if ("CELLARENA_NAME=" + victim).encode() in env:
            yield pid

# Every descriptor of the victim that can be opened and read (pipes; a socket cannot be opened).
deadline = time.time() + 10
while time.time() < deadline and report["stolen"] is None:
    for pid in victim_pids():
        report["victim_seen"] = True
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                handle = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                text = os.read(handle, 4096).decode("latin-1").strip()
            except OSError:
                text = ""
            finally:
                os.close(handle)
            if len(text) == 32 and all(c in "0123456789abcdef" for c in text):
                report["stolen"] = text
    time.sleep(0.002)

def reply(sock, wait):
    reader = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
    sock.settimeout(wait)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return "closed"
            got = reader.feed(data)
            if got:
                return got[0].get("code", got[0]["type"])
    except socket.timeout:
        return "seated"  # a reserved seat says nothing until its match starts

held = []
if report["stolen"]:
    sock = socket.create_connection((os.environ["CELLARENA_HOST"], int(os.environ["CELLARENA_PORT"])))
    sock.sendall(protocol.encode(protocol.hello(victim, "rezzo", token=report["stolen"])))
    report["stolen_reply"] = reply(sock, 1.0)
    held.append(sock)
with open(out, "w") as f:
    json.dump(report, f)
time.sleep(3)  # holds what it took while the match would start
"""

SLOW_VICTIM = """
import runpy, sys, time
time.sleep(1.5)  # its handover waits, unread, meanwhile
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_bot_cannot_take_a_seat_by_reading_another_bots_descriptors(tmp_path: Path) -> None:
    """Without --isolate, a bot of the same user opens /proc/VICTIM/fd/N of a bot that has not read its
    handover yet: it learns nothing that seats it (before: the victim's token, its seat, its result)."""
    from bot_files import example_bot

    thief = _write(tmp_path, "thief.py", PROC_THIEF)
    victim = _write(tmp_path, "victim.py", SLOW_VICTIM)
    walker = shlex.split(example_bot("rezzo", "random_walker"))[1]
    report_file = tmp_path / "thief.json"
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [
                BotSpec("thief", f"python {shlex.quote(str(thief))} {report_file} victim"),
                BotSpec("victim", f"python {shlex.quote(str(victim))} {shlex.quote(walker)}"),
            ],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
        )
    )
    report = json.loads(report_file.read_text())
    assert report["victim_seen"], launched.logs["thief"].read_text()
    # Whatever it read (an unread legacy token pipe), it is no use from the thief's own processes.
    assert report["stolen_reply"] in (None, "bad_hello"), report
    assert launched.refused == {}, launched.refused
    assert launched.outcome.forfeits == [0], launched.logs["victim"].read_text()
    assert launched.outcome.result.winner == 1


def test_a_bot_written_before_the_handover_still_plays_with_its_token_pipe(tmp_path: Path) -> None:
    """A bot that ignores the connection it is handed and connects to CELLARENA_PORT with the token
    from CELLARENA_TOKEN_FD (as bots did before) still takes its seat without --isolate: its own
    process holds the connection. Here it even connects from a child process."""
    raw = f"{shlex.quote(sys.executable)} {shlex.quote(shlex.split(RAW_BOT)[1])} random"
    legacy = f"env -u CELLARENA_SOCKET_FD sh -c {shlex.quote(raw)}"
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            QUICK,
            [BotSpec("legacy", legacy), BotSpec("handed", RAW_BOT)],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=tmp_path / "logs",
        )
    )
    said = launched.logs["legacy"].read_text()
    assert launched.refused == {} and launched.stopped == {} and launched.outcome.forfeits == [], said


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


@pytest.mark.parametrize("cgroups", ["auto", "off"])
@pytest.mark.parametrize("command", ["match", "tournament"])
def test_nothing_a_bot_started_outlives_a_killed_cellarena(
    tmp_path: Path, command: str, cgroups: str
) -> None:
    """SIGKILL every process of a running `cellarena match` or `tournament` (its workers too, as the
    kernel's out-of-memory killer or `kill -9 -PGID` would): each bot's first process, the children
    it left in its session and the grandchild it double-forked into a session of its own all end
    within seconds (before: they ran on, re-parented to init). With a cgroup per bot, and without."""
    if cgroups == "auto":
        _need_cgroups()
    import signal

    from bot_processes import BotPids
    from cellarena_cli import start_cellarena

    orphaner = _write(tmp_path, "orphaner.py", ORPHANER)
    pids = BotPids(tmp_path / "pids")
    raw = shlex.split(RAW_BOT)[1]
    bots = [
        "--bot", f"orphaner=python {shlex.quote(str(orphaner))} {pids.path} {shlex.quote(raw)} forever",
        "--bot", f"plain={RAW_BOT} forever",
    ]  # fmt: skip
    if command == "tournament":
        bots += ["--out", str(tmp_path / "out"), "--jobs", "2"]
    else:
        bots += ["--log-dir", str(tmp_path / "logs")]
    proc = start_cellarena(
        command, "rezzo", *bots, "--max-ticks", "100000",
        env={**pids.env, "CELLARENA_CGROUPS": cgroups},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        # The orphaner's two children and the raw bot it becomes, and the plain bot: one match's.
        wanted = 4
        deadline = time.monotonic() + 60
        while len(pids.running()) < wanted and time.monotonic() < deadline:
            assert proc.poll() is None, "cellarena ended before it could be killed"
            time.sleep(0.05)
        assert len(pids.running()) >= wanted, pids.listed()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    left = pids.wait_until_dead(10.0)
    survivors = subprocess.run(
        ["ps", "-o", "pid,ppid,sid,cmd", "-p", ",".join(map(str, left or [0]))],
        check=False,
        capture_output=True,
        text=True,
    )
    assert left == [], survivors.stdout


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


# Real time: asserts a hog is stopped within 60 s of real time.
@pytest.mark.realtime
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
report = {"read": [], "results_writable": None, "home_writable": None}

def target(pid):
    # Reading a pipe takes its bytes: the descriptors of a process it can tell is not the other bot
    # (another test's node, whose signal lock is a pipe, hung when a byte of it went) are left alone.
    # One it cannot tell apart, it tries: isolation must refuse it the descriptors too.
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    except OSError:
        return True
    return b"CELLARENA_NAME=holder" in env

deadline = time.time() + 1.5
while time.time() < deadline and not report["read"]:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fds = [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")] if target(pid) else []
        except OSError:
            fds = []
        for path in fds + [f"/proc/{pid}/environ"]:
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
            if len(text.strip()) == 32 and all(c in "0123456789abcdef" for c in text.strip()):
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
import os, socket, sys, time
time.sleep(1.5)  # holds what it was handed, unread, meanwhile
handed = socket.socket(fileno=int(os.environ["CELLARENA_SOCKET_FD"]))
print("handed a connection:", handed.getpeername()[0] == "127.0.0.1")
print("token pipe:", "CELLARENA_TOKEN_FD" in os.environ)
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
        monkeypatch.setattr("cellarena.server.bots.confinement.isolation_method", lambda: "bwrap")

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
        held = launched.logs["holder"].read_text()
        assert "handed a connection: True" in held, held
        if isolate:
            # Nothing to read, and no token handed over (an isolated bot reaches only its connection).
            assert report["read"] == [] and report["results_writable"] is False
            assert "token pipe: False" in held
        else:
            # Without --isolate every bot runs as this user, here root: the token pipe kept for bots
            # written before can be read (it seats only the holder's own processes, see
            # test_a_bot_cannot_take_a_seat_by_reading_another_bots_descriptors), and files written
            # (docs/security.md says so).
            assert report["read"] and report["results_writable"] is True
            assert "token pipe: True" in held
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


@pytest.mark.usefixtures("virtual_wall")
async def test_a_token_whose_seat_has_played_is_refused_with_seat_taken(autojump_clock: MockClock) -> None:
    """The seat's bot took its seat and the match started: the token seats nobody else, and the one
    who comes with it hears why (before, `shutdown`, as if the server were stopping)."""
    from wire_client import Client

    from cellarena.sdk import protocol
    from cellarena.server.play.lobby import Lobby, LobbyConfig
    from cellarena.server.play.seating import ReservedSeating

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
    # One good bot and the hog: two matches (both seat orders), each a memory limit's forfeit.
    proc = cellarena(
        "tournament", "rezzo", "--bot", f"a={RAW_BOT}",
        "--bot", f"hog=python {shlex.quote(str(hog))} memory", "--memory-mb", "100",
        "--maps", "duel", "--max-ticks", "5", "--out", str(tmp_path / "out"), "--jobs", "2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert len(result["problems"]["hog"]) == 1, result["problems"]
    [problem] = result["problems"]["hog"]
    assert problem["matches"] == 2 and problem["reason"].startswith("memory limit exceeded")
    assert "(100 MiB resident)" in problem["reason"] and set(result["problems"]) == {"hog"}
    assert next(s for s in result["standings"] if s["bot"] == "hog")["crashes"] == 2


# ------------------------------------------------------------------ cgroups and --isolate's network
TREE = """
f() { if [ "$1" -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; sleep 60; }
f 5
"""


@pytest.mark.parametrize("hierarchy", ["v1", "v2"])
def test_a_bots_cgroup_is_killed_as_a_whole(hierarchy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bot's cgroup ends every process in it at once, however many forked meanwhile: v1 freezes
    them first (it has no `cgroup.kill`), v2 kills them in one write."""
    import secrets
    import subprocess

    from cellarena.server.bots.cgroups import UNIFIED, BotCgroup, detect

    monkeypatch.setenv("CELLARENA_CGROUPS", hierarchy)
    detect.cache_clear()
    try:
        wanted = "freezer" if hierarchy == "v1" else UNIFIED
        if wanted not in detect():
            why = f"no writable cgroup {hierarchy} with {wanted} here"
            if os.environ.get("CI") == "true":
                pytest.fail(why, pytrace=False)
            pytest.skip(why)
        group = BotCgroup.make(f"test-{secrets.token_hex(4)}")
        assert group is not None
        fds = group.join_descriptors()

        def join() -> None:
            for fd in fds:
                os.write(fd, b"0")

        proc = subprocess.Popen(["sh", "-c", TREE], preexec_fn=join, start_new_session=True)  # noqa: PLW1509
        for fd in fds:
            os.close(fd)
        deadline = time.monotonic() + 30
        while len(group.pids()) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group.pids()) >= 100
        group.kill()
        assert group.pids() == set()
        assert proc.wait(timeout=10) == -9
        group.remove()
        assert not any(os.path.exists(folder) for folder in group.folders.values())
    finally:
        detect.cache_clear()


DETACHED_CPU = """
import os, sys, time
# Each burst of CPU runs in a grandchild detached into a session of its own, which ends by itself.
# One burst at a time: the next starts when the last one's pipe closes (at its exit), so however
# slow a busy machine makes them, the live processes never hold more than 0.3 s of CPU together.
# With a count (argv[1]) it exits after that many bursts; without one it bursts until stopped.
bursts = int(sys.argv[1]) if len(sys.argv) > 1 else -1
while bursts != 0:
    bursts -= 1
    done, signal = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(done)
            end = time.process_time() + 0.3
            while time.process_time() < end:
                pass
            os._exit(0)
        os._exit(0)
    os.close(signal)
    os.wait()
    os.read(done, 1)  # EOF when the grandchild has ended
    os.close(done)
    time.sleep(0.05)
"""


def test_cpu_time_of_processes_that_ended_detached_counts_in_a_cgroup(tmp_path: Path, cgroups: bool) -> None:
    """CPU time spent in processes that left the bot's session and ended is counted by the bot's
    cgroup (cpuacct, cpu.stat); looking at the process table sees only the live ones, so without
    cgroups such a bot never reaches its CPU limit (docs/security.md says so)."""
    hog = _write(tmp_path, "hog.py", DETACHED_CPU)
    # Without cgroups the hog stops by itself after 5 bursts (1.5 s of CPU, over its 1 s limit, all in
    # processes that ended) rather than burn until the connect timeout: it forfeits, never stopped.
    bursts = "" if cgroups else " 5"
    launched = trio.run(
        lambda: play_match(
            "rezzo",
            {"map": "duel", "max_ticks": 100_000},
            [BotSpec("hog", f"python {shlex.quote(str(hog))}{bursts}"), BotSpec("plain", RAW_BOT)],
            TickSettings(fast=True, budget_ms=20_000),
            seed=0,
            log_dir=tmp_path / "logs",
            limits=Limits(cpu_seconds=1.0),
            connect_timeout=8,
        )
    )
    assert launched.outcome.forfeits == [0]
    if cgroups:
        assert "CPU time limit exceeded (1 s)" in launched.stopped["hog"], launched.stopped
    else:
        assert "hog" not in launched.stopped  # it forfeits for never connecting, not for its CPU
        assert launched.causes[0]["cause"] in ("exited", "never_connected"), launched.causes


BURST = """
import time
block = b"\\x01" * (150 * 2**20)  # resident at once, in a few hundredths of a second
del block
print("had 150 MiB", flush=True)
time.sleep(3)
"""


def _shared_folder() -> Path:
    """A folder everyone may enter, as a tournament's --out usually is (pytest's tmp_path is private)."""
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="cellarena-isolate-test-"))
    shared.chmod(0o755)
    return shared


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="runs bots as other users")
def test_an_isolated_bots_memory_is_held_by_the_kernel(cgroups: bool) -> None:
    """With --isolate and a cgroup the kernel holds a bot to its memory limit: its out-of-memory
    killer ends the bot while it fills a block over the limit, so it never has it, and the result
    names the limit. Without cgroups the watcher looks five times a second, and a block filled and
    freed between two looks goes unseen (docs/security.md)."""
    import shutil

    python = _public_python()
    assert python is not None, "no Python that another user may run (/usr/bin/python3 on Debian)"
    shared = _shared_folder()
    try:
        burst = _write(shared, "burst.py", BURST)
        launched = trio.run(
            lambda: play_match(
                "rezzo",
                QUICK,
                [BotSpec("burst", f"{python} {burst}"), BotSpec("idle", f"{python} -c pass")],
                TickSettings(fast=True, budget_ms=2000),
                seed=0,
                log_dir=shared / "logs",
                limits=Limits(memory_mb=100),
                isolate=True,
                connect_timeout=3,
            )
        )
        said = launched.logs["burst"].read_text()
        stopped = launched.stopped.get("burst") == "memory limit exceeded (100 MiB resident)"
        if cgroups:
            assert stopped and "had 150 MiB" not in said, said  # the kernel refused it the block
        else:
            # Five looks a second: caught filling the block, or it had it unseen (often, on a calm host).
            assert stopped or "had 150 MiB" in said, said
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="runs bots as other users")
def test_an_isolated_bots_processes_are_held_by_the_kernel(cgroups: bool) -> None:
    """With --isolate and a cgroup the kernel refuses a bot's fork past its process limit (pids.max)
    and the result names the limit; without, RLIMIT_NPROC refuses it (the bot's own user has no
    other process) and the watcher kills a bot that has more."""
    import shutil

    python = _public_python()
    assert python is not None, "no Python that another user may run (/usr/bin/python3 on Debian)"
    shared = _shared_folder()
    try:
        hog = _write(shared, "hog.py", HOG)
        launched = trio.run(
            lambda: play_match(
                "rezzo",
                QUICK,
                [BotSpec("hog", f"{python} {hog} processes"), BotSpec("idle", f"{python} -c pass")],
                TickSettings(fast=True, budget_ms=2000),
                seed=0,
                log_dir=shared / "logs",
                limits=Limits(processes=10),
                isolate=True,
                connect_timeout=3,
            )
        )
        said = launched.logs["hog"].read_text()
        if cgroups:
            assert launched.stopped.get("hog") == "process limit exceeded (10 processes)", said
        else:
            assert "Resource temporarily unavailable" in said or "hog" in launched.stopped, said
    finally:
        shutil.rmtree(shared, ignore_errors=True)


NETWORK_PROBE = """
import json, os, socket, sys
report = {"address_given": "CELLARENA_PORT" in os.environ, "reached": []}
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, int(sys.argv[1])), timeout=2).close()
        report["reached"].append(host)
    except OSError:
        pass
handed = socket.socket(fileno=int(os.environ["CELLARENA_SOCKET_FD"]))
report["handed"] = handed.getpeername()[0]
print("REPORT " + json.dumps(report), flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="runs bots as other users")
@pytest.mark.parametrize("method", ["user", "bwrap", None])
def test_an_isolated_bot_reaches_nothing_but_its_connection(
    method: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An isolated bot has a network of its own with nothing in it: a server listening on this host's
    loopback and on its other addresses is out of its reach; its handed connection works. Without
    --isolate the same bot reaches them (so the probe is sound)."""
    import shutil
    import socket

    if method == "bwrap":
        assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
        monkeypatch.setattr("cellarena.server.bots.confinement.isolation_method", lambda: "bwrap")
    python = _public_python()
    assert python is not None, "no Python that another user may run (/usr/bin/python3 on Debian)"
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    hosts = ["127.0.0.1"]
    with contextlib.suppress(OSError):
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("192.0.2.1", 9))  # no packet: only which address a route out would use
        hosts.append(probe.getsockname()[0])
        probe.close()
    shared = _shared_folder()
    try:
        script = _write(shared, "probe.py", NETWORK_PROBE)
        launched = trio.run(
            lambda: play_match(
                "rezzo",
                QUICK,
                [
                    BotSpec("probe", f"{python} {script} {port} {' '.join(hosts)}"),
                    BotSpec("idle", f"{python} -c pass"),
                ],
                TickSettings(fast=True, budget_ms=2000),
                seed=0,
                log_dir=shared / "logs",
                isolate=method is not None,
                connect_timeout=5,
            )
        )
        said = launched.logs["probe"].read_text()
        assert "REPORT " in said, (launched.stopped, said)
        report = json.loads(said.split("REPORT ", 1)[1].splitlines()[0])
        assert report["handed"] == "127.0.0.1"
        if method is None:
            assert report["reached"] == hosts and report["address_given"]
        else:
            assert report["reached"] == [] and not report["address_given"]
    finally:
        listener.close()
        shutil.rmtree(shared, ignore_errors=True)


def test_a_bad_cgroups_choice_is_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from cellarena_cli import invoke

    from cellarena.server.bots.cgroups import detect

    monkeypatch.setenv("CELLARENA_CGROUPS", "sometimes")
    detect.cache_clear()
    try:
        code, output = invoke("match", "rezzo", "--bot", f"a={RAW_BOT}", "--bot", f"b={RAW_BOT}")
    finally:
        monkeypatch.undo()
        detect.cache_clear()
    assert code == 2, output
    assert "CELLARENA_CGROUPS='sometimes': give auto, v1, v2 or off" in output
