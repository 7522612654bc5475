"""The C++, Rust and Java kits on a ladder's side, with the Rezzo starters `cellarena new-bot` writes:
many matches in a row, refusals that mean "not now" (waited out) and every other code (a stop), a real
ladder and its cluster's workers, a redirect followed and a seat taken back after a lost connection,
SIGTERM, TLS (Java) or the advice to use a local TLS proxy, and (with the TypeScript kit) a match
under --isolate, where the handed connection is the only way to play.

The starters are built once and shared with test_native_kits.py (tests/native_starters.py).
"""

from __future__ import annotations

import functools
import json
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from cellarena_cli import CLI, ROOT, invoke
from game_servers import Process, Server, exited, ladder_serve, serve, start, wait_for
from native_starters import LANGS, Starters, starters_of
from node_kit import built_kit
from scripted_server import Peer, Script, ScriptedServer, match, refuse
from tls_proxy import TLSProxy, certificates

from cellarena.arena.ladder.store.ladder_store import LadderStore, MatchRecord
from cellarena.sdk import protocol
from cellarena.sdk.protocol import codes

RANDOM_WALKER = ROOT / "example_bots" / "rezzo" / "random_walker.py"
#: The kits' back-off shortened for these tests (each kit reads CELLARENA_BACKOFF_FIRST_S): rounds of
#: 25-50 ms, 50-100 ms, ... instead of 0.5-1 s, 1-2 s, ...; a server's "for another N s" is still waited
#: out. The real schedule (a first round of 1 s) is each kit's own unit tests'.
QUICK_BACKOFF = {"CELLARENA_BACKOFF_FIRST_S": "0.05"}


@pytest.fixture(scope="module")
def starters(request: pytest.FixtureRequest) -> Iterator[Starters]:
    yield starters_of(request.config)


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `cellarena serve rezzo` for the tests whose bots play it, one test at a time: it pairs
    whoever comes, and each test's bots come together."""
    server = serve(tmp_path_factory.mktemp("serve"))
    yield server
    server.stop()


# ------------------------------------------------------------------ many matches, ladders, TLS
def kit_bot(
    starters: Starters, lang: str, folder: Path, name: str, port: int, *flags: str, token: str | None = None
) -> Process:
    """A built Rezzo starter as its author starts it, with the quick back-off; a token goes through the
    environment."""
    env = QUICK_BACKOFF | ({"CELLARENA_TOKEN": token} if token is not None else {})
    command = [*starters.command(lang, "rezzo"), "--port", str(port), "--name", name, *flags]
    return start(command, folder, name, cwd=starters.get(lang, "rezzo"), env=env)


