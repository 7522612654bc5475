"""PostgreSQL's own programs (``pg_dump``, ``pg_restore``) run for `ladder backup` and `ladder restore`.

A program is looked for on PATH, then in Debian's ``/usr/lib/postgresql/N/bin`` (newest first), which
its packages keep off PATH. The database URL's password never reaches the child's argv or
environment, where other users of the machine could read it (``ps``, ``/proc/PID/environ``): the
child gets the URL without it and ``PGPASSFILE`` naming a password file written 0600 in a private
temporary folder, removed when the child is done. A URL without a password uses the host's usual
``~/.pgpass``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from cellarena.arena.ladder.store.backends import redact_url

INSTALL_HINT = "install PostgreSQL's client programs (Debian/Ubuntu: apt-get install postgresql-client)"
#: Where Debian keeps each PostgreSQL release's programs, off PATH (``N/bin``).
DEBIAN_ROOT = Path("/usr/lib/postgresql")
#: Seconds a dump or a restore may take before it is stopped: generous, but never forever.
DEFAULT_TIMEOUT = 3600.0


class PgToolError(Exception):
    """A PostgreSQL program is missing or failed; the message names it and says what to do."""


def find_program(name: str) -> Path:
    """``name`` (``pg_dump``, ``pg_restore``) on PATH or in /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return Path(found)
    debian = sorted(
        DEBIAN_ROOT.glob(f"*/bin/{name}"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1]
    raise PgToolError(f"{name} was not found on PATH nor in /usr/lib/postgresql/*/bin; {INSTALL_HINT}")


def _passfile_line(password: str) -> str:
    # Any host, port, database and user: the file is this one child's. ':' and '\' are escaped.
    return "*:*:*:*:" + password.replace("\\", "\\\\").replace(":", "\\:") + "\n"


@contextlib.contextmanager
def connection(url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The URL without its password and the environment for a child that connects with it."""
    parts = urlsplit(url)
    env = dict(os.environ)
    if parts.password is None:
        yield url, env
        return
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    bare = urlunsplit(parts._replace(netloc=user + netloc))
    with tempfile.TemporaryDirectory(prefix="cellarena-pgpass-") as folder:  # mode 0700
        passfile = Path(folder) / "pgpass"
        fd = os.open(passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(_passfile_line(unquote(parts.password)))
        env["PGPASSFILE"] = str(passfile)
        env.pop("PGPASSWORD", None)  # the file's password, not a stale one from the caller
        yield bare, env


def run(name: str, url: str, args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Run ``name ARGS --dbname=URL`` (without the URL's password) to its end; `PgToolError` if it fails."""
    program = find_program(name)
    with connection(url) as (bare, env):
        try:
            proc = subprocess.run(
                [str(program), *args, f"--dbname={bare}"],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PgToolError(
                f"{name} on {redact_url(url)} took over {timeout:g} s and was stopped; "
                "check that the database server answers, or allow more time (--timeout)"
            ) from None
        except OSError as exc:
            raise PgToolError(f"{program}: cannot run it ({exc.strerror or exc}); {INSTALL_HINT}") from None
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())[-1500:]
        raise PgToolError(f"{name} failed on {redact_url(url)} (exit status {proc.returncode}): {said}")
