"""`cellarena match`: a server on a free loopback port, one process per bot, one match.

Each bot is handed a connection to the server that already owns its seat, as its standard input
(CELLARENA_SOCKET_FD=0), and its name in CELLARENA_NAME. Without --isolate it also gets the server's
address (CELLARENA_HOST, _PORT) and its seat token through an inherited pipe (CELLARENA_TOKEN_FD),
for bots written before the connection was handed over; that token seats only a connection that the
bot's own processes hold. Nothing secret goes in the environment, which other processes can read
(docs/protocol.md). Each process starts in a session of its own, in a cgroup of its own where the host
offers one, and is confined (`cellarena.server.bots.confinement`): limits on memory, CPU time, processes
and open files, optionally a user and a network of its own; when the match ends, on Ctrl-C, or when
cellarena itself is killed (the parent-death signal and `cellarena.server.bots.reaper`), every process it
started, double-forked or not, is killed. No process is left behind.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import trio

from cellarena.sdk import protocol
from cellarena.server.bots.confinement import (
    POLL_SECONDS,
    Launch,
    Limits,
    ProcessTree,
    become_subreaper,
    cgroup_reason,
    check_isolation,
    exit_reason,
    over_limit,
    process_table,
)
from cellarena.server.bots.python_view import PythonView
from cellarena.server.bots.reaper import Reaper
from cellarena.server.bots.spawn import Child, spawn
from cellarena.server.games import causes
from cellarena.server.games.base import Engine
from cellarena.server.net.connection import Connection
from cellarena.server.net.socket_owner import holds, tcp_inode
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import MatchOutcome, Recorder, TickSettings
from cellarena.server.play.seating import Refusal, ReservedSeating
from cellarena.server.play.start import MatchStart

#: Seconds a bot has, from the start of its process, to connect and send hello.
DEFAULT_CONNECT_TIMEOUT = 15.0
#: Bytes of a bot's output kept in its log per match; a bot that prints without end cannot fill the disk.
LOG_LIMIT = 8 * 2**20


@dataclass(frozen=True)
class BotSpec:
    """A bot program: its name, its command line, and the folder it runs in (None: the current one);
    a submitted program also its view of Python (`cellarena.server.bots.python_view`): isolated, it
    then runs under bubblewrap with the interpreter and the packages the host offers, and no other."""

    name: str
    command: str
    cwd: str | None = None
    view: PythonView | None = None

    @classmethod
    def parse(cls, text: str) -> BotSpec:
        """``NAME=COMMAND``; raises ValueError saying what is wrong."""
        name, sep, command = text.partition("=")
        name, command = name.strip(), command.strip()
        if not sep or not name or not command:
            raise ValueError(
                f'{text!r} is not NAME=COMMAND, e.g. random="python example_bots/rezzo/random_walker.py"'
            )
        if len(name) > protocol.MAX_NAME or not name.isprintable():
            raise ValueError(
                f"bot name {name!r} must be printable and at most {protocol.MAX_NAME} characters"
            )
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"cannot split the command of {name!r}: {exc}") from None
        if not argv:
            raise ValueError(f"bot {name!r} has an empty command")
        return cls(name, command)

    @classmethod
    def parse_all(cls, texts: Sequence[str]) -> list[BotSpec]:
        """Each ``NAME=COMMAND`` parsed; ValueError also when two bots share a name."""
        specs = [cls.parse(t) for t in texts]
        names = [s.name for s in specs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"bot names must differ; repeated: {', '.join(repeated)}")
        return specs

    def argv(self) -> list[str]:
        """The command's words. A bare `python`/`python3` means this interpreter, which has cellarena."""
        argv = shlex.split(self.command)
        if argv[0] in ("python", "python3"):
            argv[0:1] = [self.view.executable, "-S"] if self.view is not None else [sys.executable]
        return argv


class MatchFailedError(RuntimeError):
    """The server could not play the match to a result (a bug of its own, logged where it happened)."""