@pytest.mark.parametrize("lang", LANGS)
async def test_not_now_refusals_are_retried_with_back_off(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    starters.get(lang, "rezzo")  # built before the server's clock starts
    server = ScriptedServer(
        [
            refuse(protocol.BUSY, "kit already has a connection in the queue"),
            refuse(protocol.LOCKED_OUT, "too many wrong tokens from 127.0.0.1; refused for another 0.4 s"),
            match(3),
            refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back in a few seconds"),
            match(3),
        ]
    )
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = kit_bot(starters, lang, tmp_path, "kit", port, "--matches", "2")
        code = await exited(bot, 90)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert code == 0, err
    assert server.failures == [] and len(server.seen) == 5
    assert all(
        hello is not None and hello["name"] == "kit" and hello["game"] == "rezzo" for _, hello in server.seen
    )
    times = [t for t, _ in server.seen]
    assert times[1] - times[0] >= 0.025  # the first failure in a row waits 25-50 ms (QUICK_BACKOFF)
    assert times[2] - times[1] >= 0.4  # the lock-out said 0.4 s: no sooner (the second round is 50-100 ms)
    assert times[4] - times[3] >= 0.025  # a match was played: the count started again
    assert "the server sent error busy" in err and "trying again in" in err
    assert err.count("end after 3 ticks") == 2 and "match 1 of 2 played" in err


@pytest.mark.parametrize("lang", LANGS)
def test_matches_2_against_cellarena_serve(
    starters: Starters, plain_server: Server, lang: str, tmp_path: Path
) -> None:
    bots = [
        kit_bot(starters, lang, tmp_path, name, plain_server.port, "--matches", "2") for name in ("k1", "k2")
    ]
    codes = [b.wait(120) for b in bots]
    assert codes == [0, 0], [b.stderr() for b in bots]
    for b in bots:
        assert (
            b.stderr().count("end after ") == 2 and b.stderr().count("played; connecting for the next") == 1
        )


def ladder_bot(folder: Path, name: str) -> Path:
    """``name`` registered on the ladder in ``folder`` (in this process: a `cellarena` process would
    cost a second of imports), its token in a file for `--token-file`."""
    code, said = invoke("ladder", "--dir", str(folder), "bot", "add", name, "--game", "rezzo")
    assert code == 0, said
    path = folder / f"{name}.token"
    path.write_text(said.strip().splitlines()[-1] + "\n")  # the token, on the last line
    path.chmod(0o600)
    return path


def test_one_bot_of_each_kit_keeps_playing_on_a_real_ladder_and_follows_it_to_its_cluster(
    starters: Starters, tmp_path: Path
) -> None:
    """`--ladder --token-file` against `cellarena ladder serve --cluster local:2`, which hands every
    match to a worker process and redirects the bots there: one match per connection, each played at
    a worker, and the bot queues on the ladder again after each `end`; the ladder records the matches,
    and the token stays out of every log. (One ladder for what were two tests, a plain ladder and
    one with a cluster: the cluster's redirects are the plain ladder's path plus one hop.)"""
    tokens = {lang: ladder_bot(tmp_path, f"{lang}_kit") for lang in LANGS}
    for lang in LANGS:
        starters.get(lang, "rezzo")
    ladder = ladder_serve(tmp_path, "--cluster", "local:2", "--grace", "2")

    def finished() -> list[MatchRecord]:
        with LadderStore(tmp_path / "ladder.sqlite") as store:
            return [m for m in store.matches("rezzo") if m.status == "finished"]

    try:
        assert "matches played on the cluster local:2" in ladder.stderr()
        bots = {
            lang: kit_bot(starters, lang, tmp_path / "bots", f"{lang}_kit", ladder.port, "--ladder",
                          "--token-file", str(tokens[lang]))
            for lang in LANGS
        }  # fmt: skip
        try:
            wait_for(
                lambda: all(b.stderr().count("end after ") >= 2 for b in bots.values()),
                "two ladder matches of every kit's bot",
                240,
            )
        finally:
            for bot in bots.values():
                bot.stop()  # SIGTERM ends a kit bot mid-wait, with status 0
        # A bot has its `end` before the worker's result reaches the ladder's store.
        ended = sum(b.stderr().count("end after ") for b in bots.values()) // 2
        wait_for(lambda: len(finished()) >= ended, f"{ended} matches recorded by the ladder", 60)
    finally:
        ladder.stop()
    for lang, bot in bots.items():
        token, err = tokens[lang].read_text().strip(), bot.stderr()
        assert "error" not in err and "played; connecting for the next" in err, err
        assert err.count("playing this match at 127.0.0.1:") >= 2, err
        assert token not in err and token not in ladder.stderr()
    assert {name for m in finished() for name in m.bots} == {f"{lang}_kit" for lang in LANGS}


@pytest.mark.parametrize("lang", ["cpp", "rust"])
def test_kits_without_tls_say_to_use_a_local_tls_proxy(starters: Starters, lang: str) -> None:
    proc = subprocess.run(
        [*starters.command(lang, "rezzo"), "--tls"],
        cwd=starters.get(lang, "rezzo"), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 64 and "local TLS proxy" in proc.stderr and "README" in proc.stderr


async def test_the_java_kit_plays_over_tls_and_checks_the_certificate(
    starters: Starters, plain_server: Server, tmp_path: Path
) -> None:
    starters.get("java", "rezzo")
    certs = certificates(tmp_path, "127.0.0.1")
    proxy = TLSProxy(certs.server, plain_server.port)
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        flags = ["--host", "127.0.0.1", "--tls-ca", str(certs.ca_file)]
        bots = [kit_bot(starters, "java", tmp_path, name, port, *flags) for name in ("j1", "j2")]
        codes = [await exited(b, 60) for b in bots]
        # A CA that signed nothing the proxy shows: the handshake is refused, and the bot says why.
        wrong = kit_bot(
            starters, "java", tmp_path, "j3", port, "--ladder", "--tls-ca", str(certs.other_ca_file)
        )
        wrong_code = await exited(wrong, 60)
        nursery.cancel_scope.cancel()
    assert codes == [0, 0], [b.stderr() for b in bots]
    assert proxy.handshakes == 2 and all(b.stderr().count("end after ") == 1 for b in bots)
    err = wrong.stderr()
    assert wrong_code == 1 and f"TLS handshake with 127.0.0.1:{port} failed" in err and "--tls-ca" in err, err
    assert "trying again" not in err


# ------------------------------------------------------------------ the handed connection, redirects, SIGTERM
def _portable(starters: Starters, lang: str, into: Path) -> str:
    """What a Rezzo bot of ``lang`` needs to run, copied ``into`` a folder every user may read (under
    --isolate as root each bot is a user of its own, and a checkout or pytest's folders may be
    private), and its command line there."""
    if lang == "ts":
        kit = built_kit()
        shutil.copytree(kit / "dist", into / "dist")
        shutil.copytree(kit / "node_modules" / "@msgpack", into / "node_modules" / "@msgpack")
        return "node dist/test/bots/rezzo.js"
    folder = starters.get(lang, "rezzo")
    command = starters.command(lang, "rezzo")
    built = command[-1] if lang == "java" else command[0]  # java -jar build/x.jar; build/x; target/...
    (into / built).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(folder / built, into / built)
    return " ".join(command)


def test_each_kit_plays_on_the_connection_it_is_handed_under_isolate(starters: Starters) -> None:
    """`--isolate`: each bot has an empty network of its own and no token pipe, so the match is played
    on the connection the launcher hands over (CELLARENA_SOCKET_FD=0) or not at all. A bot of every
    kit (C++, Rust, Java, TypeScript) sits in one match of four seats (Rezzo's quad map): one match
    tree for the four, and none of them could reach the server by address."""
    kits = [*LANGS, "ts"]
    shared = Path(tempfile.mkdtemp(prefix="cellarena-kits-isolate-"))
    try:
        shared.chmod(0o755)
        commands = {lang: _portable(starters, lang, shared / "bot") for lang in kits}
        logs = shared / "logs"
        bots = [arg for lang in kits for arg in ("--bot", f"{lang}={commands[lang]}")]
        proc = subprocess.run(
            [*CLI, "match", "rezzo", *bots, "--map", "quad", "--isolate", "--fast", "--max-ticks", "30",
             "--log-dir", str(logs), "--json"],
            cwd=shared / "bot", capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        said = {n: (logs / f"{n}.log").read_text() if (logs / f"{n}.log").is_file() else "" for n in kits}
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{said}"
    result = json.loads(proc.stdout)
    assert result["forfeits"] == [] and result["ticks"] == 30, said
    assert result["exit_codes"] == dict.fromkeys(kits, 0), said
    assert result["invalid"] == dict.fromkeys(kits, 0), said
    assert not any("error" in text for text in said.values()), said


async def hold(peer: Peer) -> None:
    """Say nothing after the hello, as a ladder's queue does while no opponent comes."""
    await trio.sleep_forever()


def redirect_to(port: int, token: str) -> Script:
    """Answer the hello with a redirect to ``port`` on this host (docs/protocol.md, `redirect`)."""

    async def script(peer: Peer) -> None:
        await peer.send(protocol.redirect("127.0.0.1", port, token, tls=False))

    return script


@pytest.mark.parametrize("lang", LANGS)
async def test_a_kit_bot_follows_a_redirect_and_takes_its_seat_back_after_a_lost_connection(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    """The ladder redirects (the hello says it accepts that), the match host drops the connection after
    a tick, and the bot comes back with the redirect's token, the same bot, and plays the match out."""
    starters.get(lang, "rezzo")
    server = ScriptedServer([])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        # ...and after its match the bot queues on the ladder again, where it waits.
        server.scripts.extend([redirect_to(port, "seat-token-1"), match(3, drop_after=1), match(3), hold])
        bot = kit_bot(starters, lang, tmp_path, "kit", port, "--ladder", token="cla_ladder_token")
        with trio.fail_after(60):
            while len(server.seen) < 4:
                await trio.sleep(0.05)
        bot.proc.send_signal(signal.SIGTERM)
        code = await exited(bot, 30)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert server.failures == [] and code == 0, err
    hellos = [hello for _, hello in server.seen[:3]]
    assert all(h is not None and h.get("accepts") == ["redirect"] for h in hellos), hellos
    assert [h["token"] for h in hellos if h is not None] == [
        "cla_ladder_token",
        "seat-token-1",
        "seat-token-1",
    ]
    assert f"playing this match at 127.0.0.1:{port}" in err
    assert "closed the connection before the match ended; taking the seat back" in err
    assert "stopped by SIGTERM after 1 matches" in err and "seat-token-1" not in err


@pytest.mark.parametrize("lang", ["cpp", "rust"])
async def test_a_kit_without_tls_gives_a_tls_match_host_up_and_queues_again(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    """The C++ and Rust kits speak plain TCP: a redirect to a match host that speaks TLS is not followed
    (nothing is sent there), the bot says why and what to do, and goes back to the ladder's queue."""
    starters.get(lang, "rezzo")

    async def to_tls_host(peer: Peer) -> None:
        await peer.send(protocol.redirect("127.0.0.1", 9, "seat-token-2", tls=True))

    server = ScriptedServer([to_tls_host, hold])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = kit_bot(starters, lang, tmp_path, "kit", port, "--ladder", token="cla_ladder_token")
        with trio.fail_after(60):
            while len(server.seen) < 2:
                await trio.sleep(0.05)
        bot.proc.send_signal(signal.SIGTERM)
        code = await exited(bot, 30)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert code == 0 and server.failures == [], err
    assert (
        "the match host 127.0.0.1:9 speaks TLS" in err
        and "local TLS proxy" in err
        and "trying again in" in err
    )
    assert "seat-token-2" not in err


class RefusingServer:
    """Refuses every hello with the error code the bot's name asks for (one connection per bot), and
    keeps the token each hello carried."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.tokens: list[object] = []

    async def start(self, nursery: trio.Nursery) -> int:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        return int(listeners[0].socket.getsockname()[1])

    async def _handle(self, stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        with trio.move_on_after(15):
            hello = await peer.recv()
            if hello is not None:
                code = str(hello["name"]).removeprefix("code_")
                self.refused.append(code)
                self.tokens.append(hello.get("token"))
                await peer.send(protocol.error(code, f"as the test says ({code})"))
        await trio.aclose_forcefully(stream)


#: Every code of the registry that is not "not now", and one the kits have never heard of (a code a
#: later server adds, as `paused` is): each must stop a ladder bot, since waiting would not help.
STOPS = [c for c in codes.ERROR_CODES if c not in codes.RETRY_LATER] + ["a_later_code"]


@pytest.mark.parametrize("lang", LANGS)
async def test_every_refusal_outside_retry_later_stops_a_kit_ladder_bot(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    """The retry rule is the registry's (sdk/protocol/codes.py): a refusal in RETRY_LATER is waited out
    (test_not_now_refusals_are_retried_with_back_off), and every other code, today's or a later one,
    stops the bot with status 1, saying what the server said and, for bad_hello, what to fix. The
    ladder token went in each hello and into no log."""
    starters.get(lang, "rezzo")
    server = RefusingServer()
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bots = {
            code: kit_bot(
                starters, lang, tmp_path / code, f"code_{code}", port, "--ladder", token="cla_wrong_secret"
            )
            for code in STOPS
        }
        statuses = {code: await exited(bot, 60) for code, bot in bots.items()}
        nursery.cancel_scope.cancel()
    assert sorted(server.refused) == sorted(STOPS)  # one try each: no bot came back
    assert server.tokens == ["cla_wrong_secret"] * len(STOPS)
    for code, bot in bots.items():
        err = bot.stderr()
        assert statuses[code] == 1, (code, err)
        assert f"the server sent error {code}: as the test says ({code})" in err, (code, err)
        assert "not trying again" in err and "cla_wrong_secret" not in err, (code, err)
    assert "check the bot's token" in bots[protocol.BAD_HELLO].stderr()
