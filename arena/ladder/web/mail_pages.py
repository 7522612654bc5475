"""The owners' pages that mail (`ladder web --smtp-host`, docs/ladder.md "Mail"): "forgot password",
the mailed reset link's page, the address's verification link, and the account page's address and
notices forms.

The forms are CSRF-checked as the others (`owner_guard`). "Forgot password" answers the same whether or
not an account has the address (no one learns who has an account), and is limited per client address.
A link's token travels in the mail, the link's query string and the page's hidden field only: the
pages never log it, errors name the path without the query, and the page is neither cached nor sent
on as a Referer.
"""

from __future__ import annotations

from datetime import UTC, datetime

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from cellarena.arena.ladder.accounts.mail_links import LIFETIMES, Purpose
from cellarena.arena.ladder.accounts.mailer import Mailer, Outgoing
from cellarena.arena.ladder.accounts.owner_mail import Link, OwnerMail
from cellarena.arena.ladder.accounts.owners import AccountError, Owner
from cellarena.arena.ladder.web.action_log import refused, said
from cellarena.arena.ladder.web.owner_guard import AddressLimit, Endpoint
from cellarena.arena.ladder.web.owner_pages import AccountSite

#: "Forgot password" forms from one address in an hour.
RESET_MAILS_PER_HOUR = 5
#: A link's page: not cached, and its address (the token) never sent to another site as a Referer
#: (same-origin, not no-referrer: with that, browsers post the form with "Origin: null").
_PRIVATE = {"cache-control": "no-store", "referrer-policy": "same-origin"}
#: The page each kind of mailed link opens.
_LINK_PATHS: dict[Purpose, str] = {"reset": "/reset/mail", "verify": "/verify"}


def _now() -> datetime:
    return datetime.now(UTC)


