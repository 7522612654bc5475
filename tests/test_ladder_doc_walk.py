"""docs/ladder.md walked as written (issue 42): every `cellarena` command of the page's shell blocks
is run, in the page's order, with the placeholders of `WORDS` and `PARTS` put in (a path, a port, a
database), or is listed in `NOT_RUN` with the one reason it cannot be run here.

First pass, in this process, in order: each short command (`bot add`, `register`, `submit`,
`backup`, ...), in `site/` for "Start to finish" and in `by-hand/` after it; the page's `ladder up`
of "Start to finish" runs in the background from its step 3 to the section's end, so that its steps
6 to 10 run against it. Second pass: each other long-running command (`serve`, `web`) is started as
a process of its own in a folder of its own (a copy of the first pass's ladders, fresh ports), all
at once but those on a default port (one after another), each awaited until it says it listens and
takes a connection, then stopped with SIGTERM: status 0, no traceback. Every ```toml block of the page is read
as a config file (`read_config`). The PostgreSQL database is the suite's real server; the Backups
section's dump and restore run in tests/test_ladder_backup.py."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cellarena_cli import CLI, ROOT, invoke
from certificates import pem_files
from game_servers import WITHOUT_NUMBA, Process, start, wait_for
from postgres_server import PostgresServer
from test_ladder_doc_commands import DOC, DocCommand, doc_commands, resolve
from test_ladder_up import listening

from cellarena.arena.cli import main
from cellarena.arena.cli.ladder import ladder
from cellarena.arena.ladder.ops.config_file import read_config
from cellarena.arena.ladder.store.ladder_store import LadderStore

#: The page's commands not run here, each with why. Keyed by the command's words as written.
NOT_RUN = {
    "ladder up /etc/cellarena/ladder.toml [--grace 15] [--check]": "a synopsis ([optional] parts); "
    "`up` and `up --check` run as written in Start to finish",
    "ladder serve rezzo [--maps duel,field] [--host ADDRESS] [--port 7777] [--grace 5]": "a synopsis of "
    "every option (its first line): its options are resolved by test_ladder_doc_commands.py",
    "ladder serve rezzo --host 0.0.0.0 --tls-cert fullchain.pem --tls-key privkey.pem --cluster "
    "tcp://scheduler.internal:8786 [--cluster-host ADDRESS]": "needs a Dask scheduler at "
    "scheduler.internal; test_ladder_cluster.py runs a ladder on a cluster",
    "ladder serve rezzo --cluster local:2": "starts a Dask cluster of two workers (tens of seconds of "
    "CPU); test_ladder_cluster.py runs it",
    "ladder systemd /etc/cellarena/ladder.toml --out units [--user ladder] [--name cellarena-ladder]": "a "
    "synopsis; `ladder systemd ladder.toml --out units` runs in Start to finish",
    "ladder replay 1234 --token-file alice.token --url https://ladder.example.org": "needs a site at "
    "https://ladder.example.org where alice played match 1234; test_ladder_debug.py runs it",
    "ladder register https://ladder.example.org --name alice --password-file ~/.ladder-password --bot "
    "alicebot --token-file alicebot.token": "a remote site; the same command runs against the walk's "
    "pages in Start to finish",
    "ladder submit mybot --url https://ladder.example.org --token-file mybot.token": "a remote site; the "
    "same command runs against the walk's pages in Start to finish",
    "bench ladder --submitted 20": "a measurement: 20 starts of a built bot; test_ladder_bench.py runs "
    "a short one",
    "bench ladder --bots 500 --seconds 30": "a measurement of 30 s; test_ladder_bench.py runs a short one",
    "bench ladder --bots 40 --seconds 20 --ticks 150 --cluster local:2": "a measurement of 40 s on a "
    "Dask cluster; test_ladder_bench.py runs a short one",
    "bench ladder --bots 1000 --seconds 30 --warmup 15 --workers 2": "a measurement of 45 s; "
    "test_ladder_bench.py runs a short one",
}
#: The Backups section's commands: run as written, pg_dump and pg_restore with them, against the
#: suite's PostgreSQL by tests/test_ladder_backup.py (test_the_docs_commands_run_as_written), on a
#: ladder with matches, replays and owners; a second run here would add its 10 s for nothing.
RUN_BY_THE_BACKUP_TEST = "Backups"

#: Placeholders: whole words of the page, and what the walk gives (relative to its folder).
WORDS = {
    "fullchain.pem": "{tls}/chain.pem",
    "privkey.pem": "{tls}/key.pem",
    "cert.pem": "{tls}/chain.pem",
    "key.pem": "{tls}/key.pem",
}
#: Placeholders inside words: the certificates of Let's Encrypt, the host's folder, the database.
PARTS = {
    "/etc/letsencrypt/live/ladder.example.org/fullchain.pem": "{tls}/chain.pem",
    "/etc/letsencrypt/live/ladder.example.org/privkey.pem": "{tls}/key.pem",
    "/srv/ladder": "{srv}",
    "postgresql://ladder@dbhost/ladder": "{db}",
}
#: The page's ports: each gets a free one (per process of the second pass).
PORTS = re.compile(r"(?<![0-9])(443|7777|7778|8080|9100|9101)(?![0-9])")
#: Where a long-running command listens when the page gives no --port.
DEFAULT_PORT = {"serve": 7777, "web": 8080}
START = "Start to finish"
TOML = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def not_run(command: DocCommand) -> str | None:
    if command.section == RUN_BY_THE_BACKUP_TEST:
        return "run as written by tests/test_ladder_backup.py"
    return NOT_RUN.get(" ".join(command.written))


def long_running(command: DocCommand) -> bool:
    path = resolve(command.words)
    return path[:2] in (("ladder", "serve"), ("ladder", "web")) or (
        path == ("ladder", "up") and "--check" not in command.words
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Places:
    """What the placeholders stand for in one folder."""

    folder: Path
    srv: Path
    tls: Path
    db: str
    ports: dict[int, int] = field(default_factory=dict)

    def put_in(self, words: tuple[str, ...]) -> list[str]:
        names = {"tls": str(self.tls), "srv": str(self.srv), "db": self.db}
        out = []
        for written in words:
            word = self.ported(written)
            word = WORDS[word].format(**names) if word in WORDS else word
            for part in sorted(PARTS, key=len, reverse=True):
                word = word.replace(part, PARTS[part].format(**names))
            out.append(word)
        return out

    def ported(self, text: str) -> str:
        """``text`` with each of the page's ports replaced by this folder's free one."""
        return PORTS.sub(lambda m: str(self.ports.setdefault(int(m[0]), free_port())), text)


@dataclass
class Walk:
    root: Path
    tls: Path
    db: str
    site: Places
    by_hand: Places
    outputs: dict[int, str] = field(default_factory=dict)


@contextlib.contextmanager
def inside(folder: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield


def first_pass(walk: Walk) -> None:
    """The short commands in order, and "Start to finish"'s `ladder up` from its step on."""
    up: Process | None = None
    try:
        for command in doc_commands():
            later = long_running(command) and command.section != START
            if not_run(command) is not None or later:
                continue
            places = walk.site if command.section == START else walk.by_hand
            if up is not None and command.section != START:
                stop(up)
                up = None
            words = places.put_in(command.written)
            if long_running(command):  # without numba, as the page installs cellarena ('.[web]')
                up = start([*CLI, *words], places.folder, "up", cwd=places.folder, env=WITHOUT_NUMBA)
                listening(up, "serve rezzo")
                listening(up, "web")
                continue
            with inside(places.folder):
                code, output = invoke(*words, command=main)
            assert code == 0, f"docs/ladder.md line {command.line}: `cellarena {' '.join(words)}`:\n{output}"
            walk.outputs[command.line] = output
    finally:
        if up is not None:
            stop(up)


