"""The owners' paths (`cellarena ladder web --signup POLICY`), each to its page group's handler."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.web.admin_pages import AdminPages
from cellarena.arena.ladder.web.owner_bot_pages import BotPages
from cellarena.arena.ladder.web.owner_guard import Endpoint, guarded
from cellarena.arena.ladder.web.owner_pages import AccountSite
from cellarena.arena.ladder.web.owner_sign_in import SignInPages


def owner_routes(site: AccountSite) -> list[BaseRoute]:
    """The routes of ``site``'s pages and its HTTP API (JSON in and out, no cookie: nothing for another
    site to ride on), every handler `guarded` (the store's faults as pages)."""
    sign_in, bots, admin = SignInPages(site), BotPages(site), AdminPages(site)
    endpoints: list[tuple[str, Endpoint, str]] = [
        ("/signup", sign_in.signup_page, "GET"),
        ("/signup", sign_in.signup, "POST"),
        ("/login", sign_in.login_page, "GET"),
        ("/login", sign_in.login, "POST"),
        ("/logout", sign_in.logout, "POST"),
        ("/reset", sign_in.reset_page, "GET"),
        ("/reset", sign_in.reset, "POST"),
        ("/account", bots.account, "GET"),
        ("/account/bots", bots.create_bot, "POST"),
        ("/account/bots/{name:path}/rotate", bots.rotate, "POST"),
        ("/account/bots/{name:path}/revoke", bots.revoke, "POST"),
        ("/account/bots/{name:path}/resume", bots.resume_bot, "POST"),
        ("/account/bots/{name:path}/pause", bots.pause_bot, "POST"),
        ("/account/bots/{name:path}/challenge", bots.challenge, "POST"),
        ("/account/bots/{name:path}/challenges", bots.refusal, "POST"),
        ("/account/bots/{name:path}/datasets", bots.datasets, "POST"),
        ("/account/bots/{name:path}/versions/{number}/live", bots.make_live, "POST"),
        ("/account/bots/{name:path}/versions", bots.upload, "POST"),
        ("/account/bots/{name:path}", bots.bot_page, "GET"),
        ("/account/replays/{id}", bots.replay, "GET"),
        ("/account/delete", bots.delete_account, "POST"),
        ("/admin", admin.admin_page, "GET"),
        ("/admin/{action}", admin.admin_action, "POST"),
        ("/api/signup", sign_in.api_signup, "POST"),
        ("/api/owner/bots", bots.api_bots, "POST"),
    ]
    if site.mail is not None:  # --smtp-host: the pages that mail (docs/ladder.md "Mail")
        from cellarena.arena.ladder.web.mail_pages import MailPages

        mail = MailPages(site)
        site.verification = mail.send_verification
        endpoints += mail.routes()
    return [Route(path, guarded(endpoint), methods=[method]) for path, endpoint, method in endpoints]