class MailPages:
    """The pages of ``site`` that mail, through its settings' mailer."""

    def __init__(self, site: AccountSite) -> None:
        self.site = site
        self.guard = site.guard
        mail, mailer = site.mail, site.settings.mailer
        if mail is None or mailer is None:
            raise ValueError("the mail pages need a mailer (AccountSettings.mailer)")
        self.mail: OwnerMail = mail
        self.mailer: Mailer = mailer
        self.reset_mails = AddressLimit(RESET_MAILS_PER_HOUR)

    # ------------------------------------------------------------------ forgot password
    async def forgot_page(self, request: Request) -> Response:
        return self.site.anonymous_form("account/forgot.html", request, title="Forgot password", error=None)

    async def forgot(self, request: Request) -> Response:
        fields = await self.guard.anonymous_post(request)
        self.guard.limited(self.reset_mails, request, "password mails")
        links = await trio.to_thread.run_sync(self.mail.reset_links, fields.get("email", ""), _now())
        for link in links:
            self._send_reset(request, link)
        said("someone", "asked for a password mail", self.guard.client(request))
        return self.site.page(
            "account/message.html",
            request,
            title="Mail on its way",
            message="If an account on this ladder has that address, a mail with a link to set a new "
            f"password is on its way to it. The link works once, for "
            f"{LIFETIMES['reset'].total_seconds() / 3600:g} hour(s).",
        )

    def _send_reset(self, request: Request, link: Link) -> None:
        self._mail_link(
            request,
            link,
            "reset",
            "Set a new password",
            "Someone (you, we hope) asked for a new password for your account {owner} on the ladder. "
            "To set one, open this link within {hours} hour(s); it works once:\n\n{url}\n\n"
            "If you did not ask, ignore this mail: your password stays as it is.\n",
            "a password link",
        )

    def _mail_link(
        self, request: Request, link: Link, kind: Purpose, subject: str, text: str, what: str
    ) -> None:
        """Mail ``link`` (of `LIFETIMES`' ``kind``) to its owner: ``text`` with its {owner}, {url} and
        {hours} filled in, after a greeting; ``what`` names the mail in the mailer's log."""
        url = f"{self.guard.origin(request)}{_LINK_PATHS[kind]}?t={link.token}"
        hours = f"{LIFETIMES[kind].total_seconds() / 3600:g}"
        body = f"Hello {link.owner},\n\n" + text.format(owner=link.owner, url=url, hours=hours)
        self.mailer.submit(Outgoing(link.email, subject, body, f"{what} for {link.owner}"))

    async def reset_link_page(self, request: Request) -> Response:
        token = request.query_params.get("t", "")
        try:
            owner = await trio.to_thread.run_sync(self.mail.reset_owner, token, _now())
        except AccountError as exc:
            return self._private(
                self.site.page("account/message.html", request, 400, title="Link", message=str(exc))
            )
        response = self.site.anonymous_form(
            "account/reset_mail.html",
            request,
            title="New password",
            error=None,
            token=token,
            for_owner=owner.name,
        )
        return self._private(response)

    async def reset_link(self, request: Request) -> Response:
        fields = await self.guard.anonymous_post(request)
        self.guard.limited(self.guard.logins, request, "password checks")
        token = fields.get("t", "")
        try:
            owner = await trio.to_thread.run_sync(
                self.mail.reset_password, token, fields.get("password", ""), _now()
            )
        except AccountError as exc:
            refused(
                "someone", "setting a new password by a mailed link", str(exc), self.guard.client(request)
            )
            page = self.site.anonymous_form(
                "account/reset_mail.html", request, 400, title="New password", error=str(exc), token=token,
                for_owner="",
            )  # fmt: skip
            return self._private(page)
        said(owner.name, "set a new password with a mailed link", self.guard.client(request))
        return RedirectResponse("/login", status_code=303)

    # ------------------------------------------------------------------ the address and notices
    async def verify(self, request: Request) -> Response:
        try:
            owner = await trio.to_thread.run_sync(self.mail.verify, request.query_params.get("t", ""), _now())
        except AccountError as exc:
            return self._private(
                self.site.page("account/message.html", request, 400, title="Link", message=str(exc))
            )
        said(owner.name, "verified their address", self.guard.client(request))
        message = f"Thank you, {owner.name}: your address is verified."
        return self._private(
            self.site.page("account/message.html", request, title="Verified", message=message)
        )

    async def set_address(self, request: Request) -> Response:
        owner, _, fields = await self.guard.owner_post(request)
        try:
            await trio.to_thread.run_sync(self.mail.set_address, owner, fields.get("email", ""))
        except AccountError as exc:
            raise HTTPException(400, str(exc)) from None
        said(owner.name, "set their address", self.guard.client(request))
        await self.send_verification(request, owner)
        return RedirectResponse("/account", status_code=303)

    async def resend(self, request: Request) -> Response:
        owner, _, _ = await self.guard.owner_post(request)
        self.guard.limited(self.reset_mails, request, "mails")
        await self.send_verification(request, owner)
        return RedirectResponse("/account", status_code=303)

    async def send_verification(self, request: Request, owner: Owner) -> None:
        link = await trio.to_thread.run_sync(self.mail.verify_link, owner, _now())
        if link is None:
            return
        self._mail_link(
            request,
            link,
            "verify",
            "Confirm your address",
            "To confirm that this is your address on the ladder, open this link within {hours} hours:"
            "\n\n{url}\n\nIf you did not sign up, ignore this mail.\n",
            "a verification link",
        )

    async def notify(self, request: Request) -> Response:
        owner, _, fields = await self.guard.owner_post(request)
        on = fields.get("notify") == "on"
        await trio.to_thread.run_sync(self.mail.set_notify, owner, on)
        said(owner.name, f"turned notices by mail {'on' if on else 'off'}", self.guard.client(request))
        return RedirectResponse("/account", status_code=303)

    @staticmethod
    def _private(response: Response) -> Response:
        response.headers.update(_PRIVATE)
        return response

    def routes(self) -> list[tuple[str, Endpoint, str]]:
        return [
            ("/forgot", self.forgot_page, "GET"),
            ("/forgot", self.forgot, "POST"),
            ("/reset/mail", self.reset_link_page, "GET"),
            ("/reset/mail", self.reset_link, "POST"),
            ("/verify", self.verify, "GET"),
            ("/account/mail", self.set_address, "POST"),
            ("/account/mail/verify", self.resend, "POST"),
            ("/account/notify", self.notify, "POST"),
        ]
