"""Bad input to the ladder's commands and pages: refused names are one line (or one JSON object) and a
non-zero exit, never a traceback; every name the ladder takes has a page a browser reaches; match
numbers past 64 bits are 404, not 500."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from cellarena_cli import CLI, run_here
from game_servers import start

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.public_pages import bot_href

REFUSED = {
    "empty": "",
    "300 characters": "x" * 300,
    "RTL override": "evil\u202etxt.exe",
    "newline": "two\nlines",
    "zero-width space": "zero\u200bwidth",
    "Hangul filler": "ann\u3164",
    "dot": ".",
    "dot dot": "..",
}


def add(folder: Path, name: str, *extra: str) -> tuple[int, str, str]:
    """`ladder bot add` in this process (a traceback that escaped it would be in stderr, as a process
    prints it): a refusal of its arguments, where a process each cost 0.2 s of CPU twenty times."""
    done = run_here("ladder", "--dir", str(folder), "bot", "add", name, "--game", "rezzo", *extra)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name", list(REFUSED.values()), ids=list(REFUSED))
def test_a_refused_name_is_one_line_or_one_json_object(tmp_path: Path, name: str) -> None:
    code, out, err = add(tmp_path, name)
    assert code != 0 and out == ""
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "NAME" in err and "bot name" in err
    code, out, err = add(tmp_path, name, "--json")
    assert code != 0 and "Traceback" not in err
    error = json.loads(out)  # stdout is exactly one JSON object
    assert error["option"] == "NAME" and "bot name" in error["error"]
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        assert store.list_bots() == []  # nothing was registered


def test_a_name_that_differs_only_in_case_is_one_line_or_one_json_object(tmp_path: Path) -> None:
    assert add(tmp_path, "Alice")[0] == 0
    code, out, err = add(tmp_path, "alice")
    assert code == 1 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "already a bot named 'Alice'" in err
    code, out, err = add(tmp_path, "ALICE", "--json")
    assert code == 1 and "Traceback" not in err
    assert "differ only in case" in json.loads(out)["error"]


def test_the_hosts_bot_add_is_under_the_ladder_name_profile(tmp_path: Path) -> None:
    """The profile the pages use (`names`): the invisible character named, a look-alike taken."""
    code, _, err = add(tmp_path, "ann\u3164")
    assert code == 2 and "U+3164 HANGUL FILLER is invisible" in err and "\\u3164" in err
    assert add(tmp_path, "paypal")[0] == 0
    code, _, err = add(tmp_path, "paypa1")
    assert code == 1 and "already a bot named 'paypal'" in err and "look-alike" in err


# ------------------------------------------------------------------------------------------ pages
#: Names the ladder takes whose URLs need care: each must lead a browser to the bot's own page.
ODD_NAMES = ["a/b", "a/../b", "a?b=c", "a#b", "100%", "%2e%2e", "...", "/", "\\", "<b>", "é ü", "a b"]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`cellarena ladder web` over a ladder with bots of odd names and one finished match: its URL."""
    folder = tmp_path_factory.mktemp("ladder")
    with LadderStore(folder / "ladder.sqlite") as store:
        for name in ODD_NAMES:
            store.add_bot(name, "rezzo")
    web = start([*CLI, "ladder", "--dir", str(folder), "web", "rezzo", "--port", "0"], folder, "web")
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/", web.stdout())):
            assert web.proc.poll() is None and time.monotonic() < deadline, web.stderr()
            time.sleep(0.05)
        yield found.group(0)
    finally:
        web.stop()


def test_every_name_the_ladder_takes_has_a_page_a_browser_reaches(pages: str) -> None:
    for name in ODD_NAMES:
        href = bot_href(name)
        # urljoin resolves the link as a browser does (dot segments, query, fragment).
        status, body = get(urljoin(pages, href))
        assert status == 200, (name, href, body)
        assert "rating" in body.lower()
        status, body = get(urljoin(pages, "/api" + href))
        assert status == 200 and json.loads(body)["name"] == name


@pytest.mark.parametrize(
    "path",
    [
        "api/matches/{n}",
        "matches/{n}",
        "matches?before={n}",
        "api/matches?before={n}",
        "api/replays/{n}/file",
        "replays/{n}/",
        "api/replays/{n}/meta",
    ],
)
def test_a_match_number_past_64_bits_is_not_found(pages: str, path: str) -> None:
    for number in (2**63, 2**64, 10**40):
        status, body = get(pages + path.format(n=number))
        assert status == 404, (path, number, body)
    if "replays" in path:  # digits that are not ASCII: no match either
        status, _ = get(pages + path.format(n="%C2%B2"))
        assert status == 404
