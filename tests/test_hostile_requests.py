"""Arbitrary requests at every route of every web app cellarena serves: never a 5xx, never a traceback.

The apps are the ones the commands serve (`ladder web` with sign-ups and the live match, `cellarena
web`, `replay view`, and the live view of `match --web` and `serve --web`), called in this process
(`asgi_calls`). Hypothesis fills each route's parameters with numbers of thousands of digits, digits
that are not ASCII, names with slashes and control characters, arbitrary query strings and headers
(Host, Origin, cookies, tokens), and bodies: arbitrary bytes, forms, and JSON nested deep or huge.
Every answer must be below 500, and the log must hold no traceback.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from asgi_calls import call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from web_apps import GAME, LOOPBACK, REPLAY, ladder

from cellarena.arena.results import MatchRow, RatingPoint, SeatRow
from cellarena.arena.tournament_store import Standing
from cellarena.arena.web.pages import results_app
from cellarena.server.web.live import LiveFeed, LiveMatches, live_app
from cellarena.server.web.replays import viewer_app

#: Examples per app: with a few ms each, the four apps take a few seconds. A longer hunt:
#: CELLARENA_HOSTILE_EXAMPLES=5000.
EXAMPLES = int(os.environ.get("CELLARENA_HOSTILE_EXAMPLES", "120"))
PARAM = re.compile(r"{(\w+)(?::(\w+))?}")


class Source:
    """A tournament of one match, whose replay is a real file (`cellarena web` over a results folder)."""

    title = "cup"
    game = GAME

    def standings(self) -> list[Standing]:
        return [
            Standing("a", 1.0, 25.0, 8.0, 1, 1, 0, 0, 0.0, 0),
            Standing("b", 0.0, 25.0, 8.0, 1, 0, 0, 1, 0.0, 0),
        ]

    def matches(self) -> list[MatchRow]:
        seats = (
            SeatRow("a", 1, 0, 0, 0, forfeit=False, crashed=False),
            SeatRow("b", 2, 0, 0, 0, forfeit=False, crashed=False),
        )
        return [MatchRow(0, "k0", 1, None, "a", "test", 30, REPLAY, "t", seats)]

    def match(self, index: int) -> MatchRow | None:
        return next((m for m in self.matches() if m.index == index), None)

    def rating_history(self) -> list[RatingPoint]:
        return [RatingPoint(0, "a", 1.0), RatingPoint(0, "b", 0.0)]


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Any, dict[str, str]]]]:
    """Each app, with the tokens its requests may carry."""
    made = ladder(tmp_path_factory.mktemp("ladder"))
    feed = LiveFeed(GAME)
    live = LiveMatches(GAME, "127.0.0.1", lambda: [(1, ["a", "b"])])
    yield {
        "ladder web": (made.app, made.tokens),
        "cellarena web": (results_app({"cup": Source()}, LOOPBACK), {}),
        "replay view": (viewer_app(REPLAY, LOOPBACK), {}),
        "live view": (live_app(feed, live, LOOPBACK), {}),
    }
    made.store.close()


def routes_of(app: Any) -> list[tuple[str, list[str]]]:
    """Every HTTP route of ``app``: its path template and methods (the static files' mount too)."""
    found: list[tuple[str, list[str]]] = []
    routes: list[BaseRoute] = app.routes
    for route in routes:
        if isinstance(route, Route):
            found.append((route.path, sorted(route.methods or ["GET"])))
        elif isinstance(route, Mount):
            found.append((route.path + "/{path:path}", ["GET"]))
        elif isinstance(route, WebSocketRoute):
            found.append((route.path, ["GET"]))  # asked over HTTP: 404, not a crash
    return found


HUGE_DIGITS = st.integers(19, 6000).map(lambda n: "9" * n)
ODD = st.sampled_from(
    ["1", "2", "0", "3", "alice", "bob", "cup", "cup.0", "replay", "²", "٣", "-1", "1_0", "..", ".", "%00"]
)
ODD = ODD | st.sampled_from(["%2F", "%C2%B2", "%FF", "a%2Fb", "x" * 300])
SEGMENT = st.one_of(ODD, HUGE_DIGITS, st.text(max_size=40).map(lambda t: quote(t, safe="")))
PATH_PARAM = st.one_of(SEGMENT, st.lists(SEGMENT, min_size=1, max_size=4).map("/".join))
QUERY_KEYS = st.sampled_from(["before", "from", "count", "i", "seat", "x", ""])
QUERY = st.one_of(
    st.lists(st.tuples(QUERY_KEYS, st.one_of(ODD, HUGE_DIGITS, st.text(max_size=20))), max_size=4).map(
        lambda pairs: "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs).encode()
    ),
    st.binary(max_size=60),
)
JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["name", "password", "owner", "opponent", "refuse", "bot", "game", "csrf", "invite"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)
BODY = st.one_of(
    st.just(b""),
    st.binary(max_size=200),
    JSONS.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 20_000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 20_000).map(lambda n: b'{"name": ' + b"[" * n),
    st.integers(4000, 6000).map(lambda n: b'{"name": ' + b"1" * n + b"}"),
    st.integers(1, 40_000).map(lambda n: b"name=" + b"x" * n),
    st.dictionaries(
        st.sampled_from(["name", "password", "csrf", "opponent", "refuse", "back", "reason"]),
        st.text(max_size=30),
        max_size=4,
    ).map(lambda d: "&".join(f"{k}={quote(v)}" for k, v in d.items()).encode()),
)
HEADER_VALUE = st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=60).map(
    lambda t: t.encode("latin-1")
)


