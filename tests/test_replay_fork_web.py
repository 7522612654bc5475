"""The player names a fork's origin, and links it when the origin is served too: in this process
through the API, and once in a real browser over `cellarena replay view`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from asgi_calls import call
from browser import page_of, viewer
from replay_fork_play import play

from cellarena.server.play.match import TickSettings
from cellarena.server.replay import file_digest
from cellarena.server.replay_fork import plan_fork, play_fork
from cellarena.server.web.replays import viewer_app


def make_fork(folder: Path) -> tuple[Path, Path]:
    """origin.replay (drop2df, in-process) and fork.replay, every seat replayed from tick 3."""
    origin, fork = folder / "origin.replay", folder / "fork.replay"
    play("drop2df", origin)
    plan = plan_fork(str(origin), 3, ())
    trio.run(lambda: play_fork(plan, fork, TickSettings(fast=True), log_dir=folder / "logs"))
    return origin, fork


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_fork(tmp_path_factory.mktemp("fork-web"))


async def test_the_api_names_the_origin_and_links_it_when_served(forked: tuple[Path, Path]) -> None:
    origin, fork = forked
    app = viewer_app(fork)
    meta = (await call(app, "GET", "/api/replays/replay/meta")).json()
    link = f"/replays/origin-{file_digest(origin)[:16]}/"
    assert meta["forked_from"] == {"replay": "origin.replay", "tick": 3, "link": link}
    served = await call(app, "GET", f"/api{link.removesuffix('/')}/meta")
    assert served.status == 200 and served.json()["name"] == "origin.replay"
    assert "forked_from" not in served.json()
    assert (await call(app, "GET", link)).status == 200
    assert (await call(app, "GET", "/api/replays/origin-0000000000000000/meta")).status == 404


async def test_an_origin_that_changed_or_is_gone_is_named_without_a_link(tmp_path: Path) -> None:
    origin, fork = await trio.to_thread.run_sync(make_fork, tmp_path)
    origin.write_bytes(origin.read_bytes() + b"\0")  # not the file the fork was made from
    meta = (await call(viewer_app(fork), "GET", "/api/replays/replay/meta")).json()
    assert meta["forked_from"] == {"replay": "origin.replay", "tick": 3, "link": None}
    origin.unlink()
    meta = (await call(viewer_app(fork), "GET", "/api/replays/replay/meta")).json()
    assert meta["forked_from"]["link"] is None


def test_the_player_shows_forked_from_with_a_link_to_the_origin(
    forked: tuple[Path, Path], browser: Any
) -> None:
    _origin, fork = forked
    with viewer("replay", "view", str(fork), "--port", "0") as url, page_of(browser) as (page, console):
        page.goto(url)
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
        subtitle = page.inner_text(".subtitle")
        assert "forked from origin.replay at tick 3" in subtitle
        page.click("#forked-from")
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
        assert page.evaluate("window.cellarenaPlayer.state.meta.name") == "origin.replay"
        assert "forked from" not in page.inner_text(".subtitle")
        console.assert_clean()
