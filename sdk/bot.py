"""The `GameBot` base class and `run()`, which connects a bot to a server and plays one match, or many.

    from cellarena.sdk import Bot, Move, View, run

    class Forward(Bot):
        def on_tick(self, view: View) -> Move:
            return Move.ADVANCE if view.viewport.can_advance() else Move.RIGHT

    if __name__ == "__main__":
        raise SystemExit(run(Forward))   # or Forward.run(); `--ladder` keeps it playing

`GameBot` is generic over what ``on_tick`` gets and what it returns; each game's SDK module
subclasses it once with its own types and ``game`` (`cellarena.sdk.games.cata.CataBot`, ...), and
`cellarena.sdk.Bot` is Rezzo's. A bot subclasses its game's class, so a type checker (mypy or pyright,
strict) checks its ``on_tick`` against that game's view and answer. `docs/sdk.md` is the tutorial.

The loop is forgiving on purpose: an exception in ``on_tick``, or an answer the game's module cannot
encode, costs that tick and a message on stderr (an exception's with its traceback), never the
connection, so one bug does not forfeit a whole match. That tick's answer is sent without its
``moves`` field, which the server counts as **invalid** in every game (docs/protocol.md), so
``MatchResult.invalid`` tells the bot's author how often it happened.
"""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from cellarena.sdk import protocol
from cellarena.sdk.client import (
    Client,
    ClientError,
    ServerError,
    TLSError,
    connect,
    handed_connection,
    is_loopback,
    tls_context,
)
from cellarena.sdk.debug import DebugLayer
from cellarena.sdk.games import DEFAULT_GAME, MovesError, adapter, parse_settings
from cellarena.sdk.protocol import ProtocolError
from cellarena.sdk.protocol import debug as protocol_debug
from cellarena.sdk.reconnect import Backoff

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7777
MAX_NAME = protocol.MAX_NAME


# ---------------------------------------------------------------------------------------- messages
@dataclass(frozen=True)
class MatchInfo:
    """The ``welcome`` message: your seat and the match's settings.

    ``config`` is the game's settings as sent. ``settings`` holds them typed when the game's SDK
    module reads them (for Rezzo a `RezzoSettings`: ``map``, ``width``, ``height``,
    ``agents_per_player``, ``view_size``, ``max_ticks``, ``torus``, ``own_base_counts``), else None.
    The settings' fields read as fields of the MatchInfo too: ``info.map`` is ``info.settings.map``.
    """

    seat: int | None
    players: int
    names: tuple[str, ...]
    game: str
    match: int = 0
    tick_rate: float = 0.0
    budget_ms: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    role: str = "bot"
    #: Your time bank at the start, in ms (0: the match has none; docs/protocol.md#the-time-bank).
    time_bank_ms: int = 0
    #: Read from ``config`` by the game's SDK module unless given.
    settings: Any = None

    def __post_init__(self) -> None:
        if self.settings is None:
            object.__setattr__(self, "settings", parse_settings(self.game, self.config))

    def __getattr__(self, name: str) -> Any:
        # Only called when the usual lookup fails: the game's settings answer for their fields.
        # Read through __dict__, so that a half-built instance (copy, pickle) cannot recurse here.
        settings = self.__dict__.get("settings")
        if not name.startswith("_") and settings is not None and hasattr(settings, name):
            return getattr(settings, name)
        game = self.__dict__.get("game", "this game")
        raise AttributeError(
            f"'MatchInfo' object has no attribute {name!r}, nor do the {game} settings (see info.config)"
        )

    @property
    def name(self) -> str | None:
        """Your bot's name as the server seated it (None for spectators)."""
        return None if self.seat is None else self.names[self.seat]

    @property
    def fast(self) -> bool:
        """Fast mode: the next tick comes as soon as every bot has answered."""
        return self.tick_rate == 0

    @classmethod
    def from_welcome(cls, message: Mapping[str, Any]) -> MatchInfo:
        """The MatchInfo of a ``welcome``; a malformed one is a `ProtocolError` naming the field."""
        welcome = protocol.check_welcome(message)
        return cls(
            seat=welcome.get("seat"),
            players=welcome["players"],
            names=tuple(welcome["names"]),
            game=welcome["game"],
            match=welcome["match"],
            tick_rate=float(welcome["tick_rate"]),
            budget_ms=welcome["budget_ms"],
            config=dict(welcome["config"]),
            role=welcome["role"],
            time_bank_ms=welcome.get("time_bank_ms", 0),
        )


