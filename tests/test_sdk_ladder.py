"""Python SDK bots that keep playing (`--matches N`, `--ladder`) and connect over TLS (`--tls`,
`--tls-ca`), run as their authors run them: example_bots/rezzo/random_walker.py as a process, against
a real `cellarena ladder serve`, a real `cellarena serve`, a scripted server that refuses, and a
TLS-terminating proxy in front of `cellarena serve` (the server's own TLS is tested with the server)."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio
from bot_files import load_example_bot
from game_servers import Process, Server, exited, ladder_serve, serve, start, wait_for
from scripted_server import Peer, ScriptedServer, match, refuse
from tls_proxy import TLSProxy, certificates

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol
from cellarena.sdk.reconnect import Backoff

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "example_bots" / "rezzo" / "random_walker.py"
PLAYED = "played; connecting for the next"
#: Two bots whose ratings a win parts are paired again at once, not after up to 30 s of waiting
#: (matchmaking's own tests say how long it keeps them apart).
PAIR_AT_ONCE = ("--starve-after", "0.1")


def bot(folder: Path, name: str, port: int, *flags: str) -> Process:
    """random_walker.py, as a bot author starts it."""
    return start([sys.executable, str(BOT), "--port", str(port), "--name", name, *flags], folder, name)


def add_ladder_bot(folder: Path, name: str) -> Path:
    """``name`` registered on the ladder in ``folder`` through its store (`ladder bot add` as a command
    is tests/test_ladder_cli.py's); its token in a file, whose path is returned (`--token-file`)."""
    with LadderStore(folder / "ladder.sqlite") as store:
        token = store.add_bot(name, "rezzo")[1].secret
    path = folder / f"{name}.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def game_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `cellarena serve rezzo` for the tests that only need bots paired and played (each waits
    for its own bots to end, so the next test's bots meet a server with nobody waiting)."""
    server = serve(tmp_path_factory.mktemp("serve"))
    yield server
    server.stop()


def reported(server: Server) -> int:
    """The match results the server has printed so far (one JSON line each)."""
    return sum(1 for line in server.stdout().splitlines() if line.startswith("{"))


def results(proc: Process) -> int:
    """The matches a bot reports having played to their end (its one-line summary per match)."""
    return sum(1 for line in proc.stderr().splitlines() if " after " in line and " ticks, " in line)


# ------------------------------------------------------------------------------------------ ladder
def test_ladder_bots_keep_playing_and_come_back_after_the_ladder_restarts(tmp_path: Path) -> None:
    """Also: a bot with a wrong token, refused by the same ladder before the others come."""
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    ladder = ladder_serve(tmp_path, *PAIR_AT_ONCE)
    a_wrong_token_stops_a_ladder_bot_at_once(tmp_path, ladder.port)
    bots = {
        name: bot(tmp_path / "bots", name, ladder.port, "--ladder", "--token-file", str(token))
        for name, token in tokens.items()
    }
    try:
        wait_for(lambda: all(b.stderr().count(PLAYED) >= 2 for b in bots.values()), "two matches each", 120)
        assert ladder.stop() == 0  # SIGTERM: the match under way is void, the bots are told `shutdown`
        before = {name: b.stderr().count(PLAYED) for name, b in bots.items()}
        time.sleep(1)  # the bots back off and find nothing listening
        ladder = ladder_serve(tmp_path, *PAIR_AT_ONCE, port=ladder.port, label="ladder-again")
        wait_for(
            lambda: all(b.stderr().count(PLAYED) > before[n] for n, b in bots.items()),
            "a match after the restart",
            120,
        )
        assert all(b.proc.poll() is None for b in bots.values()), "a ladder bot stopped playing"
        bots["alice"].proc.send_signal(signal.SIGINT)
        assert bots["alice"].wait(15) == 130
        assert bots["bob"].stop() == 0
    finally:
        for b in bots.values():
            if b.proc.poll() is None:
                b.proc.kill()
        ladder.stop()
    for name, b in bots.items():
        err = b.stderr()
        assert "trying again in" in err  # it backed off while the ladder was away
        assert tokens[name].read_text().strip() not in err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"{name}: ") and (
            "interrupted after" in last or "stopped by SIGTERM after" in last
        )
    assert not any(t.read_text().strip() in ladder.stderr() for t in tokens.values())
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
        assert len(finished) >= 3
        assert all(sorted(m.bots) == ["alice", "bob"] for m in finished)


