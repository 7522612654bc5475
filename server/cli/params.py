"""Checks of command-line values that click's own types let through, shared by every command."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """A `click.FloatRange` that also refuses ``nan``: nan compares false with both bounds, so a plain
    range lets it through, and a nan tick rate or budget would only fail deep inside a match."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        result = super().convert(value, param, ctx)
        if math.isnan(result):
            self.fail(f"{value!r} is not a number", param, ctx)
        return result


def writable_folder(path: Path, option: str) -> Path:
    """Make ``path`` (and its parents) if needed and check that files can be written in it.

    Called before anything starts, so that a bad ``--out`` or ``--log-dir`` is an error naming the
    option, not a traceback (or a match that cannot start) later on.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(
            f"{path}: cannot create this folder ({exc.strerror or exc})", param_hint=option
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{path}: this folder is not writable", param_hint=option)
    return path