@dataclass(frozen=True)
class MatchResult:
    """The ``end`` message: how the match ended for you."""

    ticks: int
    result: str  # "win", "loss" or "draw"
    rank: int
    ranks: tuple[int, ...] = ()
    winner: int | None = None
    reason: str = ""
    late: int = 0
    invalid: int = 0
    illegal: int = 0

    @property
    def won(self) -> bool:
        return self.result == "win"

    @classmethod
    def from_end(cls, message: Mapping[str, Any]) -> MatchResult:
        """The MatchResult of an ``end``; a malformed one is a `ProtocolError` naming the field."""
        end = protocol.check_end(message)
        return cls(
            ticks=end["ticks"],
            result=end["result"],
            rank=end["rank"],
            ranks=tuple(end["ranks"]),
            winner=end["winner"],
            reason=end["reason"],
            late=end["late"],
            invalid=end["invalid"],
            illegal=end["illegal"],
        )

    def summary(self) -> str:
        """One line for a log."""
        return (
            f"{self.result} (rank {self.rank}) after {self.ticks} ticks, {self.reason}; "
            f"late {self.late}, invalid {self.invalid}, illegal {self.illegal}"
        )


# ---------------------------------------------------------------------------------------- the bot
#: What ``on_tick`` gets: the game's view (Rezzo's `View`, C.A.T.A.'s `View`, ...).
ViewT = TypeVar("ViewT")
#: What ``on_tick`` returns: the game's answer type (Rezzo's `Answer`: a move or one per agent, ...).
AnswerT = TypeVar("AnswerT")


class GameBot(Generic[ViewT, AnswerT]):
    """Subclass your game's bot class and override ``on_tick`` (and, if you like, ``on_start`` and
    ``on_end``): `cellarena.sdk.Bot` (Rezzo's), `cellarena.sdk.games.cata.CataBot`, and so on.

    ``GameBot[ViewT, AnswerT]`` is the generic base those are made from: ``on_tick`` takes a
    ``ViewT`` and returns an ``AnswerT``, so a type checker checks a bot against its game. ``game``
    is the game named in ``hello``; each game's class sets it. ``info`` holds the `MatchInfo` once the
    match starts (it is None before, and in offline tests that call ``on_tick`` directly).
    """

    game: ClassVar[str] = DEFAULT_GAME
    info: MatchInfo | None = None
    #: The bot's version, said in ``hello``: a ladder records it with each match and shows results per
    #: version. Set it on the class, or ``MyBot(version="1.2")``; ``--version`` overrides both.
    version: str | None = None

    def __init__(self, *, version: str | None = None) -> None:
        if version is not None:
            self.version = version

    @property
    def debug(self) -> DebugLayer:
        """This tick's debug drawing: ``self.debug.mark(cell, colour, label)``, ``.line(a, b, colour)``
        and ``.log(text)`` during ``on_tick`` go out with its answer (docs/sdk.md#debugging). Made on
        first use, so a bot that never draws sends and pays nothing."""
        layer: DebugLayer | None = self.__dict__.get("_debug")
        if layer is None:
            layer = self.__dict__["_debug"] = DebugLayer()
        return layer

    def on_start(self, info: MatchInfo) -> None:
        """The match begins: your seat, the players, the game's settings."""

    def on_tick(self, view: ViewT) -> AnswerT:
        """Your answer to one tick, in the game's shape (Rezzo: one move per agent in ``view.agents``
        order, or one move if you have one agent). The default does nothing."""
        answer: AnswerT = adapter(self.game).idle_answer(view)
        return answer

    def on_end(self, result: MatchResult) -> None:
        """The match is over. The connection closes after this returns."""

    def make_view(self, message: dict[str, Any]) -> ViewT:
        """Turn a ``tick`` message into what ``on_tick`` gets (for Rezzo, a `View`), with the game's
        SDK module. Override it to get something else."""
        try:
            view: ViewT = adapter(self.game).make_view(message)
        except ValueError as exc:
            raise ProtocolError(protocol.BAD_MESSAGE, str(exc)) from None
        return view

    def encode_answer(self, answer: AnswerT, message: dict[str, Any]) -> Any:
        """The ``moves`` field for what ``on_tick`` returned; raises `MovesError` saying what is wrong.

        It checks at run time what the types promise, since a bot may be untyped or wrong: an answer
        it refuses is sent as invalid (see the module's docstring)."""
        return adapter(self.game).encode_answer(answer, message)

    @classmethod
    def run(cls, argv: Sequence[str] | None = None, *, matches: int = 1, ladder: bool = False) -> int:
        """``raise SystemExit(MyBot.run())``: the same as `run(MyBot, ...)` (see there)."""
        return run(cls, argv, matches=matches, ladder=ladder)


