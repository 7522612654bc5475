"""`ladder up CONFIG` (docs/ladder.md, "One file to run a ladder"): the supervisor's restarts and
back-off in virtual time with fake parts; a part's process stopped by SIGTERM, then SIGKILL; and one
real ladder of two games and its pages on PostgreSQL started from a file, a part killed and started again, and
everything stopped by one SIGTERM."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from cellarena_cli import CLI, invoke
from game_servers import WITHOUT_NUMBA, Process, start, wait_for
from postgres_server import PostgresServer
from wire_client import Client

from cellarena.arena.ladder.ops.supervisor import Backoff, Exit, Part, run_process, supervise
from cellarena.arena.ladder.store.ladder_store import LadderStore


def failing(starts: list[float], runs: list[float]) -> tuple[Part, object]:
    """A fake part that runs ``runs[i]`` seconds on its i-th start (the last one after) and fails."""

    async def run(part: Part) -> Exit:
        starts.append(trio.current_time())
        await trio.sleep(runs[min(len(starts) - 1, len(runs) - 1)])
        return Exit(3, ("Traceback (most recent call last):", "OSError: port taken"))

    return Part("serve rezzo", ()), run


async def test_a_failing_part_starts_again_after_a_doubling_wait_up_to_the_most(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    starts: list[float] = []
    part, run = failing(starts, [0.5])
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise, [part], run, Backoff(first=1, factor=2, most=8, steady=60), stop)
        await trio.sleep(40)
        stop.set()
    waits = [later - earlier - 0.5 for earlier, later in itertools.pairwise(starts)]
    assert waits == pytest.approx([1, 2, 4, 8, 8, 8])
    said = [r.getMessage() for r in caplog.records if "exited" in r.getMessage()]
    assert said[0] == (
        "serve rezzo exited with status 3; next try in 1 s; its last lines:\n"
        "  serve rezzo| Traceback (most recent call last):\n  serve rezzo| OSError: port taken"
    )
    assert "next try in 8 s" in said[-1]


async def test_a_part_that_ran_steadily_starts_again_after_the_first_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts: list[float] = []
    part, run = failing(starts, [0.5, 0.5, 100, 0.5])
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise, [part], run, Backoff(first=1, factor=2, most=60, steady=60), stop)
        await trio.sleep(110)
        stop.set()
    ran = [0.5, 0.5, 100, 0.5]
    waits = [b - a - ran[i] for i, (a, b) in enumerate(itertools.pairwise(starts))][:3]
    assert waits == pytest.approx([1, 2, 1])  # after 100 s up: the first wait again, not 4


async def test_a_stop_ends_every_part_running_or_waiting_and_returns(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    cancelled: list[str] = []

    async def run(part: Part) -> Exit:
        try:
            if part.name == "web":
                await trio.sleep_forever()
            await trio.sleep(0.1)
            return Exit(-9)
        finally:
            if trio.current_effective_deadline() == -float("inf"):
                cancelled.append(part.name)

    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        parts = [Part("serve cata", ()), Part("web", ())]
        nursery.start_soon(supervise, parts, run, Backoff(first=30), stop)
        await trio.sleep(5)  # serve cata waits for its next try, web runs
        stopped_at = trio.current_time()
        stop.set()
    assert trio.current_time() == stopped_at and cancelled == ["web"]
    assert any("serve cata was killed by SIGKILL; next try in 30 s" in r.getMessage() for r in caplog.records)


class Lines(io.StringIO):
    """A part's copied output, and an event when a line holding ``word`` arrives."""

    def __init__(self, word: str) -> None:
        super().__init__()
        self.word = word
        self.seen = trio.Event()

    def write(self, text: str) -> int:
        if self.word in text:
            self.seen.set()
        return super().write(text)


@pytest.mark.parametrize(
    ("on_term", "killed", "last"),
    [
        ("print('bye', flush=True); sys.exit(0)", False, "bye"),  # stops, its last words copied
        ("None", True, "ready"),  # ignores SIGTERM: killed after the grace
    ],
)
async def test_a_stopped_process_gets_sigterm_then_sigkill_after_the_grace(
    on_term: str, killed: bool, last: str, caplog: pytest.LogCaptureFixture
) -> None:
    code = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: ({on_term.replace('; ', ', ')}))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    out = Lines("ready")
    ended: list[Exit] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                ended.append(await run_process(Part("part", (sys.executable, "-c", code)), 0.5, out))

            nursery.start_soon(run)
            await out.seen.wait()
            nursery.cancel_scope.cancel()
    assert ended == []  # cancelled: the supervisor's stop, not an exit to report
    assert out.getvalue().splitlines()[-1] == f"part| {last}"
    said = [r.getMessage() for r in caplog.records]
    assert any("did not stop within 0.5 s of SIGTERM: SIGKILL" in m for m in said) == killed


async def test_a_process_that_exits_is_reported_with_its_status_and_last_lines() -> None:
    code = "import sys\nfor i in range(20): print(f'line {i}')\nsys.exit(5)"
    with trio.fail_after(60):
        ended = await run_process(Part("part", (sys.executable, "-c", code)), 0.5, io.StringIO())
    assert ended.status == 5 and ended.tail[-1] == "line 19" and len(ended.tail) == 8


