"""`ladder web`'s live view of each game it serves (``--live-port [GAME=]PORT``, docs/ladder.md): the
pages' addresses (``/live/`` lists the games, ``/live/GAME/`` plays one; a one-game site keeps
``/live/``), the bad arguments' errors, and a relay told ``GAME=auto`` that watches where the game's
`ladder serve` recorded its bot port (TLS, its certificate pinned) and follows it to a new port. All in
this process; real servers and a browser are tests/test_ladder_games.py's and test_ladder_up_e2e.py's."""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from asgi_calls import call
from cellarena_cli import refused
from certificates import pem_files

from cellarena.arena.cli import main
from cellarena.arena.ladder.connect_commands import Endpoint
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.app import ladder_app
from cellarena.arena.ladder.web.live_games import LiveSource, recorded_target
from cellarena.sdk.protocol import FrameReader, encode
from cellarena.server.web.hosts import AllowedHosts

LOOPBACK, _ = AllowedHosts.for_server("127.0.0.1", ())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LadderStore]:
    with LadderStore(tmp_path / "ladder.sqlite") as s:
        yield s


async def test_a_site_of_two_games_lists_them_and_plays_each_at_its_address(store: LadderStore) -> None:
    app, live = ladder_app(store, ["rezzo", "cata"], allowed_hosts=LOOPBACK, live=["rezzo", "cata"])
    assert live is not None and list(live.feeds) == ["rezzo", "cata"]
    listed = await call(app, "GET", "/live/")
    assert listed.status == 200
    assert 'href="/live/rezzo/"' in listed.text and 'href="/live/cata/"' in listed.text
    page = await call(app, "GET", "/live/cata/")
    assert page.status == 200 and 'data-game="cata" data-live="/live/cata/ws"' in page.text
    unknown = await call(app, "GET", "/live/chess/")
    assert unknown.status == 404 and "/live/rezzo/, /live/cata/" in unknown.text
    assert 'href="/live/"' in (await call(app, "GET", "/")).text  # the header links the list

    app, live = ladder_app(store, ["rezzo", "cata"], allowed_hosts=LOOPBACK, live=["cata"])
    assert live is not None and list(live.feeds) == ["cata"]
    listed = await call(app, "GET", "/live/")
    assert 'href="/live/cata/"' in listed.text and "/live/rezzo/" not in listed.text
    assert (await call(app, "GET", "/live/rezzo/")).status == 404


async def test_a_one_game_site_keeps_its_first_addresses(store: LadderStore) -> None:
    app, _ = ladder_app(store, ["rezzo"], allowed_hosts=LOOPBACK, live=True)
    first = await call(app, "GET", "/live/")
    assert first.status == 200 and 'data-game="rezzo" data-live="/live/ws"' in first.text
    named = await call(app, "GET", "/live/rezzo/")
    assert named.status == 200 and 'data-live="/live/rezzo/ws"' in named.text
    app, live = ladder_app(store, ["rezzo"], allowed_hosts=LOOPBACK)
    assert live is None and (await call(app, "GET", "/live/")).status == 404


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["rezzo", "cata", "--live-port", "7777"],
            "7777 alone names no game, and these pages serve rezzo, cata",
        ),
        (["rezzo", "--live-port", "chess=7777"], "'chess' is not a game of these pages (rezzo)"),
        (["rezzo", "--live-port", "rezzo=x"], "'rezzo=x' is no bot port: give PORT (1-65535), GAME=PORT"),
        (["rezzo", "--live-port", "rezzo=70000"], "'rezzo=70000' is no bot port"),
        (["rezzo", "--live-port", "rezzo:7777"], "'rezzo:7777' is no bot port"),
        (["rezzo", "--live-port", "=7777"], "'=7777' is no bot port"),
        (["rezzo", "--live-port", "7777", "--live-port", "rezzo=auto"], "rezzo is given twice"),
    ],
    ids=["bare-port-two-games", "unknown-game", "not-a-number", "out-of-range", "colon", "no-game", "twice"],
)
def test_a_bad_live_port_is_a_usage_error_saying_what_to_give(
    args: list[str], said: str, tmp_path: Path
) -> None:
    result = refused("ladder", "--dir", str(tmp_path), "web", *args, command=main)
    assert re.search(r"Invalid value for '?--live-port'?: ", result.output), result.output
    assert said in result.output, result.output
    assert not (tmp_path / "ladder.sqlite").exists()  # refused before the database is opened