#: A bot of any game, as the loop sees it.
AnyBot = GameBot[Any, Any]


# ---------------------------------------------------------------------------------------- the loop
class _Log:
    """Lines on stderr, prefixed with the bot's name, so a match's merged logs stay readable."""

    def __init__(self, name: str, quiet: bool) -> None:
        self.name = name
        self.quiet = quiet
        #: Ticks whose answer went invalid (on_tick raised, or its answer could not be encoded).
        self.invalid = 0
        #: Whether a dropped debug drawing was reported (once a match).
        self.debug_said = False

    def __call__(self, text: str, *, always: bool = True) -> None:
        if always or not self.quiet:
            # One write per line: print() writes the text and its newline apart, and a SIGTERM
            # handler's own line could land between them.
            sys.stderr.write(f"{self.name}: {text}\n")
            sys.stderr.flush()

    def invalid_answer(self, tick: int, text: str, detail: str = "") -> None:
        """An answer that went invalid: the first in full (``detail``: a traceback), then a count at
        10, 100, 1000... and in the match's last line, so a bot that fails every tick writes a handful
        of lines instead of one traceback per tick."""
        self.invalid += 1
        n = self.invalid
        if n == 1:
            self(f"tick {tick}: {text}; this tick counts as invalid" + (f"\n{detail}" if detail else ""))
        elif n >= 10 and str(n).strip("0") == "1":
            self(f"tick {tick}: {n} invalid answers so far (the first is reported above); latest: {text}")


def play(bot: AnyBot, client: Client, *, name: str = "bot", quiet: bool = False) -> MatchResult:
    """Play one match on an open connection (``hello`` already sent) and return its result.

    Raises `ServerError`, `ConnectionClosedError` or `ProtocolError` if the match cannot go on.
    """
    log = _Log(name, quiet)
    if client.state is protocol.State.HELLO:
        client.state = protocol.State.WAITING  # the caller said hello on this socket its own way
    info: MatchInfo | None = None
    slow = skipped = 0
    unknown: set[str] = set()  # message types already reported
    while True:
        message = client.recv()
        kind = message["type"]
        if kind == "welcome":
            info = MatchInfo.from_welcome(message)
            bot.info = info
            detail = info.settings.summary() if info.settings is not None else ""
            log(
                f"seat {info.seat} of {info.players} in match {info.match} ({info.game}"
                + (f", {detail}" if detail else "")
                + ")",
                always=False,
            )
            _guarded(log, "on_start", bot.on_start, info)
        elif kind == "tick":
            assert info is not None  # the client refuses a tick before the welcome (protocol.states)
            message, skipped = _newest_tick(client, message, skipped, log)
            if (after := client.peek()) is not None and after["type"] in ("end", "error"):
                continue  # the match ended (or failed) meanwhile: that message comes next
            request = protocol.check_tick(message)
            took_ms = _answer(bot, client, message, log)
            if took_ms > request["budget_ms"]:
                slow += 1
                if slow == 1:
                    _report_slow(log, request, took_ms)
        elif kind == "end":
            result = MatchResult.from_end(message)
            said = result.summary() + (f"; {slow} slow ticks" if slow else "")
            if log.invalid:  # always said: the bot's own failures must not pass unseen
                own = f"{log.invalid} invalid answer{'' if log.invalid == 1 else 's'}"
                log(f"{said}; {own} of its own (on_tick raised or sent no moves)")
            else:
                log(said, always=False)
            _guarded(log, "on_end", bot.on_end, result)
            return result
        elif kind == "redirect":  # the client refuses one in the middle of a match (protocol.states)
            raise RedirectedError(protocol.check_redirect(message))
        elif kind not in unknown:
            # docs/protocol.md: a later server may add messages; a client logs them and goes on.
            unknown.add(kind)
            log(f"ignoring the server's {kind!r} messages: this SDK does not know them")