CONFIG = """\
dir = "ladder"
db = "{db}"

[games.rezzo]
port = 0
max-ticks = 30
tick-rate = 30
budget-ms = 25
grace = 0
house-after = 3600

[games.cata]
port = 0
house-after = 3600

[web]
port = 0

[[house]]
name = "builder"
game = "rezzo"
command = "python example_bots/rezzo/builder.py"
"""


def listening(up: Process, part: str, after: int = 0) -> int:
    """The port ``part`` of ``up`` says it listens on, in its output after offset ``after``."""
    pattern = re.compile(rf"^{part}\| .*?(?:on 127\.0\.0\.1:|http://127\.0\.0\.1:)(\d+)", re.M)
    wait_for(lambda: pattern.search(up.stderr()[after:]) is not None, f"{part} to listen", 120)
    found = pattern.search(up.stderr()[after:])
    assert found is not None
    return int(found.group(1))


async def plays(port: int, game: str, tokens: dict[str, str]) -> None:
    """Two registered bots say hello on ``port`` and are welcomed into a match."""
    with trio.fail_after(60):
        clients = [await Client.connect(port) for _ in tokens]
        for client, (name, token) in zip(clients, tokens.items(), strict=True):
            await client.hello(name, game, token=token)
        for client in clients:
            msg = await client.recv(timeout=60)
            assert msg is not None and msg["type"] == "welcome", msg
            await client.stream.aclose()


@pytest.fixture(scope="module")
def ladder_up(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[tuple[Process, dict[str, dict[str, str]], str]]:
    """`ladder up` of two games and the pages on PostgreSQL from a file, two bots registered for each
    game."""
    base = tmp_path_factory.mktemp("up")
    db = postgres_server.create_database()
    (base / "ladder.toml").write_text(CONFIG.format(db=db))
    tokens: dict[str, dict[str, str]] = {"rezzo": {}, "cata": {}}
    with LadderStore(db) as store:
        for game, names in (("rezzo", ("alice", "bob")), ("cata", ("carol", "dave"))):
            for name in names:
                tokens[game][name] = store.add_bot(name, game)[1].secret
    up = start(
        [*CLI, "ladder", "up", str(base / "ladder.toml"), "--grace", "20"], base, "up", env=WITHOUT_NUMBA
    )
    yield up, tokens, db
    if up.proc.poll() is None:
        up.proc.kill()
        up.proc.wait()


async def test_ladder_up_runs_every_part_restarts_a_killed_one_and_stops_on_sigterm(
    ladder_up: tuple[Process, dict[str, dict[str, str]], str],
) -> None:
    up, tokens, db = ladder_up
    rezzo, cata, web = listening(up, "serve rezzo"), listening(up, "serve cata"), listening(up, "web")
    await plays(rezzo, "rezzo", tokens["rezzo"])
    await plays(cata, "cata", tokens["cata"])
    with urllib.request.urlopen(f"http://127.0.0.1:{web}/api/games", timeout=30) as page:
        assert {g["game"] for g in json.load(page)["games"]} >= {"rezzo", "cata"}
    assert "database postgresql://" in up.stderr()
    with LadderStore(db) as store:
        assert [(b.name, b.kind) for b in store.list_bots("rezzo") if b.kind == "house"] == [
            ("builder", "house")
        ]

    pids = dict(re.findall(r"INFO (serve rezzo|serve cata|web) started \(pid (\d+)\)", up.stderr()))
    mark = len(up.stderr())
    os.kill(int(pids["serve rezzo"]), signal.SIGKILL)
    again = listening(up, "serve rezzo", after=mark)
    assert "serve rezzo was killed by SIGKILL; next try in 1 s" in up.stderr()
    await plays(again, "rezzo", tokens["rezzo"])

    up.proc.send_signal(signal.SIGTERM)
    assert up.wait(timeout=60) == 0, up.stderr()
    said = up.stderr()
    assert "SIGTERM: stopping every part" in said and "every part stopped" in said
    assert "serve cata| stopped" in said
    now = dict(re.findall(r"INFO (serve rezzo|serve cata|web) started \(pid (\d+)\)", said[mark:]))
    for pid in [*pids.values(), *now.values()]:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)


def test_up_check_registers_the_house_bots_once_and_starts_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "ladder.toml"
    config.write_text(
        '[games.rezzo]\n[[house]]\nname = "builder"\ngame = "rezzo"\ncommand = "python b.py"\n'
        '[[house]]\nname = "alice"\ngame = "rezzo"\ncommand = "python a.py"\n'
    )
    (tmp_path / "ladder").mkdir()
    with LadderStore(tmp_path / "ladder" / "ladder.sqlite") as store:
        store.add_bot("alice", "rezzo")  # an outside bot already has that name
    code, output = invoke("ladder", "up", str(config), "--check")
    assert code == 0 and output.endswith("ladder.toml: serve rezzo\n"), output
    said = caplog.messages
    assert "registered house bot builder for rezzo: python b.py" in said
    assert any(m.startswith("house bot alice: the ladder has a bot of that name that is not") for m in said)
    caplog.clear()
    assert invoke("ladder", "up", str(config), "--check")[0] == 0
    assert not any("registered" in m for m in caplog.messages)
    with LadderStore(tmp_path / "ladder" / "ladder.sqlite") as store:
        bots = {b.name: (b.kind, b.house_command) for b in store.list_bots("rezzo")}
    assert bots == {"alice": ("outside", None), "builder": ("house", "python b.py")}