class SpectatorServer:
    """A bot port over TLS that sends each spectator one match (welcome, end)."""

    def __init__(self, chain: Path, key: Path, names: list[str]) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(chain, key)
        self.names = names
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_ssl_over_tcp_listeners(0, self.context, host="127.0.0.1")
        self.port = listeners[0].transport_listener.socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self.one, listeners)

    async def one(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        reader = FrameReader(1 << 16)
        async with stream:
            while not (hello := reader.feed(await stream.receive_some(4096))):
                pass
            assert hello[0]["role"] == "spectator"
            await stream.send_all(
                encode({"type": "welcome", "match": 1, "game": "cata", "names": self.names})
            )
            await stream.send_all(encode({"type": "end", "match": 1}))
            await stream.wait_send_all_might_not_block()


async def test_an_auto_port_watches_where_the_games_serve_recorded_it_over_tls(
    store: LadderStore, tmp_path: Path
) -> None:
    _, chain, key = pem_files(tmp_path, "localhost", "127.0.0.1")
    pem = chain.read_text()
    _, live = ladder_app(store, ["rezzo", "cata"], allowed_hosts=LOOPBACK, live=["cata"])
    assert live is not None
    feed = live.feeds["cata"]
    first, second = SpectatorServer(chain, key, ["a", "b"]), SpectatorServer(chain, key, ["c", "d"])

    async def names() -> list[str]:
        while (welcome := feed.messages["welcome"]) is None:
            await feed.changed()
        return list(welcome["names"])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(first.serve)
            await nursery.start(second.serve)
            for task in live.relays([LiveSource("cata", "auto")], store):
                nursery.start_soon(task)  # nothing recorded yet: it waits
            store.set_endpoint(Endpoint("cata", "localhost", first.port, tls=True, ca_pem=pem))
            assert await names() == ["a", "b"]
            # The server restarts on another port (`port = 0`) and records it: the relay follows.
            store.set_endpoint(Endpoint("cata", "localhost", second.port, tls=True, ca_pem=pem))
            while feed.messages["welcome"] is None or feed.messages["welcome"]["names"] != ["c", "d"]:
                await feed.changed()
            nursery.cancel_scope.cancel()


def test_a_recorded_endpoint_says_how_to_trust_its_server() -> None:
    plain = recorded_target("127.0.0.1", Endpoint("rezzo", "ladder.example.org", 7777))
    assert (plain.port, plain.tls) == (7777, None)
    system = recorded_target("127.0.0.1", Endpoint("rezzo", "ladder.example.org", 7777, tls=True))
    assert system.tls is not None and system.tls.check_hostname
    assert (system.host, system.server_hostname) == ("127.0.0.1", "ladder.example.org")
    anywhere = recorded_target("127.0.0.1", Endpoint("rezzo", None, 7777, tls=True))
    assert anywhere.tls is not None and not anywhere.tls.check_hostname  # no name recorded: pinned


UP = """\
[games.rezzo]
host = "{host}"
[games.cata]
host = "0.0.0.0"
port = 0
[web]
{web}
"""


@pytest.mark.parametrize(
    ("host", "web", "wired"),
    [
        (
            "0.0.0.0",
            "",
            ["--live-port", "rezzo=auto", "--live-port", "cata=auto", "--live-host", "127.0.0.1"],
        ),
        ("10.0.0.5", "", ["--live-port", "rezzo=auto", "--live-port", "cata=auto"]),  # hosts differ
        ("0.0.0.0", 'games = ["cata"]', ["--live-port", "cata=auto", "--live-host", "127.0.0.1"]),
        ("0.0.0.0", 'live-host = "::1"', ["--live-port", "rezzo=auto", "--live-port", "cata=auto"]),
        ("0.0.0.0", 'live-port = ["cata=7778"]', []),  # the file's own wins
    ],
    ids=["both-games", "two-hosts", "pages-of-one", "file-live-host", "file-live-port"],
)
def test_up_gives_the_pages_a_live_view_of_each_game(
    host: str, web: str, wired: list[str], tmp_path: Path
) -> None:
    from cellarena.arena.cli.ladder import ladder
    from cellarena.arena.cli.ladder.running.up import ladder_parts
    from cellarena.arena.ladder.ops.config_file import read_config

    path = tmp_path / "ladder.toml"
    path.write_text(UP.format(host=host, web=web))
    parts = {part.name: part.argv for part in ladder_parts(read_config(path, ladder))}
    assert parts["web"][-len(wired) - 1 :] == ("web", *wired)