def _newest_tick(
    client: Client, message: dict[str, Any], skipped: int, log: _Log
) -> tuple[dict[str, Any], int]:
    """Answers to old ticks only count as late: when we have fallen behind, the newest tick the
    client holds, and the count of ticks skipped so far (the first skip is reported)."""
    while client.poll() and (newer := client.peek()) is not None and newer["type"] == "tick":
        message = client.recv()
        skipped += 1
        if skipped == 1:
            log("fell behind the server; skipping to the newest tick (on_tick is too slow?)")
    return message, skipped


def _report_slow(log: _Log, request: Mapping[str, Any], took_ms: float) -> None:
    """The first answer over its budget: what that costs (the time bank, else a noop)."""
    bank = request.get("bank_ms")
    log(
        f"tick {request['tick']}: on_tick took {took_ms:.0f} ms, over the {request['budget_ms']} ms "
        + (
            f"budget; the time bank ({bank} ms left) pays while it lasts, then late "
            "answers are noops (only the first is reported)"
            if bank is not None
            else "budget; late answers are noops (only the first is reported)"
        )
    )


class RedirectedError(Exception):
    """The server sent a ``redirect``: this bot's match is played at ``target``'s address (not a
    failure; `run()` follows it)."""

    def __init__(self, target: protocol.Redirect) -> None:
        super().__init__(f"redirected to {target['host']}:{target['port']}")
        self.target = target


def _answer(bot: GameBot[ViewT, AnswerT], client: Client, message: dict[str, Any], log: _Log) -> float:
    """Ask the bot for one tick's moves and send them; the milliseconds on_tick took.

    When ``on_tick`` raises or its answer cannot be encoded, the answer goes without a ``moves``
    field: the server counts it invalid in every game (a nil ``moves`` would be a pass in some).
    """
    tick = message["tick"]
    view = bot.make_view(message)
    started = time.monotonic()
    reply: dict[str, Any] = {"type": "moves", "tick": tick}
    error: str | None = None
    try:
        answer = bot.on_tick(view)
    except Exception as exc:
        error = f"on_tick raised {type(exc).__name__}: {exc}"
        log.invalid_answer(tick, error, traceback.format_exc().rstrip())
    else:
        try:
            reply["moves"] = bot.encode_answer(answer, message)
        except MovesError as exc:
            error = str(exc)
            log.invalid_answer(tick, error)
    took_ms = (time.monotonic() - started) * 1000.0
    layer: DebugLayer | None = getattr(bot, "__dict__", {}).get("_debug")
    if layer is not None:  # only a bot that drew pays for it
        _add_debug(reply, layer, log)
    if error is not None:  # its owner sees it in the player, where it happened (docs/protocol.md)
        reply.setdefault("debug", {})["error"] = _first_line(error)
    client.send(reply)
    return took_ms


def _first_line(text: str) -> str:
    """An error's first line, printable and within `debug.MAX_ERROR`, as the server keeps it."""
    line = (text.splitlines() or [""])[0]
    return "".join(c if c.isprintable() else "?" for c in line)[: protocol_debug.MAX_ERROR]


def _add_debug(reply: dict[str, Any], layer: DebugLayer, log: _Log) -> None:
    """Put this tick's drawing in ``reply``, unless the frame would pass the protocol's limit (the
    caps keep it far below; a huge ``moves`` could not): then the drawing goes, never the move."""
    if layer.first_problem is not None and not log.debug_said:
        log.debug_said = True
        log(f"debug drawing dropped: {layer.first_problem} (only the first is reported; the move is kept)")
    drawn = layer.take()
    if drawn is None:
        return
    reply["debug"] = drawn
    if len(protocol.encode(reply)) > protocol.MAX_CLIENT_FRAME:
        del reply["debug"]
        layer.dropped += 1
        if not log.debug_said:
            log.debug_said = True
            log(f"tick {reply['tick']}: the debug drawing would make the answer too large; sent without it")


