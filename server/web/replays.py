"""The replay player's routes: the page, the replay's facts, its frames in chunks, and observations.

A `ReplayLibrary` maps an id in the address to a replay file; the single-file viewer has one entry,
a tournament or the ladder resolve their match ids. Re-simulation runs in a worker thread under the
timeline's lock, so a long replay never stalls the server's other requests.

A replay's path on the server never leaves it: the pages, the JSON and the error messages name a
replay by its library's `label` (the ladder's "match 12"), and a download by its `file_name`.
"""

from __future__ import annotations

import functools
import logging
import os
import zlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.server.replay import Replay, ReplayError, file_digest, read_replay, strip_debug_bytes
from cellarena.server.web.hosts import AllowedHosts
from cellarena.server.web.numbers import query_number
from cellarena.server.web.templating import render
from cellarena.server.web.timeline import Timeline, final_frame

#: Timelines kept in memory at once; more replays are re-read when asked for again.
KEEP = 8
#: The most frames one request for frames asks for (the timeline sends fewer past its chunk size).
MAX_COUNT = 10_000

log = logging.getLogger("cellarena.web")


class ReplayLibrary:
    """Replay files by id, read and re-simulated on first use. ``find(id)`` gives a path or None; it
    runs in a worker thread, so it may read a database. ``label(id)`` is what pages call the replay and
    ``file_name(id)`` what its download is saved as: never its path (default ``replay ID``)."""

    def __init__(
        self,
        find: Callable[[str], Path | None],
        *,
        debug: bool = True,
        errors: bool = True,
        label: Callable[[str], str] | None = None,
        file_name: Callable[[str], str] | None = None,
        served: Callable[[Path], str | None] | None = None,
    ) -> None:
        self.find = find
        #: The id of a file among those served, or None: a fork's origin is linked only when served.
        self.served = served
        #: Whether the frames and the file carry the bots' debug drawings (`Timeline`), and whether
        #: those carry the exceptions the bots raised (a ladder's public pages: never).
        self.debug = debug
        self.errors = errors
        self.label = label or (lambda rid: f"replay {rid}")
        self.file_name = file_name or (lambda rid: f"replay-{rid}.replay")
        self._open: OrderedDict[str, Timeline] = OrderedDict()
        self._lock = trio.Lock()
        self._finals: dict[str, bytes] = {}
        self._final_lock = trio.Lock()  # thumbnails re-simulate one at a time, so pages stay quick

    @classmethod
    def single(cls, rid: str, path: Path) -> ReplayLibrary:
        """The one file ``path`` as ``rid`` (`replay view`): named by its file name, not its folders.
        A fork's origin beside it (`origin_of` checks its digest) is served too, as ``origin-...``."""
        files = {rid: path}

        def served(origin: Path) -> str:
            oid = f"origin-{file_digest(origin)[:16]}"
            files[oid] = origin
            return oid

        return cls(
            files.get,
            label=lambda asked: files[asked].name if asked in files else asked,
            file_name=lambda asked: files[asked].name if asked in files else f"{asked}.replay",
            served=served,
        )

    def origin_of(self, replay: Replay, prefix: str) -> dict[str, Any] | None:
        """A fork's origin for the player: its file name and tick, and ``link``, the origin's page when
        it is served (a file of that name beside the fork, with the digest the fork names). None for
        a replay that is no fork. Reads files: call it in a worker thread."""
        forked = replay.header.get("forked_from")
        if not isinstance(forked, dict):
            return None
        name = os.path.basename(str(forked.get("replay") or ""))  # a name, never a path
        out: dict[str, Any] = {"replay": name, "tick": forked.get("tick"), "link": None}
        beside = Path(replay.path).parent / name
        if (
            name
            and self.served is not None
            and beside.is_file()
            and file_digest(beside) == forked.get("sha256")
        ):
            rid = self.served(beside)
            if rid is not None:
                out["link"] = f"{prefix}/{rid}/"
        return out

    def hidden(self, exc: ReplayError, rid: str, path: str | os.PathLike[str]) -> ReplayError:
        """``exc`` as visitors see it: the replay's path replaced by its label (the log has it whole)."""
        log.warning("replay %s: %s", rid[:40], exc)
        return ReplayError(str(exc).replace(os.fspath(path), self.label(rid)))

    async def final(self, rid: str) -> bytes:
        """The JSON of the match's last frame (for thumbnails), re-simulated once, one replay at a time."""
        if rid not in self._finals:
            path = await trio.to_thread.run_sync(self.find, rid)  # it may read a database
            if path is None:
                raise HTTPException(404, f"no replay {rid!r}")
            async with self._final_lock:
                if rid not in self._finals:
                    try:
                        final = await trio.to_thread.run_sync(final_frame, path)
                    except ReplayError as exc:
                        raise self.hidden(exc, rid, path) from None
                    self._finals[rid] = zlib.compress(final, 1)
        return zlib.decompress(self._finals[rid])

    async def timeline(self, rid: str) -> Timeline:
        async with self._lock:
            if rid in self._open:
                self._open.move_to_end(rid)
                return self._open[rid]
            path = await trio.to_thread.run_sync(self.find, rid)
            if path is None:
                raise HTTPException(404, f"no replay {rid!r}")
            try:
                replay = await trio.to_thread.run_sync(read_replay, path)
                timeline = Timeline(replay, debug=self.debug, errors=self.errors)
                await trio.to_thread.run_sync(timeline.count_frames)
            except ReplayError as exc:
                raise self.hidden(exc, rid, path) from None
            self._open[rid] = timeline
            while len(self._open) > KEEP:
                self._open.popitem(last=False)
            return timeline


