"""`cellarena ladder`: host a public ladder. Register bots, serve rated matches, print the standings.

Everything a ladder keeps is in its database: a SQLite file in the ladder's folder (``--dir``,
default ``./ladder``), or a PostgreSQL database (``--db postgresql://...``). Replays go to the
folder's ``replays/``. A bot's token is printed once, when it is made; the database keeps only a
hash of it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import click

from cellarena.arena.cli import ladder_community
from cellarena.arena.cluster import ClusterSpec, cluster_option
from cellarena.server.cli.confine_options import confine, confine_options
from cellarena.server.cli.game_cli import GameGroup, config_error, engine_config
from cellarena.server.cli.params import (
    FiniteFloatRange,
    decorate,
    first_budget_option,
    listen_options,
    map_list,
    tick_options,
    time_bank_option,
    tls_context,
    tls_options,
    writable_folder,
)
from cellarena.server.cli.run import configure_logging, run_trio
from cellarena.server.cli.web_options import allowed_host_option
from cellarena.server.games.base import ConfigError

if TYPE_CHECKING:
    from cellarena.arena.ladder.store.ladder_store import LadderStore

DB_FILE = "ladder.sqlite"


class BadName(click.BadParameter):
    """A NAME the ladder refuses: one line on stderr (no usage text: the name is what is wrong), or
    one JSON object with ``--json``, and exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param_hint="NAME")

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class _Where:
    """The ladder's folder and database, from the group's options."""

    def __init__(self, folder: Path, db: str | None) -> None:
        self.folder = folder
        self.db = db

    @contextlib.contextmanager
    def store(self, *, create: bool = True) -> Iterator[LadderStore]:
        """The store, open for one command: any refusal of the store inside (a name it does not take,
        a duplicate, a database it cannot write) is one line on stderr, or one JSON object with
        ``--json``, and exit status 1; a refused name names NAME (exit status 2)."""
        from cellarena.arena.ladder.store.ladder_store import BadNameError, LadderStoreError

        with self.open(create=create) as store:
            try:
                yield store
            except BadNameError as exc:
                raise BadName(str(exc)) from None
            except LadderStoreError as exc:
                raise click.ClickException(str(exc)) from None

    def open(self, *, create: bool = True, reconnect_every: float | None = None) -> LadderStore:
        from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError

        target: str | Path = self.db if self.db else self.folder / DB_FILE
        if not self.db:
            writable_folder(self.folder, "--dir")
        try:
            return LadderStore(target, create=create, reconnect_every=reconnect_every)
        except LadderStoreError as exc:
            raise click.ClickException(str(exc)) from None


@click.group()
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ladder"),
    show_default=True,
    help="The ladder's folder: its SQLite database and its replays.",
)
@click.option(
    "--db",
    default=None,
    envvar="CELLARENA_LADDER_DB",
    help="A PostgreSQL database instead of the folder's SQLite file: postgresql://USER@HOST/NAME "
    "(CELLARENA_LADDER_DB; keep a password in ~/.pgpass, not here).",
)
@click.pass_context
def ladder(ctx: click.Context, folder: Path, db: str | None) -> None:
    """Host a public ladder: bots with secret tokens, a rated queue, standings that last."""
    if db is not None and not db.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter(f"{db!r} is not a postgresql:// URL", param_hint="--db")
    ctx.obj = _Where(folder, db)


# ------------------------------------------------------------------------------------------ bots
@ladder.group()
def bot() -> None:
    """Register, list, revoke bots and renew their tokens."""


def _game_argument(value: str) -> str:
    from cellarena.server.games import is_game, registry

    if not is_game(value):
        raise click.BadParameter(str(registry.unknown_game(value)), param_hint="--game")
    return value


