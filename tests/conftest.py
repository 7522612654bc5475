"""Fixtures that several test files use.

Shared helpers that are plain functions or classes live in modules named for what they are, which
test files import by name (pytest puts this folder on sys.path): `cellarena_cli` runs the command,
`bot_files` finds and loads the bots tests play with, `bot_processes` tells which bots still run,
`fake_server` stands in for the match server when a client is under test, `postgres_server` starts a
throwaway PostgreSQL server.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bot_processes import BotPids
from browser import launched
from postgres_server import PostgresServer
from postgres_server import missing as postgres_missing
from suite import LONGEST_FIRST, REALTIME_MARK, unlisted

from cellarena.arena.ladder.accounts.password_cost import VARIABLE as PASSWORD_COST_VARIABLE
from cellarena.server import wall_clock

# numpy's OpenBLAS starts a pool of spinning threads in every process that imports it; the suite
# starts some 1,500 such processes (servers, bots, commands) beside each other on few cores, none of
# which multiplies matrices big enough to gain. One thread each saves about a tenth of the suite's
# CPU (measured on tests/test_tournament_cli.py, test_match_cli.py, test_new_bot.py: 72 s to 65 s).
# `cellarena` sets it for its commands and what they start (arena/cli); set here, before xdist
# starts its workers, so the processes the tests start themselves (bots, scripts) inherit it too.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Owners' passwords are hashed with argon2id at its cheapest, in the test processes (the fixture
# below) and in every `ladder web` they start (its --password-hash, from the environment): the same
# code and library, without the cost that makes guessing slow. At the default cost a hash or a check
# costs 0.2 s of CPU, and a run made some 210 (38 s of CPU). test_ladder_accounts.py checks the
# default cost; test_ladder_accounts_web.py a cost given on the command line.
QUICK_PASSWORD_HASH = "m=8,t=1,p=1"
os.environ[PASSWORD_COST_VARIABLE] = QUICK_PASSWORD_HASH

# A shell ignores Ctrl-C (SIGINT) in what it starts in the background (`pytest ... &`, `nohup`), and
# an ignored signal stays ignored through exec: every `cellarena` and bot process the tests start
# would then shrug off the Ctrl-C that tests of stopping send it, and those tests would fail for how
# the suite was started. Python's own handler, set back here, lets the children start as from a
# terminal (exec resets a handled signal to its default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Each run counts where its CPU goes (tests/cpu_by_file.py; ``-p cpu_by_file`` loaded it already),
    and a trio test out of time fails alone (tests/trio_timeouts.py)."""
    for plugin in ("cpu_by_file", "trio_timeouts"):
        if not config.pluginmanager.has_plugin(plugin):
            config.pluginmanager.import_plugin(plugin)


@pytest.fixture(autouse=True, scope="session")
def _quick_password_hashes() -> Iterator[None]:
    """Owners' passwords hashed in this process at `QUICK_PASSWORD_HASH` (see above)."""
    from cellarena.arena.ladder.accounts import password_cost
    from cellarena.arena.ladder.accounts.owners import use_password_cost

    use_password_cost(password_cost.PasswordCost.parse(QUICK_PASSWORD_HASH))
    yield
    use_password_cost(password_cost.PasswordCost.parse(password_cost.DEFAULT))


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def virtual_wall() -> Iterator[None]:
    """The server judges lateness by trio's clock (`wall_clock.virtual`), not time.time() and the
    kernel's stamps. With a test that takes `autojump_clock` (pytest-trio only honours a clock that is
    a direct argument of the test), budgets, tick rates, hello timeouts and late answers of an
    in-process lobby play out in virtual time: at once, and the same on an idle or a busy machine.
    Sync on purpose: pytest-trio refuses async fixtures for sync tests, and the contextvar set here is
    copied into the test's trio.run. Not for tests that start processes or work in threads (a
    thread's real work looks like idleness to autojump, which then leaps ahead)."""
    with wall_clock.virtual():
        yield


@pytest.fixture
def bot_pids(tmp_path: Path) -> BotPids:
    """A fresh pid file for tests/bots/raw_bot.py; give ``bot_pids.env`` to the `cellarena` process."""
    return BotPids(tmp_path / "pids")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session (tests/postgres_server.py). Where there is none, CI
    fails (its .ci/run installs one, so a missing server is a broken CI, not a reason to test less);
    elsewhere the PostgreSQL half of the ladder store's tests is skipped, saying how to install it."""
    why = postgres_missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; under CI the ladder store must be tested on PostgreSQL", pytrace=False)
        pytest.skip(f"{why}; the ladder store's PostgreSQL tests need it")
    server = PostgresServer()
    yield server
    server.stop()


#: The session's browser, once a test has asked for it.
_LAUNCHED: list[Any] = []


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the browser tests of a whole test process (tests/browser.py), each
    page in a context of its own (`browser.page_of`): a launch with Playwright's driver costs some
    1.3 s of CPU, which each of sixteen files paid for a browser of its own."""
    with launched() as b:
        _LAUNCHED.append(b)
        yield b
        _LAUNCHED.clear()


@pytest.fixture(autouse=True, scope="module")
def _browser_contexts_end_with_their_file() -> Iterator[None]:
    """What a file left open in the shared browser (a test that failed before closing its context)
    is closed with the file, as a browser of the file's own was: a live page would otherwise go on
    drawing while later files run."""
    yield
    for b in _LAUNCHED:
        for context in list(b.contexts):
            context.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def ladder_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty ladder database, once as a SQLite file and once as a PostgreSQL database: the
    ladder store's tests run unchanged on both, as the store runs unchanged on both."""
    if request.param == "sqlite":
        return str(tmp_path / "ladder.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the longest files first (see `LONGEST_FIRST`); the order within a file is kept."""
    # tests/suite.py's realtime phase collects only the files that spell the mark: a realtime test
    # elsewhere (marked through a helper, say) would run in neither phase.
    missed = unlisted(item.path for item in items if item.get_closest_marker("realtime"))
    if missed:
        raise pytest.UsageError(
            f"{', '.join(sorted(missed))}: a test marked realtime in a file without the text "
            f"{REALTIME_MARK!r}, which tests/suite.py's realtime phase looks for; mark it with "
            "@pytest.mark.realtime in the file itself"
        )
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
