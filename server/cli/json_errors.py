"""Errors as JSON for commands run with ``--json``: a script reading stdout gets an object, not prose.

One place for every command: the root group (`cellarena.arena.cli`) turns a click error into
`error_object` when the command line has ``--json``, so a command only has to have a ``--json`` option.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click


class FileFault(click.ClickException):
    """A file the command read is at fault (a replay, a map): exit status 1, the message (which names
    the file) as ``error: ...`` on stderr, and ``file`` (plus ``line``/``column`` when known) in JSON."""

    exit_code = 1

    def __init__(self, message: str, file: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.file, self.line, self.column = file, line, column

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)

    def where(self) -> dict[str, Any]:
        """``file``, and ``line`` and ``column`` when known: for JSON output."""
        out: dict[str, Any] = {"file": self.file}
        if self.line is not None:
            out["line"] = self.line
        if self.column is not None:
            out["column"] = self.column
        return out


def file_failed(text: str, as_json: bool) -> NoReturn:
    """Stop a command that reads or writes replay files on the file at fault (exit status 1):
    ``error: text`` on stderr, or with ``--json`` ``{"ok": false, "error": text, "code": "file"}``
    on stdout, as its successful answer's ``ok`` field reads."""
    if as_json:
        click.echo(json.dumps({"ok": False, "error": text, "code": "file"}))
    else:
        click.echo(f"error: {text}", err=True)
    sys.exit(1)


def error_object(exc: click.ClickException) -> dict[str, Any]:
    """``error`` (the message), ``code`` (what kind), and ``option``/``file`` at fault when known."""
    out: dict[str, Any] = {"error": exc.format_message(), "code": _code(exc), "exit_code": exc.exit_code}
    if isinstance(exc, click.BadParameter):
        hint = exc.param_hint
        if hint is None and exc.param is not None:
            hint = exc.param.opts[0] if exc.param.opts else exc.param.name
        if hint is not None:
            out["option"] = hint if isinstance(hint, str) else " / ".join(hint)
    if isinstance(exc, click.NoSuchOption):
        out["option"] = exc.option_name
    if isinstance(exc, click.FileError):
        out["file"] = exc.ui_filename
    if isinstance(exc, FileFault):
        out.update(exc.where())
    return out


def _code(exc: click.ClickException) -> str:
    for kind, code in (
        (click.NoSuchOption, "no_such_option"),
        (click.MissingParameter, "missing_parameter"),
        (click.BadParameter, "bad_parameter"),
        (click.UsageError, "usage"),
        (click.FileError, "file"),
        (FileFault, "file"),
    ):
        if isinstance(exc, kind):
            return code
    return "error"


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (before a ``--`` that ends the options)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False
