"""The results pages: a list of tournaments, each one's standings, rating chart and matches.

`results_routes` takes the `ResultsSource`s by id and serves them; the matches' replays play in the
server's replay player (`replay_routes`, mounted by the caller with `replay_library`). The ladder can
mount the same routes over its own source.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from urllib.parse import quote

import trio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from cellarena.arena.web.charts import color_of, rating_chart
from cellarena.arena.web.results import MatchRow, ResultsSource
from cellarena.server.web.pages import page
from cellarena.server.web.replays import ReplayLibrary


def replay_id(tid: str, index: int) -> str:
    return f"{tid}.{index}"


def replay_library(sources: Mapping[str, ResultsSource]) -> ReplayLibrary:
    """The player's library over the sources' matches: id ``TID.INDEX``."""

    def find(rid: str) -> Path | None:
        tid, _, index = rid.rpartition(".")
        source = sources.get(tid)
        if source is None or not index.isdigit():
            return None
        row = source.match(int(index))
        return None if row is None else row.replay

    return ReplayLibrary(find)


def _source(sources: Mapping[str, ResultsSource], tid: str) -> ResultsSource:
    source = sources.get(tid)
    if source is None:
        raise HTTPException(404, f"no tournament {tid!r} here")
    return source


def _seat_cell(row: MatchRow, colors: Mapping[str, str]) -> str:
    parts = []
    for s in row.seats:
        flags = "".join(
            f" <span class=flag>{what}</span>"
            for what, on in (("crashed", s.crashed), ("forfeit", s.forfeit))
            if on
        )
        parts.append(
            f'<span class=swatch style="background:{colors.get(s.bot, "#888")}"></span> '
            f"{escape(s.bot)} <span class=dim>#{s.rank}</span>{flags}"
        )
    return "<br>".join(parts)


def _counts(row: MatchRow) -> str:
    return "<br>".join(f"{s.late} / {s.invalid} / {s.illegal}" for s in row.seats)


def tournament_html(tid: str, source: ResultsSource) -> str:
    standings = source.standings()
    bots = [s.bot for s in standings]
    colors = {bot: color_of(i) for i, bot in enumerate(bots)}
    rows = "".join(
        f'<tr data-bot="{escape(s.bot)}"><td class=num>{n}</td>'
        f'<td><span class=swatch style="background:{colors[s.bot]}"></span> {escape(s.bot)}</td>'
        f"<td class=num>{s.rating:.2f}</td><td class=num>{s.mu:.2f}</td><td class=num>{s.sigma:.2f}</td>"
        f"<td class=num>{s.matches}</td><td class=num>{s.wins}</td><td class=num>{s.draws}</td>"
        f"<td class=num>{s.losses}</td><td class=num>{s.late_rate:.2%}</td>"
        f"<td class=num>{s.invalid_rate:.2%}</td><td class=num>{s.crashes}</td>"
        f"<td class=num>{s.bank_drawn_ms}</td></tr>"
        for n, s in enumerate(standings, 1)
    )
    matches = source.matches()
    match_rows = []
    for m in matches:
        rid = quote(replay_id(tid, m.index))
        if m.replay is not None:
            thumb = f'<canvas class=thumb width=96 height=96 data-final="/api/replays/{rid}/final"></canvas>'
            links = f'<a href="/replays/{rid}/">watch</a> · <a href="/api/replays/{rid}/file">replay file</a>'
        else:
            thumb, links = '<div class="thumb none">no replay</div>', ""
        winner = escape(m.winner) if m.winner else "draw"
        match_rows.append(
            f'<tr data-match="{m.index}"><td>{thumb}</td><td class=num>{m.index}</td>'
            f"<td class=num>{m.round}</td>"
            f"<td>{escape(m.map or '')}</td><td>{_seat_cell(m, colors)}</td><td>{winner}</td>"
            f"<td>{escape(m.reason)}</td><td class=num>{m.ticks}</td><td class=num>{_counts(m)}</td>"
            f"<td>{links}</td></tr>"
        )
    body = (
        f"<header><h1>{escape(source.title)}: {escape(source.game)}</h1>"
        f"<div class=subtitle>{len(matches)} matches finished · "
        '<a href="/">all tournaments</a></div></header>'
        '<main class="results">'
        "<section class=panel><h2>Standings</h2>"
        "<table class=list id=standings><tr><th>#</th><th>bot</th>"
        '<th title="mu - 3 sigma: the rating the standings sort by">rating</th><th>mu</th><th>sigma</th>'
        "<th>matches</th><th>wins</th><th>draws</th><th>losses</th>"
        '<th title="late or missing answers per tick">late</th>'
        '<th title="answers the server could not read, per tick">invalid</th><th>crashes</th>'
        '<th title="ms of time bank drawn (docs/protocol.md#the-time-bank)">bank ms</th></tr>'
        f"{rows}</table></section>"
        "<section class=panel><h2>Rating after each match</h2>"
        f"{rating_chart(source.rating_history(), bots)}</section>"
        "<section class=panel><h2>Matches</h2><table class=list id=matches><tr><th>final board</th><th>#</th>"
        "<th>round</th><th>map</th><th>seats (rank)</th><th>winner</th><th>how it ended</th><th>ticks</th>"
        '<th title="late / invalid / illegal, per seat">late / invalid / illegal</th><th></th></tr>'
        + "".join(match_rows)
        + "</table>"
        # The counts column's three numbers, said once for the whole table.
        + "<p class=legend id=counts-legend><b>late / invalid / illegal</b>, one line per seat in the "
        "order of the seats column: <b>late</b> ticks whose answer came after the budget or never; "
        "<b>invalid</b> answers the server could not read (not a well-formed answer, or a move code "
        "that does not exist); <b>illegal</b> moves the game refused and played as a no-op.</p>"
        "</section></main>"
        '<script src="/static/palette.js"></script>'
        f'<script src="/static/games/{escape(source.game)}.js"></script>'
        '<script src="/static/thumbs.js"></script>'
    )
    return page(f"{source.title}: standings", body)


def index_html(sources: Mapping[str, ResultsSource]) -> str:
    items = "".join(
        f'<tr><td><a href="/t/{quote(tid)}/">{escape(s.title)}</a></td><td>{escape(s.game)}</td></tr>'
        for tid, s in sources.items()
    )
    body = (
        "<header><h1>Tournaments</h1></header><main class=results><section class=panel>"
        f"<table class=list id=tournaments><tr><th>results</th><th>game</th></tr>{items}</table>"
        "</section></main>"
    )
    return page("tournaments", body)


def results_routes(sources: Mapping[str, ResultsSource]) -> list[BaseRoute]:
    """``/`` (the list, or the one tournament), ``/t/{tid}/`` and ``/api/t/{tid}/standings``."""

    async def index(_request: Request) -> Response:
        if len(sources) == 1:
            return RedirectResponse(f"/t/{quote(next(iter(sources)))}/")
        return HTMLResponse(index_html(sources))

    async def tournament(request: Request) -> Response:
        tid = request.path_params["tid"]
        source = _source(sources, tid)
        return HTMLResponse(await trio.to_thread.run_sync(tournament_html, tid, source))

    async def standings(request: Request) -> Response:
        source = _source(sources, request.path_params["tid"])
        rows = await trio.to_thread.run_sync(source.standings)
        return JSONResponse([s.to_json() for s in rows])

    async def slash(request: Request) -> Response:
        return RedirectResponse(f"/t/{quote(request.path_params['tid'])}/")

    return [
        Route("/", index),
        Route("/t/{tid}/", tournament),
        Route("/t/{tid}", slash),
        Route("/api/t/{tid}/standings", standings),
    ]