@dataclass
class LaunchedMatch:
    outcome: MatchOutcome
    logs: dict[str, Path]
    exit_codes: dict[str, int | None]
    #: Bots whose hello the server refused (they forfeit), by name: what they were told.
    refused: dict[str, Refusal] = field(default_factory=dict)
    #: Bots that could not start, or were stopped for going over a limit, by name: why, for a person.
    stopped: dict[str, str] = field(default_factory=dict)
    #: Each seat's cause (`causes`): the match's, with what only the launcher knows put in: a
    #: forfeit's process that exited (status or signal, the last line of its log), went over a
    #: limit, could not start, or whose hello was refused. `match` and tournaments both show these.
    causes: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Each bot's last log line (`last_log_line`), read before a temporary log folder goes.
    last_lines: dict[str, str | None] = field(default_factory=dict)


@dataclass
class BotProcess:
    """A launched bot: its first process, everything it started (`tree`), and how it was confined."""

    proc: Child
    tree: ProcessTree
    launch: Launch
    #: Why the launcher stopped it (a limit), or None.
    stopped_for: str | None = None
    #: `stop_bot` had to signal it (it did not exit by itself when its match ended).
    signalled: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stdout(self) -> trio.abc.ReceiveStream | None:
        return self.proc.stdout

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait(self) -> int:
        return await self.proc.wait()


async def play_match(
    game: str,
    engine_config: dict[str, Any],
    bots: list[BotSpec],
    settings: TickSettings,
    *,
    seed: int,
    log_dir: Path,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    recorder: Callable[[int, Engine, list[str], int], Recorder | None] | None = None,
    on_tick: Callable[[Engine], None] | None = None,
    limits: Limits | None = None,
    isolate: bool = False,
    on_listening: Callable[[int], None] | None = None,
    start: MatchStart | None = None,
) -> LaunchedMatch:
    """Run one match between ``bots`` (one per seat, in order) and stop every process afterwards.

    ``on_listening(port)`` is told the match server's port before the bots start (the live view
    connects to it as a spectator). ``start``: the match's first engine instead of a fresh one, and
    its scripted seats, whose bots (names only) are not started (`replay fork`)."""
    limits = limits or Limits()
    if isolate:
        check_isolation()
    launch = _Launch(game, bots, log_dir, limits, isolate, connect_timeout)
    lobby = Lobby(
        LobbyConfig(
            game,
            engine_config,
            settings,
            host="127.0.0.1",
            port=0,
            matches=1,
            seed=seed,
            recorder=recorder,
            on_result=launch.outcomes.append,
            on_tick=on_tick,
            # A handed-over connection is accepted before its bot's process starts: it has as long
            # to say hello as a bot has to connect.
            hello_timeout=max(connect_timeout, LobbyConfig.hello_timeout),
            explain_gone=launch.explain_gone,
            start=start,
        ),
        launch.seating,
    )
    if lobby.players != len(bots):
        raise ValueError(
            f"the map has {lobby.players} seats but {len(bots)} bots were given; "
            f"give exactly {lobby.players} --bot options"
        )
    log_dir.mkdir(parents=True, exist_ok=True)
    await launch.run(lobby, on_listening, start)
    return launch.result()


