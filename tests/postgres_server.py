"""A throwaway PostgreSQL server for the tests, from Debian's ``postgresql`` package.

The ladder store runs on PostgreSQL through the same code as on SQLite, and only a real server shows
that the shared SQL is really shared. One server starts per test session (about a second) in a temp
folder, listens on 127.0.0.1 at a free port and on a unix socket in that folder, trusts local
connections (nothing but this machine can reach it), and runs with fsync off: the tests kill clients,
never the server. Each test gets a database of its own.

initdb refuses to run as root, so as root (CI) the server runs as the ``postgres`` user that the
package creates, through ``runuser``; the folder is given to that user.

    apt-get update && apt-get install -y postgresql     # what .ci/run does
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

INSTALL_HINT = "install it with `apt-get install -y postgresql` (Debian/Ubuntu)"
_names = itertools.count(1)


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL's programs (Debian keeps them out of PATH)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def missing() -> str | None:
    """Why no server can be started here, or None if one can."""
    if find_bindir() is None:
        return f"PostgreSQL is not installed: {INSTALL_HINT}"
    try:
        import psycopg  # noqa: F401 -- only whether it is there
    except ImportError:
        return "psycopg is not installed: pip install -e '.[test]' brings it"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root, and runuser (util-linux) is missing to start PostgreSQL as postgres"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A running server; `stop()` ends it and deletes its folder."""

    def __init__(self) -> None:
        bindir = find_bindir()
        assert bindir is not None, INSTALL_HINT
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="cellarena-pg-"))
        self._as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            self._as_owner = ["runuser", "-u", "postgres", "--"]
        self.data = self.root / "data"
        self.port = 0
        try:
            # trust: only this machine can connect; --no-sync: a test server need not survive a power cut.
            # UTF8 with the C locale: bot names may be any printable text, whatever the machine's locale.
            initdb = ["-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"]
            self._run("initdb", *initdb, "--no-sync")
            self._start()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _run(self, program: str, *args: str) -> None:
        proc = subprocess.run(
            [*self._as_owner, str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,  # runuser keeps the cwd, which postgres may not be able to enter
        )
        if proc.returncode != 0:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}{tail}")

    def _start(self, port: int | None = None) -> None:
        for attempt in range(3):  # the free port may be taken between finding and binding it
            self.port = port if port is not None else _free_port()
            options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -F -c shared_buffers=16MB"
            try:
                log = str(self.root / "log")
                self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-t", "60", "-o", options, "start")
                return
            except RuntimeError:
                if attempt == 2:
                    raise

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """A connection to the maintenance database, for CREATE DATABASE and the like."""
        import psycopg

        return psycopg.connect(self.url(), autocommit=True)

    def create_database(self) -> str:
        """A new, empty database; its URL."""
        name = f"t{os.getpid()}_{next(_names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def pause(self) -> None:
        """Stop the server as an outage would (its clients' connections break), keeping its data."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start it again after `pause`, on the same port."""
        self._start(self.port)

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():  # not if a test left it paused
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