def _guarded(log: _Log, what: str, fn: Any, arg: Any) -> None:
    """Call a bot hook; an exception is reported and the match goes on."""
    try:
        fn(arg)
    except Exception:
        log(f"{what} raised; carrying on\n{traceback.format_exc().rstrip()}")


# ---------------------------------------------------------------------------------------- run()
#: Connections to a match host tried before a redirected match is given up (a lost connection
#: comes back to its seat within the ladder's grace).
FOLLOW_ATTEMPTS = 3
#: Exit statuses of `run()`: played (or stopped by SIGTERM), could not go on, Ctrl-C.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

# What to do about an error that waiting cannot fix, said with the error.
_FIX = {
    protocol.BAD_HELLO: "check the bot's token (--token-file, --token or CELLARENA_TOKEN) and its game",
    protocol.BAD_VERSION: f"this SDK speaks protocol {protocol.PROTOCOL_VERSION}; update cellarena",
    protocol.TLS_REQUIRED: "connect with --tls",
    protocol.REVOKED: "ask the ladder's host for the bot's current token",
    protocol.PAUSED: "fix the bot, then resume it on the ladder (its owner) or ask the ladder's host",
}


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def read_token(flag: str | None, token_file: str | None) -> str | None:
    """The token to send in ``hello``: the content of ``--token-file``, else ``--token``, else the
    seat token a launcher handed over (`_seat_token`: CELLARENA_TOKEN_FD, CELLARENA_TOKEN), else None.

    Every way a bot is handed its token goes through here, so that a new one is added in one place.
    A token is a secret: it is never logged, and an error about it names the file, not the content.
    Raises ValueError when the file cannot be read or holds no token.
    """
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"--token-file {token_file}: cannot read it ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise ValueError(f"--token-file {token_file}: it is not UTF-8 text") from None
        if not text:
            raise ValueError(f"--token-file {token_file}: the file is empty")
        return text
    if flag is not None and flag.strip():
        return flag.strip()
    return _seat_token()


def _seat_token() -> str | None:
    """The seat token: read once from the pipe CELLARENA_TOKEN_FD names (how `cellarena match` hands it
    over, out of other processes' sight; docs/protocol.md), else CELLARENA_TOKEN (a token you set)."""
    fd = _env("CELLARENA_TOKEN_FD")
    if fd is None or not fd.isdigit():
        return _env("CELLARENA_TOKEN")
    try:
        with os.fdopen(int(fd), "rb") as pipe:
            return pipe.readline(4096).decode("ascii", "replace").strip() or None
    except OSError:
        return _env("CELLARENA_TOKEN")


def _handed_connection() -> Client | None:
    """The connection that the program which started this bot handed over, already owning its seat
    (descriptor CELLARENA_SOCKET_FD, usually 0: `cellarena match`, tournaments; docs/protocol.md), or
    None. ValueError when the variable names no open socket."""
    fd = _env("CELLARENA_SOCKET_FD")
    if fd is None:
        return None
    if not fd.isdigit():
        raise ValueError(f"{fd!r} is not a descriptor number")
    return handed_connection(int(fd))