class _Launch:
    """One match's bots as `play_match` runs them: their seats' tokens, their processes and logs, and
    what became of each (exit status, a limit that stopped it, why its connection went)."""

    def __init__(
        self,
        game: str,
        bots: list[BotSpec],
        log_dir: Path,
        limits: Limits,
        isolate: bool,
        connect_timeout: float,
    ) -> None:
        self.game = game
        self.bots = bots
        self.limits = limits
        self.isolate = isolate
        self.tokens = {secrets.token_hex(16): seat for seat in range(len(bots))}
        self.by_seat = {seat: token for token, seat in self.tokens.items()}
        self.outcomes: list[MatchOutcome] = []
        self.procs: dict[str, BotProcess] = {}
        self.seating = ReservedSeating(
            self.tokens, [b.name for b in bots], timeout=connect_timeout, owner=self.owner
        )
        #: Seats whose bot exited while the match went on, and how (before `stop_bot` at the end), and
        #: an event per seat set when its exit is known; an event per bot set once its log is complete.
        self.exited: dict[int, int] = {}
        self.exit_seen = {seat: trio.Event() for seat in range(len(bots))}
        self.log_done = {b.name: trio.Event() for b in bots}
        self.logs = _log_paths(log_dir, [b.name for b in bots])
        self.exit_codes: dict[str, int | None] = {}
        self.stopped: dict[str, str] = {}

    def owner(self, seat: int, conn: Connection) -> bool:
        """Whether a connection that came with seat ``seat``'s token is held by that bot's processes."""
        proc = self.procs.get(self.bots[seat].name)
        return proc is not None and holds_connection(proc, conn)

    async def explain_gone(self, seat: int) -> dict[str, Any] | None:
        """Why seat ``seat``'s connection went, if its process exited (the match asks at its end, so
        that its replay says ``exited`` rather than ``disconnected``): its status or signal, and its
        log's last line once the log is complete. None while the process still runs. A seat
        refused at its hello, or given up at the connect timeout, says so: that ended it first,
        whatever its process did after (one that waits for its connection to close then exits)."""
        before = seat_cause(self.seating, seat, self.game)
        if before is not None:
            return before
        name = self.bots[seat].name
        proc = self.procs.get(name)
        if proc is None:
            return None  # it never started: the launcher says why once the match is over
        with trio.move_on_after(EXIT_WAIT):  # the socket closes a moment before the exit is seen
            await self.exit_seen[seat].wait()
        if seat not in self.exited:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await self.log_done[name].wait()
        line = last_log_line(self.logs[name], secrets=self.tokens)
        return exit_cause(proc, self.exited[seat], self.limits, line)

    async def run(
        self, lobby: Lobby, on_listening: Callable[[int], None] | None, start: MatchStart | None = None
    ) -> None:
        """Serve the match, start every bot, and stop them all once it is over (at once if interrupted)."""
        # Each bot's output goes through a pipe to its log, so that a bot that prints without end cannot
        # fill the disk. The copiers outlive the match: a bot's last words come after `end`.
        async with trio.open_nursery() as copiers:
            try:
                async with trio.open_nursery() as nursery:

                    async def serve(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
                        await lobby.serve(task_status=task_status)
                        nursery.cancel_scope.cancel()  # the match is over: stop watching the processes

                    port = await nursery.start(serve)
                    if on_listening is not None:
                        on_listening(port)
                    for seat, bot in enumerate(self.bots):
                        if start is not None and seat in start.scripted:
                            self.seating.seat_gone(seat)  # played in-process: no bot comes
                            continue
                        proc = await self._start(seat, bot, port)
                        if proc is None:
                            continue
                        assert proc.stdout is not None
                        copiers.start_soon(
                            _copy_then_set, proc.stdout, self.logs[bot.name], self.log_done[bot.name]
                        )
                        nursery.start_soon(
                            _watch_process, proc, seat, self.seating, self.exited, self.exit_seen[seat]
                        )
                    nursery.start_soon(watch_limits, list(self.procs.values()), self.limits)
            except BaseException:
                with trio.CancelScope(shield=True):  # interrupted: stop everything at once
                    for name, proc in self.procs.items():
                        self.exit_codes[name] = await stop_bot(proc, patience=0.0)
                raise
            with trio.CancelScope(shield=True):
                # The match is over and every bot was sent `end`: give them a moment to exit by themselves.
                for seat, bot in enumerate(self.bots):
                    if bot.name in self.procs:
                        # A bot that never took its seat was sent no `end`, so it has nothing to finish.
                        patience = 0.0 if seat in self.seating.abandoned else 2.0
                        self.exit_codes[bot.name] = await stop_bot(self.procs[bot.name], patience=patience)
            # The pipes close with the processes; a stray process that kept one open is not waited for.
            copiers.cancel_scope.deadline = trio.current_time() + 2.0

    async def _start(self, seat: int, bot: BotSpec, port: int) -> BotProcess | None:
        """Start seat ``seat``'s bot on its handed-over connection; None (its seat gone, why in its
        log) when it cannot start."""
        try:
            connection = _handover(self.seating, seat, port)
            try:
                # Isolated, a bot reaches no network (and so no port): the connection is
                # its only way in, and no token is handed over.
                proc = await start_bot(
                    bot,
                    "127.0.0.1",
                    port,
                    None if self.isolate else self.by_seat[seat],
                    limits=self.limits,
                    isolate=self.isolate,
                    connection=connection,
                    on_started=functools.partial(self.procs.__setitem__, bot.name),
                )
            finally:
                connection.close()  # the bot has its own copy; ours would keep the seat open
        except OSError as exc:
            why = f"cannot start {bot.command!r}: {exc}"
            if self.isolate and isinstance(exc, PermissionError):
                why += (
                    " (with --isolate the bot runs as a user of its own: its program and "
                    "folder must be readable by every user; docs/security.md)"
                )
            self.logs[bot.name].write_text(f"cellarena: {why}\n")
            self.stopped[bot.name] = why
            self.seating.seat_gone(seat)
            self.exit_codes[bot.name] = None
            return None
        self.procs[bot.name] = proc
        return proc

    def result(self) -> LaunchedMatch:
        """The match's outcome with what became of each bot; MatchFailedError if it has none."""
        for name, proc in self.procs.items():
            limit = proc.stopped_for or exit_reason(self.exit_codes[name], self.limits)
            if limit is not None:
                self.stopped[name] = limit
                with contextlib.suppress(OSError), open(self.logs[name], "a") as f:
                    f.write(f"\n[cellarena: stopped: {limit}]\n")
        if not self.outcomes:
            raise MatchFailedError("the match ended without a result (a server error, logged above)")
        refused = {self.bots[seat].name: refusal for seat, refusal in sorted(self.seating.refusals.items())}
        launched = LaunchedMatch(self.outcomes[0], self.logs, self.exit_codes, refused, self.stopped)
        for seat, bot in enumerate(
            self.bots
        ):  # exits the watcher had no time to see: the match ended with them
            ended = self.procs.get(bot.name)
            code = self.exit_codes.get(bot.name)
            if ended is not None and not ended.signalled and code is not None and seat not in self.exited:
                self.exited[seat] = code
        names = [b.name for b in self.bots]
        launched.causes = launch_causes(
            launched, self.game, names, self.exited, secrets=self.tokens, abandoned=self.seating.abandoned
        )
        launched.last_lines = {
            name: last_log_line(path, secrets=self.tokens) for name, path in self.logs.items()
        }
        return launched


#: Seconds the end of a match waits for a gone bot's exit to be seen, and then for its log's end.
EXIT_WAIT = 0.8
#: A run of token-like characters this long reads as a secret in a log line (tokens are 32 hex
#: digits here, longer on a ladder); paths and sentences have separators long before.
_SECRET_LIKE = re.compile(r"[A-Za-z0-9_+=-]{32,}")


def last_log_line(path: Path, secrets: Iterable[str] = ()) -> str | None:
    """The last line a bot wrote to its log (not the launcher's own notes), cut to 200 characters.

    It goes into results and replays, which others read: a bot that printed its token must not
    publish it, so ``secrets`` (the match's tokens) and anything that looks like a token are
    replaced by ``[redacted]`` before the cut."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("[cellarena:")]
    if not lines:
        return None
    line = lines[-1]
    for secret in secrets:
        if secret:
            line = line.replace(secret, "[redacted]")
    return _SECRET_LIKE.sub("[redacted]", line)[:200]


def _exit_fields(code: int | None) -> dict[str, Any]:
    if code is not None and code < 0:
        try:
            return {"signal": signal.Signals(-code).name}
        except ValueError:
            return {"signal": str(-code)}
    return {"status": code}


def exit_cause(proc: BotProcess, code: int, limits: Limits, line: str | None) -> dict[str, Any]:
    """The cause of a seat whose launched process exited with ``code`` while its match went on:
    ``limit`` if the launcher or the kernel stopped it for one, else ``exited`` with its status or
    signal; both with ``line``, its log's last line (`last_log_line`)."""
    limit = proc.stopped_for or exit_reason(code, limits)
    if limit is not None:
        return causes.cause(causes.LIMIT, limit=limit.split(" ")[0], detail=limit, last_log_line=line)
    return causes.cause(causes.EXITED, **_exit_fields(code), last_log_line=line)


def refusal_cause(refusal: Refusal, game: str, tick: int | None = None) -> dict[str, Any]:
    """The cause of a seat whose hello was refused: ``wrong_game`` if it asked for another game."""
    if refusal.game != game:
        return causes.cause(causes.WRONG_GAME, tick, asked=str(refusal.game), game=game)
    return causes.cause(causes.REFUSED, tick, code=refusal.code, message=refusal.message)


def seat_cause(seating: ReservedSeating, seat: int, game: str) -> dict[str, Any] | None:
    """Why ``seat`` never took its seat, if the seating knows: its hello refused, or given up at the
    timeout (`ReservedSeating.abandoned`); None otherwise."""
    refusal = seating.refusals.get(seat)
    if refusal is not None:
        return refusal_cause(refusal, game)
    if seat in seating.abandoned:
        return dict(seating.abandoned[seat])
    return None


def launch_causes(
    launched: LaunchedMatch,
    game: str,
    names: list[str],
    exited: Mapping[int, int],
    *,
    secrets: Iterable[str] = (),
    abandoned: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[int, dict[str, Any]]:
    """Each seat's cause: the match's, and for a seat that forfeited, what the launcher knows of why
    (its hello refused, given up at the connect timeout (``abandoned``, `ReservedSeating.abandoned`),
    a limit, its process gone while the match went on, or it could not start)."""
    abandoned = abandoned or {}
    result = launched.outcome.result
    out = {seat: dict(c) for seat, c in result.causes.items()}
    forfeits = set(launched.outcome.forfeits)
    for seat, name in enumerate(names):
        if seat not in forfeits and name not in launched.refused:
            continue
        was = out.get(seat, {})
        tick = was.get("tick")
        if name in launched.refused:
            out[seat] = refusal_cause(launched.refused[name], game, tick)
            continue
        if seat in abandoned:  # whatever its process did after: it had forfeited by then
            out[seat] = {**abandoned[seat], **({} if tick is None else {"tick": tick})}
            continue
        if was.get("cause") == causes.UNRESPONSIVE:
            continue  # hung: the process was alive until the launcher stopped it
        line = last_log_line(launched.logs[name], secrets) if name in launched.logs else None
        why = launched.stopped.get(name)
        if why is not None and name in launched.exit_codes and launched.exit_codes[name] is None:
            out[seat] = causes.cause(causes.NEVER_CONNECTED, tick, detail=why)
        elif why is not None:
            out[seat] = causes.cause(
                causes.LIMIT, tick, limit=why.split(" ")[0], detail=why, last_log_line=line
            )
        elif seat in exited:
            out[seat] = causes.cause(causes.EXITED, tick, **_exit_fields(exited[seat]), last_log_line=line)
    return out


#: What a launched bot is told by cellarena alone, never inherited from cellarena's own environment.
_HANDOVER_VARIABLES = (
    "CELLARENA_TOKEN", "CELLARENA_TOKEN_FD", "CELLARENA_SOCKET_FD", "CELLARENA_HOST", "CELLARENA_PORT",
    "CELLARENA_TLS", "CELLARENA_TLS_CA", "CELLARENA_TLS_NAME",
)  # fmt: skip


def _handover(seating: ReservedSeating, seat: int, port: int) -> socket.socket:
    """A connection to the match server for ``seat``, made here and handed to its bot: the seat is
    the connection's (`ReservedSeating.expect`), so the bot has no secret that another could read.
    Bound before it connects, so that the server knows its source port before it can accept it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        seating.expect(sock.getsockname()[1], seat)
        sock.settimeout(5.0)  # loopback: the kernel completes it at once unless the backlog is full
        sock.connect(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # the bot gets it blocking, as a socket it made itself would be
    except BaseException:
        sock.close()
        raise
    return sock


def holds_connection(proc: BotProcess, conn: Connection) -> bool:
    """Whether one of ``proc``'s own processes (not those found by its marker alone, which another
    process can copy) holds the loopback connection ``conn``: how a token read from a bot's pipe by
    another process of the same user seats nobody (docs/security.md)."""
    server_port = _local_port(conn)
    if conn.peer_port is None or server_port is None:
        return False
    inode = tcp_inode(conn.peer_port, server_port)
    return inode is not None and holds(proc.tree.lineage(process_table()), inode)


def _local_port(conn: Connection) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(conn.sock.getsockname()[1])
    return None


async def start_bot(
    bot: BotSpec,
    host: str,
    port: int,
    token: str | None,
    *,
    limits: Limits | None = None,
    isolate: bool = False,
    connection: socket.socket | None = None,
    on_started: Callable[[BotProcess], None] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> BotProcess:
    """Start ``bot`` in a session of its own, confined by ``limits`` (and isolated with ``isolate``),
    its output piped for `copy_log` (docs/protocol.md says what a bot is handed):

    - ``connection``, when given, as its standard input, descriptor 0, named by CELLARENA_SOCKET_FD:
      a connection to the match server that already owns the bot's seat, with nothing secret in it;
    - ``token``, when given, through an inherited pipe named by CELLARENA_TOKEN_FD, with where to
      connect in CELLARENA_HOST and _PORT, for bots written before the connection was handed over.
      The token goes into the pipe only after ``on_started`` has the process: a bot that can read it
      is known, so its hello is judged by its own processes however fast it comes (a compiled bot
      says hello before an awaited start returns);
    - ``extra_env``, when given, more variables, none secret (a house bot's CELLARENA_TLS, ...).

    A bot with a view of Python (`BotSpec.view`), isolated, runs confined as a submitted program:
    under bubblewrap even as root, seeing only that Python."""
    become_subreaper()
    launch = Launch(
        limits or Limits(),
        isolate=isolate,
        handed_connection=connection is not None,
        view=bot.view if isolate else None,
    )
    try:
        launch.prepare()
    except BaseException:
        launch.cleanup()  # its cgroup, made before the isolation was refused
        raise
    env = _bot_env(bot, launch, host, port, extra_env)
    pass_fds: tuple[int, ...] = ()
    read_end = write_end = None
    payload = b""
    if token is not None:
        payload = token.encode() + b"\n"
        # Not in the environment, which any process of the same user can read (/proc/PID/environ).
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, False)
        env["CELLARENA_TOKEN_FD"] = str(read_end)
        pass_fds = (read_end,)
    if connection is not None:
        env["CELLARENA_SOCKET_FD"] = "0"
    # Should cellarena be killed, the reaper stops what the bot started (`cellarena.server.bots.reaper`).
    # It hears of the bot before the bot runs, by its marker (and cgroup): told only after the start
    # returned, it missed a bot whose launcher was killed in between, and the children the bot had
    # forked by then ran on (seen on a loaded machine, where a thread's hand-back takes a while).
    try:
        Reaper.add(launch.marker, None, launch.marker, launch.cgroup)
        proc = await spawn(
            launch.argv(bot.argv(), bot.cwd),
            stdin=connection.fileno() if connection is not None else subprocess.DEVNULL,
            env=env,
            cwd=bot.cwd,
            pass_fds=pass_fds,
            **launch.popen_kwargs(),
        )
    except BaseException:
        with contextlib.suppress(OSError):  # a reaper that could not start: nothing to take back
            Reaper.done(launch.marker)
        launch.cleanup()
        if write_end is not None:
            os.close(write_end)
        raise
    finally:
        if read_end is not None:
            os.close(read_end)
    launch.started()
    Reaper.add(launch.marker, proc.pid, launch.marker, launch.cgroup)  # and now its sessions too
    started = BotProcess(proc, ProcessTree(proc.pid, launch.marker), launch)
    if on_started is not None:
        on_started(started)
    if write_end is not None:
        try:
            os.write(write_end, payload)
        except OSError:
            pass  # the bot is gone already: its exit tells the rest
        finally:
            os.close(write_end)
    return started


def _bot_env(
    bot: BotSpec, launch: Launch, host: str, port: int, extra_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A launched bot's environment: cellarena's, without what only cellarena may tell it, and its own
    (``extra_env``: told only with the address, as a house bot's TLS settings are)."""
    env = {k: v for k, v in os.environ.items() if k not in _HANDOVER_VARIABLES}
    env.update(CELLARENA_NAME=bot.name, PYTHONUNBUFFERED="1")
    if bot.view is not None:
        env.update(dict(bot.view.env))
    if not launch.private_network:  # an address it could reach
        env.update(CELLARENA_HOST=host, CELLARENA_PORT=str(port), **dict(extra_env or {}))
    env.update(launch.env())
    return env


async def watch_limits(bots: list[BotProcess], limits: Limits) -> None:
    """Until cancelled, look at the bots' processes every `POLL_SECONDS` and kill a bot over a limit."""
    while True:
        await trio.sleep(POLL_SECONDS)
        running = [b for b in bots if b.returncode is None and b.stopped_for is None]
        if not running:
            return
        table = await trio.to_thread.run_sync(process_table)
        for bot in running:
            rss, cpu, count = bot.tree.usage(table)
            group = bot.launch.cgroup
            if group is not None:  # the kernel's count: every process the bot ever ran, however detached
                cpu = group.cpu_seconds() or cpu
                count = max(count, len(group.pids()))
            why = over_limit(limits, rss, cpu, count) or cgroup_reason(group, limits)
            if why is not None:
                bot.stopped_for = why
                logging.getLogger("cellarena.server").warning(
                    "bot %d stopped: %s; it used %.0f MiB, %.1f s of CPU, %d processes",
                    bot.pid, why, rss / 2**20, cpu, count,
                )  # fmt: skip
                _signal_group(bot, signal.SIGKILL)
                if group is not None:
                    await trio.to_thread.run_sync(group.kill)
                await trio.to_thread.run_sync(bot.tree.kill)


async def copy_log(output: trio.abc.ReceiveStream, path: Path, limit: int) -> None:
    """Copy a bot's output to its log file, up to ``limit`` bytes. The rest is read and dropped, so
    that the bot never blocks on a full pipe (it would answer late for the server's sake)."""
    kept = 0
    log_file: IO[bytes] | None = open(path, "wb")  # noqa: SIM115 -- closed below, also on a full disk
    try:
        async for chunk in output:
            if log_file is None or kept >= limit:
                continue
            part = chunk[: limit - kept]
            kept += len(part)
            try:
                log_file.write(part)
                if kept >= limit:
                    log_file.write(
                        f"\n[cellarena: log cut at {limit // 2**20} MiB; the rest was dropped]\n".encode()
                    )
                log_file.flush()  # the log can be followed while the match plays
            except OSError as exc:  # a full disk: the match goes on, the log stops here
                logging.getLogger("cellarena.server").error("log %s stops here: %s", path, exc)
                with contextlib.suppress(OSError):
                    log_file.close()
                log_file = None
    finally:
        if log_file is not None:
            with contextlib.suppress(OSError):
                log_file.close()


async def _watch_process(
    proc: BotProcess, seat: int, seating: ReservedSeating, exited: dict[int, int], seen: trio.Event
) -> None:
    exited[seat] = await proc.wait()
    seen.set()
    seating.seat_gone(seat)  # if it never connected, do not keep the others waiting


async def _copy_then_set(output: trio.abc.ReceiveStream, path: Path, done: trio.Event) -> None:
    try:
        await copy_log(output, path, LOG_LIMIT)
    finally:
        done.set()


async def stop_bot(proc: BotProcess, *, patience: float, grace: float = 2.0) -> int | None:
    """Wait ``patience`` seconds for the bot to exit, then terminate its whole group, politely first;
    then kill every process it left, wherever it went (other sessions, orphans), and remove its
    private folder."""
    with trio.move_on_after(patience):
        await proc.wait()
    if proc.returncode is None:
        proc.signalled = True
        _signal_group(proc, signal.SIGTERM)
        with trio.move_on_after(grace):
            await proc.wait()
    if proc.returncode is None:
        _signal_group(proc, signal.SIGKILL)
        await proc.wait()
    else:
        _signal_group(proc, signal.SIGKILL)  # children the bot left behind in its group
    group = proc.launch.cgroup
    if group is not None:
        await trio.to_thread.run_sync(group.kill)  # all of it at once, wherever it went
        # A limit the kernel held it to, read before its cgroup goes (its out-of-memory killer may
        # have ended the bot between two looks of the watcher).
        proc.stopped_for = proc.stopped_for or cgroup_reason(group, proc.launch.limits)
    await trio.to_thread.run_sync(proc.tree.kill)
    proc.launch.cleanup()
    Reaper.done(proc.launch.marker)
    return proc.returncode


def _signal_group(proc: BotProcess, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _log_paths(log_dir: Path, names: list[str]) -> dict[str, Path]:
    """One log file per bot, named after it; names that make the same file name get their seat added."""
    stems = [_safe(name) for name in names]
    return {
        name: log_dir / (f"{stem}.log" if stems.count(stem) == 1 else f"{stem}-seat{seat}.log")
        for seat, (name, stem) in enumerate(zip(names, stems, strict=True))
    }


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "bot"
