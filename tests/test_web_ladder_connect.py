"""Issue 42, point 2, end to end: a TLS ladder (`ladder serve` with a certificate of a private CA made
here, and ``--public-host``) records where bots connect; the owner reads their bot's command on the
token page in Chromium, downloads the certificate it names from the page's link, and the bot started
with that command, as written, by a shell in its folder, plays a match. `ladder register` prints the
same command from the same builder, and a bot started with it as written plays too. The pages are
saved as screenshots (`browser.shot_dir`).

One ladder for the module: its serve, its pages and the host's opponent (example_bots' builder, which
queues again after each match) start once."""

from __future__ import annotations

import os
import shlex
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser import Console, shot_dir
from cellarena_cli import CLI
from certificates import pem_files
from game_servers import Process, Server, add_ladder_bot, ladder_serve, start, wait_for
from ladder_pages import Pages, ladder_pages

from cellarena.arena.ladder.connect_commands import Address, kit_command
from cellarena.arena.ladder.store.ladder_store import LadderStore

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"
VIEWPORT = {"width": 1280, "height": 900}
#: A bot whose folder is as `cellarena new-bot` lays it out for a Python bot: NAME.py.
SCRIPTED = """from cellarena.sdk import Bot, Move, View, run


class Scripted(Bot):
    def on_tick(self, view: View) -> list[int]:
        return [Move.ADVANCE for _ in view.agents]


if __name__ == "__main__":
    raise SystemExit(run(Scripted))
"""


@dataclass
class Site:
    folder: Path
    serve: Server
    pages: Pages


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("connect")
    LadderStore(folder / "ladder.sqlite").close()
    certs = folder / "bot-port"
    certs.mkdir()
    ca, chain, key = pem_files(certs, "localhost", "127.0.0.1")
    opponent = add_ladder_bot(folder, "builder")
    tls = ["--tls-cert", str(chain), "--tls-key", str(key), "--public-host", "localhost"]
    served = ladder_serve(folder, *tls, "--starve-after", "1")
    processes: list[Process] = [served]
    try:
        # The host's bot, over TLS too, trusting the private CA.
        argv = [sys.executable, str(ROOT / "example_bots" / "rezzo" / "builder.py"), "--host",
                "127.0.0.1", "--port", str(served.port), "--ladder", "--token-file", str(opponent),
                "--tls-ca", str(ca)]  # fmt: skip
        processes.append(start(argv, folder / "bots", "builder"))

        def recorded() -> bool:
            with LadderStore(folder / "ladder.sqlite", create=False) as store:
                return "rezzo" in store.endpoints()

        wait_for(recorded, "ladder serve to record its address", 60)
        with ladder_pages(folder, "--signup", "open") as pages:
            yield Site(folder, served, pages)
    finally:
        for p in reversed(processes):
            p.stop()


def bot_folder(site: Site, name: str) -> Path:
    """A bot's folder with its program, ``NAME.py``."""
    folder = site.folder / "owners" / name
    folder.mkdir(parents=True)
    (folder / f"{name}.py").write_text(SCRIPTED)
    return folder