def parse_args(
    argv: Sequence[str] | None, default_name: str, *, matches: int = 1, ladder: bool = False
) -> argparse.Namespace:
    """The command line: flags win over CELLARENA_* variables and over ``run()``'s ``matches`` and
    ``ladder``, which win over the defaults. ``token`` holds the token (see `read_token`), ``ladder``
    whether to queue again after each match and ride out refusals, ``matches`` how many matches to
    play (None: until stopped, a ladder without ``--matches``), ``tls`` an `ssl.SSLContext` or None."""
    if matches < 1:
        raise ValueError(f"run(): matches must be 1 or more, got {matches}")
    parser = _parser(default_name, matches=matches, ladder=ladder)
    args = parser.parse_args(argv)
    _check_args(parser, args)
    # --ladder --matches N: a ladder bot (it queues again and rides out refusals) that stops after N.
    args.ladder = ladder if args.ladder is None else args.ladder
    if args.matches is None:
        args.matches = None if args.ladder else matches
    try:
        args.connection = _handed_connection()
    except ValueError as exc:
        parser.error(f"CELLARENA_SOCKET_FD: {exc}; unset it to connect to --host/--port instead")
    try:
        if args.connection is not None and args.token is None and args.token_file is None:
            args.token = None  # the handed connection owns the seat: no token needed, none read
        else:
            args.token = read_token(args.token, args.token_file)
        args.tls = tls_context(args.tls_ca) if args.tls or args.tls_ca is not None else None
    except ValueError as exc:
        parser.error(str(exc))
    except TLSError as exc:
        parser.error(f"--tls-ca: {exc}")
    return args


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, as argparse does (exit status 2), what the flags' types let through."""
    if not 0 < args.port < 65536:
        parser.error(f"--port must be 1-65535, got {args.port}")
    if not 1 <= len(args.name) <= MAX_NAME:
        parser.error(f"--name must be 1 to {MAX_NAME} characters, got {len(args.name)}")
    if args.matches is not None and args.matches < 1:
        parser.error(f"--matches must be 1 or more, got {args.matches}")
    if args.token is not None and args.token_file is not None:
        parser.error("--token and --token-file: give one of them")
    version = args.bot_version
    if version is not None and not (1 <= len(version) <= protocol.MAX_VERSION and version.isprintable()):
        shown = f"{version[:20]!r}... ({len(version)} characters)" if len(version) > 20 else repr(version)
        parser.error(f"--version must be 1 to {protocol.MAX_VERSION} printable characters, got {shown}")


def _parser(default_name: str, *, matches: int, ladder: bool) -> argparse.ArgumentParser:
    """A bot's flags, with their defaults from CELLARENA_* variables and ``run()``'s arguments."""
    parser = argparse.ArgumentParser(
        description="A cellarena bot: connects to a server and plays a match, or many (--matches, --ladder).",
        epilog="--host, --port, --token and --name default to their CELLARENA_* environment variables when "
        "those are set; `cellarena match` sets them for every bot it starts.",
    )
    env_port = _env("CELLARENA_PORT")
    port_default = DEFAULT_PORT
    if env_port is not None:
        if not env_port.isdigit() or not 0 < int(env_port) < 65536:
            parser.error(f"CELLARENA_PORT must be a port number (1-65535), got {env_port!r}")
        port_default = int(env_port)
    parser.add_argument(
        "--host", default=_env("CELLARENA_HOST") or DEFAULT_HOST, help="server address (CELLARENA_HOST)"
    )
    parser.add_argument("--port", type=int, default=port_default, help="server port (CELLARENA_PORT)")
    parser.add_argument(
        "--token",
        help="seat or ladder token (else CELLARENA_TOKEN_FD, CELLARENA_TOKEN); other users can read a "
        "command line, so prefer --token-file or the variable",
    )
    parser.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    parser.add_argument(
        "--name", default=_env("CELLARENA_NAME") or default_name, help="bot name (CELLARENA_NAME)"
    )
    parser.add_argument(
        "--version",
        dest="bot_version",
        default=_env("CELLARENA_BOT_VERSION"),
        help=f"the bot's version, said in hello (1 to {protocol.MAX_VERSION} printable characters; a "
        "ladder shows results per version; CELLARENA_BOT_VERSION) [default: the bot's own `version`]",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="only report problems on stderr")
    many = parser.add_argument_group(
        "playing many matches",
        "After a match the bot connects again at once. After a lost connection or a refusal that means "
        "'not now' (busy, queue_full, ...) it waits 0.5-1 s, twice as long after each failure in a row, "
        "at most 60 s (or as long as a lock-out lasts). Any other error from the server stops it "
        "(exit status 1).",
    )
    many.add_argument(
        "--matches",
        type=int,
        metavar="N",
        help=f"play N matches in a row (default: {matches}; with --ladder, stop after N)",
    )
    many.add_argument(
        "--ladder",
        action="store_true",
        default=None,
        help="keep playing until stopped (Ctrl-C, SIGTERM) or --matches N are played, queueing again "
        "after each match" + (" (the default here)" if ladder else ""),
    )
    secure = parser.add_argument_group("TLS")
    secure.add_argument(
        "--tls",
        action="store_true",
        default=_env("CELLARENA_TLS") == "1",
        help="connect over TLS; the server's certificate must be signed by a CA the system trusts, and "
        "be for --host (CELLARENA_TLS=1)",
    )
    secure.add_argument(
        "--tls-ca",
        metavar="PATH",
        default=_env("CELLARENA_TLS_CA"),
        help="trust only the certificates in this PEM file: CAs, or the server's own certificate "
        "(implies --tls; CELLARENA_TLS_CA)",
    )
    secure.add_argument(
        "--tls-name",
        metavar="NAME",
        default=_env("CELLARENA_TLS_NAME"),
        help="the name the server's certificate must be for, when --host is an address it does not "
        "name (a ladder's house bots connect to 127.0.0.1; CELLARENA_TLS_NAME) [default: --host]",
    )
    return parser


