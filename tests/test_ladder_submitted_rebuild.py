"""`cellarena ladder rebuild` (arena/cli/ladder/rebuild.py, `builds.rebuild_live`, `Builder.rebuild`):
after the host upgrades the SDK or a toolchain, each live version is built and validated again from
its archive, confined; one that passes plays on from its new build, one that fails keeps its old
build, stays the live version and its bot is paused with the reason. The "upgrade" here: the host
no longer offers a package one bot imports. Real builds and matches (bubblewrap), 30 ticks each.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import trio
from cellarena_cli import invoke

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.services.builds import BuildSettings, Rebuilt, live_versions, rebuild_live
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.arena.ladder.submissions.build import PYTHON_PACKAGES, BuildLimits
from cellarena.server.bots.confinement import Limits

#: A bot that imports a package only the "old" host offered (`if TYPE_CHECKING`: never at play).
OLD_IMPORT = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import click  # noqa: F401\n"


def _upload(store: LadderStore, archives: ArchiveStore, source: Path) -> None:
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(source, arcname=source.name)
    data = packed.getvalue()
    store.add_bot(source.name, "rezzo")
    store.versions.add_version(source.name, archives.put(data, "tar.gz"), len(data), "tar.gz")


def test_a_rebuild_keeps_what_passes_and_pauses_what_fails(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is not installed (.ci/run installs it); CI must have it", pytrace=False)
        pytest.skip("bubblewrap is not installed")
    folder = tmp_path / "ladder"
    folder.mkdir()
    for name in ("good", "gone"):
        write_bot("rezzo", name, "python", tmp_path / name)
    bot = tmp_path / "gone" / "gone.py"
    bot.write_text(bot.read_text() + "\n" + OLD_IMPORT)
    old = BuildLimits(python_packages=(*PYTHON_PACKAGES, "click"))
    settings = BuildSettings(folder, BuildLimits(), game_values={"max_ticks": 30})
    with LadderStore(folder / "ladder.sqlite") as store:
        archives = ArchiveStore(folder / "archives")
        for name in ("good", "gone"):
            _upload(store, archives, tmp_path / name)
        first = BuildSettings(folder, old, game_values={"max_ticks": 30})
        builder = first.loop(store, "rezzo", match_limits=Limits(), isolate=True).builder
        for _ in range(2):
            assert (taken := trio.run(builder.build_next)) and taken[1] and taken[1].state == "validated", (
                taken
            )
        live = live_versions(store, None)
        assert sorted(v.bot for v in live) == ["gone", "good"], [(v.bot, v.state, v.reason) for v in live]
        stale = folder / "versions" / "good" / "1" / "good" / "left-by-the-old-build"
        stale.write_text("")

        async def rebuild() -> list[Rebuilt]:
            return await rebuild_live(
                store, settings, live, match_limits=Limits(), isolate=True, actor="host"
            )

        done = {r.version.bot: r for r in trio.run(rebuild)}
        assert done["good"].ok and done["good"].reason is None
        assert not stale.exists() and (stale.parent / "good.py").is_file()  # its new build, in place
        assert not done["gone"].ok and "imports click" in (done["gone"].reason or "")
        gone = store.bot("gone")
        assert gone is not None and gone.paused is not None and "failed its rebuild" in gone.paused
        assert "imports click" in gone.paused
        assert (folder / "versions" / "gone" / "1" / "gone" / "gone.py").is_file()  # its old build, kept
        assert "imports click" in (folder / "private-logs" / "gone" / "rebuild-v1.log").read_text()
        assert [v.number for v in live_versions(store, ["gone"])] == [1]  # live until the owner uploads
        good = store.bot("good")
        assert good is not None and good.paused is None
        assert not list((folder / "versions" / "good").glob(".*"))  # no half-built folder left


def test_the_command_names_what_it_cannot_rebuild(tmp_path: Path) -> None:
    folder = tmp_path / "ladder"
    folder.mkdir()
    with LadderStore(folder / "ladder.sqlite") as store:
        store.add_bot("bare", "rezzo")
    code, out = invoke("ladder", "--dir", str(folder), "rebuild")
    assert code == 2 and "name the bots to rebuild, or give --all" in out, out
    code, out = invoke("ladder", "--dir", str(folder), "rebuild", "bare")
    assert code == 1 and "bare has no live version to rebuild" in out, out
    code, out = invoke("ladder", "--dir", str(folder), "rebuild", "--all")
    assert code == 0 and "nothing to rebuild" in out, out
