"""The admins' page (`cellarena ladder owner admin NAME` makes an admin): owners waiting for approval,
paused and banned bots, the audit log; and its actions.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from cellarena.arena.ladder.accounts.owners import AccountError
from cellarena.arena.ladder.errors import UnknownBotError
from cellarena.arena.ladder.web.action_log import said
from cellarena.arena.ladder.web.owner_pages import AccountSite


class AdminPages:
    """The admins' page and its actions: approve owners, pause, resume, ban and unban bots, audited."""

    def __init__(self, site: AccountSite) -> None:
        self.site = site
        self.guard = site.guard

    async def admin_page(self, request: Request, status: int = 200, error: str | None = None) -> Response:
        owner, session = await self.guard.logged_in(request)
        await self.site.check_admin(owner)
        context = await trio.to_thread.run_sync(self.site.admin_context)
        return self.site.page(
            "account/admin.html", request, status, title="Admin", csrf=self.guard.csrf_for(session),
            error=error, owner=owner, **context,
        )  # fmt: skip

    async def admin_action(self, request: Request) -> Response:
        """One admin action (approve, pause, resume, ban, unban), audited as ``OWNER (admin)``."""
        owner, _, fields = await self.guard.owner_post(request)
        await self.site.check_admin(owner)
        action, name = request.path_params["action"], fields.get("name", "").strip()
        reason = fields.get("reason", "").strip()
        who = f"{owner.name} (admin)"
        acts: dict[str, Callable[[], object]] = {
            "approve": lambda: self.site.accounts.approve(name, actor=who),
            "pause": lambda: self.site.store.pause(name, reason or "paused by an admin", actor=who),
            "resume": lambda: self.site.store.resume(name, actor=who),
            "ban": lambda: self.site.store.ban(name, reason, actor=who),
            "unban": lambda: self.site.store.unban(name, actor=who),
        }
        if action not in acts:
            raise HTTPException(404, f"no admin action {action[:30]!r}")
        if action == "ban" and not reason:
            return await self.admin_page(request, 400, "give the reason for a ban: the bot is told it")
        try:
            await trio.to_thread.run_sync(acts[action])
        except (AccountError, UnknownBotError) as exc:
            return await self.admin_page(request, 400, str(exc))
        target = "owner" if action == "approve" else "bot"
        said(
            who, f"{action} {target} {name}" + (f" ({reason})" if reason else ""), self.guard.client(request)
        )
        return RedirectResponse("/admin", status_code=303)