@bot.command("add")
@click.argument("name")
@click.option("--game", required=True, help="The game the bot plays.")
@click.option(
    "--max-matches", type=click.IntRange(1, 100), default=1, show_default=True, help="Matches at a time."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object, the token in it.")
@click.pass_obj
def bot_add(where: _Where, name: str, game: str, max_matches: int, as_json: bool) -> None:
    """Register NAME and print its token, once: give it to the bot's author over a private channel."""
    _game_argument(game)
    with where.store() as store:
        record, token = store.add_bot(name, game, max_matches=max_matches, actor=ladder_community.actor())
    click.echo(
        f"registered {record.name} for {record.game}; its token (shown once, keep it secret):", err=True
    )
    if as_json:
        about = {"name": record.name, "game": record.game, "max_matches": record.max_matches}
        click.echo(json.dumps({**about, "token": token.secret}))
        return
    click.echo(token.secret)


@bot.command("rotate")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, token.")
@click.pass_obj
def bot_rotate(where: _Where, name: str, as_json: bool) -> None:
    """Give NAME a new token (printed once); the old one stops working at once."""
    with where.store() as store:
        token = _known(lambda n: store.rotate(n, actor=ladder_community.actor()), name)
    click.echo(f"new token for {name} (the old one no longer works):", err=True)
    click.echo(json.dumps({"name": name, "token": token.secret}) if as_json else token.secret)


@bot.command("revoke")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, revoked.")
@click.pass_obj
def bot_revoke(where: _Where, name: str, as_json: bool) -> None:
    """Stop NAME from playing: its token no longer works; its matches stay in the history."""
    with where.store() as store:
        _known(lambda n: store.revoke(n, actor=ladder_community.actor()), name)
    click.echo(json.dumps({"name": name, "revoked": True}) if as_json else f"revoked {name}")


@bot.command("list")
@click.option("--game", default=None, help="Only this game's bots.")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"bots": [...]}.')
@click.pass_obj
def bot_list(where: _Where, game: str | None, as_json: bool) -> None:
    """Every registered bot (never its token)."""
    with where.store() as store:
        bots = store.list_bots(game)
    if as_json:
        click.echo(json.dumps({"bots": [record.to_json() for record in bots]}))
        return
    for record in bots:
        state = (
            "revoked" if record.revoked else "banned" if record.banned else "paused" if record.paused else ""
        )
        state = state or "active"
        house = f"  house: {record.house_command}" if record.house_command else ""
        click.echo(f"{record.name:24} {record.game:12} {state:8} max {record.max_matches}{house}")


def _known(action: Any, name: str) -> Any:
    from cellarena.arena.ladder.store.ladder_store import UnknownBotError

    try:
        return action(name)
    except UnknownBotError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None


# ------------------------------------------------------------------------------------------ owners
@ladder.group()
def owner() -> None:
    """People who sign up on the pages (`ladder web --signup`): invites, approvals, lost passwords."""


@contextlib.contextmanager
def _accounts(where: _Where) -> Iterator[Any]:
    try:
        from cellarena.arena.ladder.accounts.owners import AccountError, Accounts
    except ImportError as exc:
        raise click.UsageError(f"owners need the 'web' extra ({exc}); pip install 'cellarena[web]'") from None
    with where.store() as store:
        try:
            yield Accounts(store)
        except AccountError as exc:
            raise click.ClickException(str(exc)) from None


@owner.command("list")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"owners": [...]}.')
@click.pass_obj
def owner_list(where: _Where, as_json: bool) -> None:
    """Every owner, with their status (active, or pending the host's approval) and bots."""
    with _accounts(where) as accounts:
        rows = [(o, [b.name for b in accounts.bots(o)]) for o in accounts.owners()]
    if as_json:
        click.echo(json.dumps({"owners": [{**o.to_json(), "bots": bots} for o, bots in rows]}))
        return
    for o, bots in rows:
        click.echo(f"{o.name:24} {o.status:8} {', '.join(bots)}")


@owner.command("invite")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: invite.")
@click.pass_obj
def owner_invite(where: _Where, as_json: bool) -> None:
    """Make an invite code (for `--signup invite`), printed once; each signs one owner up."""
    with _accounts(where) as accounts:
        code = accounts.make_invite()
    click.echo("an invite code (shown once; it signs up one owner):", err=True)
    click.echo(json.dumps({"invite": code}) if as_json else code)


@owner.command("approve")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, approved.")
@click.pass_obj
def owner_approve(where: _Where, name: str, as_json: bool) -> None:
    """Let NAME, who signed up under `--signup approval`, log in."""
    with _accounts(where) as accounts:
        accounts.approve(name, actor=ladder_community.actor())
    if as_json:
        click.echo(json.dumps({"name": name, "approved": True}))
        return
    click.echo(f"approved {name}: they can log in now")


@owner.command("admin")
@click.argument("name")
@click.option("--remove", is_flag=True, help="No longer an admin.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, admin.")
@click.pass_obj
def owner_admin(where: _Where, name: str, remove: bool, as_json: bool) -> None:
    """Make owner NAME an admin of the ladder: the pages' /admin then lets them approve owners and
    pause, resume, ban and unban bots, each written to the audit log under their name."""
    with _accounts(where) as accounts:
        accounts.set_admin(name, not remove, actor=ladder_community.actor())
    if as_json:
        click.echo(json.dumps({"name": name, "admin": not remove}))
        return
    click.echo(f"{name} is {'no longer' if remove else 'now'} an admin")