def _in_range(timeline: Timeline, index: int, name: str) -> None:
    if not 0 <= index < timeline.count:
        raise HTTPException(
            400, f"{name}={index}: no such frame; this replay has frames 0 to {timeline.count - 1}"
        )


async def _made(
    library: ReplayLibrary, rid: str, timeline: Timeline, make: Callable[[int, int], bytes], a: int, b: int
) -> Response:
    """The JSON ``make(a, b)`` gives, run in a thread under the timeline's lock; a replay that fails
    to re-simulate there is answered as `ReplayLibrary.hidden` says."""
    async with timeline.lock:
        try:
            body = await trio.to_thread.run_sync(make, a, b)
        except ReplayError as exc:
            raise library.hidden(exc, rid, timeline.replay.path) from None
    return Response(body, media_type="application/json")


def player_html(title: str, api: str, game: str, *, live: str = "") -> str:
    """The player page for the replay whose API lives at ``api``, or for the live feed at ``live``."""
    return render("player.html", title=title, api=api, game=game, live=live)


def replay_routes(library: ReplayLibrary, prefix: str = "/replays") -> list[BaseRoute]:
    """The player's page at ``{prefix}/{id}/`` and its API at ``/api{prefix}/{id}/...``. The file
    download carries the bots' debug drawings and exceptions as the library's frames do."""

    async def player(request: Request) -> Response:
        rid = request.path_params["rid"]
        timeline = await library.timeline(rid)
        title = f"{library.label(rid)}: {timeline.replay.game}, {' vs '.join(timeline.replay.names)}"
        return HTMLResponse(player_html(title, f"/api{prefix}/{rid}", timeline.replay.game))

    async def meta(request: Request) -> Response:
        rid = request.path_params["rid"]
        timeline = await library.timeline(rid)
        origin = await trio.to_thread.run_sync(library.origin_of, timeline.replay, prefix)
        extra = {} if origin is None else {"forked_from": origin}
        return JSONResponse({**timeline.meta(), "name": library.label(rid), **extra})

    async def frames(request: Request) -> Response:
        rid = request.path_params["rid"]
        timeline = await library.timeline(rid)
        start = query_number(request, "from", 0)
        count = query_number(request, "count", 32, maximum=MAX_COUNT)
        _in_range(timeline, start, "from")
        return await _made(library, rid, timeline, timeline.chunk, start, count)

    async def observation(request: Request) -> Response:
        rid = request.path_params["rid"]
        timeline = await library.timeline(rid)
        index, seat = query_number(request, "i", 0), query_number(request, "seat", 0)
        _in_range(timeline, index, "i")
        return await _made(library, rid, timeline, timeline.observation, index, seat)

    async def final(request: Request) -> Response:
        body = await library.final(request.path_params["rid"])
        return Response(body, media_type="application/json")

    async def download(request: Request) -> Response:
        rid = request.path_params["rid"]
        timeline = await library.timeline(rid)
        data = await trio.Path(timeline.replay.path).read_bytes()
        if not (library.debug and library.errors):  # the bots' owners' (a ladder's public pages)
            strip = functools.partial(strip_debug_bytes, drawings=library.debug)
            data, _ = await trio.to_thread.run_sync(strip, data)
        return Response(
            data,
            media_type="application/octet-stream",
            headers={"content-disposition": f'attachment; filename="{library.file_name(rid)}"'},
        )

    async def slash(request: Request) -> Response:
        return RedirectResponse(f"{prefix}/{request.path_params['rid']}/")

    return [
        Route(prefix + "/{rid}/", player),
        Route(prefix + "/{rid}", slash),
        Route("/api" + prefix + "/{rid}/meta", meta),
        Route("/api" + prefix + "/{rid}/frames", frames),
        Route("/api" + prefix + "/{rid}/observation", observation),
        Route("/api" + prefix + "/{rid}/final", final),
        Route("/api" + prefix + "/{rid}/file", download),
    ]


def viewer_app(path: Path, allowed_hosts: AllowedHosts | None = None) -> Starlette:
    """`cellarena replay view`'s app: the one replay at ``path`` as ``/replays/replay/`` (``/`` leads
    there)."""
    from cellarena.server.web.app import build_app

    async def home(_request: Request) -> Response:
        return RedirectResponse("/replays/replay/")

    library = ReplayLibrary.single("replay", path)
    return build_app([Route("/", home), *replay_routes(library)], allowed_hosts=allowed_hosts)
