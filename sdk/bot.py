"""The `Bot` base class and `run()`, which connects a bot to a server and plays one match.

    from cellarena.sdk import Bot, Move, run

    class Forward(Bot):
        def on_tick(self, view):
            return Move.ADVANCE if view.viewport.can_advance() else Move.RIGHT

    if __name__ == "__main__":
        raise SystemExit(run(Forward))

`docs/sdk.md` is the tutorial. The loop is forgiving on purpose: an exception in ``on_tick`` or a
malformed answer costs that tick (noops) and a message on stderr, never the connection, so one bug
does not forfeit a whole match.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cellarena.sdk import protocol
from cellarena.sdk.client import Client, ClientError, connect
from cellarena.sdk.games import DEFAULT_GAME, MovesError, adapter, parse_settings
from cellarena.sdk.protocol import ProtocolError

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
class Bot:
    """Subclass this and override ``on_tick`` (and, if you like, ``on_start`` and ``on_end``).

    ``game`` is the game named in ``hello``. ``info`` holds the `MatchInfo` once the match starts
    (it is None before, and in offline tests that call ``on_tick`` directly).
    """

    game: ClassVar[str] = DEFAULT_GAME
    info: MatchInfo | None = None

    def on_start(self, info: MatchInfo) -> None:
        """The match begins: your seat, the players, the game's settings."""

    def on_tick(self, view: Any) -> Any:
        """Your answer to one tick, in the game's shape (Rezzo: one move per agent in ``view.agents``
        order, or one move if you have one agent). The default does nothing."""
        return adapter(self.game).idle_answer(view)

    def on_end(self, result: MatchResult) -> None:
        """The match is over. The connection closes after this returns."""

    def make_view(self, message: dict[str, Any]) -> Any:
        """Turn a ``tick`` message into what ``on_tick`` gets (for Rezzo, a `View`), with the game's
        SDK module. Override it to get something else."""
        try:
            return adapter(self.game).make_view(message)
        except ValueError as exc:
            raise ProtocolError(protocol.BAD_MESSAGE, str(exc)) from None

    def encode_answer(self, answer: Any, message: dict[str, Any]) -> Any:
        """The ``moves`` field for what ``on_tick`` returned; raises `MovesError` saying what is wrong."""
        return adapter(self.game).encode_answer(answer, message)


# ---------------------------------------------------------------------------------------- the loop
class _Log:
    """Lines on stderr, prefixed with the bot's name, so a match's merged logs stay readable."""

    def __init__(self, name: str, quiet: bool) -> None:
        self.name = name
        self.quiet = quiet

    def __call__(self, text: str, *, always: bool = True) -> None:
        if always or not self.quiet:
            print(f"{self.name}: {text}", file=sys.stderr, flush=True)


def play(bot: Bot, client: Client, *, name: str = "bot", quiet: bool = False) -> MatchResult:
    """Play one match on an open connection (``hello`` already sent) and return its result.

    Raises `ServerError`, `ConnectionClosedError` or `ProtocolError` if the match cannot go on.
    """
    log = _Log(name, quiet)
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
            if info is None:
                raise ProtocolError(protocol.BAD_MESSAGE, "a tick arrived before the welcome")
            # Answers to old ticks only count as late: when we have fallen behind, answer the newest.
            while client.poll() and (newer := client.peek()) is not None and newer["type"] == "tick":
                message = client.recv()
                skipped += 1
                if skipped == 1:
                    log("fell behind the server; skipping to the newest tick (on_tick is too slow?)")
            if (after := client.peek()) is not None and after["type"] in ("end", "error"):
                continue  # the match ended (or failed) meanwhile: that message comes next
            request = protocol.check_tick(message)
            took_ms = _answer(bot, client, message, log)
            budget = request["budget_ms"]
            if took_ms > budget:
                slow += 1
                if slow == 1:
                    log(
                        f"tick {request['tick']}: on_tick took {took_ms:.0f} ms, over the {budget} ms "
                        "budget; late answers are noops (only the first is reported)"
                    )
        elif kind == "end":
            result = MatchResult.from_end(message)
            log(result.summary() + (f"; {slow} slow ticks" if slow else ""), always=False)
            _guarded(log, "on_end", bot.on_end, result)
            return result
        elif kind not in unknown:
            # docs/protocol.md: a later server may add messages; a client logs them and goes on.
            unknown.add(kind)
            log(f"ignoring the server's {kind!r} messages: this SDK does not know them")


def _answer(bot: Bot, client: Client, message: dict[str, Any], log: _Log) -> float:
    """Ask the bot for one tick's moves and send them; the milliseconds on_tick took."""
    tick = message["tick"]
    view = bot.make_view(message)
    started = time.monotonic()
    payload = adapter(bot.game).noop_answer(message)
    try:
        answer = bot.on_tick(view)
    except Exception:
        log(f"tick {tick}: on_tick raised; playing noops this tick\n{traceback.format_exc().rstrip()}")
    else:
        try:
            payload = bot.encode_answer(answer, message)
        except MovesError as exc:
            log(f"tick {tick}: {exc}; playing noops this tick")
    took_ms = (time.monotonic() - started) * 1000.0
    client.send(protocol.moves(tick, payload))
    return took_ms


def _guarded(log: _Log, what: str, fn: Any, arg: Any) -> None:
    """Call a bot hook; an exception is reported and the match goes on."""
    try:
        fn(arg)
    except Exception:
        log(f"{what} raised; carrying on\n{traceback.format_exc().rstrip()}")


# ---------------------------------------------------------------------------------------- run()
def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


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


def parse_args(argv: Sequence[str] | None, default_name: str) -> argparse.Namespace:
    """The command line: flags win over CELLARENA_* variables, which win over the defaults."""
    parser = argparse.ArgumentParser(
        description="A cellarena bot: connects to a server and plays one match.",
        epilog="Each option defaults to its CELLARENA_* environment variable when that is set; "
        "`cellarena match` sets them for every bot it starts.",
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
        "--token", default=_seat_token(), help="seat token (CELLARENA_TOKEN_FD, CELLARENA_TOKEN)"
    )
    parser.add_argument(
        "--name", default=_env("CELLARENA_NAME") or default_name, help="bot name (CELLARENA_NAME)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="only report problems on stderr")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be 1-65535, got {args.port}")
    if not 1 <= len(args.name) <= MAX_NAME:
        parser.error(f"--name must be 1 to {MAX_NAME} characters, got {len(args.name)}")
    return args


def run(bot: type[Bot] | Bot, argv: Sequence[str] | None = None) -> int:
    """Connect, play one match, and return an exit status for ``raise SystemExit(run(MyBot))``.

    0 when the match was played to its end; 1, with one line on stderr, when the bot could not
    connect, the server sent an ``error``, or the connection broke; 130 on Ctrl-C.
    """
    bot_class = type(bot) if isinstance(bot, Bot) else bot
    args = parse_args(argv, bot_class.__name__.lower()[:MAX_NAME])
    instance = bot if isinstance(bot, Bot) else bot_class()
    log = _Log(args.name, args.quiet)
    try:
        with connect(args.host, args.port, name=args.name, game=bot_class.game, token=args.token) as client:
            play(instance, client, name=args.name, quiet=args.quiet)
    except ClientError as exc:
        log(f"error: {exc}")
        return 1
    except ProtocolError as exc:
        log(f"error: the server sent something this SDK cannot read ({exc})")
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    return 0