@owner.command("reset")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, code, expires_in.")
@click.pass_obj
def owner_reset(where: _Where, name: str, as_json: bool) -> None:
    """NAME lost their password: print a one-time code (24 h) to send them over a channel you trust;
    they set a new password with it at the pages' /reset, which logs out all their sessions."""
    with _accounts(where) as accounts:
        code = accounts.make_reset_code(name)
    click.echo(f"a one-time code for {name} (shown once, works for 24 hours, at /reset):", err=True)
    click.echo(json.dumps({"name": name, "code": code, "expires_in": "24h"}) if as_json else code)


@owner.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, revoked (bot names).")
@click.pass_obj
def owner_delete(where: _Where, name: str, yes: bool, as_json: bool) -> None:
    """Delete NAME's account: their bots are revoked (their matches stay in the history, ownerless),
    their sessions end, the name is free again."""
    if not yes:
        click.confirm(f"delete {name} and revoke their bots?", abort=True)
    with _accounts(where) as accounts:
        revoked = accounts.delete_owner(name)
    if as_json:
        click.echo(json.dumps({"name": name, "revoked": list(revoked)}))
        return
    click.echo(f"deleted {name}" + (f"; revoked {', '.join(revoked)}" if revoked else ""))


@ladder.command("register")
@click.argument("url")
@click.option("--name", required=True, help="Your owner name on that ladder.")
@click.option(
    "--password-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="A file holding your password (never give a password on the command line).",
)
@click.option(
    "--invite-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file holding the host's invite code.",
)
@click.option("--bot", default=None, help="Also make a bot of this name (once your account is active).")
@click.option(
    "--game",
    default=None,
    help="The bot's game, on a ladder of several games. [default: the ladder's one game]",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the bot's token (made 0600). [default: BOT.token]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: owner, bot, or error.")
def register(
    url: str,
    name: str,
    password_file: str,
    invite_file: str | None,
    bot: str | None,
    game: str | None,
    token_file: str | None,
    as_json: bool,
) -> None:
    """Sign up to the ladder whose pages are at URL (https), and with --bot make your first bot.

    Your password and the bot's token cross the network, so URL must be https (plain http only to this
    machine). The token is written to --token-file, never printed. Exit status 0 when done; 1 when the
    ladder refuses (a taken name, a wrong invite, too many sign-ups) or cannot be reached."""
    import os
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    from cellarena.sdk.client import is_loopback

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{url!r} is not an http(s) address", param_hint="URL")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise click.BadParameter(
            f"{url}: plain http off this machine would send your password in clear; use https",
            param_hint="URL",
        )

    def secret(path: str, option: str) -> str:
        try:
            text = Path(path).read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"{path}: cannot read it ({exc})", param_hint=option) from None
        if not text:
            raise click.BadParameter(f"{path}: the file is empty", param_hint=option)
        return text

    password = secret(password_file, "--password-file")
    invite = secret(invite_file, "--invite-file") if invite_file else None
    target = Path(token_file) if token_file else Path(f"{bot}.token")

    def fail(text: str) -> NoReturn:
        click.echo(json.dumps({"ok": False, "error": text}) if as_json else f"error: {text}", err=not as_json)
        sys.exit(1)

    def post(path: str, body: dict[str, str | None]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{url.rstrip('/')}{path}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "accept": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return dict(json.loads(answer.read()))
        except urllib.error.HTTPError as exc:
            try:
                detail = str(json.loads(exc.read()).get("error", ""))
            except (ValueError, AttributeError):
                detail = ""
            fail(f"the ladder refused (HTTP {exc.code}): {detail[:300] or exc.reason}")
        except (urllib.error.URLError, OSError) as exc:
            fail(f"cannot reach the ladder at {url} ({getattr(exc, 'reason', exc)})")

    signed = post("/api/signup", {"name": name, "password": password, "invite": invite})
    status = signed["owner"]["status"]
    out: dict[str, Any] = {"ok": True, "owner": signed["owner"]}
    if status != "active":
        if not as_json:
            click.echo(f"signed up as {name}; the ladder's host approves new owners: wait for them")
        else:
            click.echo(json.dumps(out))
        return
    if bot is not None:
        asked: dict[str, str | None] = {"owner": name, "password": password, "name": bot}
        if game is not None:
            asked["game"] = game
        made = post("/api/owner/bots", asked)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(made["token"] + "\n")
        except OSError as exc:
            fail(f"{target}: cannot write the token ({exc.strerror or exc}); rotate it on the pages")
        out["bot"] = {"name": made["name"], "game": made["game"], "token_file": str(target)}
    if as_json:
        click.echo(json.dumps(out))
        return
    click.echo(f"signed up as {name}")
    if bot is not None:
        click.echo(
            f"made bot {bot}; its token is in {target} (0600): connect with --ladder --token-file {target}"
        )


# ------------------------------------------------------------------------------------------ house bots
@ladder.group()
def house() -> None:
    """Bots the ladder starts itself when a bot would otherwise wait alone."""


@house.command("add")
@click.argument("name")
@click.argument("command")
@click.option("--game", required=True, help="The game the bot plays.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, game, command.")
@click.pass_obj
def house_add(where: _Where, name: str, command: str, game: str, as_json: bool) -> None:
    """Register NAME, started with COMMAND (run from the folder `ladder serve` runs in), e.g.
    cellarena ladder house add builder "python example_bots/rezzo/builder.py" --game rezzo"""
    from cellarena.server.launcher import BotSpec

    _game_argument(game)
    try:
        BotSpec.parse(f"{name}={command}")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="COMMAND") from None
    with where.store() as store:
        record, _ = store.add_bot(name, game, house_command=command, actor=ladder_community.actor())
    if as_json:
        click.echo(json.dumps({"name": record.name, "game": record.game, "command": command}))
        return
    click.echo(f"registered house bot {record.name} for {record.game}: {command}")