def run_as_written(command: str, folder: Path, label: str) -> Process:
    """``command`` as an owner pastes it in a shell, in the bot's folder; ``python`` is this venv's.
    The shell execs it, so that stopping the process stops the bot (dash forks a lone command: the
    bot, with --ladder, then played on after its test, orphaned)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return start(["/bin/sh", "-c", f"exec {command}"], folder, label, cwd=folder, env={"PATH": path})


def plays_a_match(site: Site, bot: str, process: Process) -> None:
    def played() -> bool:
        assert process.proc.poll() is None, f"{bot} stopped:\n{process.stderr()}"
        with LadderStore(site.folder / "ladder.sqlite", create=False) as store:
            return any(b.match.status == "finished" for b in store.bot_history(bot, limit=5))

    wait_for(played, f"{bot} to play a match", 90)


def test_the_owner_copies_the_command_from_the_token_page_and_their_bot_plays(
    site: Site, browser: Any, tmp_path: Path
) -> None:
    shots = shot_dir(tmp_path)
    url = site.pages.url
    context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True, accept_downloads=True)
    page = context.new_page()
    console = Console(page)
    page.goto(url + "/signup")
    page.fill("input[name=name]", "ann")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")
    page.fill("#new-bot input[name=name]", "scripted")
    page.click("#new-bot button")
    folder = bot_folder(site, "scripted")
    token = folder / "scripted.token"
    token.write_text(page.inner_text("#token").strip() + "\n")
    token.chmod(0o600)
    panel = page.locator("section.connect[data-game=rezzo]")
    assert panel.locator("code.host").inner_text() == "localhost"  # --public-host, not 127.0.0.1
    assert panel.locator("code.port").inner_text() == str(site.serve.port)
    command = panel.locator("tr[data-kit=python] pre.command").inner_text().strip()
    assert command == (
        f"python scripted.py --host localhost --port {site.serve.port} --ladder --token-file scripted.token "
        "--tls --tls-ca rezzo-ca.pem"
    )
    stunnel = panel.locator("tr[data-kit=cpp] pre.setup").inner_text()
    assert f"connect = localhost:{site.serve.port}" in stunnel and "CAfile = rezzo-ca.pem" in stunnel
    with page.expect_download() as download:
        panel.locator("a[download]").click()
    assert download.value.suggested_filename == "rezzo-ca.pem"
    download.value.save_as(folder / "rezzo-ca.pem")
    page.screenshot(path=str(shots / "ladder-token-connect.png"), full_page=True)
    bot = run_as_written(command, folder, "scripted")
    try:
        plays_a_match(site, "scripted", bot)
    finally:
        bot.stop()
    page.goto(url + "/account/bots/scripted")
    page.click("#connect-link")
    page.wait_for_url("**/connect")
    shown = page.locator("section.connect[data-game=rezzo] tr[data-kit=python] pre.command").inner_text()
    assert shown.strip() == command.replace("scripted", "my_bot").replace("my_bot.token", "bot.token")
    page.screenshot(path=str(shots / "ladder-connect.png"), full_page=True)
    console.assert_clean()
    context.close()


def test_register_prints_the_same_command_and_a_bot_plays_with_it(site: Site) -> None:
    folder = bot_folder(site, "benbot")
    password = site.folder / "ben.password"
    password.write_text(PASSWORD + "\n")
    argv = [*CLI, "ladder", "--dir", str(site.folder), "register", site.pages.url, "--name", "ben",
            "--password-file", str(password), "--bot", "benbot"]  # fmt: skip
    env = {**os.environ, "SSL_CERT_FILE": str(site.pages.ca)}
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    lines = done.stdout.splitlines()
    expected = kit_command(
        "python", Address("rezzo", "localhost", site.serve.port, tls=True, own_ca=True), "benbot"
    ).command
    assert lines[1:] == [
        "made bot benbot; its token is in benbot.token (0600)",
        f"rezzo plays at localhost:{site.serve.port}, TLS; connect it from its folder with:",
        f"  curl -fsSo rezzo-ca.pem {site.pages.url}/connect/rezzo/ca.pem   # the ladder's own certificate, "
        "to trust",
        f"  {expected}",
        f"every kit's command (TypeScript, Java, C++, Rust): {site.pages.url}/connect",
    ], done.stdout
    # The certificate as curl would fetch it (this test's pages use a CA of their own: trust it).
    fetch = shlex.split(lines[3].split("#")[0])
    pages_tls = ssl.create_default_context(cafile=str(site.pages.ca))
    with urllib.request.urlopen(fetch[-1], context=pages_tls, timeout=30) as answer:
        (folder / fetch[-2]).write_bytes(answer.read())
    bot = run_as_written(expected, folder, "benbot")
    try:
        plays_a_match(site, "benbot", bot)
    finally:
        bot.stop()