def stop(process: Process) -> None:
    """SIGTERM (a service manager's stop): every part, `up` and the pages too, ends with status 0."""
    code = process.stop(timeout=60)
    said = process.stderr()
    assert code == 0 and "Traceback" not in said, f"{process.proc.args} ended with {code}:\n{said}"


def second_pass(walk: Walk) -> dict[int, str]:
    """The other long-running commands, each in a copy of the first pass's ladders; what each said."""
    lanes: dict[bool, list[tuple[DocCommand, Places]]] = {True: [], False: []}
    for command in doc_commands():
        if not_run(command) is not None or not long_running(command) or command.section == START:
            continue
        folder = walk.root / "second" / f"line{command.line}"
        shutil.copytree(walk.by_hand.folder, folder, ignore=shutil.ignore_patterns("*.lock"))
        srv = folder / "srv-ladder"
        shutil.copytree(walk.site.srv, srv, ignore=shutil.ignore_patterns("*.lock"))
        places = Places(folder, srv, walk.tls, walk.db)
        lanes["--port" in command.written].append((command, places))
    said: dict[int, str] = {}
    running: list[tuple[DocCommand, Process, int]] = []
    try:
        for command, places in lanes[True]:  # each on ports of its own: all at once
            running.append(launch(command, places))
        for command, places in lanes[False]:  # on the default port, one after another
            said[command.line] = await_listening(*launch(command, places))
        for command, process, port in running:
            said[command.line] = await_listening(command, process, port)
    finally:
        for _, process, _ in running:
            if process.proc.poll() is None:
                process.stop(timeout=60)
    return said


