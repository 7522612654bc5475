"""The whole app `cellarena ladder web` serves: the public pages (`public_pages`), the owners' pages with
``--signup`` (`owner_pages`), each game's live match with ``--live-port`` (`live_games`), behind the
Host check (`server.web.hosts`). Made here, outside the command, so the tests call the very app it serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.connect_page import Connect, connect_routes
from cellarena.arena.ladder.web.live_games import LiveGames
from cellarena.arena.ladder.web.public_pages import LadderSite
from cellarena.arena.ladder.web.public_routes import public_routes
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.web.app import build_app
from cellarena.server.web.hosts import AllowedHosts

if TYPE_CHECKING:
    from cellarena.arena.ladder.web.owner_guard import AccountSettings
    from cellarena.arena.ladder.web.submission_pages import SubmissionSettings


def ladder_app(
    store: LadderStore,
    games: Sequence[str],
    *,
    allowed_hosts: AllowedHosts | None,
    live: bool | Sequence[str] = False,
    public_debug: bool = False,
    accounts: AccountSettings | None = None,
    trusted: TrustedProxies | None = None,
    submissions: SubmissionSettings | None = None,
    public_url: str | None = None,
) -> tuple[Starlette, LiveGames | None]:
    """The app, and with ``live`` (the games relayed live; True: every game) their `LiveGames`, whose
    relays fill each game's feed from its bot port; with
    ``submissions``, owners upload their bots' archives (`submission_pages`); the connect page
    (`connect_page`) names the site by ``public_url`` (``--public-url``), else by each request."""
    trusted = trusted or TrustedProxies()
    relayed = list(games) if live is True else list(live or ())
    site = LadderSite(
        store,
        games,
        live=bool(relayed),
        public_debug=public_debug,
        policy=None if accounts is None else accounts.policy,
        accounts=accounts is not None,
        trusted_proxies=trusted,  # the owner endpoint's lock-out counts by the client behind them
    )
    connect = Connect(store, games, public_url)
    routes: list[BaseRoute] = []
    uploads = None
    if submissions is not None:
        from cellarena.arena.ladder.web.submission_pages import Submissions

        uploads = Submissions(store, games, submissions)
    if accounts is not None:
        from cellarena.arena.ladder.web.owner_pages import AccountSite
        from cellarena.arena.ladder.web.owner_routes import owner_routes

        account_site = AccountSite(store, games, accounts, live=bool(relayed), submissions=uploads)
        account_site.connect = connect  # the token page's command
        site.who = account_site.guard.owner  # the header names who is logged in
        site.owner_sessions = account_site.guard.api_owner  # owners act on the API with their login too
        routes += owner_routes(account_site)
    if uploads is not None:
        uploads.community.sessions = site.owner_sessions
        routes += uploads.routes()
    routes += public_routes(site)
    routes += connect_routes(connect, site)
    live_games = None
    if relayed:
        live_games = LiveGames(site, relayed)
        routes += live_games.routes()
    return build_app(routes, allowed_hosts=allowed_hosts, trusted_proxies=trusted), live_games
