"""The TypeScript kit (sdk/kits/typescript) for tests: its pinned packages installed once, built once per
change of its sources, and bot folders of `new-bot --lang ts|js` built together on those packages.

npm and tsc are the slow part of these tests (a few seconds each on a busy machine), so test processes
running side by side (pytest-xdist) share one ``node_modules`` and one build, each made under a lock:
whichever process comes first installs or builds, the other waits and finds it done.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
from cellarena_cli import ROOT

KIT = ROOT / "sdk" / "kits" / "typescript"
TSC = KIT / "node_modules" / "typescript" / "bin" / "tsc"
#: The kit's node tests, as `npm test` runs them.
NODE_TESTS = "dist/test/*.test.js"
NPM_CI = ["npm", "ci", "--no-audit", "--no-fund"]


def need_node() -> None:
    """Node.js and npm, or a failure under CI (which must have them: .ci/run installs them) and a skip
    elsewhere."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are needed for the TypeScript kit; CI must have them", pytrace=False)
        pytest.skip("node and npm are needed for the TypeScript kit")


def _installed() -> bool:
    """Whether node_modules holds every package the kit's lock pins, at its version."""
    lock = json.loads((KIT / "package-lock.json").read_text())
    for where, meta in lock["packages"].items():
        if not where:
            continue
        found = KIT / where / "package.json"
        if not found.is_file() or json.loads(found.read_text()).get("version") != meta["version"]:
            return False
    return True


def _sources_digest() -> str:
    """A digest of everything a build reads: the sources, the tsconfig and the lock."""
    h = hashlib.blake2b(digest_size=16)
    files = [
        KIT / "tsconfig.json",
        KIT / "package-lock.json",
        *sorted(KIT.glob("src/**/*.ts")),
        *sorted(KIT.glob("test/**/*.ts")),
    ]
    for path in files:
        h.update(str(path.relative_to(KIT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def built_kit() -> Path:
    """The kit's folder with its pinned packages installed (`npm ci`) and its sources built into dist/,
    each redone only when out of date."""
    need_node()
    with (KIT / "package.json").open("rb") as lock:  # a lock on a file that is always there
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed():
            proc = subprocess.run(NPM_CI, cwd=KIT, capture_output=True, text=True, timeout=600, check=False)
            assert proc.returncode == 0, f"npm ci in {KIT} failed:\n{proc.stdout}\n{proc.stderr}"
            assert _installed(), "npm ci did not install the pinned packages"
        stamp = KIT / "dist" / ".sources"
        digest = _sources_digest()
        if not stamp.is_file() or stamp.read_text() != digest:
            shutil.rmtree(KIT / "dist", ignore_errors=True)
            proc = subprocess.run(
                ["node", str(TSC), "-p", str(KIT)],
                cwd=KIT,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert proc.returncode == 0, f"tsc -p {KIT} failed:\n{proc.stdout}\n{proc.stderr}"
            stamp.write_text(digest)
    return KIT


def build_bot_folders(folders: Iterable[Path]) -> None:
    """Bot folders written by `new-bot --lang ts|js`, on the kit's installed packages (a link to its
    node_modules instead of an `npm ci` each, which one test does for real) and built by one `tsc -b`."""
    folders = list(folders)
    built_kit()
    for folder in folders:
        (folder / "node_modules").symlink_to(KIT / "node_modules", target_is_directory=True)
    proc = subprocess.run(
        ["node", str(TSC), "-b", *map(str, folders)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, f"tsc -b of the bot folders failed:\n{proc.stdout}\n{proc.stderr}"