def a_wrong_token_stops_a_ladder_bot_at_once(tmp_path: Path, port: int) -> None:
    """A ladder bot with a token the ladder does not know is told so and stops after one attempt."""
    wrong = tmp_path / "wrong.token"
    wrong.write_text("cla_" + "x" * 43 + "\n")
    stray = bot(tmp_path / "stray", "alice", port, "--ladder", "--token-file", str(wrong))
    assert stray.wait(30) == 1
    err = stray.stderr()
    assert "the server sent error 'bad_hello'" in err
    assert "check the bot's token" in err and "not trying again" in err
    assert "trying again in" not in err  # one attempt: a wrong token retried would get it locked out
    assert "x" * 43 not in err
    assert len(err.strip().splitlines()) == 1


def test_matches_3_plays_exactly_three_against_cellarena_serve(tmp_path: Path, game_server: Server) -> None:
    before = reported(game_server)
    bots = [bot(tmp_path / "bots", name, game_server.port, "--matches", "3") for name in ("one", "two")]
    for b in bots:
        assert b.wait(120) == 0, b.stderr()
    wait_for(lambda: reported(game_server) >= before + 3, "the server's three results", 30)
    assert reported(game_server) == before + 3, game_server.stdout()
    for b in bots:
        assert results(b) == 3, b.stderr()
        assert b.stderr().count(PLAYED) == 2  # between the matches, not after the last


# ------------------------------------------------------------------------------------------ refusals
async def test_refusals_that_mean_not_now_are_retried_with_back_off(tmp_path: Path) -> None:
    lockout = "too many wrong tokens from 127.0.0.1; refused for another 2 s"
    server = ScriptedServer(
        [
            refuse(protocol.BUSY, "walker already has a connection in the queue"),
            refuse(protocol.LOCKED_OUT, lockout),
            match(3),
            match(3, drop_after=1),
            refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back in a few seconds"),
            match(3),
        ],
        expect="walker",
    )
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        walker = bot(tmp_path, "walker", port, "--matches", "2")
        code = await exited(walker, 60)
        nursery.cancel_scope.cancel()
    err = walker.stderr()
    assert code == 0, err
    assert server.failures == []
    assert len(server.seen) == 6
    times = [t for t, _ in server.seen]
    assert times[1] - times[0] >= 0.5  # the first failure in a row waits 0.5-1 s
    assert times[2] - times[1] >= 2.0  # the lock-out said 2 s: no sooner
    # After a played match the count starts again: the drop is a first failure (0.5-1 s, not 1-2 s).
    assert 0.5 <= times[4] - times[3] < 1.5
    assert times[5] - times[4] >= 1.0  # the second in a row: 1-2 s
    assert "the server sent error 'busy'" in err and "trying again in" in err
    assert "closed the connection before the match ended" in err
    assert results(walker) == 2


@pytest.mark.parametrize("matches", [1, 2])
async def test_ladder_with_matches_n_rides_out_refusals_and_stops_after_n(
    tmp_path: Path, matches: int
) -> None:
    """docs/ladder.md: `--matches N` works with `--ladder`: a ladder bot (a "not now" is waited out,
    even with one match to play) that exits 0 once N matches are played."""
    scripts = [refuse(protocol.BUSY, "walker already has a connection in the queue")]
    for _ in range(matches):
        scripts += [match(3), refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back later")]
    server = ScriptedServer(
        scripts[:-1], expect="walker"
    )  # nothing after the last match: a connection more would fail
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        walker = bot(tmp_path, "walker", port, "--ladder", "--matches", str(matches))
        code = await exited(walker, 60)
        nursery.cancel_scope.cancel()
    err = walker.stderr()
    assert code == 0, err
    assert server.failures == [] and len(server.seen) == len(scripts) - 1
    assert results(walker) == matches and err.count("trying again in") == matches
    assert err.count(f"of {matches} played; connecting for the next") == matches - 1


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (protocol.BAD_VERSION, "update cellarena"),
        (protocol.TLS_REQUIRED, "connect with --tls"),
        (protocol.REVOKED, "current token"),
        (protocol.PAUSED, "fix the bot, then resume it"),
        (protocol.INTERNAL, "waiting cannot fix this"),
    ],
)
async def test_an_error_that_waiting_cannot_fix_stops_the_bot(tmp_path: Path, code: str, fix: str) -> None:
    server = ScriptedServer([refuse(code, "as the test says")], expect="walker")
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        walker = bot(tmp_path, "walker", port, "--ladder")
        status = await exited(walker, 30)
        nursery.cancel_scope.cancel()
    err = walker.stderr()
    assert status == 1
    assert f"the server sent error '{code}': as the test says" in err and fix in err
    assert len(server.seen) == 1 and server.failures == []


