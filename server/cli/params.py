"""Command-line parameters shared by every command: checks of values that click's own types let through,
the pacing options of `serve`, `match` and `tournament`, and the TLS options of the listeners."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    import ssl

    from cellarena.server.net.trusted_proxies import TrustedProxies
    from cellarena.server.play.match import TickSettings

_Args = TypeVar("_Args")
#: What a click option decorates: a command's function, or the command.
_Decorated = TypeVar("_Decorated", bound="Callable[..., Any] | click.Command")


class FiniteFloatRange(click.FloatRange):
    """A `click.FloatRange` that also refuses ``nan``: nan compares false with both bounds, so a plain
    range lets it through, and a nan tick rate or budget would only fail deep inside a match."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        result = super().convert(value, param, ctx)
        if math.isnan(result):
            self.fail(f"{value!r} is not a number", param, ctx)
        return result


def map_list(value: str, option: str = "--maps") -> list[str]:
    """A comma-separated list of map names or files (``--maps duel,field``): one rule for every command
    that takes one. Blanks around a name are dropped; an empty list or a name given twice is refused."""
    names = [m.strip() for m in value.split(",") if m.strip()]
    if not names:
        raise click.BadParameter(f"give at least one map, e.g. {option} duel,field", param_hint=option)
    twice = sorted({m for m in names if names.count(m) > 1})
    if twice:
        raise click.BadParameter(f"{', '.join(twice)} is listed twice in {value!r}", param_hint=option)
    return names


def writable_folder(path: Path, option: str) -> Path:
    """Make ``path`` (and its parents) if needed and check that files can be written in it.

    Called before anything starts, so that a bad ``--out`` or ``--log-dir`` is an error naming the
    option, not a traceback (or a match that cannot start) later on.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(
            f"{path}: cannot create this folder ({exc.strerror or exc})", param_hint=option
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{path}: this folder is not writable", param_hint=option)
    return path


def tick_options(engine_class: Any, *, fast_by_default: bool = False) -> list[Any]:
    """--tick-rate, --budget-ms and the fast switch, defaulting to the game's own pacing.

    A single match plays at the game's rate unless ``--fast``; a tournament, ``fast_by_default``,
    plays fast unless ``--realtime``.
    """
    rate = engine_class.default_tick_rate
    budget = engine_class.default_budget_ms
    if fast_by_default:
        fast = click.option(
            "--fast/--realtime",
            default=True,
            show_default=True,
            help="Next tick as soon as every seat answered, or at the fixed tick rate.",
        )
    else:
        fast = click.option(
            "--fast", is_flag=True, help="Start the next tick as soon as every seat answered."
        )
    return [
        ranged_option(
            "--tick-rate", rate, FiniteFloatRange(0.1, 1000), "Ticks per second in fixed-rate mode."
        ),
        click.option(
            "--budget-ms",
            default=budget,
            show_default=budget is not None,
            type=FiniteFloatRange(1, 60_000),
            help="Time per move in milliseconds, counted from when the frame was sent; a fraction is "
            "rounded to whole ms (the wire's int is the budget enforced)."
            + (" [default: one tick less 3 ms for the server]" if budget is None else ""),
        ),
        fast,
    ]


def ranged_option(
    flag: str, default: Any, kind: click.ParamType[Any, Any], text: str
) -> Callable[[_Decorated], _Decorated]:
    """``flag`` of type ``kind`` (a range), its default shown in --help: the shape of most options,
    declared in one line each."""
    return click.option(flag, default=default, show_default=True, type=kind, help=text)


class ParsedParam(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2; we take 8.1
    """A value read by `parse`, whose ValueError says what is wrong (click names the option in the
    error); a value already of the type `parsed` (a default, a config file's) passes as it is."""

    parsed: type

    def parse(self, text: str) -> Any:
        raise NotImplementedError

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self.parsed):
            return value
        try:
            return self.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def ranged_param(flag: str, default: Any, kind: click.ParamType[Any, Any], text: str) -> click.Option:
    """`ranged_option` as a parameter, for a command built from a list of them."""
    return click.Option([flag], default=default, show_default=True, type=kind, help=text)


def optional_option(
    flag: str, kind: click.ParamType[Any, Any], text: str
) -> Callable[[_Decorated], _Decorated]:
    """``flag`` of type ``kind``, None unless given (``text`` says what then): `ranged_option`'s
    twin for an option without a default."""
    return click.option(flag, type=kind, default=None, help=text)


