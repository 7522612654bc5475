"""Submitted bots on the pages and the API: an owner uploads a bot's folder as an archive, sees its
versions, makes a validated one live and rolls back (docs/ladder.md, "Submitting a bot").

The API, authorised as the community API's changes are (`CommunityApi.acting`: the bot's token in
``Authorization: Bearer``, compared in constant time, or the owner's session with the page's CSRF
token in ``X-CSRF-Token``):

- ``POST /api/bots/NAME/submissions``, the archive as the body (``Content-Type: application/gzip``
  or ``application/zip``): 201 with the version's number and state (``received``), or 4xx with the
  reason: 400 a refused archive (`submissions.unpack`'s rules), 413 over the size limit, 415 another
  media type, 429 the owner's daily quota (uploads, or build minutes: ``Retry-After`` says when);
- ``GET /api/bots/NAME/submissions``: the bot's versions, newest first, with their logs;
- ``POST /api/bots/NAME/submissions/N/live``: make version N live (validated, or retired: a roll back);
- ``POST /api/submissions``: the upload, for the token's own bot (what ``ladder submit`` sends);
- ``GET /api/bots/NAME/logs/ID``: the bot's own output in match ID (its private log, as the ladder
  kept it: `validate.private_log`), as text; its owner's alone (and the host's, on disk).

The owner's bot page (``/account/bots/NAME``) has the same as forms: the upload (multipart, with the
CSRF token as every form), "make live" beside each validated or retired version, and the private
logs of its latest matches.

An upload is unpacked once into a scratch folder beside the archives (in the ladder's folder) to
check it, then kept in the archive store (`submissions.archives`) and recorded ``received``; the
ladder's builder takes it from there.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.ladder.errors import UnknownBotError
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store.ladder_store import MAX_ID, LadderStore
from cellarena.arena.ladder.store.version_tables import RevokedBotError, UnknownVersionError, UploadQuotaError
from cellarena.arena.ladder.submissions.archives import ArchiveStore, ArchiveStoreError
from cellarena.arena.ladder.submissions.unpack import UnpackError, UnpackLimits, unpack
from cellarena.arena.ladder.submissions.validate import private_log
from cellarena.arena.ladder.submissions.versions import Version, VersionMoveError
from cellarena.arena.ladder.web.community_pages import CommunityApi, OwnerSessions
from cellarena.arena.ladder.web.owner_guard import Endpoint, store_faults
from cellarena.arena.ladder.web.upload_body import Upload, read_upload
from cellarena.server.web.numbers import path_number

log = logging.getLogger("cellarena.ladder")

#: The highest version number a path takes.
MAX_VERSION = 1_000_000
#: Private logs listed on a bot's page, newest first.
PAGE_LOGS = 10


@dataclass
class SubmissionSettings:
    """Where uploads are kept and what they may be (`ladder web`; the config file will name them)."""

    #: The archive store's folder (``archives/`` in the ladder's folder).
    archives: Path
    limits: UnpackLimits = field(default_factory=UnpackLimits)
    #: Versions an owner (or an owner-less bot) may upload in 24 hours.
    uploads_per_day: int = 10
    #: Minutes their builds may take in 24 hours (builds that ended then); once used, uploads wait.
    build_minutes_per_day: int = 60


class Submissions:
    """Uploads and versions of ``games``' bots, over ``store`` and the archive store."""

    def __init__(
        self,
        store: LadderStore,
        games: str | Sequence[str],
        settings: SubmissionSettings,
        sessions: OwnerSessions | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.archives = ArchiveStore(settings.archives)
        self.community = CommunityApi(store, games, sessions)

    # -- what the API and the pages do ----------------------------------------------------------------
    def receive(self, bot: BotRecord, upload: Upload, actor: str) -> Version:
        """Check, keep and record an uploaded archive: the new version, ``received``. HTTPException 429
        for the quota, 400 for an archive `unpack` refuses (its message), 503 if it cannot be kept."""
        per_day, minutes = self.settings.uploads_per_day, self.settings.build_minutes_per_day
        try:
            self.store.versions.check_quota(bot.name, per_day, minutes)
            # Checked inside the ladder's folder (beside the archives): nothing is written outside it.
            self.archives.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=".check-", dir=self.archives.folder) as scratch:
                unpack(upload.data, upload.kind, Path(scratch) / "bot", self.settings.limits)
            sha256 = self.archives.put(upload.data, upload.kind)
            return self.store.add_version(
                bot.name,
                sha256,
                len(upload.data),
                upload.kind,
                per_day=per_day,
                build_minutes=minutes,
                actor=actor,
            )
        except UploadQuotaError as exc:
            raise HTTPException(429, str(exc), headers={"retry-after": str(exc.retry_after)}) from None
        except RevokedBotError as exc:
            raise HTTPException(409, str(exc)) from None
        except UnpackError as exc:
            raise HTTPException(400, f"archive refused: {exc}") from None
        except (ArchiveStoreError, OSError) as exc:
            log.error("ladder pages: %s", exc)
            raise HTTPException(503, "the ladder cannot keep archives just now; try again later") from None

    def make_live(self, bot: BotRecord, number: int, actor: str) -> Version:
        """409 for a version that cannot go live (not validated), 404 for no such version."""
        try:
            return self.store.make_live(bot.name, number, actor=actor)
        except VersionMoveError as exc:
            raise HTTPException(409, str(exc)) from None
        except UnknownVersionError as exc:
            raise HTTPException(404, str(exc)) from None

    def versions_json(self, bot: BotRecord) -> dict[str, Any]:
        live = self.store.live_version(bot.name)
        return {
            "bot": bot.name,
            "live": None if live is None else live.number,
            "uploads_left": self.store.versions.uploads_left(bot.name, self.settings.uploads_per_day),
            "build_minutes_left": round(
                self.store.versions.build_minutes_left(bot.name, self.settings.build_minutes_per_day), 1
            ),
            "versions": [v.to_json(logs=True) for v in self.store.versions_of(bot.name)],
        }

    @property
    def folder(self) -> Path:
        """The ladder's folder (the archives' parent), where `ladder serve` keeps private logs."""
        return self.settings.archives.parent

    def private_logs(self, bot: str, limit: int = PAGE_LOGS) -> list[tuple[int, str]]:
        """The bot's latest matches with a private log, newest first: (match id, the log's text)."""
        found = []
        for path in private_log(self.folder, bot, "match-0").parent.glob("match-*.log"):
            number = path.stem.removeprefix("match-")
            if number.isdigit():
                found.append((int(number), path))
        found.sort(reverse=True)
        return [(number, _read_log(path)) for number, path in found[:limit]]

    def private_log_text(self, bot: BotRecord, match: int) -> str:
        """404 when the bot has no private log of ``match`` (it did not play it, or was not started)."""
        path = private_log(self.folder, bot.name, f"match-{match}")
        if not path.is_file():
            raise HTTPException(404, f"{bot.name} has no private log of match {match}")
        return _read_log(path)

    # -- the API --------------------------------------------------------------------------------------
    async def _acting(self, request: Request) -> tuple[BotRecord, str]:
        try:
            return await self.community.acting(request, request.path_params.get("name"), {})
        except UnknownBotError as exc:
            raise HTTPException(404, str(exc)) from None

    async def upload_api(self, request: Request) -> Response:
        bot, actor = await self._acting(request)  # before the body: a stranger's upload is not read
        upload = await read_upload(request, self.settings.limits.archive_bytes)
        version = await trio.to_thread.run_sync(self.receive, bot, upload, actor)
        return JSONResponse(version.to_json(), status_code=201)

    async def versions_api(self, request: Request) -> Response:
        bot, _ = await self._acting(request)
        return JSONResponse(await trio.to_thread.run_sync(self.versions_json, bot))

    async def live_api(self, request: Request) -> Response:
        bot, actor = await self._acting(request)
        number = path_number(request, "number", "version", maximum=MAX_VERSION)
        version = await trio.to_thread.run_sync(self.make_live, bot, number, actor)
        return JSONResponse(version.to_json())

    async def log_api(self, request: Request) -> Response:
        bot, _ = await self._acting(request)  # its token or its owner's session: nobody else's
        match = path_number(request, "match", "match", maximum=MAX_ID)
        text = await trio.to_thread.run_sync(self.private_log_text, bot, match)
        return PlainTextResponse(text)

    def routes(self) -> list[BaseRoute]:
        """Before the ladder's public routes (``/bots/{name:path}`` would take them)."""

        def api(endpoint: Endpoint) -> Endpoint:
            return store_faults(endpoint, "ladder API", "; try again later")

        return [
            Route(
                "/api/bots/{name:path}/submissions/{number}/live",
                api(self.live_api),
                methods=["POST"],
            ),
            Route("/api/bots/{name:path}/submissions", api(self.upload_api), methods=["POST"]),
            Route("/api/bots/{name:path}/submissions", api(self.versions_api), methods=["GET"]),
            Route("/api/bots/{name:path}/logs/{match}", api(self.log_api), methods=["GET"]),
            # The token's own bot (`ladder submit`: a token knows its bot).
            Route("/api/submissions", api(self.upload_api), methods=["POST"]),
        ]


def _read_log(path: Path) -> str:
    """A private log's text (capped where it was written; a bot's bytes need not be UTF-8)."""
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        return f"[cellarena: the log cannot be read: {exc.strerror}]"