async def test_sigterm_during_the_back_off_stops_the_bot(tmp_path: Path, free_port: int) -> None:
    walker = bot(tmp_path, "walker", free_port, "--ladder")
    with trio.fail_after(30):
        while "trying again in" not in walker.stderr():
            await trio.sleep(0.05)
    walker.proc.send_signal(signal.SIGTERM)
    assert await exited(walker, 10) == 0
    assert walker.stderr().strip().splitlines()[-1] == "walker: stopped by SIGTERM after 0 matches"


def test_back_off_doubles_is_capped_and_resets() -> None:
    import random

    backoff = Backoff(first=1.0, cap=8.0, rng=random.Random(1))
    waits = [backoff.next() for _ in range(6)]
    for n, wait in enumerate(waits):
        ceiling = min(8.0, 2.0**n)
        assert ceiling / 2 <= wait <= ceiling
    assert backoff.next("refused for another 42 s") >= 42
    backoff.reset()
    assert 0.5 <= backoff.next() <= 1.0


# ------------------------------------------------------------------------------------------ TLS
async def test_tls_through_a_terminating_proxy(tmp_path: Path, game_server: Server) -> None:
    certs = certificates(tmp_path, "127.0.0.1")
    before = reported(game_server)
    proxy = TLSProxy(certs.server, game_server.port)
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        flags = ["--host", "127.0.0.1", "--tls-ca", str(certs.ca_file)]
        bots = [bot(tmp_path / "bots", name, port, *flags) for name in ("one", "two")]
        codes = [await exited(b, 60) for b in bots]
        nursery.cancel_scope.cancel()
    assert codes == [0, 0], [b.stderr() for b in bots]
    with trio.fail_after(30):
        while reported(game_server) < before + 1:
            await trio.sleep(0.05)
    assert proxy.handshakes == 2
    assert reported(game_server) == before + 1 and all(results(b) == 1 for b in bots)


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--tls-ca", "{other}"], "unable to get local issuer certificate"),  # a CA that signed nothing here
        (["--tls"], "unable to get local issuer certificate"),  # the system's store knows no trustme CA
        (["--tls-ca", "{ca}", "--host", "localhost"], "Hostname mismatch"),  # the name is checked
    ],
)
async def test_a_refused_tls_handshake_says_why_and_stops(
    tmp_path: Path, flags: list[str], reason: str
) -> None:
    certs = certificates(tmp_path, "127.0.0.1")
    proxy = TLSProxy(certs.server, 9)  # never reached: the handshake fails first
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        argv = [f.format(other=certs.other_ca_file, ca=certs.ca_file) for f in flags]
        walker = bot(tmp_path, "walker", port, "--ladder", *argv)
        status = await exited(walker, 30)
        nursery.cancel_scope.cancel()
    err = walker.stderr()
    assert status == 1
    host = "localhost" if "localhost" in flags else "127.0.0.1"
    assert f"TLS handshake with {host}:{port} failed: the server's certificate was refused" in err
    assert reason in err and "--tls-ca" in err
    assert "trying again" not in err and len(err.strip().splitlines()) == 1


