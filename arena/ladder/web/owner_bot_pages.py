"""A logged-in owner's pages: their bots, each bot's page and forms (new, rotate, revoke, resume,
challenge, refuse challenges, keep out of datasets, upload a version, make one live), their matches'
replays with their own debug drawings, deleting the account; and the API's new bot (name and password in
the body, no cookie).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from cellarena.arena.ladder.accounts.owners import AccountError, Owner
from cellarena.arena.ladder.errors import BadNameError
from cellarena.arena.ladder.identity.tokens import Token
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store.ladder_store import MAX_ID
from cellarena.arena.ladder.web.action_log import said
from cellarena.arena.ladder.web.connect_page import address_json
from cellarena.arena.ladder.web.owner_guard import SESSION_COOKIE
from cellarena.arena.ladder.web.owner_pages import AccountSite
from cellarena.arena.ladder.web.public_pages import bot_href
from cellarena.arena.ladder.web.submission_pages import MAX_VERSION, Submissions
from cellarena.arena.ladder.web.upload_body import read_upload
from cellarena.server.web.numbers import path_number


class BotPages:
    """An owner's bots: the account page, a bot's page and their forms, replays, the account's
    deletion, the API's new bot."""

    def __init__(self, site: AccountSite) -> None:
        self.site = site
        self.guard = site.guard

    async def account(self, request: Request) -> Response:
        try:
            owner, session = await self.guard.logged_in(request)
        except HTTPException:
            return RedirectResponse("/login", status_code=303)
        context = await trio.to_thread.run_sync(self.site.account_context, owner)
        return self.site.page(
            "account/account.html",
            request,
            title=f"{owner.name}'s bots",
            csrf=self.guard.csrf_for(session),
            error=None,
            **context,
        )

    async def create_bot(self, request: Request) -> Response:
        owner, session, fields = await self.guard.owner_post(request)
        name = fields.get("name", "")
        try:
            bot, token = await trio.to_thread.run_sync(
                lambda: self.site.accounts.create_bot(
                    owner, name, self.site.game_of(fields), max_bots=self.site.settings.max_bots
                )
            )
        except (AccountError, BadNameError) as exc:
            context = await trio.to_thread.run_sync(self.site.account_context, owner)
            return self.site.page(
                "account/account.html",
                request,
                400,
                title=f"{owner.name}'s bots",
                csrf=self.guard.csrf_for(session),
                error=str(exc),
                **context,
            )
        said(owner.name, f"made bot {bot.name} ({bot.game})", self.guard.client(request))
        return await self.site.token_page(request, owner, bot.name, token, "made", bot.game)

    async def rotate(self, request: Request) -> Response:
        owner, _, _ = await self.guard.owner_post(request)
        name = request.path_params["name"]
        token = await self.site.bot_action(lambda: self.site.accounts.rotate_bot(owner, name))
        assert isinstance(token, Token)
        said(owner.name, f"renewed the token of bot {name}", self.guard.client(request))
        bot = await self.site.bot_action(lambda: self.site.accounts.bot_of(owner, name))
        assert isinstance(bot, BotRecord)
        return await self.site.token_page(request, owner, name, token, "rotated", bot.game)

    async def revoke(self, request: Request) -> Response:
        """Asks first (a page with the button that revokes), then revokes: there is no undoing it."""
        owner, session, fields = await self.guard.owner_post(request)
        name = request.path_params["name"]
        bot = await self.site.bot_action(lambda: self.site.accounts.bot_of(owner, name))
        assert isinstance(bot, BotRecord)
        if fields.get("confirm") != "yes":
            return self.site.page(
                "account/confirm.html", request, title=f"Revoke {name}?", bot=bot,
                csrf=self.guard.csrf_for(session), action=f"/account{bot_href(name)}/revoke",
            )  # fmt: skip
        await self.site.bot_action(lambda: self.site.accounts.revoke_bot(owner, name))
        said(owner.name, f"revoked bot {name}", self.guard.client(request))
        return RedirectResponse("/account", status_code=303)

    async def delete_account(self, request: Request) -> Response:
        owner, session, fields = await self.guard.owner_post(request)
        try:
            await self.site.do_check_password(
                request, {"name": owner.name, "password": fields.get("password", "")}
            )
        except AccountError:
            context = await trio.to_thread.run_sync(self.site.account_context, owner)
            return self.site.page(
                "account/account.html", request, 403, title=f"{owner.name}'s bots",
                csrf=self.guard.csrf_for(session),
                error="the password is wrong: your account is not deleted", **context,
            )  # fmt: skip
        revoked = await trio.to_thread.run_sync(self.site.accounts.delete_owner, owner.name)
        said(
            owner.name,
            f"deleted their account (bots revoked: {', '.join(revoked) or 'none'})",
            self.guard.client(request),
        )
        response = self.site.page(
            "account/message.html",
            request,
            title="Account deleted",
            message=f"{owner.name}'s account is deleted"
            + (f" and {', '.join(revoked)} revoked" if revoked else "")
            + "; their matches stay in the history.",
        )
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def bot_page(self, request: Request) -> Response:
        try:
            owner, session = await self.guard.logged_in(request)
        except HTTPException:
            return RedirectResponse("/login", status_code=303)
        name = request.path_params["name"]
        context = await trio.to_thread.run_sync(lambda: self.site.account_context(owner, name))
        return self.site.page(
            "account/bot.html", request, title=f"{name} (yours)", csrf=self.guard.csrf_for(session),
            error=None, **context,
        )  # fmt: skip

    async def bot_change(
        self, request: Request, change: Callable[[BotRecord, dict[str, str], str], object]
    ) -> Response:
        """A form's change to one of the owner's bots; back to the page it was posted from, which
        shows a refusal (a ban, the quota, an unknown opponent) beside the bot."""
        owner, session, fields = await self.guard.owner_post(request)
        name = request.path_params["name"]
        bot = await self.site.bot_action(lambda: self.site.accounts.bot_of(owner, name))
        assert isinstance(bot, BotRecord)
        back_to_bot = fields.get("back") == "bot"
        try:
            await self.site.bot_action(lambda: change(bot, fields, f"{owner.name} (owner)"))
        except HTTPException as exc:
            if exc.status_code not in (400, 404, 409, 429):
                raise
            return await self._refused(request, owner, session, name, exc, back_to_bot=back_to_bot)
        said(owner.name, _what(request.url.path, name, fields), self.guard.client(request))
        where = f"/account{bot_href(name)}" if back_to_bot else "/account"
        return RedirectResponse(where, status_code=303)

    async def _refused(
        self,
        request: Request,
        owner: Owner,
        session: str,
        name: str,
        exc: HTTPException,
        *,
        back_to_bot: bool,
    ) -> Response:
        """The page a form was posted from, with the refusal beside the bot, and its status."""
        only = name if back_to_bot else None
        context = await trio.to_thread.run_sync(lambda: self.site.account_context(owner, only))
        context["errors"] = {name: exc.detail}
        return self.site.page(
            "account/bot.html" if back_to_bot else "account/account.html", request,
            exc.status_code, title=f"{name} (yours)" if back_to_bot else f"{owner.name}'s bots",
            csrf=self.guard.csrf_for(session), error=None, **context,
        )  # fmt: skip

    async def pause_bot(self, request: Request) -> Response:
        """The owner pauses their bot (refused at hello until they resume it; a match plays on)."""
        return await self.bot_change(
            request, lambda b, f, who: self.site.store.pause(b.name, PAUSED_BY_OWNER, actor=who)
        )

    async def resume_bot(self, request: Request) -> Response:
        return await self.bot_change(request, lambda b, f, who: self.site.community.resume_bot(b, who))

    async def challenge(self, request: Request) -> Response:
        return await self.bot_change(
            request, lambda b, f, who: self.site.community.challenge_by(b, f.get("opponent", "").strip(), who)
        )

    async def refusal(self, request: Request) -> Response:
        return await self.bot_change(
            request, lambda b, f, who: self.site.community.refusal_of(b, f.get("refuse") == "1", who)
        )

    async def datasets(self, request: Request) -> Response:
        """Keep the bot's matches out of the ladder's exported datasets (``keep_out=1``), or let them in."""
        store = self.site.store
        return await self.bot_change(
            request, lambda b, f, who: store.keep_out_of_datasets(b.name, f.get("keep_out") == "1", actor=who)
        )

    def _submissions(self) -> Submissions:
        if self.site.submissions is None:
            raise HTTPException(404, "this ladder takes no submitted bots")
        return self.site.submissions

    async def upload(self, request: Request) -> Response:
        """The bot page's upload form (multipart, its CSRF token checked before anything is kept)."""
        submissions = self._submissions()
        self.guard.check_origin(request)
        owner, session = await self.guard.logged_in(request)
        name = request.path_params["name"]
        bot = await self.site.bot_action(lambda: self.site.accounts.bot_of(owner, name))
        assert isinstance(bot, BotRecord)
        try:
            upload = await read_upload(request, submissions.settings.limits.archive_bytes)
            self.guard.check_csrf(upload.fields, self.guard.csrf_for(session))
            await trio.to_thread.run_sync(submissions.receive, bot, upload, f"{owner.name} (owner)")
        except HTTPException as exc:
            if exc.status_code not in (400, 413, 415, 429):
                raise
            return await self._refused(request, owner, session, name, exc, back_to_bot=True)
        return RedirectResponse(f"/account{bot_href(name)}#versions", status_code=303)

    async def make_live(self, request: Request) -> Response:
        """A version's "make live" (or "roll back to") button."""
        submissions = self._submissions()
        number = path_number(request, "number", "version", maximum=MAX_VERSION)
        return await self.bot_change(request, lambda b, f, who: submissions.make_live(b, number, who))

    async def replay(self, request: Request) -> Response:
        owner, _ = await self.guard.logged_in(request)
        match_id = path_number(request, "id", "match", maximum=MAX_ID)
        data = await trio.to_thread.run_sync(self.site.owner_replay, owner, match_id)
        disposition = {"content-disposition": f'attachment; filename="ladder-{match_id}.replay"'}
        headers = {**disposition, "cache-control": "private, no-store"}
        return Response(data, media_type="application/octet-stream", headers=headers)

    async def api_bots(self, request: Request) -> Response:
        """A new bot of the owner named in the body, with their password; its token, once."""
        self.guard.check_api_origin(request)
        fields = await self.guard.form(request)
        try:
            owner = await self.site.do_check_password(request, {**fields, "name": fields.get("owner", "")})
            bot, token = await trio.to_thread.run_sync(
                lambda: self.site.accounts.create_bot(
                    owner,
                    fields.get("name", ""),
                    self.site.game_of(fields),
                    max_bots=self.site.settings.max_bots,
                )
            )
        except (AccountError, BadNameError) as exc:
            status = 401 if "wrong name or password" in str(exc) else 400
            return JSONResponse({"error": str(exc)}, status_code=status)
        made: dict[str, Any] = {"name": bot.name, "game": bot.game, "token": token.secret}
        connect = self.site.connect
        if connect is not None:  # where it connects, for `ladder register` to print the command
            address = await trio.to_thread.run_sync(connect.address, bot.game, connect.fallback_host(request))
            made["connect"] = None if address is None else address_json(connect, request, address)
        return JSONResponse(made, status_code=201)


#: Why an owner's bot is paused when they paused it themselves (the pause reason its hellos are told).
PAUSED_BY_OWNER = "paused by its owner"


def _what(path: str, name: str, fields: dict[str, str]) -> str:
    """A form's change to bot ``name`` in the log's words, from the form's path."""
    action = path.rsplit("/", 1)[-1]
    if action == "challenge":
        return f"challenged {fields.get('opponent', '').strip()[:64]!r} with bot {name}"
    if action == "challenges":
        return f"set bot {name}: {'refuses' if fields.get('refuse') == '1' else 'takes'} challenges"
    if action == "datasets":
        return f"set bot {name}: {'kept out of' if fields.get('keep_out') == '1' else 'in'} datasets"
    if action == "live":
        return f"made version {path.rsplit('/', 2)[-2][:12]} of bot {name} live"
    return {"pause": f"paused bot {name}", "resume": f"resumed bot {name}"}.get(
        action, f"{action[:20]} bot {name}"
    )
