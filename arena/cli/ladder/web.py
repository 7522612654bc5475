"""`ladder web`: a ladder's pages (standings, bots, replays, the live match; owners' accounts)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from cellarena.arena.cli.ladder.mail_options import mail_options, mail_sender, mail_settings
from cellarena.arena.cli.ladder.where import Where, game_argument
from cellarena.arena.ladder.accounts.password_cost import DEFAULT as PASSWORD_COST
from cellarena.arena.ladder.accounts.password_cost import VARIABLE as PASSWORD_COST_VARIABLE
from cellarena.arena.ladder.accounts.password_cost import PasswordCost, PasswordCostError
from cellarena.arena.ladder.web.limits import LOGINS_PER_HOUR, MAX_BOTS_PER_OWNER, SIGNUPS_PER_HOUR
from cellarena.server.cli.params import (
    FiniteFloatRange,
    ranged_option,
    tls_context,
    trusted_proxies,
    writable_folder,
)
from cellarena.server.cli.run import configure_logging, restore_logging_after_command, run_trio
from cellarena.server.cli.web_options import allowed_host_option

if TYPE_CHECKING:
    from cellarena.arena.ladder.web.live_games import LiveSource


class LivePort(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2; we take 8.1
    """``--live-port``: ``PORT``, ``GAME=PORT`` or either with ``auto`` for the port; as (game or
    None, port or "auto")."""

    name = "[GAME=]PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        game, _, port = text.rpartition("=")
        if port == "auto" and (game or "=" not in text):
            return (game or None, port)
        if port.isascii() and port.isdigit() and 0 < int(port) < 65536 and (game or "=" not in text):
            return (game or None, int(port))
        self.fail(
            f"{text[:60]!r} is no bot port: give PORT (1-65535), GAME=PORT or GAME=auto, one per game, "
            "e.g. --live-port rezzo=7777 --live-port cata=auto",
            param,
            ctx,
        )


class PasswordCostType(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """``--password-hash``: argon2id's cost (`PasswordCost`); a bad one is a usage error saying what
    to give."""

    name = "m=KIB,t=PASSES,p=LANES"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, PasswordCost):
            return value
        try:
            return PasswordCost.parse(str(value))
        except PasswordCostError as exc:
            self.fail(str(exc), param, ctx)  # naming the option and its environment variable


@click.command()
@click.argument("games", metavar="GAME...", nargs=-1, required=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the pages listen on.")
@ranged_option("--port", 8080, click.IntRange(0, 65535), "HTTP port (0: any).")
@click.option(
    "--live-port",
    "live_ports",
    metavar="[GAME=]PORT",
    type=LivePort(),
    multiple=True,
    help="Show GAME's match as it is played at /live/GAME/: its `serve --port`, or auto (the port and "
    "TLS its `ladder serve` recorded in the database). Repeat for each game; one game's pages take "
    "a bare PORT (and keep /live/).",
)
@click.option(
    "--live-host",
    default="127.0.0.1",
    show_default=True,
    help="Where the ladder servers listen; with --live-tls, a name their certificates are for.",
)
@click.option(
    "--live-tls",
    is_flag=True,
    help="The bot ports given by number serve TLS (`serve --tls-cert`): watch over TLS, their "
    "certificates checked against the system's CAs for --live-host (an auto port follows its server).",
)
@click.option(
    "--live-tls-ca",
    type=click.Path(dir_okay=False),
    default=None,
    help="Trust only the certificates in this PEM file for the bot port: its CA, or the ladder's own "
    "certificate (implies --live-tls).",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Log every request, not only what owners and the host do."
)
@click.option(
    "--public-debug",
    is_flag=True,
    help="Let anyone download the bots' debug drawings with the replays. By default they are removed "
    "from every public download; each bot's owner gets their own with `ladder replay ID --token-file`.",
)
@click.option(
    "--signup",
    type=click.Choice(["open", "invite", "approval", "closed"]),
    default=None,
    help="Let people sign up and own bots (docs/ladder.md#running-a-community-ladder): open to anyone, "
    "with an invite code (`ladder owner invite`), or pending the host's approval (`ladder owner approve`); "
    "closed: owners log in, nobody new signs up. Without it the pages only show the ladder.",
)
@ranged_option("--max-bots-per-owner", MAX_BOTS_PER_OWNER, click.IntRange(1, 1000), "Active bots each.")
@ranged_option(
    "--uploads-per-day",
    10,
    click.IntRange(1, 10_000),
    "Versions an owner (or an owner-less bot) may upload in 24 hours (docs/ladder.md).",
)
@ranged_option(
    "--build-minutes-per-day",
    60,
    click.IntRange(1, 100_000),
    "Minutes the builds of an owner's (or an owner-less bot's) uploads may take in 24 hours: "
    "once used, uploads wait (docs/ladder.md).",
)
@click.option(
    "--session-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The key that signs login cookies: a file only the ladder's user reads, made (0600) if absent. "
    "[default: DIR/session.key]",
)
@ranged_option(
    "--session-days", 14.0, FiniteFloatRange(0.01, 365), "How long a login lasts (logout ends it sooner)."
)
@ranged_option(
    "--signups-per-hour",
    SIGNUPS_PER_HOUR,
    click.IntRange(1, 10_000),
    "Sign-ups from one address in an hour (behind a proxy, the client's address: --trusted-proxy).",
)
@ranged_option(
    "--logins-per-hour",
    LOGINS_PER_HOUR,
    click.IntRange(1, 10_000),
    "Password checks (logins, the API's) from one address in an hour; each costs an argon2 hash, and "
    "more are refused (429) until the hour has passed.",
)
@click.option(
    "--password-hash",
    "password_cost",
    metavar="m=KIB,t=PASSES,p=LANES",
    default=PASSWORD_COST,
    show_default=True,
    envvar=PASSWORD_COST_VARIABLE,
    show_envvar=True,
    type=PasswordCostType(),
    help="argon2id's cost for owners' new password hashes: memory (KiB), passes, lanes. Lower it only "
    "on a small host (below OWASP's least, m=19456,t=2,p=1, the ladder warns); an owner's hash made at "
    "another cost is re-hashed at their next login.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False),
    default=None,
    help="Serve the pages over HTTPS with this certificate chain (the ladder's own, as for its bot port).",
)
@click.option("--tls-key", type=click.Path(dir_okay=False), default=None, help="The certificate's key.")
@click.option(
    "--trusted-proxy",
    metavar="ADDRESS",
    multiple=True,
    help="A TLS proxy in front of the pages (an address or network; repeat for more): its "
    "X-Forwarded-For, -Proto and -Host are believed, so per-address limits count clients.",
)
@allowed_host_option
@click.option(
    "--public-url",
    metavar="URL",
    default=None,
    callback=lambda _ctx, _param, value: None if value is None else public_url(value),
    help="The pages' address as visitors reach it (https://ladder.example.org, what a proxy in front "
    "exposes): the connect page names it, and bots of a `ladder serve` on 0.0.0.0 without --public-host "
    "connect to its host, which is allowed as an --allowed-host is.",
)
@mail_options
@click.pass_obj
def web(
    where: Where,
    games: tuple[str, ...],
    host: str,
    port: int,
    live_ports: tuple[tuple[str | None, int | str], ...],
    live_host: str,
    live_tls: bool,
    live_tls_ca: str | None,
    verbose: bool,
    public_debug: bool,
    signup: str | None,
    max_bots_per_owner: int,
    uploads_per_day: int,
    build_minutes_per_day: int,
    session_key_file: Path | None,
    session_days: float,
    signups_per_hour: int,
    logins_per_hour: int,
    password_cost: PasswordCost,
    tls_cert: str | None,
    tls_key: str | None,
    trusted_proxy: tuple[str, ...],
    allowed_host: tuple[str, ...],
    public_url: str | None,
    mail: dict[str, Any],
) -> None:
    """Serve GAME's standings, bot pages, matches and replays (and each game's live match) over
    HTTP(S); with --signup, the owners' pages too: sign-up, login, their bots and tokens. Several games
    (one `ladder serve` each on the same database): each game's pages at /GAME/, one account per owner
    across them.

    A process of its own beside `ladder serve`, reading the same database: re-simulating replays for
    viewers then never takes the CPU the matches need, and the pages restart on their own. What the
    owners' pages change reaches `ladder serve` through the database's change log."""
    for game in games:
        game_argument(game)
    games = tuple(dict.fromkeys(games))  # a game named twice is served once
    live_context = _live_tls(live_tls, live_tls_ca)
    _log_actions(verbose)
    try:
        from cellarena.server.web.serving import BindError, bind
    except ImportError as exc:
        raise click.UsageError(
            f"ladder web needs the 'web' extra ({exc}); pip install 'cellarena[web]'"
        ) from None
    live = live_sources(games, live_ports, live_host, live_context)

    tls_context(tls_cert, tls_key)  # both or neither, and usable: a clear error before serving
    tls = (tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    trusted = trusted_proxies(trusted_proxy)
    allowed = _allowed_hosts(host, allowed_host, public_url)
    smtp = mail_settings(mail, signup)
    account_settings = None
    if signup is not None:
        account_settings = _account_settings(
            where,
            signup,
            max_bots_per_owner,
            session_key_file,
            session_days,
            trusted,
            signups_per_hour=signups_per_hour,
            logins_per_hour=logins_per_hour,
            password_cost=password_cost,
        )
        account_settings.allowed_hosts = allowed
        _warn_cookies_in_clear(host, tls is not None or bool(trusted))
    store = where.open(create=False, reconnect_every=1.0)  # pages come back after a database outage
    tasks = mail_sender(account_settings, smtp, mail["verify_email"], store, games)
    try:
        sock = bind(host, port)
    except BindError as exc:
        store.close()
        raise click.UsageError(str(exc)) from None
    from cellarena.arena.ladder.web.app import ladder_app

    app, live_games = ladder_app(
        store,
        games,
        allowed_hosts=allowed,
        live=[source.game for source in live],
        public_debug=public_debug,
        accounts=account_settings,
        trusted=trusted,
        submissions=_submission_settings(where, uploads_per_day, build_minutes_per_day),
        public_url=public_url,
    )
    if live_games is not None:
        tasks = [*live_games.relays(live, store), *tasks]
    try:
        serve_pages(app, sock, games, tls, tasks=tasks)
    finally:
        sock.close()
        store.close()


def _allowed_hosts(host: str, allowed_host: tuple[str, ...], public_url: str | None) -> Any:
    """The Host headers the pages answer: ``--allowed-host``'s and the public URL's (a usage error
    for a bad one; a warning where the pages answer any)."""
    from cellarena.server.web.hosts import AllowedHosts, HostsError

    try:
        named = (urlsplit(public_url).hostname or "",) if public_url else ()
        allowed, warning = AllowedHosts.for_server(host, (*allowed_host, *named))
    except HostsError as exc:
        raise click.UsageError(str(exc)) from None
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    return allowed


def live_sources(
    games: tuple[str, ...],
    given: Sequence[tuple[str | None, int | str]],
    host: str,
    tls: Any,
) -> list[LiveSource]:
    """Each game's `LiveSource` from the ``--live-port`` values: a bare port is the one game's; a
    game these pages do not serve, or named twice, is a usage error saying what to give."""
    from cellarena.arena.ladder.web.live_games import LiveSource

    sources: dict[str, LiveSource] = {}
    for named, port in given:
        game = named
        if game is None:
            if len(games) > 1:
                raise click.BadParameter(
                    f"{port} alone names no game, and these pages serve {', '.join(games)}: give "
                    f"GAME={port}, one --live-port per game",
                    param_hint="--live-port",
                )
            game = games[0]
        if game not in games:
            raise click.BadParameter(
                f"{game[:40]!r} is not a game of these pages ({', '.join(games)}): give one of them, "
                "or serve its pages too (ladder web GAME...)",
                param_hint="--live-port",
            )
        if game in sources:
            raise click.BadParameter(f"{game} is given twice: one port per game", param_hint="--live-port")
        sources[game] = LiveSource(game, port, host, tls if isinstance(port, int) else None)
    return list(sources.values())


def _submission_settings(where: Where, uploads_per_day: int, build_minutes_per_day: int) -> Any:
    """Uploads kept in the ladder's folder, and the owners' daily quotas (docs/ladder.md, "Submitting
    a bot")."""
    from cellarena.arena.ladder.web.submission_pages import SubmissionSettings

    return SubmissionSettings(
        where.folder / "archives",
        uploads_per_day=uploads_per_day,
        build_minutes_per_day=build_minutes_per_day,
    )


def public_url(value: str) -> str:
    """``--public-url``: an http(s) address with a host, no query, fragment or user; without its
    closing slash. A clear error names what is wrong."""
    parts = urlsplit(value.strip())
    try:
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise click.BadParameter(
            f"{value[:100]!r} is not the pages' address: give it as https://NAME (and :PORT or /PATH if the "
            "proxy adds them)",
            param_hint="--public-url",
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise click.BadParameter(
            f"{value[:100]!r}: the pages' address takes no query, fragment or user name",
            param_hint="--public-url",
        )
    return parts.geturl().rstrip("/")


def _log_actions(verbose: bool) -> None:
    """`serve`'s log format; what owners and admins do always (`web.action_log`), the rest with -v."""
    import logging

    configure_logging(verbose)
    actions = logging.getLogger("cellarena.ladder.web")
    restore_logging_after_command(actions)
    actions.setLevel(logging.INFO)


def _live_tls(live_tls: bool, ca_file: str | None) -> Any:
    """The relay's client TLS context (None: plain TCP), a usage error naming an unreadable CA file."""
    if not live_tls and ca_file is None:
        return None
    from cellarena.sdk.client import TLSError, tls_context

    try:
        return tls_context(ca_file)
    except TLSError as exc:
        raise click.BadParameter(str(exc), param_hint="--live-tls-ca") from None


def _warn_cookies_in_clear(host: str, secured: bool) -> None:
    """Owners' pages on plain HTTP off this machine: browsers would never send the login cookie."""
    from cellarena.sdk.client import is_loopback

    if not secured and not is_loopback(host):
        click.echo(
            f"warning: the pages on {host} are plain HTTP and no --trusted-proxy is named: login cookies "
            "are Secure, so browsers send them over HTTPS only; give --tls-cert/--tls-key, or put a TLS "
            "proxy in front and name it with --trusted-proxy",
            err=True,
        )


def serve_pages(
    app: Any,
    sock: Any,
    games: tuple[str, ...],
    tls: tuple[str, str] | None,
    *,
    tasks: Sequence[Callable[[], Awaitable[None]]] = (),
) -> None:
    """Serve ``app`` on the bound ``sock`` until Ctrl-C or SIGTERM (a service manager's or `ladder
    up`'s stop: the same clean end, not the signal's default death); ``tasks`` (the games' live
    relays, the mail sender) run beside the pages."""
    import signal

    from cellarena.server.web.serving import run, url_of

    async def main() -> None:
        import trio

        async def stop_on_term(signals: Any, scope: trio.CancelScope) -> None:
            async for _ in signals:
                click.echo("SIGTERM: stopping", err=True)
                scope.cancel()
                return

        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_on_term, signals, nursery.cancel_scope)
                for task in tasks:
                    nursery.start_soon(task)
                await run(
                    app,
                    sock,
                    lambda: click.echo(
                        f"{', '.join(games)} ladder pages at {url_of(sock, tls=tls is not None)} "
                        "(Ctrl-C stops)"
                    ),
                    tls=tls,
                )

    with contextlib.suppress(KeyboardInterrupt):
        run_trio(main)
    click.echo("stopped", err=True)


def _account_settings(
    where: Where,
    signup: str,
    max_bots: int,
    key_file: Path | None,
    session_days: float,
    trusted: Any,
    *,
    signups_per_hour: int,
    logins_per_hour: int,
    password_cost: PasswordCost,
) -> Any:
    from datetime import timedelta

    try:
        from cellarena.arena.ladder.web.owner_guard import AccountSettings, KeyFileError, load_key
    except ImportError as exc:
        raise click.UsageError(
            f"--signup needs the 'web' extra ({exc}); pip install 'cellarena[web]'"
        ) from None
    if key_file is None:
        key_file = writable_folder(where.folder, "--dir") / "session.key"
    try:
        key = load_key(key_file)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--session-key-file") from None
    from cellarena.arena.ladder.accounts.owners import use_password_cost

    if password_cost.weak:
        click.echo(
            f"warning: --password-hash {password_cost} is cheaper than OWASP's least for argon2id "
            "(m=19456,t=2,p=1): passwords from a stolen database would be quick to guess",
            err=True,
        )
    use_password_cost(password_cost)
    return AccountSettings(
        policy=None if signup == "closed" else signup,  # type: ignore[arg-type]
        key=key,
        max_bots=max_bots,
        session_lifetime=timedelta(days=session_days),
        trusted=trusted,
        signups_per_hour=signups_per_hour,
        logins_per_hour=logins_per_hour,
    )
