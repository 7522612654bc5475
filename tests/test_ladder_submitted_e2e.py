"""Submitted bots end to end (issue 41), as docs/ladder.md's "How submitted bots are built and run"
walks it, against real `ladder web` and `ladder serve` processes on one folder: an owner signs up,
uploads a Python bot and a Java one (`cellarena new-bot --lang java`, built by javac in the sandbox)
with `cellarena ladder submit`; `ladder serve` builds each (confined), validates it and plays it in
rated matches against a connected bot, with none of its processes left once idle; a second version
replaces the first only once validated; a version that crashes is refused with its log. One test: its
stages share the servers and the builds. Under CI=true a missing bubblewrap or JDK is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cellarena_cli import invoke
from game_servers import Process, ladder_serve, processes_in, start, wait_for
from ladder_pages import Browser, Pages, ladder_pages
from native_starters import need_toolchain

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.store.ladder_store import LadderStore

TOKEN = re.compile(r"<code id=token class=token>([^<]+)</code>")
CRASH = """import sys

if __name__ == "__main__":
    print("v3: about to crash", file=sys.stderr)
    raise SystemExit(3)
"""


def _states(folder: Path, bot: str) -> dict[int, str]:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return {v.number: v.state for v in store.versions_of(bot)}


def _finished_with(folder: Path, bot: str) -> int:
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        return sum(
            1 for m in store.matches("rezzo") if m.status == "finished" and bot in {s.bot for s in m.seats}
        )


def _sign_up(pages: Pages, tmp_path: Path) -> Browser:
    """Owner ann signs up: her browser."""
    owner = Browser(pages)
    owner.get("/signup")
    assert owner.post("/signup", {"name": "ann", "password": "correct horse battery"}).status == 303
    owner.get("/account")
    return owner


def _make_bot(owner: Browser, name: str, tmp_path: Path) -> Path:
    """The owner makes bot ``name`` on her page: its token, in a file."""
    made = owner.post("/account/bots", {"name": name})
    token_file = tmp_path / f"{name}.token"
    token_file.write_text(TOKEN.search(made.body).group(1) + "\n")  # type: ignore[union-attr]
    return token_file


def _connect_bob(folder: Path, tmp_path: Path, port: int) -> Process:
    """A connected bot (the example random walker) for six matches."""
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        _, bob = store.add_bot("bob", "rezzo")
    (tmp_path / "bob.token").write_text(bob.secret + "\n")
    script = [
        sys.executable,
        "example_bots/rezzo/random_walker.py",
        "--token-file",
        str(tmp_path / "bob.token"),
    ]
    return start([*script, "--port", str(port), "--matches", "8"], tmp_path, "bob")


def _the_compiled_bot_plays_once_it_is_alone(folder: Path) -> None:
    """With annbot paused by the host, bob waits for annjava (Java, built while annbot played) to go
    live and play it."""
    code, out = invoke("ladder", "--dir", str(folder), "pause", "annbot", "--reason", "annjava's turn")
    assert code == 0, out
    wait_for(lambda: _states(folder, "annjava") == {1: "live"}, "annjava's version 1 live", 120)
    wait_for(lambda: _finished_with(folder, "annjava") >= 1, "a rated match of annjava's", 60)
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        store.resume("annbot")
    logs = sorted((folder / "private-logs" / "annjava").glob("match-*.log"))
    assert logs and "annjava: seat" in logs[-1].read_text(), logs


def _second_version_replaces_the_first_once_validated(folder: Path, submit: Callable[[], None]) -> None:
    submit()
    seen: list[dict[int, str]] = []

    def second_live() -> bool:
        states = _states(folder, "annbot")
        seen.append(states)
        return states.get(2) == "live"

    wait_for(second_live, "version 2 live", 90)
    for states in seen:
        assert states[1] == "live" or states.get(2) == "live", seen
    assert _states(folder, "annbot") == {1: "retired", 2: "live"}


def _a_crashing_version_is_refused_with_its_log(folder: Path, owner: Browser) -> None:
    wait_for(lambda: _states(folder, "annbot").get(3) == "failed", "version 3 failed", 90)
    with LadderStore(folder / "ladder.sqlite", create=False) as store:
        third = store.versions.version("annbot", 3)
        assert third is not None and "v3: about to crash" in (third.validation_log or ""), third
        assert "exited" in (third.reason or ""), third.reason
        live = store.versions.live_version("annbot")
        assert live is not None and live.number == 2
    page = owner.get("/account/bots/annbot")
    assert "v3: about to crash" in page.body and '<li data-match="' in page.body  # a rated match's log


def test_uploaded_bots_are_built_validated_and_play_rated_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is not installed (.ci/run installs it); CI must have it", pytrace=False)
        pytest.skip("bubblewrap is not installed")
    need_toolchain("java")
    folder = tmp_path / "ladder"
    folder.mkdir()
    with ladder_pages(folder, "--signup", "open") as pages:
        owner = _sign_up(pages, tmp_path)
        source = tmp_path / "annbot"
        write_bot("rezzo", "annbot", "python", source)
        # A bot.toml naming another bot: its logs are still annbot's.
        (source / "bot.toml").write_text('name = "bob"\ncommand = "python annbot.py"\n')
        java = tmp_path / "annjava"
        write_bot("rezzo", "annjava", "java", java)  # its bot.toml's setup: sh build.sh (javac)
        monkeypatch.setenv("SSL_CERT_FILE", str(pages.ca))

        tokens = {bot.name: _make_bot(owner, bot.name, tmp_path) for bot in (source, java)}

        def submit(bot: Path = source) -> None:
            code, out = invoke(
                "ladder", "submit", str(bot), "--url", pages.url, "--token-file", str(tokens[bot.name])
            )
            assert code == 0, out

        submit()
        submit(java)
        # Isolated, as a ladder that runs strangers' code must be: the submitted bots have no network, and
        # the ladder hands each its connection (services/handed.py).
        server = ladder_serve(folder, "--house-after", "0.5", "--isolate")
        connected: Process | None = None
        try:
            wait_for(lambda: _states(folder, "annbot") == {1: "live"}, "version 1 live", 90)
            # Nothing of it runs while nobody waits (annjava builds).
            assert not processes_in(folder / "versions" / "annbot")
            assert (folder / "private-logs" / "annbot" / "validation-v1.log").is_file()
            assert not (folder / "private-logs" / "bob").exists()
            connected = _connect_bob(folder, tmp_path, server.port)
            wait_for(lambda: _finished_with(folder, "annbot") >= 1, "a rated match of annbot's", 60)
            _the_compiled_bot_plays_once_it_is_alone(folder)
            (source / "annbot.py").write_text((source / "annbot.py").read_text() + "\n# version 2\n")
            _second_version_replaces_the_first_once_validated(folder, submit)
            (source / "annbot.py").write_text(CRASH)
            submit()
            _a_crashing_version_is_refused_with_its_log(folder, owner)
            wait_for(lambda: connected is not None and connected.proc.poll() is not None, "bob's matches", 90)
            wait_for(lambda: not processes_in(folder / "versions"), "the bots' processes to end", 60)
            log = server.stderr()
            assert "builder: annbot version 3 failed" in log
            assert "house bot ann" not in log  # a submitted bot is called one (its warnings too)
        finally:
            if connected is not None and connected.proc.poll() is None:
                connected.stop()
            server.stop()
        assert not processes_in(folder / "versions")
