"""House bots: bots the ladder launches itself, so that a bot waiting alone still gets a match.

A house bot is registered with the command that starts it (`cellarena ladder house add`). When a
bot has waited ``after`` seconds in the queue and a house bot of the game is idle (not queued, not
playing, not starting), the ladder starts the idle house bot whose rating is closest to the longest
waiter's. It runs as a match's bots do (`cellarena.server.bots.launcher.start_bot`): in a session of its
own, confined by the same limits (and `--isolate`), told where to connect in its environment and its
token through an inherited pipe (docs/protocol.md), its output in a capped log. It plays one match
and exits; the next time it is needed it starts again. One that neither queues nor plays for
``idle_limit`` seconds (it never connected, or hangs after its match) is stopped, so a broken house
bot cannot stay "running" forever and never be started again; so is one that waits that long in the
queue without a match (the bot it was started for got another match or left): no failure, it starts
again when a bot waits for it.

The store keeps only a hash of every token, so a launch gives the house bot a new token
(`LadderStore.rotate`): the one it was started with is the only one that works. A launch after one that
failed reuses the failed one's token, kept in memory: a bot refused again and again costs no database
write each time.

On a ladder that serves TLS on its bot port, a house bot is told so as it is told where to connect
(`HouseTls`: CELLARENA_TLS, _TLS_CA and _TLS_NAME, nothing secret), and checks the ladder's own
certificate as any bot would.

A launch that never joins the queue (it never connected, connected but said no hello within the
lobby's hello timeout, was refused at its hello, or exited first) is a failure of its own, with a
cause in the words of a seat's (`cellarena.server.games.causes`): logged, counted towards automatic
pausing like a failed match (`scoring.settlement.launch_failure` decides, the store writes it), and
followed by a wait before the next launch that doubles with each failure in a row (`BACKOFF_FIRST` up
to `BACKOFF_CAP`), so that a broken house bot neither restarts forever nor rotates its token twice a
second. Why it failed is logged once, as an error; the same cause again is a shorter warning.

As cellarena started it, a house bot whose process exits mid-match is said to have ``exited`` (its
status or signal and its log's last line, its token redacted) or gone over a ``limit``, rather than
``disconnected``: the match starter asks `HouseBots.explain` at the match's end.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.matchmaking.pools import PoolMode, may_meet, pool_of
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.scoring.settlement import launch_failure
from cellarena.arena.ladder.services.handed import HandedConnections
from cellarena.arena.ladder.services.queue import Queued
from cellarena.arena.ladder.services.seating import LadderSeating
from cellarena.arena.ladder.services.submitted_bots import SubmittedBots
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings.ladder import initial
from cellarena.sdk import protocol
from cellarena.sdk.client import is_loopback
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import (
    EXIT_WAIT,
    LOG_LIMIT,
    BotProcess,
    BotSpec,
    copy_log,
    exit_cause,
    holds_connection,
    last_log_line,
    refusal_cause,
    start_bot,
    stop_bot,
    watch_limits,
)
from cellarena.server.games import causes
from cellarena.server.net.connection import Connection
from cellarena.server.play.lobby import LobbyConfig
from cellarena.server.play.seating import Refusal

log = logging.getLogger("cellarena.ladder")

#: Seconds before a house bot whose launch failed is started again; doubled with each failed launch in
#: a row, up to `BACKOFF_CAP`; a launch that joins the queue starts the count again.
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0
#: Refusals that say the ladder is full or stopping, not that the house bot is broken.
_LADDER_BUSY = frozenset({protocol.SHUTDOWN, protocol.QUEUE_FULL, protocol.TOO_MANY_CONNECTIONS})


@dataclass(frozen=True)
class HouseTls:
    """How a house bot reaches a bot port that serves TLS: it checks the certificate against
    ``ca_file`` (the ladder's own certificate chain, trusted as it is) for the name ``name``, while it
    connects to the loopback address the ladder listens on."""

    ca_file: str
    name: str

    @classmethod
    def of_certificate(cls, cert: str | Path) -> HouseTls:
        """The ladder's certificate (``--tls-cert``) pinned, for the first name it is for: a loopback
        address it names, else its first DNS name (a house bot connects to 127.0.0.1 whatever the
        certificate's name)."""
        from cryptography import x509

        try:  # the file's first certificate: the ladder's own, ahead of its chain
            alt = x509.load_pem_x509_certificate(Path(cert).read_bytes()).extensions.get_extension_for_class(
                x509.SubjectAlternativeName
            )
        except (OSError, ValueError, x509.ExtensionNotFound):
            alt = None
        names = [
            str(entry.value)
            for entry in (alt.value if alt is not None else ())
            if isinstance(entry, x509.DNSName | x509.IPAddress)
        ]
        loopback = [n for n in names if _is_loopback_address(n)]
        return cls(str(cert), (loopback or names or ["127.0.0.1"])[0].strip())

    def env(self) -> dict[str, str]:
        """What the bot is told, beside CELLARENA_HOST and _PORT (the SDK reads them as --tls,
        --tls-ca and --tls-name)."""
        return {"CELLARENA_TLS": "1", "CELLARENA_TLS_CA": self.ca_file, "CELLARENA_TLS_NAME": self.name}


def _is_loopback_address(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.strip()).is_loopback
    except ValueError:
        return False


@dataclass
class Launched:
    """A house bot's latest launch, kept after it ends so that its match can ask why it went."""

    proc: BotProcess
    #: The token it was started with, redacted from its log's last line.
    secret: str
    log: Path
    #: Set once its output is all in its log.
    log_done: trio.Event = field(default_factory=trio.Event)
    #: Set once its exit is seen (or it was stopped here).
    exited: trio.Event = field(default_factory=trio.Event)
    #: Set once what it left was stopped too (`stop_bot` read its cgroup's limit).
    reaped: trio.Event = field(default_factory=trio.Event)
    #: Whether it was ever seen queued or playing: a launch that never was is a failure.
    joined: bool = False
    #: Its connection, once seen (accepted, or its hello), and whether it said hello there.
    conn: Connection | None = None
    greeted: bool = False
    #: Its hello's refusal as a seat's cause (``wrong_game``, ``refused``), if it was refused.
    refusal: dict[str, Any] | None = None
    #: Whether a refusal said only that the ladder was full or stopping (not its failure).
    busy: bool = False
    #: Its bot's kind: ``house``, or ``submitted`` (an owner's live version), as the logs call it.
    kind: str = "house"
    #: Whether the ladder made its connection and handed it over (`handed`): it is the launch's own.
    handed: bool = False

    def owns(self, conn: Connection) -> bool:
        """Whether ``conn`` is this launch's: the one the ladder handed it, else one its processes hold."""
        return self.conn is conn if self.handed else holds_connection(self.proc, conn)

    def hello_timed_out(self) -> bool:
        """Whether the launch's connection was closed by the lobby for want of a hello."""
        conn = self.conn
        return (
            conn is not None
            and not self.greeted
            and conn.closed
            and conn.close_reason.startswith(f"{protocol.TIMEOUT}:")
        )

    async def copy_log(self) -> None:
        """Its output into its log, capped; `log_done` set at the end."""
        assert self.proc.stdout is not None
        try:
            await copy_log(self.proc.stdout, self.log, LOG_LIMIT)
        finally:
            self.log_done.set()


class HouseBots:
    """Starts house bots for bots that wait too long; `run` is its task, beside the lobby's."""

    def __init__(
        self,
        store: LadderStore,
        seating: LadderSeating,
        log_dir: Path,
        *,
        after: float = 5.0,
        every: float = 0.5,
        idle_limit: float = 30.0,
        hello_timeout: float = LobbyConfig.hello_timeout,
        backoff_first: float = BACKOFF_FIRST,
        backoff_cap: float = BACKOFF_CAP,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
        isolate: bool = False,
        tls: HouseTls | None = None,
    ) -> None:
        self.store = store
        self.seating = seating
        self.log_dir = log_dir
        self.after = after
        self.every = every
        self.idle_limit = idle_limit
        #: The lobby's: a connection without a hello is closed after it (only said in causes here).
        self.hello_timeout = hello_timeout
        self.backoff_first = backoff_first
        self.backoff_cap = backoff_cap
        self.host = host
        self.limits = limits or Limits()
        self.isolate = isolate
        self.tls = tls
        #: House bots whose process runs, by name.
        self.running: dict[str, BotProcess] = {}
        #: Each house bot's latest launch, by name, running or not (replaced by its next one).
        self.launched: dict[str, Launched] = {}
        #: Failed launches in a row, by name, and when (trio's clock) each may be started again.
        self.failed: dict[str, int] = {}
        self.not_before: dict[str, float] = {}
        #: Each house bot's last failed launch's cause, by name.
        self.last_failure: dict[str, dict[str, Any]] = {}
        #: The token of each house bot's last failed launch, by name: its next launch reuses it.
        self.unused_token: dict[str, str] = {}
        #: Bots with a live submitted version, started alike (`submitted_bots`; wired by `run_ladder`).
        self.submitted: SubmittedBots | None = None
        #: Connections made for isolated submitted bots, which have no network (wired by `run_ladder`).
        self.handed: HandedConnections | None = None

    async def run(self, port: int) -> None:
        """Look at the queue every ``every`` seconds until cancelled; then stop every house bot."""
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    await trio.sleep(self.every)
                    needed = self._needed()
                    if needed is not None:
                        await self._launch(nursery, needed, port)
        finally:
            with trio.CancelScope(shield=True):
                for proc in list(self.running.values()):
                    await stop_bot(proc, patience=0.0)

    def _needed(self) -> BotRecord | None:
        """The idle house bot to start now, or None: nobody waited long enough, or no house bot is free."""
        now = trio.current_time()
        waiting = [
            q
            for q in self.seating.queue.waiting.values()
            if now - q.since >= self.after and q.bot.kind != "house" and q.bot.name not in self.running
        ]
        if len(waiting) <= len(self._starting()):
            return None  # a launch under way is for them (a slow starter, a JVM, must not get a twin)
        busy = set(self.running) | set(self.seating.queue.waiting) | self.seating.starter.playing()
        idle = [
            b
            for b in self._candidates()
            if b.name not in busy and self.not_before.get(b.name, now) <= now  # backing off
        ]
        return _closest(waiting, idle, self.seating.results.ratings, self.seating.queue.pools)

    async def _program(self, bot: BotRecord) -> tuple[BotSpec, str, Path] | None:
        """What to start for ``bot``, its token and its log; None (logged) if it cannot start."""
        if bot.kind != "house" and self.submitted is not None:
            self.unused_token.pop(bot.name, None)  # each start has its own (`SubmittedBots.launch`)
            launch = self.submitted.launch(bot)
            return None if launch is None else (launch.spec, launch.secret, launch.log)
        assert bot.house_command is not None
        secret = self.unused_token.pop(bot.name, None)
        if secret is None:
            try:
                secret = (await trio.to_thread.run_sync(self.store.rotate, bot.name)).secret
            except LadderStoreError as exc:
                log.error("cannot start %s: %s", _called(bot, bot.name), exc)
                return None
        return BotSpec(bot.name, bot.house_command), secret, self.log_dir / f"house-{bot.name}.log"

    def _candidates(self) -> list[BotRecord]:
        """The bots the ladder may start: its house bots, and bots with a live submitted version."""
        house = self.seating.results.house_bots()
        return house if self.submitted is None else house + self.submitted.candidates()

    async def _launch(self, nursery: trio.Nursery, bot: BotRecord, port: int) -> None:
        program = await self._program(bot)
        if program is None:
            return
        spec, secret, path = program
        pair = None
        if self.handed is not None and self.isolate and spec.view is not None:
            pair = self.handed.make(secret)  # a submitted program has no network to connect with
            if pair is None:
                return

        def started(proc: BotProcess) -> None:
            # Known before its token is in the pipe: its hello is judged by its own processes, and
            # noted on this launch (`hello`), however fast it comes.
            self.running[bot.name] = proc
            launched = Launched(proc, secret, path, kind=bot.kind, handed=pair is not None)
            launched.conn = None if pair is None else pair[0]
            self.launched[bot.name] = launched

        try:
            proc = await start_bot(
                spec,
                self.host,
                port,
                None if pair is not None else secret,
                limits=self.limits,
                isolate=self.isolate,
                connection=None if pair is None else pair[1],
                on_started=started,
                extra_env=None if self.tls is None or pair is not None else self.tls.env(),
            )
        except OSError as exc:
            log.error("cannot start %s (%r): %s", _called(bot, bot.name), spec.command, exc)
            if pair is not None and self.handed is not None:
                self.handed.forget(pair[0])
                pair[0].close()
            return
        finally:
            if pair is not None:
                pair[1].close()  # the bot's now
        log.info("started %s for a bot that waited %g s", _called(bot, bot.name), self.after)
        if self.launched.get(bot.name) is None or self.launched[bot.name].proc is not proc:
            started(proc)  # a starter that did not call back
        self.running[bot.name] = proc
        launched = self.launched[bot.name]
        assert proc.stdout is not None
        nursery.start_soon(launched.copy_log)
        nursery.start_soon(self._reap, bot.name, launched)
        nursery.start_soon(watch_limits, [proc], self.limits)

    def _starting(self) -> list[Launched]:
        """The launches still running that have not joined the queue yet."""
        return [
            launched
            for name, launched in self.launched.items()
            if not launched.joined and self.running.get(name) is launched.proc
        ]

    def connected(self, conn: Connection) -> None:
        """A connection was accepted (`LadderSeating.on_connected`): if a starting house bot's own
        processes hold it, it is that launch's, so that a hello that never comes is said as such.
        Only while a launch is starting, and on loopback, where house bots connect: each look reads
        /proc."""
        if not is_loopback(conn.host):
            return
        for launched in self._starting():
            if launched.conn is None and holds_connection(launched.proc, conn):
                launched.conn = conn
                return

    def hello(self, conn: Connection, hello: dict[str, Any], refusal: tuple[str, str] | None) -> None:
        """A bot's hello, accepted (None) or refused with (code, message) (`LadderSeating.on_hello`):
        a starting house bot's, by its token and its own processes holding ``conn``, is noted, and a
        refusal becomes its launch's cause. Another process with its token is not blamed on it."""
        token = hello.get("token")
        for launched in self._starting():
            if token != launched.secret or not launched.owns(conn):
                continue
            launched.conn = conn
            launched.greeted = True
            if refusal is not None:
                code, message = refusal
                if code in _LADDER_BUSY:
                    launched.busy = True
                else:
                    game = self.seating.admission.game
                    launched.refusal = refusal_cause(Refusal(code, message, hello.get("game")), game)
            return

    def holds(self, name: str, conn: Connection) -> bool:
        """Whether house bot ``name``'s own processes hold ``conn`` (`Admission.house_owner`)."""
        launched = self.launched.get(name)
        return name in self.running and launched is not None and launched.owns(conn)

    async def explain(self, name: str) -> dict[str, Any] | None:
        """Why house bot ``name``'s connection went (`cellarena.server.play.match.ExplainGone`, for its
        seat): ``exited`` with its status or signal, or ``limit``, with its log's last line; None
        if its process has not exited within `EXIT_WAIT` seconds (the socket closes a moment
        before the exit is seen) or was stopped here, as the ladder stopped or it sat idle."""
        launched = self.launched.get(name)
        if launched is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.exited.wait()
        proc = launched.proc
        code = proc.returncode
        if code is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.reaped.wait()
        if proc.signalled and proc.stopped_for is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.log_done.wait()
        line = last_log_line(launched.log, secrets=[launched.secret])
        return exit_cause(proc, code, self.limits, line)

    async def _reap(self, name: str, launched: Launched) -> None:
        """Wait for a house bot to end its match and exit, to sit idle (neither queued nor playing) or
        queued without a match for ``idle_limit`` seconds, or, before it joined, to be refused or to
        have its connection closed for want of a hello; then stop what it left in its session, and
        count a launch that never joined as a failure (`_failed`)."""
        proc = launched.proc
        idle = False
        try:
            idle_since = trio.current_time()
            while proc.returncode is None:
                with trio.move_on_after(self.every):
                    await proc.wait()
                now = trio.current_time()
                queued = name in self.seating.queue.waiting
                if name in self.seating.starter.playing() or (queued and not launched.joined):
                    launched.joined = True
                    idle_since = now  # from its match, or from joining the queue: no longer starting
                elif not launched.joined and (launched.refusal or launched.hello_timed_out()):
                    break  # it cannot join on this launch: no need to wait out the idle limit
                elif now - idle_since >= self.idle_limit:
                    idle = True
                    if launched.joined:  # queued: the bot it came for got another match or left
                        level, said = _STOPPED["unneeded" if queued else "idle"]
                        log.log(level, "%s " + said, _called(self.launched.get(name), name), self.idle_limit)
                    break
        finally:
            if proc.returncode is not None:
                launched.exited.set()
            with trio.CancelScope(shield=True):
                await stop_bot(proc, patience=0.0)
            launched.exited.set()
            launched.reaped.set()
            if self.running.get(name) is proc:
                del self.running[name]
            if launched.handed and self.handed is not None:
                self.handed.forget(launched.conn)
        # Not reached when cancelled: the ladder stopping is no failure of the bot's.
        if launched.joined:
            self.failed.pop(name, None)
            self.not_before.pop(name, None)
            return
        cause = await self._launch_cause(launched, idle)
        await self._keep_token(name, launched.secret)
        if cause is not None:
            await self._failed(name, cause)

    async def _keep_token(self, name: str, secret: str) -> None:
        """Keep a failed launch's token for the next launch, unless it no longer works (the host
        rotated it meanwhile): a read, where a new token would be a write."""
        try:
            bot = await trio.to_thread.run_sync(self.store.authenticate, secret)
        except LadderStoreError:
            return
        if bot is not None and bot.name == name:
            self.unused_token[name] = secret

    async def _launch_cause(self, launched: Launched, idle: bool) -> dict[str, Any] | None:
        """Why a launch that never joined the queue ended, in a seat's words: what ended it first.
        None if only the ladder being full or stopping refused it."""
        if launched.refusal is not None:
            return launched.refusal
        if launched.hello_timed_out():
            detail = f"it connected but sent no hello within {self.hello_timeout:g} s"
            return causes.cause(causes.NEVER_CONNECTED, detail=detail)
        if launched.busy:
            return None
        proc = launched.proc
        if not idle and proc.returncode is not None:
            with trio.move_on_after(EXIT_WAIT):
                await launched.log_done.wait()
            line = last_log_line(launched.log, secrets=[launched.secret])
            return exit_cause(proc, proc.returncode, self.limits, line)
        if launched.conn is None:
            detail = f"it did not connect within {self.idle_limit:g} s"
        else:
            detail = f"it connected but did not join the queue within {self.idle_limit:g} s"
        return causes.cause(causes.NEVER_CONNECTED, detail=detail)

    async def _failed(self, name: str, cause: dict[str, Any]) -> None:
        """Count a failed launch: back off before the next, count it towards pausing, log one line."""
        count = self.failed[name] = self.failed.get(name, 0) + 1
        wait = min(self.backoff_cap, self.backoff_first * 2 ** (count - 1))
        self.not_before[name] = trio.current_time() + wait
        again, called = self.last_failure.get(name) == cause, _called(self.launched.get(name), name)
        self.last_failure[name] = cause
        what = causes.sentence(0, cause, [name]).replace(f"{name} forfeits: ", "", 1)
        try:
            bot = await trio.to_thread.run_sync(
                self.store.count_failed_launch, name, cause, functools.partial(launch_failure, cause)
            )
        except LadderStoreError as exc:
            log.error("%s: cannot count its failed launch: %s", called, exc)
            bot = None
        if bot is not None and bot.stopped is not None:
            await self.seating.results.load_ratings()  # not started again, without waiting for the change log
            log.error(
                "%s failed to join the ladder (%s): paused (%s); fix its command or program "
                "(its output is in %s), then `cellarena ladder resume %s`",
                called,
                what,
                bot.stopped,
                self.launched[name].log,
                name,
            )
            return
        if again:  # said already: one line that it goes on, not the whole story every time
            log.warning(
                "%s failed to join the ladder again, for the same reason: %d failed launch(es) "
                "in a row, next start in %g s at the earliest",
                called,
                count,
                wait,
            )
            return
        log.error(
            "%s failed to join the ladder (%s): %d failed launch(es) in a row, next start in "
            "%g s at the earliest; fix its command or program (its output is in %s)",
            called,
            what,
            count,
            wait,
            self.launched[name].log,
        )


#: How the stop of a house bot that had joined is logged: queued without a match, or neither queued
#: nor playing, for the idle limit.
_STOPPED = {
    "unneeded": (logging.INFO, "waited %g s in the queue without a match: stopped until it is needed"),
    "idle": (logging.WARNING, "neither queued nor played for %g s: stopped (see its log)"),
}


def _closest(
    waiting: list[Queued], idle: list[BotRecord], ratings: dict[str, Rating], mode: PoolMode
) -> BotRecord | None:
    """The idle bot to start for the longest waiter it may meet (`pools.may_meet`: under ``--pools
    separate`` a connected bot is given a house bot only, a submitted one either): the one closest to
    that waiter in rating; None if no idle bot may meet any waiter."""
    for longest in sorted(waiting, key=lambda q: q.since):
        fit = [b for b in idle if may_meet(longest.pool, pool_of(b.kind, launched=True), mode)]
        if fit:
            target = ratings.get(longest.bot.name, initial()).mu
            return min(fit, key=lambda b: (abs(ratings.get(b.name, initial()).mu - target), b.name))
    return None


def _called(bot: BotRecord | Launched | None, name: str) -> str:
    """What the logs call bot ``name`` (its record, or its latest launch): a submitted bot is no house bot."""
    return f"house bot {name}" if bot is None or bot.kind == "house" else f"submitted bot {name}"