class _Stopped(BaseException):
    """SIGTERM arrived: stop where the bot is, as Ctrl-C does, but as a normal exit."""


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """While inside, SIGTERM raises `_Stopped` (in the main thread; elsewhere signals are not ours)."""

    def stop(_signum: int, _frame: object) -> None:
        raise _Stopped

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Series:
    """The matches one ``run()`` plays, one connection each, with back-off between failed attempts."""

    def __init__(self, bot: type[AnyBot] | AnyBot, args: argparse.Namespace, log: _Log) -> None:
        self.bot = bot
        self.bot_class = type(bot) if isinstance(bot, GameBot) else bot
        self.args = args
        self.log = log
        self.played = 0
        self.backoff = Backoff()
        #: With one match, any failure ends the run at once: the host that started the bot wants to know.
        self.keep_trying = bool(args.ladder) or args.matches > 1

    def done(self) -> bool:
        return self.args.matches is not None and self.played >= self.args.matches

    def play_all(self) -> int:
        args = self.args
        # A new instance per match when given a class, so no state leaks from one match to the next;
        # a match cut short is taken up again by the same one (a ladder may give its seat back).
        instance = self.bot if isinstance(self.bot, GameBot) else self.bot_class()
        while not self.done():
            try:
                try:
                    self.play_at(instance, args.host, args.port, args.token, args.tls)
                except RedirectedError as redirect:
                    if not self.follow(instance, redirect.target):
                        continue
            except TLSError as exc:
                return self.fail(str(exc))
            except ServerError as exc:
                if self.keep_trying and exc.code in protocol.RETRY_LATER:
                    self.wait(str(exc), exc.message)
                    continue
                fix = _FIX.get(exc.code)
                if self.keep_trying:
                    fix = (fix + "; " if fix else "") + "not trying again: waiting cannot fix this"
                return self.fail(str(exc) + (f"; {fix}" if fix else ""))
            except ClientError as exc:
                if not self.keep_trying:
                    return self.fail(str(exc))
                self.wait(str(exc))
                continue
            except ProtocolError as exc:
                return self.fail(f"the server sent something this SDK cannot read ({exc})")
            self.played += 1
            self.backoff.reset()
            if self.done():
                break
            if not isinstance(self.bot, GameBot):
                instance = self.bot_class()
            of = "" if args.matches is None else f" of {args.matches}"
            self.log(f"match {self.played}{of} played; connecting for the next", always=False)
        return EXIT_OK

    def version(self, instance: AnyBot) -> str | None:
        """The version the hello says: ``--version``, else the bot's own."""
        given: str | None = self.args.bot_version
        return given if given is not None else instance.version

    def play_at(
        self, instance: AnyBot, host: str, port: int, token: str | None, tls: ssl.SSLContext | None
    ) -> None:
        """Connect to ``host``:``port``, say hello (following redirects), and play one match there."""
        args = self.args
        handed: Client | None = args.connection
        if handed is not None and (host, port) == (args.host, args.port):
            # The first match on the connection the launcher made: it owns the seat, no token is sent.
            args.connection = None
            with handed as client:
                client.hello(
                    args.name, self.bot_class.game, accepts=protocol.ACCEPTS, version=self.version(instance)
                )
                play(instance, client, name=args.name, quiet=args.quiet)
            return
        with connect(
            host,
            port,
            name=args.name,
            game=self.bot_class.game,
            token=token,
            tls=tls,
            tls_name=args.tls_name if (host, port) == (args.host, args.port) else None,
            accepts=protocol.ACCEPTS,
            version=self.version(instance),
        ) as client:
            play(instance, client, name=args.name, quiet=args.quiet)

    def follow(self, instance: AnyBot, target: protocol.Redirect) -> bool:
        """Play the match a ladder sent this bot to; whether it was played.

        A connection lost mid-match is taken up again (the seat waits for its bot for the ladder's
        grace). A failure at the match host is the match's, not the bot's: with several matches to
        play the bot goes back to the ladder after a wait, with one it is the run's failure."""
        host, port = target["host"], target["port"]
        where = f"the match host {host}:{port}"
        self.log(f"playing this match at {host}:{port}", always=False)
        if target["tls"]:
            tls = self.args.tls if self.args.tls is not None else tls_context(self.args.tls_ca)
        elif self.args.tls is not None and not is_loopback(host):
            return self.give_up(
                f"the ladder sent this bot to {host}:{port} without TLS, which would send its seat "
                "token in clear; not going (tell the ladder's host)"
            )
        else:
            tls = None
        for attempt in range(1, FOLLOW_ATTEMPTS + 1):
            try:
                self.play_at(instance, host, port, target["token"], tls)
                return True
            except ServerError as exc:
                return self.give_up(f"{where} refused this bot: {exc}")
            except RedirectedError:
                return self.give_up(f"{where} redirected this bot again; a match host must not")
            except TLSError as exc:
                return self.give_up(f"{where}: {exc}")
            except ClientError as exc:
                if attempt == FOLLOW_ATTEMPTS:
                    return self.give_up(f"lost {where} ({exc})")
                self.log(f"lost {where} ({exc}); connecting there again")
                time.sleep(0.2 * attempt)
        return False

    def give_up(self, text: str) -> bool:
        """A redirected match that could not be played: wait and go back to the ladder, or (one match
        to play) fail the run."""
        if not self.keep_trying:
            raise ClientError(text)
        self.wait(text)
        return False

    def fail(self, text: str) -> int:
        after = f" (after {self.played} matches)" if self.keep_trying else ""
        self.log(f"error: {text}{after}")
        return EXIT_FAILED

    def wait(self, why: str, server_message: str = "") -> None:
        delay = self.backoff.next(server_message)
        self.log(f"{why}; trying again in {delay:.1f} s")
        time.sleep(delay)


