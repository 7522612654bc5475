"""The owners' pages before login: sign up, log in, log out, set a new password with the host's code; the
API's sign-up.
"""

from __future__ import annotations

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from cellarena.arena.ladder.accounts.owners import AccountError
from cellarena.arena.ladder.errors import BadNameError
from cellarena.arena.ladder.web.action_log import refused, said
from cellarena.arena.ladder.web.owner_guard import SESSION_COOKIE
from cellarena.arena.ladder.web.owner_pages import AccountSite


class SignInPages:
    """Sign-up, login, logout and a new password: the pages before an owner is logged in, and the
    API's sign-up."""

    def __init__(self, site: AccountSite) -> None:
        self.site = site
        self.guard = site.guard

    def _again(
        self, template: str, title: str, request: Request, status: int, error: Exception, name: str
    ) -> Response:
        """The form again, saying what was wrong, with the name as it was typed."""
        return self.site.anonymous_form(
            template, request, status, title=title, error=str(error), name=name[:64]
        )

    async def signup_page(self, request: Request) -> Response:
        if self.site.settings.policy is None:
            raise HTTPException(404, "this ladder takes no sign-ups; its host registers the bots")
        return self.site.anonymous_form("account/signup.html", request, title="Sign up", error=None, name="")

    async def signup(self, request: Request) -> Response:
        fields = await self.guard.anonymous_post(request)
        try:
            owner = await self.site.do_sign_up(request, fields)
        except (AccountError, BadNameError) as exc:
            return self._again("account/signup.html", "Sign up", request, 400, exc, fields.get("name", ""))
        said(
            owner.name,
            f"signed up ({'active' if owner.active else 'waiting for approval'})",
            self.guard.client(request),
        )
        if not owner.active:
            return self.site.page(
                "account/message.html",
                request,
                title="Signed up",
                message=f"You signed up as {owner.name}. The ladder's host approves new owners: "
                "you can log in once they have.",
            )
        return await self.site.start_session(owner)

    async def login_page(self, request: Request) -> Response:
        return self.site.anonymous_form("account/login.html", request, title="Log in", error=None, name="")

    async def login(self, request: Request) -> Response:
        fields = await self.guard.anonymous_post(request)
        try:
            owner = await self.site.do_check_password(request, fields)
        except AccountError as exc:
            refused(repr(fields.get("name", "")[:64]), "logging in", str(exc), self.guard.client(request))
            return self._again("account/login.html", "Log in", request, 401, exc, fields.get("name", ""))
        said(owner.name, "logged in", self.guard.client(request))
        return await self.site.start_session(owner)

    async def logout(self, request: Request) -> Response:
        owner, session, _ = await self.guard.owner_post(request)
        await trio.to_thread.run_sync(self.site.accounts.end_session, session)
        said(owner.name, "logged out", self.guard.client(request))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def reset_page(self, request: Request) -> Response:
        return self.site.anonymous_form(
            "account/reset.html", request, title="New password", error=None, name=""
        )

    async def reset(self, request: Request) -> Response:
        fields = await self.guard.anonymous_post(request)
        self.guard.limited(self.guard.logins, request, "password checks")
        name = fields.get("name", "")
        try:
            await trio.to_thread.run_sync(
                self.site.accounts.reset_password, name, fields.get("code", ""), fields.get("password", "")
            )
        except AccountError as exc:
            refused(repr(name[:64]), "setting a new password", str(exc), self.guard.client(request))
            return self._again("account/reset.html", "New password", request, 400, exc, name)
        said(name, "set a new password with the host's reset code", self.guard.client(request))
        return RedirectResponse("/login", status_code=303)

    async def api_signup(self, request: Request) -> Response:
        self.guard.check_api_origin(request)
        fields = await self.guard.form(request)
        try:
            owner = await self.site.do_sign_up(request, fields)
        except (AccountError, BadNameError) as exc:
            status = 409 if "is taken" in str(exc) else 400
            return JSONResponse({"error": str(exc)}, status_code=status)
        said(owner.name, "signed up through the API", self.guard.client(request))
        return JSONResponse({"owner": owner.to_json()}, status_code=201)