@st.composite
def headers(draw: st.DrawFn, tokens: dict[str, str]) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    chosen = {
        b"accept": st.sampled_from([b"application/json", b"text/html", b"*/*"]),
        b"content-type": st.sampled_from(
            [
                b"application/json",
                b"application/x-www-form-urlencoded",
                b"text/plain",
                b"application/json; charset=latin-1",
                b"application/gzip",
                b"multipart/form-data; boundary=x",
            ]
        ),
        b"origin": st.sampled_from(
            [b"http://127.0.0.1:8080", b"null", b"http://evil.example", b"http://[::1", b"x"]
        ),
        b"referer": st.sampled_from([b"http://127.0.0.1:8080/signup", b"http://[x/", b"::::"]),
        b"authorization": st.one_of(
            st.sampled_from([f"Bearer {t}".encode() for t in tokens.values()] or [b"Bearer x"]), HEADER_VALUE
        ),
        b"cookie": st.one_of(
            HEADER_VALUE.map(lambda v: b"cellarena_session=" + v),
            HEADER_VALUE.map(lambda v: b"cellarena_form=" + v),
        ),
        b"x-csrf-token": HEADER_VALUE,
        b"x-forwarded-for": HEADER_VALUE,
        b"x-forwarded-host": HEADER_VALUE,
        b"accept-encoding": st.sampled_from([b"gzip", b"br", b"gzip;q=0, *"]),
        b"range": HEADER_VALUE,
    }
    for name in draw(st.lists(st.sampled_from(sorted(chosen)), unique=True, max_size=5)):
        out.append((name, draw(chosen[name])))
    name = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).map(str.encode)
    out += draw(st.lists(st.tuples(name, HEADER_VALUE), max_size=2))
    return out


HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1:8080", "localhost", "[::1]:8080"]),
    HEADER_VALUE.map(lambda v: v.decode("latin-1")),
)


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("name", ["ladder web", "cellarena web", "replay view", "live view"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_no_request_to_any_route_gets_a_5xx_or_logs_a_traceback(
    apps: dict[str, tuple[Any, dict[str, str]]], name: str, data: st.DataObject
) -> None:
    app, tokens = apps[name]
    template, methods = data.draw(st.sampled_from(routes_of(app)), label="route")
    path = PARAM.sub(
        lambda m: data.draw(PATH_PARAM if m.group(2) == "path" else SEGMENT, label=m.group(1)), template
    )
    any_method = st.sampled_from(["GET", "POST", "HEAD", "PUT", "OPTIONS"])
    method = data.draw(st.one_of(st.sampled_from(methods), any_method), label="method")
    query = data.draw(QUERY, label="query")
    sent = data.draw(headers(tokens), label="headers")
    body = data.draw(BODY, label="body") if method not in ("GET", "HEAD") else b""
    host = data.draw(HOSTS, label="host")
    captured = Captured()
    root = logging.getLogger()
    root.addHandler(captured)
    try:
        answer = await call(app, method, path, query=query, headers=sent, body=body, host=host)
    finally:
        root.removeHandler(captured)
    assert answer.raised is None, f"{method} {path[:200]}: raised {answer.raised!r}"
    assert 100 <= answer.status < 500, (method, path[:200], answer.status, answer.text[:500])
    tracebacks = [r for r in captured.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage()[:300] for r in tracebacks]
