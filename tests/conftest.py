"""Fixtures that several test files use.

Shared helpers that are plain functions or classes live in modules named for what they are, which
test files import by name (pytest puts this folder on sys.path): `cellarena_cli` runs the command,
`bot_files` finds and loads the bots tests play with, `bot_processes` tells which bots still run,
`fake_server` stands in for the match server when a client is under test.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from bot_processes import BotPids


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bot_pids(tmp_path: Path) -> BotPids:
    """A fresh pid file for tests/bots/raw_bot.py; give ``bot_pids.env`` to the `cellarena` process."""
    return BotPids(tmp_path / "pids")