def launch(command: DocCommand, places: Places) -> tuple[DocCommand, Process, int]:
    words = places.put_in(command.written)
    part = resolve(command.words)[1]
    port = int(words[words.index("--port") + 1]) if "--port" in words else DEFAULT_PORT[part]
    # Without numba, as the page installs cellarena ('.[web]').
    return command, start([*CLI, *words], places.folder, "part", cwd=places.folder, env=WITHOUT_NUMBA), port


def await_listening(command: DocCommand, process: Process, port: int) -> str:
    """Once ``process`` says it listens on ``port`` and a connection there is taken: stopped, and
    what it said."""

    def listens() -> bool:
        assert process.proc.poll() is None, f"docs/ladder.md line {command.line} ended:\n{process.stderr()}"
        if f":{port}" not in process.stderr() + process.stdout():
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
        return False

    wait_for(listens, f"line {command.line} to listen on {port}", 120)
    stop(process)
    return process.stderr()


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer) -> Iterator[Walk]:
    root = tmp_path_factory.mktemp("doc-walk")
    tls = root / "tls"
    tls.mkdir()
    pem_files(tls, "localhost", "127.0.0.1", "ladder.example.org")
    db = postgres_server.create_database()
    site, by_hand = root / "site", root / "by-hand"
    for folder in (site, by_hand):
        folder.mkdir()
    config = TOML.search(DOC.read_text().split("\n## Start to finish\n", 1)[1])
    assert config is not None
    # /srv/ladder, the host's ladder of the sections after the start, is the start's.
    walk = Walk(
        root, tls, db, Places(site, site / "ladder", tls, db), Places(by_hand, site / "ladder", tls, db)
    )
    # The page's ports, in the file of "Start to finish" as in its commands.
    (site / "ladder.toml").write_text(walk.site.ported(config.group(1)))
    (site / "ann.password").write_text("a passphrase of ann's\n")
    (site / "ann.password").chmod(0o600)
    (site / "ladder").mkdir()  # made by `up --check` as well; the SMTP login's password (Mail) in it
    (site / "ladder" / "smtp.password").write_text("the SMTP login's password\n")
    (site / "ladder" / "smtp.password").chmod(0o600)
    yield walk


def test_the_page_runs_as_written(walk: Walk) -> None:
    first_pass(walk)
    site = walk.site.folder
    with LadderStore(site / "ladder" / "ladder.sqlite", create=False) as store:
        bots = {b.name: b.kind for b in store.list_bots("rezzo")}
    assert bots == {"random": "house", "alice": "outside", "annbot": "outside"}
    token = site / "annbot.token"
    assert token.read_text().startswith("cla_") and stat.S_IMODE(token.stat().st_mode) == 0o600
    said = "\n".join(walk.outputs.values())
    assert "signed up as ann" in said and "annbot version 1: received" in said
    assert sorted(p.name for p in (site / "units").iterdir()) == [
        "cellarena-ladder-house.service",
        "cellarena-ladder-serve-rezzo.service",
        "cellarena-ladder-web.service",
        "cellarena-ladder.target",
    ]
    code, before = invoke("ladder", "--config", str(site / "ladder.toml"), "standings", "rezzo", "--json")
    code2, after = invoke("ladder", "--dir", str(site / "restored"), "standings", "rezzo", "--json")
    assert code == code2 == 0 and before == after
    said_by = second_pass(walk)
    for command in doc_commands():
        if command.line in said_by and "serve" in command.words and "--tls-cert" in command.words:
            assert "(TLS)" in said_by[command.line], (command.text, said_by[command.line])


def test_each_toml_block_is_a_config_file(tmp_path: Path) -> None:
    for number, block in enumerate(TOML.findall(DOC.read_text())):
        path = tmp_path / f"block{number}.toml"
        path.write_text(block)
        read_config(path, ladder)


def test_every_command_is_run_or_listed_with_its_reason() -> None:
    """A command the page gains is run by the walk (and fails it if it cannot run); an entry of
    `NOT_RUN` the page lost fails here."""
    written = {" ".join(c.written) for c in doc_commands()}
    assert not set(NOT_RUN) - written, f"no longer on the page: {sorted(set(NOT_RUN) - written)}"
    for reason in NOT_RUN.values():  # a test named as the one that runs it is there
        for name in re.findall(r"test_\w+\.py", reason):
            assert (ROOT / "tests" / name).is_file(), reason
