"""The options of `ladder serve GAME`: the game's, pacing, the bot port, house bots, where matches are
played, the health port, and a community ladder's policy."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import click

from cellarena.arena.cli.ladder.match_hosts import WorkersParam
from cellarena.arena.cluster import cluster_option
from cellarena.arena.ladder.matchmaking.pools import POOL_MODES
from cellarena.arena.ladder.policy import NEW_VERSION_RATINGS
from cellarena.server.cli.confine_options import confine_options
from cellarena.server.cli.params import (
    FiniteFloatRange,
    first_budget_option,
    listen_options,
    optional_option,
    ranged_option,
    tick_options,
    time_bank_option,
    tls_options,
)


def serve_options(game_plugin: Any, cli: Any) -> list[Any]:
    """Every option of `ladder serve` for the game of ``game_plugin`` (its `GameCli`: ``cli``)."""

    return [
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
        *public_address_options(),
        ranged_option(
            "--grace",
            5.0,
            FiniteFloatRange(0, 300),
            "Seconds a bot whose connection dropped keeps its seat, to come back with its token.",
        ),
        ranged_option(
            "--house-after",
            5.0,
            FiniteFloatRange(0, 3600),
            "Seconds a bot waits alone before a house bot is started to play it.",
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
        ranged_option("--seed", 0, click.INT, "Seed of the matchmaker's draws."),
        optional_option(
            "--health-port",
            click.IntRange(0, 65535),
            "Serve GET /health (JSON: the database's state, results waiting on disk, queue, matches; "
            "503 while the database is down) on this port (0: any free one). Needs the 'web' extra.",
        ),
        click.option(
            "--health-host", default="127.0.0.1", show_default=True, help="Address /health listens on."
        ),
        *community_options(),
        click.option("-v", "--verbose", is_flag=True, help="Log connections, the queue and matches."),
    ]


def public_address_options() -> list[Any]:
    """Where bots from outside reach the bot port, as the pages' connect page shows it."""
    return [
        click.option(
            "--public-host",
            metavar="NAME",
            default=None,
            callback=_public_host,
            help="The name or address bots from outside connect to (what a proxy or NAT exposes; the name "
            "on the TLS certificate), shown on the pages' connect page. [default: --host, or the pages' "
            "own name when --host is 0.0.0.0 or ::]",
        ),
        optional_option(
            "--public-port",
            click.IntRange(1, 65535),
            "The port bots from outside connect to, when a proxy or NAT forwards another to --port. "
            "[default: --port]",
        ),
    ]


#: One label of a host name (RFC 1123).
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _public_host(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A host name or IP address as bots' ``--host`` takes it; a clear error for anything else."""
    if value is None:
        return None
    name = value.strip().strip("[]").rstrip(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    named = len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split("."))
    if (address is None and not named) or (address is not None and address.is_unspecified):
        raise click.BadParameter(
            f"{value[:80]!r} is no address a bot can connect to: give the host name or IP address bots "
            "from outside use (e.g. ladder.example.org), without a scheme or port (--public-port)"
        )
    return name


def community_options() -> list[Any]:
    """A community ladder's policy (docs/ladder.md), written to the database as the server starts."""
    return [
        ranged_option(
            "--pause-after",
            5,
            click.IntRange(0, 1000),
            "Pause a bot after this many failed matches in a row (crashes, disconnects not back "
            "within the grace, long late or invalid runs; not losses); 0: never.",
        ),
        ranged_option(
            "--new-version-rating",
            "keep",
            click.Choice(NEW_VERSION_RATINGS),
            "When a bot plays under a new version (its hello's version): keep its rating, reset "
            "it to the initial rating, or inherit its mu with its uncertainty widened to the start's.",
        ),
        ranged_option(
            "--challenges-per-day",
            10,
            click.IntRange(0, 100_000),
            "Challenges a bot may make in any 24 hours (`ladder challenge`, the API).",
        ),
        click.option(
            "--challenges-rated/--challenges-unrated",
            default=False,
            show_default=True,
            help="Whether a challenge's match changes ratings.",
        ),
        ranged_option(
            "--starve-after",
            30.0,
            FiniteFloatRange(0.1, 3600),
            "Seconds a bot waits before it meets the nearest free bot whatever their ratings "
            "(a quiet ladder of few bots far apart wants it shorter).",
        ),
        click.option(
            "--pools",
            type=click.Choice(POOL_MODES),
            default="mixed",
            show_default=True,
            help="mixed: connected and submitted bots meet each other; separate: each meets only its own "
            "kind (their compute is not equal). House bots meet both; challenges may cross pools.",
        ),
    ]