async def test_a_plain_bot_at_a_tls_port_and_a_tls_bot_at_a_plain_port(
    tmp_path: Path, game_server: Server
) -> None:
    certs = certificates(tmp_path, "127.0.0.1")
    server = game_server
    proxy = TLSProxy(certs.server, server.port)
    async with trio.open_nursery() as nursery:
        port = await proxy.start(nursery)
        plain = bot(tmp_path, "plain", port)
        assert await exited(plain, 30) == 1
        nursery.cancel_scope.cancel()
    tls = bot(tmp_path, "tls", server.port, "--tls-ca", str(certs.ca_file))
    assert await exited(tls, 30) == 1
    # A TLS server may answer a plain hello with an alert, or just close; the bot says what to do either way.
    said = plain.stderr()
    assert f"the server at 127.0.0.1:{port} " in said and "connect with --tls" in said
    err = tls.stderr()
    assert f"TLS handshake with 127.0.0.1:{server.port} failed" in err and "is that port serving TLS?" in err


def test_bad_tls_and_token_flags_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """random_walker.py's own `run` in this process (a process per refusal only adds imports): each
    bad flag is refused as a usage error, status 2, before anything connects."""
    walker = load_example_bot("rezzo", "random_walker").RandomWalker

    def usage(*flags: str) -> str:
        with pytest.raises(SystemExit) as refused:
            walker.run(list(flags))
        err = capsys.readouterr().err
        assert refused.value.code == 2, err
        return err

    assert "--tls-ca" in usage("--tls-ca", str(tmp_path / "missing.pem"))
    (tmp_path / "junk.pem").write_text("not a certificate")
    assert "junk.pem" in usage("--tls-ca", str(tmp_path / "junk.pem"))
    assert "--matches must be 1 or more" in usage("--matches", "0")
    assert "--token-file" in usage("--token-file", str(tmp_path / "nowhere.token"))
    (tmp_path / "empty.token").write_text("\n")
    assert "the file is empty" in usage("--token-file", str(tmp_path / "empty.token"))


async def test_a_tls_alert_to_a_plain_hello_is_named(tmp_path: Path) -> None:
    async def alert(peer: Peer) -> None:  # a TLS server's "protocol version" alert, as some send
        await peer.stream.send_all(bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]))

    server = ScriptedServer([alert])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        plain = bot(tmp_path, "plain", port)
        assert await exited(plain, 30) == 1
        nursery.cancel_scope.cancel()
    assert f"plain: error: the server at 127.0.0.1:{port} speaks TLS; connect with --tls" in plain.stderr()


class CuttingProxy:
    """Plain TCP to ``target_port``; the first connection is cut ``after`` seconds into the match (its
    first bytes from the server), as a network blip would: the bot reads the end of its connection."""

    def __init__(self, target_port: int, after: float) -> None:
        self.target_port = target_port
        self.after = after
        self.connections = 0

    async def start(self, nursery: trio.Nursery) -> int:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        return int(listeners[0].socket.getsockname()[1])

    async def _handle(self, client: trio.SocketStream) -> None:
        self.connections += 1
        cut = self.connections == 1
        server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        async with trio.open_nursery() as pumps:

            async def pump(source: trio.SocketStream, sink: trio.SocketStream, cuts: bool) -> None:
                try:
                    while data := await source.receive_some(1 << 16):
                        if cuts:
                            cuts = False
                            pumps.start_soon(cut_after)
                        await sink.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                pumps.cancel_scope.cancel()

            async def cut_after() -> None:
                await trio.sleep(self.after)
                pumps.cancel_scope.cancel()

            pumps.start_soon(pump, server, client, cut)
            pumps.start_soon(pump, client, server, False)
        await trio.aclose_forcefully(server)
        await self._hang_up(client)

    @staticmethod
    async def _hang_up(client: trio.SocketStream) -> None:
        """Ends the bot's side with a FIN, never a reset: a close with the bot's answers unread (it
        answers at 15 Hz) would reset the connection, and the bot would see a reset or an end by
        the race of the two (seen under load). So the bot is told "no more" and its answers are read
        and dropped until it hangs up in turn."""
        try:
            await client.send_eof()
            with trio.move_on_after(30):
                while await client.receive_some(1 << 16):
                    pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await trio.aclose_forcefully(client)


