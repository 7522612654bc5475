"""Driving a real browser from tests: Playwright for Python on Debian's chromium, and the viewer running
as the `cellarena` command a user starts.

Playwright's own browser download is not used: the tests find ``chromium`` on PATH, or the binary that
``CELLARENA_CHROMIUM`` names. Where either Playwright or the browser is missing, the tests are skipped
with the command that installs it, except under ``CI=true`` (whose .ci/run installs both): there a
missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cellarena_cli import served

#: A page big enough that the side panel and the board both show; screenshots have this size.
VIEWPORT = {"width": 1440, "height": 900}
#: Where screenshots go: docs/web/ when refreshing the docs' pictures, else the test's tmp_path.
SHOTS_ENV = "CELLARENA_SCREENSHOTS"


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; under CI the browser tests must run (.ci/run installs chromium)", pytrace=False)
    pytest.skip(why)


def chromium_path() -> str:
    """The chromium binary to drive, or skip/fail saying how to install one."""
    named = os.environ.get("CELLARENA_CHROMIUM")
    if named:
        if not Path(named).is_file():
            _missing(f"CELLARENA_CHROMIUM={named}: no such file")
        return named
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    _missing("no chromium on PATH (apt-get install -y chromium, or set CELLARENA_CHROMIUM)")
    raise AssertionError("unreachable")


@contextmanager
def launched() -> Iterator[Any]:
    """A headless chromium under Playwright's sync API, closed afterwards.

    Tests take the ``browser`` fixture (tests/conftest.py: one per test process) rather than this:
    Playwright's sync API refuses a second one in the thread that runs the first. Only a test that
    drives a browser from a thread of its own calls this."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    path = chromium_path()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=["--no-sandbox"], headless=True)
        try:
            yield browser
        finally:
            browser.close()


class Console:
    """Errors a page logs (console errors, uncaught exceptions, failed requests); a test asserts none."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def assert_clean(self) -> None:
        assert not self.errors, "\n".join(self.errors)


@contextmanager
def page_of(browser: Any) -> Iterator[tuple[Any, Console]]:
    """A fresh page (its own context) and its console watch."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        yield page, Console(page)
    finally:
        context.close()


URL = re.compile(r"at (http://\S+)")


@contextmanager
def viewer(*args: str) -> Iterator[str]:
    """`cellarena ARGS` (a command that serves pages) started for real; yields the URL it prints
    (`cellarena_cli.served`: a failure in the block shows the server's last lines)."""
    with served(*args, url=URL) as server:
        yield server.url


def shot_dir(tmp_path: Path) -> Path:
    """Where a test saves its screenshots (see `SHOTS_ENV`)."""
    named = os.environ.get(SHOTS_ENV)
    out = Path(named) if named else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out


def pixel(page: Any, selector: str, x: float, y: float) -> tuple[int, int, int]:
    """The RGB of canvas ``selector`` at canvas pixel (x, y)."""
    rgb = page.evaluate(
        """([sel, x, y]) => Array.from(
            document.querySelector(sel).getContext('2d').getImageData(Math.floor(x), Math.floor(y), 1, 1).data
        ).slice(0, 3)""",
        [selector, x, y],
    )
    return (int(rgb[0]), int(rgb[1]), int(rgb[2]))


def hex_rgb(color: str) -> tuple[int, int, int]:
    return (int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16))
