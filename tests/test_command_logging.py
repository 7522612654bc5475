"""A command run in this process (click's runner, as many tests do) leaves this process's logging as
it found it: before, `bench ladder` left the "cellarena" logger at ERROR and a later test's caplog
read nothing."""

from __future__ import annotations

import logging

import click
import pytest
from cellarena_cli import invoke

from cellarena.server.cli.run import configure_logging, quiet_logger


@click.command()
def _quieting_command() -> None:
    """What the load benchmarks do before their load, and what `serve` and `match` do first."""
    configure_logging(verbose=True)
    quiet_logger("cellarena")
    logging.getLogger("cellarena.server").warning("swallowed: the command quieted it")
    raise click.ClickException("the command fails after configuring logging")


def test_a_command_leaves_the_loggers_as_it_found_them(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = logging.getLogger()
    before = (root.level, logging.getLogger("cellarena").level)
    with monkeypatch.context() as patched:
        # As in a program without logging set up: basicConfig adds its handler to the root logger.
        patched.setattr(root, "handlers", [])
        code, output = invoke(command=_quieting_command)
        assert code == 1 and "fails after configuring logging" in output
        assert root.handlers == []  # not a handler writing to the runner's closed stderr
    assert (root.level, logging.getLogger("cellarena").level) == before
    assert "swallowed" not in caplog.text
    logging.getLogger("cellarena.server").warning("a later warning")
    assert "a later warning" in caplog.text


def test_a_failed_match_command_leaves_the_loggers_as_it_found_them(caplog: pytest.LogCaptureFixture) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    code, output = invoke("match", "rezzo", "--bot", "no-equals-sign")
    assert code == 2 and "--bot" in output
    assert (root.handlers, root.level) == (handlers, level)
    logging.getLogger("cellarena.server").warning("a warning after the command")
    assert "a warning after the command" in caplog.text