async def test_a_ladder_bot_whose_connection_drops_takes_its_seat_back(tmp_path: Path) -> None:
    tokens = {name: add_ladder_bot(tmp_path, name) for name in ("alice", "bob")}
    ladder = ladder_serve(tmp_path, "--grace", "5", "--max-ticks", "120", *PAIR_AT_ONCE)
    try:
        async with trio.open_nursery() as nursery:
            proxy = CuttingProxy(ladder.port, after=0.5)
            port = await proxy.start(nursery)
            alice = bot(
                tmp_path / "bots", "alice", port, "--matches", "2", "--token-file", str(tokens["alice"])
            )
            bob = bot(
                tmp_path / "bots", "bob", ladder.port, "--matches", "2", "--token-file", str(tokens["bob"])
            )
            assert await exited(alice, 90) == 0, alice.stderr()
            assert await exited(bob, 90) == 0, bob.stderr()
            nursery.cancel_scope.cancel()
    finally:
        ladder.stop()
    err = alice.stderr()
    assert "closed the connection before the match ended" in err and "trying again in" in err
    seated = [line for line in err.splitlines() if ": seat " in line]
    assert len(seated) == 3 and seated[0] == seated[1], seated  # the first match's welcome, twice
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
    assert len(finished) == 2
    first = min(finished, key=lambda m: m.id)
    seat = next(s for s in first.seats if s.bot == "alice")
    assert not seat.forfeit and seat.late > 0  # back in time: the ticks it missed count as late


IDLE_BOT = """
from cellarena.sdk import Bot


class Idle(Bot):
    made = 0

    def __init__(self) -> None:
        Idle.made += 1
        self.number = Idle.made
        self.starts = 0

    def on_start(self, info):
        self.starts += 1

    def on_end(self, result):
        print(f"instance {self.number} started {self.starts} time(s)", flush=True)


raise SystemExit(Idle.run(matches=2))
"""


@pytest.mark.parametrize(("flags", "played"), [([], 2), (["--matches", "1"], 1)])
async def test_run_matches_from_code_and_the_flag_that_wins(
    tmp_path: Path, flags: list[str], played: int
) -> None:
    (tmp_path / "idle.py").write_text(IDLE_BOT)
    server = ScriptedServer([match(2) for _ in range(played)])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        idle = start(
            [sys.executable, str(tmp_path / "idle.py"), "--port", str(port), *flags], tmp_path, "idle"
        )
        assert await exited(idle, 60) == 0, idle.stderr()
        nursery.cancel_scope.cancel()
    assert len(server.seen) == played and server.failures == []
    lines = idle.stdout().splitlines()
    assert len(lines) == played and all(line.endswith("started 1 time(s)") for line in lines)
    assert [line.split()[1] for line in lines] == [str(n + 1) for n in range(played)]  # one per match


async def test_a_ladder_whose_database_is_down_is_retried(tmp_path: Path) -> None:
    """During a database outage a ladder refuses hellos with `shutdown` (docs/ladder.md), a code SDKs
    released before that outage handling already retry: the bot comes back and plays."""
    outage = "the ladder cannot reach its database now; come back in a few seconds"
    server = ScriptedServer([refuse(protocol.SHUTDOWN, outage), match(3), match(3)])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        walker = bot(tmp_path, "walker", port, "--matches", "2")
        code = await exited(walker, 60)
        nursery.cancel_scope.cancel()
    assert code == 0, walker.stderr()
    assert len(server.seen) == 3 and "trying again in" in walker.stderr()


def test_a_log_line_is_one_write_so_a_signal_cannot_split_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM's handler raises between bytecodes; print() wrote a line's text and its newline apart,
    and under load the "stopped by SIGTERM" line was seen glued to the back-off line before it."""
    from cellarena.sdk.bot import _Log

    writes: list[str] = []

    class Stderr:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Stderr())
    _Log("walker", quiet=False)("could not connect; trying again in 0.8 s")
    assert writes == ["walker: could not connect; trying again in 0.8 s\n"]