def run(
    bot: type[AnyBot] | AnyBot, argv: Sequence[str] | None = None, *, matches: int = 1, ladder: bool = False
) -> int:
    """Connect, play, and return an exit status for ``raise SystemExit(run(MyBot))``.

    One match by default. ``matches=N`` plays N in a row and ``ladder=True`` plays until stopped, each
    on a new connection; the command line's ``--matches N`` and ``--ladder`` win over them. Given a
    class, every match is played by a new instance of it; given an instance, that one plays them all.

    The exit status: 0 once the matches are played, or when SIGTERM stopped the bot; 130 on Ctrl-C;
    1, with one line on stderr, when it cannot go on. With one match that is any failure (no
    connection, an ``error`` from the server, a broken connection). With more, the bot waits and
    tries again after a lost connection or a refusal in `protocol.RETRY_LATER`, and stops only on an
    error that waiting cannot fix (a wrong token, another protocol version, a refused TLS handshake).
    """
    bot_class = type(bot) if isinstance(bot, GameBot) else bot
    args = parse_args(argv, bot_class.__name__.lower()[:MAX_NAME], matches=matches, ladder=ladder)
    log = _Log(args.name, args.quiet)
    series = _Series(bot, args, log)
    after = ""
    try:
        with _sigterm_stops():
            return series.play_all()
    except KeyboardInterrupt:
        if series.keep_trying:
            after = f" after {series.played} matches"
        log(f"interrupted{after}")
        return EXIT_INTERRUPTED
    except _Stopped:
        log(f"stopped by SIGTERM after {series.played} matches")
        return EXIT_OK