def first_budget_option() -> Any:
    """--first-budget-ms: a longer budget for the first tick (bots that load a model or warm a JIT)."""
    return click.option(
        "--first-budget-ms",
        default=None,
        type=FiniteFloatRange(1, 600_000),
        help="The first tick's budget in milliseconds, for bots that load a model or warm up a JIT. "
        "[default: the same as every tick's]",
    )


def time_bank_option() -> Any:
    """--time-bank-ms: each seat's time bank, for the moments a bot needs longer than its budget."""
    return ranged_option(
        "--time-bank-ms",
        0.0,
        FiniteFloatRange(0, 3_600_000),
        "Each seat's time bank in milliseconds: an answer after its budget is still taken while "
        "the bank lasts, and the bank shrinks by the time over budget; the tick waits for it. "
        "0: no bank (docs/protocol.md#the-time-bank).",
    )


@dataclasses.dataclass(frozen=True)
class PacingArgs:
    """The pacing options (`tick_options`, `first_budget_option`, `time_bank_option`) as the args of a
    command that plays matches (`serve`, `match`, `tournament`, `ladder serve`) hold them."""

    tick_rate: float
    budget_ms: float | None
    fast: bool
    first_budget_ms: float | None
    time_bank_ms: float

    def tick_settings(self, **more: Any) -> TickSettings:
        """The pacing these options ask for, with ``more`` of `TickSettings` (a command's own limits).
        Imported here: the match module pulls in trio."""
        from cellarena.server.play.match import TickSettings

        return TickSettings(
            tick_rate=self.tick_rate,
            budget_ms=self.budget_ms,
            fast=self.fast,
            first_budget_ms=self.first_budget_ms,
            time_bank_ms=self.time_bank_ms,
            **more,
        )


def command_args(cls: type[_Args], values: dict[str, Any]) -> tuple[_Args, dict[str, Any]]:
    """A game command's own options as ``cls`` (a dataclass with a field per option), and the rest of
    ``values``: the game's options, which its `GameCli` reads. So a command parses, then hands over
    to a function that a test can call with the same dataclass."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    own = {k: v for k, v in values.items() if k in names}
    return cls(**own), {k: v for k, v in values.items() if k not in names}


def connect_timeout_option() -> Any:
    """``--connect-timeout`` of the commands that launch bots (`match`, `tournament`)."""
    return ranged_option(
        "--connect-timeout",
        15.0,
        FiniteFloatRange(0.5, 600),
        "Seconds a bot has to connect before it forfeits.",
    )


def trusted_proxies(values: tuple[str, ...]) -> TrustedProxies:
    """``--trusted-proxy``'s addresses and networks, checked (`ladder serve`, `ladder web`)."""
    from cellarena.server.net.trusted_proxies import TrustedProxies

    try:
        return TrustedProxies.parse(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trusted-proxy") from None


def decorate(command: Any, options: list[Any]) -> Any:
    """``command`` with every click option of ``options``, in order."""
    for option in reversed(options):
        command = option(command)
    return command


def listen_options() -> list[Any]:
    """``--host`` and ``--port`` of a server's bot port (`serve`, `ladder serve`)."""
    return [
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on."),
        ranged_option("--port", 7777, click.IntRange(0, 65535), "TCP port (0: any)."),
    ]


def tls_options() -> list[Any]:
    """``--tls-cert PATH --tls-key PATH``: serve TLS on the bot port (both or neither)."""
    return [
        click.option(
            "--tls-cert",
            type=click.Path(dir_okay=False),
            default=None,
            help="Serve TLS with this certificate chain (PEM, e.g. Let's Encrypt's fullchain.pem).",
        ),
        click.option(
            "--tls-key",
            type=click.Path(dir_okay=False),
            default=None,
            help="The certificate's private key (PEM, e.g. privkey.pem).",
        ),
    ]


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The TLS context of ``--tls-cert``/``--tls-key``, None for plain TCP; a usage error names the
    option or file at fault."""
    from cellarena.server.net.tls import TlsConfigError, server_context

    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise click.BadParameter(f"{given} needs {missing} too", param_hint=missing)
    try:
        return server_context(cert, key)
    except TlsConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--tls-cert/--tls-key") from None