# ------------------------------------------------------------------------------------------ standings
@ladder.command()
@click.argument("game")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def standings(where: _Where, game: str, as_json: bool) -> None:
    """GAME's table: rating (mu - 3 sigma), matches, wins, draws, losses."""
    _game_argument(game)
    with where.store() as store:
        table = store.standings(game)
    if as_json:
        click.echo(json.dumps({"game": game, "standings": [s.to_json() for s in table]}))
        return
    from rich.console import Console
    from rich.table import Table

    from cellarena.arena.ladder.records import STANDINGS_COLUMNS

    out = Table(title=f"{game} ladder")
    for col in STANDINGS_COLUMNS:
        out.add_column(col, justify="left" if col == "bot" else "right")
    for s in table:
        out.add_row(*s.cells())
    Console(highlight=False).print(out)


# ------------------------------------------------------------------------------------------ web
@ladder.command()
@click.argument("games", metavar="GAME...", nargs=-1, required=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the pages listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="HTTP port (0: any)."
)
@click.option(
    "--live-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="The ladder's bot port (its `serve --port`): /live/ then shows its newest match as it is played.",
)
@click.option("--live-host", default="127.0.0.1", show_default=True, help="Where that ladder listens.")
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
@click.option(
    "--max-bots-per-owner",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Active bots each.",
)
@click.option(
    "--session-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The key that signs login cookies: a file only the ladder's user reads, made (0600) if absent. "
    "[default: DIR/session.key]",
)
@click.option(
    "--session-days",
    type=FiniteFloatRange(0.01, 365),
    default=14.0,
    show_default=True,
    help="How long a login lasts (logout ends it sooner).",
)
@click.option(
    "--signups-per-hour",
    type=click.IntRange(1, 10_000),
    default=5,
    show_default=True,
    help="Sign-ups from one address in an hour (behind a proxy, the client's address: --trusted-proxy).",
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
@click.pass_obj
def web(
    where: _Where,
    games: tuple[str, ...],
    host: str,
    port: int,
    live_port: int | None,
    live_host: str,
    public_debug: bool,
    signup: str | None,
    max_bots_per_owner: int,
    session_key_file: Path | None,
    session_days: float,
    signups_per_hour: int,
    tls_cert: str | None,
    tls_key: str | None,
    trusted_proxy: tuple[str, ...],
    allowed_host: tuple[str, ...],
) -> None:
    """Serve GAME's standings, bot pages, matches and replays (and the live match) over HTTP(S); with
    --signup, the owners' pages too: sign-up, login, their bots and tokens. Several games (one `ladder
    serve` each on the same database): each game's pages at /GAME/, one account per owner across them.

    A process of its own beside `ladder serve`, reading the same database: re-simulating replays for
    viewers then never takes the CPU the matches need, and the pages restart on their own. What the
    owners' pages change reaches `ladder serve` through the database's change log."""
    for game in games:
        _game_argument(game)
    games = tuple(dict.fromkeys(games))  # a game named twice is served once
    if live_port is not None and len(games) > 1:
        raise click.BadParameter(
            "--live-port watches one ladder server, so one game's: serve the pages of one game with it, "
            "or leave it out",
            param_hint="--live-port",
        )
    try:
        from cellarena.arena.ladder.web.app import ladder_app
        from cellarena.server.web.hosts import AllowedHosts, HostsError
        from cellarena.server.web.serving import BindError, bind, run, url_of
    except ImportError as exc:
        raise click.UsageError(
            f"ladder web needs the 'web' extra ({exc}); pip install 'cellarena[web]'"
        ) from None
    from cellarena.server.trusted_proxies import TrustedProxies

    tls_context(tls_cert, tls_key)  # both or neither, and usable: a clear error before serving
    tls = (tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    try:
        trusted = TrustedProxies.parse(trusted_proxy)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trusted-proxy") from None
    try:
        allowed, warning = AllowedHosts.for_server(host, allowed_host)
    except HostsError as exc:
        raise click.UsageError(str(exc)) from None
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    account_settings = None
    if signup is not None:
        account_settings = _account_settings(
            where, signup, max_bots_per_owner, session_key_file, session_days, signups_per_hour, trusted
        )
        account_settings.allowed_hosts = allowed
        from cellarena.sdk.client import is_loopback

        if tls is None and not trusted and not is_loopback(host):
            click.echo(
                f"warning: the pages on {host} are plain HTTP and no --trusted-proxy is named: login cookies "
                "are Secure, so browsers send them over HTTPS only; give --tls-cert/--tls-key, or put a TLS "
                "proxy in front and name it with --trusted-proxy",
                err=True,
            )
    store = where.open(create=False, reconnect_every=1.0)  # pages come back after a database outage
    try:
        sock = bind(host, port)
    except BindError as exc:
        store.close()
        raise click.UsageError(str(exc)) from None
    app, feed = ladder_app(
        store,
        games,
        allowed_hosts=allowed,
        live=live_port is not None,
        public_debug=public_debug,
        accounts=account_settings,
        trusted=trusted,
    )

    async def main() -> None:
        import trio

        async with trio.open_nursery() as nursery:
            if feed is not None and live_port is not None:
                from cellarena.server.web.live import relay

                nursery.start_soon(relay, live_host, live_port, feed)
            await run(
                app,
                sock,
                lambda: click.echo(
                    f"{', '.join(games)} ladder pages at {url_of(sock, tls=tls is not None)} (Ctrl-C stops)"
                ),
                tls=tls,
            )

    try:
        run_trio(main)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        sock.close()
        store.close()


def _account_settings(
    where: _Where,
    signup: str,
    max_bots: int,
    key_file: Path | None,
    session_days: float,
    signups_per_hour: int,
    trusted: Any,
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
    return AccountSettings(
        policy=None if signup == "closed" else signup,  # type: ignore[arg-type]
        key=key,
        max_bots=max_bots,
        session_lifetime=timedelta(days=session_days),
        trusted=trusted,
        signups_per_hour=signups_per_hour,
    )


# ----------------------------------------------------------------------------------------- replay
@ladder.command("replay")
@click.argument("match_id", metavar="ID", type=click.IntRange(1))
@click.option(
    "--token-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The file holding your bot's ladder token (never give a token on the command line).",
)
@click.option(
    "--url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The ladder's pages (`ladder web`).",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Where to write it. [default: ladder-ID.replay]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: ok and out, or error.")
def replay_download(match_id: int, token_file: str, url: str, out: str | None, as_json: bool) -> None:
    """Download match ID's replay with your bot's debug drawings (the public copy has none).

    The token goes in an Authorization header, never in the URL; over anything but loopback use an
    https URL, or the token crosses the network in clear. Exit status 0 once the file is written,
    1 when the ladder refuses (a wrong token, not your bot's match) or cannot be reached.
    """
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    from cellarena.sdk.bot import read_token
    from cellarena.sdk.client import is_loopback

    try:
        token = read_token(None, token_file)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--token-file") from None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{url!r} is not an http(s) address", param_hint="--url")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise click.BadParameter(
            f"{url}: plain http off this machine would send the token in clear; use https",
            param_hint="--url",
        )
    target = Path(out) if out else Path(f"ladder-{match_id}.replay")
    request = urllib.request.Request(
        f"{url.rstrip('/')}/api/replays/{match_id}/owner", headers={"Authorization": f"Bearer {token}"}
    )

    def fail(text: str) -> NoReturn:
        click.echo(json.dumps({"ok": False, "error": text}) if as_json else f"error: {text}", err=not as_json)
        sys.exit(1)

    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = answer.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace").strip()[:300]
        fail(f"the ladder refused (HTTP {exc.code}): {detail}")
    except (urllib.error.URLError, OSError) as exc:
        fail(f"cannot reach the ladder at {url} ({getattr(exc, 'reason', exc)})")
    try:
        target.write_bytes(data)
    except OSError as exc:
        fail(f"{target}: cannot write it ({exc.strerror or exc})")
    if as_json:
        click.echo(json.dumps({"ok": True, "out": str(target), "match": match_id}))
    else:
        click.echo(f"{target}: match {match_id}'s replay, with your bot's debug drawings")


# ------------------------------------------------------------------------------------------ serve
@contextlib.contextmanager
def _open_hand_off(
    spec: ClusterSpec, config: Any, public_host: str | None, cert: str | None, key: str | None, insecure: bool
) -> Iterator[Any]:
    """The ladder's hand-off to the cluster ``spec``, its workers checked; a ClusterError is the
    command's error, said before anyone connects."""
    from cellarena.arena.cluster import ClusterError
    from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffConfig, open_hand_off

    hand_off_config = HandOffConfig(
        public_host=public_host,
        tls_cert=str(Path(cert).resolve()) if cert else None,
        tls_key=str(Path(key).resolve()) if key else None,
        insecure=insecure,
    )
    configs = [config.config_for(m) for m in config.maps]
    try:
        with open_hand_off(spec, config.game, configs, hand_off_config) as hand_off:
            yield hand_off
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None


class WorkersParam(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2; we take 8.1
    """``--workers``: a number of worker processes, or ``auto`` (`local_workers.parse_workers`)."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from cellarena.arena.ladder.hosting.worker_pool import parse_workers

        try:
            return parse_workers(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _local_workers(
    workers: int,
    workers_host: str | None,
    config: Any,
    cluster: ClusterSpec | None,
    cert: str | None,
    key: str | None,
    insecure: bool,
    verbose: bool,
) -> Any:
    """The ladder's worker processes for ``--workers`` (None for 1), or a clear error naming the option."""
    from cellarena.sdk.client import is_loopback

    if workers == 1:
        if workers_host is not None:
            raise click.BadParameter(
                "it names where bots reach the worker processes: give --workers 2 or more too",
                param_hint="--workers-host",
            )
        return None
    if cluster is not None:
        raise click.BadParameter(
            "the matches go either to a cluster or to worker processes here: give --cluster or --workers, "
            "not both",
            param_hint="--workers",
        )
    from cellarena.arena.ladder.hosting.worker_pool import LocalWorkers
    from cellarena.arena.ladder.hosting.worker_process import WorkerSetup

    public = workers_host or config.host
    if public in ("0.0.0.0", "::", ""):
        raise click.BadParameter(
            f"bots cannot be sent to {public or 'an empty address'}: give --workers-host, the name or "
            "address bots reach this machine at (the one on the TLS certificate)",
            param_hint="--workers-host",
        )
    if cert is None and not insecure and not (is_loopback(public) and is_loopback(config.host)):
        raise click.BadParameter(
            f"the workers would take seat tokens in clear at {public}: give --tls-cert/--tls-key, or "
            "--insecure on a network you trust",
            param_hint="--workers",
        )
    setup = WorkerSetup(
        config.game,
        config.config_for(config.maps[0]),
        config.settings,
        bind_host=config.host,
        tls_cert=str(Path(cert).resolve()) if cert else None,
        tls_key=str(Path(key).resolve()) if key else None,
        max_connections_per_address=config.rules.max_connections_per_address,
        verbose=verbose,
    )
    return LocalWorkers(workers, setup, public_host=public, notify=lambda text: click.echo(text, err=True))


def _health_socket(host: str, port: int | None) -> Any:
    """The bound socket of ``--health-port``, or None without it; a clear error if it cannot be."""
    if port is None:
        return None
    try:
        from cellarena.server.web.serving import BindError, bind
    except ImportError as exc:
        raise click.UsageError(
            f"--health-port needs the 'web' extra ({exc}); pip install 'cellarena[web]'"
        ) from None
    try:
        return bind(host, port)
    except BindError as exc:
        raise click.BadParameter(str(exc), param_hint="--health-port") from None


def _community_options() -> list[Any]:
    """A community ladder's policy (docs/ladder.md), written to the database as the server starts."""
    return [
        click.option(
            "--pause-after",
            default=5,
            show_default=True,
            type=click.IntRange(0, 1000),
            help="Pause a bot after this many failed matches in a row (crashes, disconnects not back "
            "within the grace, long late or invalid runs; not losses); 0: never.",
        ),
        click.option(
            "--new-version-rating",
            type=click.Choice(["keep", "reset"]),
            default="keep",
            show_default=True,
            help="When a bot plays under a new version (its hello's version): keep its rating, or "
            "reset it to the initial rating.",
        ),
        click.option(
            "--challenges-per-day",
            default=10,
            show_default=True,
            type=click.IntRange(0, 100_000),
            help="Challenges a bot may make in any 24 hours (`ladder challenge`, the API).",
        ),
        click.option(
            "--challenges-rated/--challenges-unrated",
            default=False,
            show_default=True,
            help="Whether a challenge's match changes ratings.",
        ),
        click.option(
            "--starve-after",
            default=30.0,
            show_default=True,
            type=FiniteFloatRange(0.1, 3600),
            help="Seconds a bot waits before it meets the nearest free bot whatever their ratings "
            "(a quiet ladder of few bots far apart wants it shorter).",
        ),
    ]


def _serve_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def serve_game(
        maps: str | None,
        tick_rate: float,
        budget_ms: float | None,
        fast: bool,
        first_budget_ms: float | None,
        time_bank_ms: float,
        host: str,
        port: int,
        grace: float,
        house_after: float,
        insecure: bool,
        seed: int,
        verbose: bool,
        tls_cert: str | None,
        tls_key: str | None,
        cluster: ClusterSpec | None,
        cluster_host: str | None,
        trusted_proxy: tuple[str, ...],
        health_port: int | None,
        health_host: str,
        pause_after: int,
        new_version_rating: str,
        challenges_per_day: int,
        challenges_rated: bool,
        workers: int,
        workers_host: str | None,
        starve_after: float,
        **game_values: Any,
    ) -> None:
        import gc

        from cellarena.arena.ladder.ops.wiring import LadderConfig, build, run_ladder
        from cellarena.arena.ladder.policy import CommunityPolicy
        from cellarena.arena.ladder.rules import LadderRules
        from cellarena.arena.ladder.services.spool import FOLDER as SPOOL_FOLDER
        from cellarena.arena.ladder.store.ladder_store import LadderStoreError
        from cellarena.sdk.client import is_loopback
        from cellarena.server.match import TickSettings
        from cellarena.server.trusted_proxies import TrustedProxies

        try:
            trusted = TrustedProxies.parse(trusted_proxy)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--trusted-proxy") from None

        where = click.get_current_context().find_object(_Where)
        assert where is not None  # the ladder group made it
        configure_logging(verbose)
        house_limits, isolate = confine(game_values)  # for house bots (docs/security.md)
        pool: tuple[str | None, ...] = (None,)
        if maps:
            if cli.map_key is None:
                raise click.BadParameter(f"{game} has no maps", param_hint="--maps")
            pool = tuple(map_list(maps))
        elif cli.map_key is not None and cli.default_maps:
            pool = tuple(cli.default_maps)
        replay_dir = writable_folder(where.folder / "replays", "--dir")
        config = LadderConfig(
            game,
            engine_config(game, game_values),
            map_key=cli.map_key,
            maps=pool,
            settings=TickSettings(
                tick_rate=tick_rate,
                budget_ms=budget_ms,
                fast=fast,
                first_budget_ms=first_budget_ms,
                reconnect_grace=grace,
                time_bank_ms=time_bank_ms,
            ),
            host=host,
            port=port,
            tls=tls_context(tls_cert, tls_key),
            rules=LadderRules(insecure=insecure, starve_after=starve_after),
            trusted_proxies=trusted,
            replay_dir=replay_dir,
            # A folder per game: several games' servers may share the ladder's folder and database.
            spool_dir=writable_folder(where.folder / SPOOL_FOLDER / quote(game, safe=""), "--dir"),
            legacy_spool_dir=where.folder / SPOOL_FOLDER,
            log_dir=writable_folder(where.folder / "logs", "--dir"),
            house_after=house_after,
            house_limits=house_limits,
            isolate=isolate,
            seed=seed,
            policy=CommunityPolicy(
                pause_after=pause_after,
                new_version_rating="reset" if new_version_rating == "reset" else "keep",
                challenges_per_day=challenges_per_day,
                challenges_rated=challenges_rated,
            ),
        )
        if not is_loopback(host) and not insecure and config.tls is None:
            click.echo(
                f"{host} is not a loopback address and this port is plain TCP: bots from other machines "
                "are refused (tls_required) so that no token crosses the network in clear; give "
                "--tls-cert/--tls-key (or --insecure to allow tokens in clear)",
                err=True,
            )
        local_workers = _local_workers(
            workers, workers_host, config, cluster, tls_cert, tls_key, insecure, verbose
        )
        if cluster is None and cluster_host is not None:
            raise click.BadParameter(
                "it names where bots reach the cluster's workers: give --cluster too",
                param_hint="--cluster-host",
            )
        health_sock = _health_socket(health_host, health_port)
        store = where.open()
        try:
            try:
                build(store, config)  # the config and every map of the pool, checked before serving
            except ConfigError as exc:
                raise config_error(game, exc) from None
            with contextlib.ExitStack() as stack:
                if health_sock is not None:
                    stack.callback(health_sock.close)
                hand_off: Any = local_workers
                if cluster is not None:
                    hand_off = stack.enter_context(
                        _open_hand_off(cluster, config, cluster_host, tls_cert, tls_key, insecure)
                    )
                gc.collect()
                gc.freeze()

                def listening(bound: int) -> None:
                    on = f"; matches played on the cluster {cluster}" if cluster else ""
                    if local_workers is not None:
                        on = f"; matches played in {workers} worker processes"

                    if health_sock is not None:
                        from cellarena.server.web.serving import url_of

                        on += f"; health at {url_of(health_sock, '/health')}"
                    click.echo(
                        f"ladder: {game} on {host}:{bound}{' (TLS)' if config.tls else ''}, "
                        f"maps {', '.join(m or 'default' for m in pool)}{on}; "
                        f"database {store.where}; Ctrl-C stops",
                        err=True,
                    )

                async def main() -> None:
                    await run_ladder(
                        store,
                        config,
                        on_listening=listening,
                        notify=lambda text: click.echo(text, err=True),
                        hand_off=hand_off,
                        health_sock=health_sock,
                    )

                from cellarena.arena.ladder.hosting.worker_pool import WorkerStartError

                try:
                    run_trio(main)
                except (OSError, LadderStoreError, WorkerStartError) as exc:
                    raise click.ClickException(str(exc)) from None
                except KeyboardInterrupt:
                    click.echo("stopped", err=True)
        finally:
            store.close()

    options = [
        *cli.options,
        click.option(
            "--maps",
            default=None,
            help="The map pool, comma-separated. [default: the game's tournament maps]",
        ),
        *tick_options(game_plugin.engine_class()),
        first_budget_option(),
        time_bank_option(),
        *listen_options(),
        click.option(
            "--grace",
            default=5.0,
            show_default=True,
            type=FiniteFloatRange(0, 300),
            help="Seconds a bot whose connection dropped keeps its seat, to come back with its token.",
        ),
        click.option(
            "--house-after",
            default=5.0,
            show_default=True,
            type=FiniteFloatRange(0, 3600),
            help="Seconds a bot waits alone before a house bot is started to play it.",
        ),
        *confine_options(),  # for house bots
        click.option(
            "--insecure",
            is_flag=True,
            help="Accept tokens over plain TCP from other machines (they cross the network in clear).",
        ),
        *tls_options(),
        click.option(
            "--trusted-proxy",
            metavar="ADDRESS",
            multiple=True,
            help="A proxy in front of the ladder (an address or network, e.g. 127.0.0.1 or 10.0.0.0/24; "
            "repeat for more) whose connections start with a PROXY protocol header (v1 or v2) naming the "
            "client, so that per-address limits count clients, not the proxy. Its connections without "
            "one are refused.",
        ),
        cluster_option(
            "Play matches on a Dask cluster: local:N (N worker processes here) or tcp://HOST:PORT (a "
            "scheduler). Bots that follow redirects are sent to the worker hosting their match; the "
            "workers serve TLS with --tls-cert/--tls-key, which must be at the same paths there."
        ),
        click.option(
            "--cluster-host",
            metavar="HOST",
            default=None,
            help="The address bots reach the workers at. [default: each worker's address on the cluster]",
        ),
        click.option(
            "--workers",
            type=WorkersParam(),
            default="1",
            show_default=True,
            metavar="N|auto",
            help="Worker processes that play the matches (auto: one per core). 1: every match in this "
            "process. With more, this process keeps the queue and the database, and bots that follow "
            "redirects play in the workers, each a lobby on a free port of --host.",
        ),
        click.option(
            "--workers-host",
            metavar="HOST",
            default=None,
            help="The address bots reach the workers at (the name on the TLS certificate). "
            "[default: --host; needed when --host is 0.0.0.0 or ::]",
        ),
        click.option(
            "--seed", default=0, show_default=True, type=int, help="Seed of the matchmaker's draws."
        ),
        click.option(
            "--health-port",
            type=click.IntRange(0, 65535),
            default=None,
            help="Serve GET /health (JSON: the database's state, results waiting on disk, queue, matches; "
            "503 while the database is down) on this port (0: any free one). Needs the 'web' extra.",
        ),
        click.option(
            "--health-host", default="127.0.0.1", show_default=True, help="Address /health listens on."
        ),
        *_community_options(),
        click.option("-v", "--verbose", is_flag=True, help="Log connections, the queue and matches."),
    ]
    doc = (
        f"Serve a {game} ladder ({game_plugin.summary}): registered bots connect with their tokens, "
        "queue, and play rated matches against bots of close rating. Ctrl-C or SIGTERM stops; "
        "matches under way are voided (no rating change)."
    )
    return click.command(game, help=doc)(decorate(serve_game, options))


ladder.add_command(GameGroup("serve", factory=_serve_command, help="Serve a ladder of one game."))

# The community ladder's commands (pauses, bans, challenges, the audit log) live in their own module.
for _command in ladder_community.COMMANDS:
    ladder.add_command(_command)
for _command in ladder_community.BOT_COMMANDS:
    bot.add_command(_command)
