"""The owners' pages and HTTP API: sign-up, login, logout, an owner's bots and their matches' private side.

Mounted by `cellarena ladder web --signup POLICY` beside the public pages (`public_pages`).
What a page changes it writes to the database (`Accounts`), and a bot created, rotated or revoked
reaches a running ``ladder serve`` through the change log, as the host's commands do.

What every request is checked for (its session cookie, CSRF token, Origin, and the limits per
address) is `owner_guard`'s; the handlers are grouped by page: `owner_sign_in` (sign-up, login,
logout, a new password), `owner_bot_pages` (the owner's bots, their forms, replays, the account's
deletion) and `admin_pages`, and `owner_routes` maps the paths to them.

**A bot's community side.** ``/account`` and ``/account/bots/NAME`` show each bot paused or banned
with the reason and the failed matches behind it (their causes), and forms to resume it (a ban only
the host lifts), to challenge a bot by name within the quota, and to refuse challenges: POSTs with
the CSRF token and Origin check above, applied by `CommunityApi`'s rules as its API applies them
(with ``owner NAME (owner)`` in the audit log). The same API accepts the owner's session instead of
the bot's token (`api_owner`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from cellarena.arena.ladder.accounts.mail_links import MailLinks
from cellarena.arena.ladder.accounts.owner_mail import OwnerMail, check_address
from cellarena.arena.ladder.accounts.owners import AccountError, Accounts, Owner
from cellarena.arena.ladder.connect_commands import token_file
from cellarena.arena.ladder.identity.tokens import Token
from cellarena.arena.ladder.records import BotMatch, BotRecord
from cellarena.arena.ladder.scoring.failures import failure_of
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.community_pages import CommunityApi
from cellarena.arena.ladder.web.connect_page import Connect
from cellarena.arena.ladder.web.owner_guard import FORM_COOKIE, SESSION_COOKIE, AccountSettings, OwnerGuard
from cellarena.arena.ladder.web.public_pages import bot_href
from cellarena.arena.ladder.web.submission_pages import Submissions
from cellarena.server.replay import strip_debug_bytes
from cellarena.server.web.templating import render

log = logging.getLogger("cellarena.ladder")

#: Matches of each bot on the owner's page.
RECENT = 20


class AccountSite:
    """The owners' side of a ladder's game, or of its several games (one account across them): what
    its pages show and do; `owner_routes` serves it."""

    def __init__(
        self,
        store: LadderStore,
        game: str | Sequence[str],
        settings: AccountSettings,
        *,
        live: bool = False,
        submissions: Submissions | None = None,
    ) -> None:
        self.store = store
        #: Uploads and versions of submitted bots (`submission_pages`), or None: the pages show none.
        self.submissions = submissions
        #: Whether the header links to /live/ (`ladder web --live-port`), as the public pages' does.
        self.live = live
        self.accounts = Accounts(
            store, verified_for_bots=settings.verify_email and settings.mailer is not None
        )
        #: Owners' addresses and mailed links (`--smtp-host`), or None: no mail (`mail_pages`).
        self.mail: OwnerMail | None = None
        if settings.mailer is not None:
            self.mail = OwnerMail(self.accounts, MailLinks(settings.key))
        #: Mails a new owner's verification link (`mail_pages.MailPages` sets it).
        self.verification: Callable[[Request, Owner], Awaitable[None]] | None = None
        self.games = (game,) if isinstance(game, str) else tuple(game)
        self.game = self.games[0]
        #: The community API's rules (resume, challenge, refusal), applied to the pages' forms too.
        self.community = CommunityApi(store, self.games)
        self.settings = settings
        #: The checks of every request: session, CSRF, Origin, limits per address.
        self.guard = OwnerGuard(settings, self.accounts)
        #: Where bots connect (`connect_page`), for the token page's command; None: it shows none.
        self.connect: Connect | None = None

    def game_of(self, fields: dict[str, str]) -> str:
        """The game a new bot plays: the form's ``game``, which a site of several games needs."""
        game = fields.get("game", "")
        if game in self.games or (not game and len(self.games) == 1):
            return game or self.game
        raise AccountError(
            f"choose the bot's game: game must be one of {', '.join(self.games)}"
            + (f", not {game[:40]!r}" if game else "")
        )

    def page(self, template: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        html = render(
            template,
            "cellarena.arena.ladder.web",
            game=" and ".join(self.games),
            games=self.games,
            policy=self.settings.policy,
            accounts=True,
            live=self.live,
            bot_href=bot_href,
            mail=self.mail is not None,
            verify_email=self.mail is not None and self.settings.verify_email,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def anonymous_form(
        self, template: str, request: Request, status: int = 200, **context: Any
    ) -> HTMLResponse:
        value, token = self.guard.form_token(request)
        response = self.page(template, request, status, csrf=token, **context)
        self.guard.set_cookie(response, FORM_COOKIE, value, None)
        return response

    async def do_sign_up(self, request: Request, fields: dict[str, str]) -> Owner:
        if self.settings.policy is None:
            raise HTTPException(403, "this ladder takes no sign-ups; its host registers the bots")
        self.guard.limited(self.guard.signups, request, "sign-ups")
        policy = self.settings.policy
        email = fields.get("email", "").strip()
        if self.mail is not None and (email or self.settings.verify_email):
            check_address(email)  # before the account is made: a typo is refused, not kept
        owner = await trio.to_thread.run_sync(
            lambda: self.accounts.sign_up(
                fields.get("name", ""), fields.get("password", ""), policy=policy, invite=fields.get("invite")
            )
        )
        if self.mail is not None and email:
            mail = self.mail
            await trio.to_thread.run_sync(mail.set_address, owner, email)
            if self.verification is not None:
                await self.verification(request, owner)
        return owner

    async def do_check_password(self, request: Request, fields: dict[str, str]) -> Owner:
        self.guard.limited(self.guard.logins, request, "password checks")
        return await trio.to_thread.run_sync(
            self.accounts.check_password, fields.get("name", ""), fields.get("password", "")
        )

    def account_context(self, owner: Owner, only: str | None = None) -> dict[str, Any]:
        """What the owner's page shows: each bot (or the one named ``only``), active first, with its
        recent matches' private side, the failed matches in a row behind a pause, its challenges and
        what is left of its quota."""
        if only is not None:
            bots = [self.accounts.bot_of(owner, only)]
        else:
            bots = sorted(self.accounts.bots(owner), key=lambda b: (not b.active, b.name))
        history: dict[str, list[BotMatch]] = {
            b.name: self.store.bot_history(b.name, limit=RECENT) for b in bots
        }
        return {
            **self._versions_context(bots if only is not None else []),
            "owner": owner,
            "bots": bots,
            "history": history,
            "failed": {b.name: failed_in_a_row(history[b.name]) for b in bots},
            "challenges": {b.name: self.store.challenges_of(b.name, limit=10) for b in bots},
            "quota_left": {b.name: self.store.challenges_left(b.name) for b in bots if b.active},
            "opponents": [b.name for g in self.games for b in self.store.list_bots(g) if b.active],
            "community": self.store.policy(),
            "kept_out": self.store.kept_out_of_datasets(),
            "max_bots": self.settings.max_bots,
            "errors": {},
            "back": "" if only is None else "bot",
            "admin": self.accounts.is_admin(owner),
            "mail_status": None if self.mail is None else self.mail.status(owner),
        }

    def _versions_context(self, bots: list[BotRecord]) -> dict[str, Any]:
        """A bot's own page: its submitted versions and what is left of the upload quota."""
        if self.submissions is None or not bots:
            return {}
        settings = self.submissions.settings
        return {
            "versions": {b.name: self.store.versions_of(b.name, limit=20) for b in bots},
            "uploads_left": {
                b.name: self.store.versions.uploads_left(b.name, settings.uploads_per_day) for b in bots
            },
            "uploads_per_day": settings.uploads_per_day,
            "build_minutes_left": {
                b.name: self.store.versions.build_minutes_left(b.name, settings.build_minutes_per_day)
                for b in bots
            },
            "build_minutes_per_day": settings.build_minutes_per_day,
            "private_logs": {b.name: self.submissions.private_logs(b.name) for b in bots},
            "upload_limits": settings.limits,
        }

    async def check_admin(self, owner: Owner) -> None:
        """403 unless the host made ``owner`` an admin (`cellarena ladder owner admin NAME`)."""
        if not await trio.to_thread.run_sync(self.accounts.is_admin, owner):
            raise HTTPException(
                403,
                "only the ladder's admins see this page "
                "(the host makes one: cellarena ladder owner admin NAME)",
            )

    def admin_context(self) -> dict[str, Any]:
        """The admin page: owners waiting for approval, paused and banned bots, the audit log."""
        bots = [b for g in self.games for b in self.store.list_bots(g)]
        return {
            "pending": [o for o in self.accounts.owners() if not o.active],
            "stopped": [b for b in bots if b.active and (b.paused or b.banned)],
            "audit": self.store.audit_log(100),
            "admins": self.accounts.admins(),
        }

    def owner_replay(self, owner: Owner, match_id: int) -> bytes:
        """The replay of match ``match_id`` with the debug drawings of the owner's bots in it (and no one
        else's); 404, the same whether the match exists or not, when none of their bots played it."""
        mine = {b.id for b in self.accounts.bots(owner)}
        m = self.store.match(match_id)
        seats = [s.seat for s in m.seats if s.bot_id in mine] if m is not None else []
        if (
            m is None
            or not seats
            or m.replay is None
            or m.status != "finished"
            or not Path(m.replay).is_file()
        ):
            raise HTTPException(404, f"none of your bots has a match {match_id} with a replay here")
        try:
            data = Path(m.replay).read_bytes()
        except OSError as exc:
            raise HTTPException(
                404, f"the replay of match {match_id} cannot be read ({exc.strerror})"
            ) from None
        stripped, _ = strip_debug_bytes(data, f"match {match_id}", keep=seats)
        return stripped

    async def start_session(self, owner: Owner) -> Response:
        session = await trio.to_thread.run_sync(
            self.accounts.new_session, owner, self.settings.session_lifetime
        )
        response = RedirectResponse("/account", status_code=303)
        signed = self.guard.sign(session)
        self.guard.set_cookie(
            response, SESSION_COOKIE, signed, int(self.settings.session_lifetime.total_seconds())
        )
        return response

    async def bot_action(self, action: Callable[[], object]) -> object:
        try:
            return await trio.to_thread.run_sync(action)
        except AccountError as exc:
            raise HTTPException(400, str(exc)) from None

    async def token_page(
        self, request: Request, owner: Owner, name: str, token: Token, what: str, game: str
    ) -> HTMLResponse:
        """A bot's new token, shown once, with the command that connects it (its name filled in)."""
        connect: dict[str, Any] = {
            "addresses": {},
            "commands": {},
            "site_url": "",
            "token_file": token_file(name),
        }
        where = self.connect
        if where is not None:
            connect = await trio.to_thread.run_sync(lambda: where.context(request, bot=name, game=game))
        response = self.page(
            "account/token.html",
            request,
            owner=owner,
            title=f"{name}'s token",
            bot=name,
            token=token.secret,
            what=what,
            bot_url=bot_href(name),
            **connect,
        )
        response.headers["cache-control"] = "no-store"  # shown once: not kept by the browser's cache
        return response


def failed_in_a_row(history: list[BotMatch]) -> list[tuple[BotMatch, str]]:
    """The bot's newest finished matches that failed, in a row (newest first), each with its failure
    (`failures.failure_of`): what a pause stands on, shown to the owner with each match's cause."""
    run = []
    for b in history:
        if b.match.status != "finished":
            continue
        me = b.me
        failure = failure_of(me.cause, me.late or 0, me.invalid or 0, b.match.ticks or 0)
        if failure is None:
            break
        run.append((b, failure))
    return run
