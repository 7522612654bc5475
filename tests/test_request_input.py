"""Numbers, JSON bodies and replay paths at the web apps' edge (issue 39, items 3 and 4).

Numbers in paths, query strings and bodies are read by one parser (`server.web.numbers`): ASCII digits,
bounded, else a clear 404 or 400. JSON bodies by one reader with size and depth limits
(`server.web.json_body`): a clear 400 or 413, never a 500 with a traceback. And a replay's path on
the server never leaves it: the ladder names replays by match number. Requests go to the apps in this
process (`asgi_calls`); tests/test_hostile_requests.py throws arbitrary ones at every route.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from asgi_calls import call
from starlette.exceptions import HTTPException
from starlette.requests import Request
from web_apps import REPLAY, Ladder, ladder

from cellarena.server.web.json_body import DRAIN_BYTES, JsonBodyError, nesting, parse_json, read_body
from cellarena.server.web.numbers import MAX_DIGITS, parse_number

HUGE = "9" * 5000  # past Python's 4300-digit limit for int()


@pytest.fixture
def site(tmp_path: Path) -> Ladder:
    made = ladder(tmp_path)
    yield made
    made.store.close()


def test_a_number_is_ascii_digits_and_bounded() -> None:
    assert [parse_number(t) for t in ("0", "12", "007", "1" + "0" * 18)] == [0, 12, 7, 10**18]
    assert parse_number("9223372036854775807") == 2**63 - 1
    for text in ("", "²", "٣", "-1", "+1", " 1", "1 ", "1_000", "0x10", "1e3", HUGE, "1" * (MAX_DIGITS + 1)):
        assert parse_number(text) is None, text
    assert parse_number("9223372036854775808") is None  # past the largest id
    assert parse_number("11", maximum=10) is None


@pytest.mark.parametrize(
    "path",
    ["/matches/{n}", "/api/matches/{n}", "/replays/{n}/", "/api/replays/{n}/meta", "/account/replays/{n}"],
)
async def test_a_match_number_of_thousands_of_digits_or_not_ascii_is_not_found(
    site: Ladder, path: str
) -> None:
    for number in (HUGE, "%C2%B2", "%D9%A3", "-1", "1_0"):
        answer = await call(
            site.app, "GET", path.format(n=number), headers=[(b"accept", b"application/json")]
        )
        assert answer.raised is None, (path, number[:10], answer.raised)
        assert answer.status in (401, 404), (path, number[:10], answer.status, answer.text[:300])


async def test_the_owner_replay_endpoint_takes_no_digit_that_int_refuses(site: Ladder) -> None:
    bearer = (b"authorization", f"Bearer {site.tokens['alice']}".encode())
    for rid in ("%C2%B2", HUGE, "1"):
        answer = await call(site.app, "GET", f"/api/replays/{rid}/owner", headers=[bearer])
        assert answer.raised is None
        if rid == "1":
            assert answer.status == 200 and answer.body == site.replay.read_bytes()
            assert answer.headers["content-disposition"] == 'attachment; filename="ladder-1.replay"'
        else:
            assert answer.status == 404 and "has no match" in answer.json()["error"]


@pytest.mark.parametrize("name", ["from", "count", "i", "seat"])
async def test_a_frame_number_in_the_query_is_ascii_digits(site: Ladder, name: str) -> None:
    what = "frames" if name in ("from", "count") else "observation"
    for value, said in [
        (b"%D9%A3", "ASCII digits"),  # int() takes this one (3), and the next two
        (b"-1", "ASCII digits"),
        (b"1_0", "ASCII digits"),
        (HUGE.encode(), "at most"),
    ]:
        answer = await call(site.app, "GET", f"/api/replays/1/{what}", query=name.encode() + b"=" + value)
        assert answer.raised is None
        assert answer.status == 400 and said in answer.json()["error"], answer.text[:200]
    assert (await call(site.app, "GET", f"/api/replays/1/{what}", query=name.encode() + b"=1")).status == 200


def test_json_is_read_within_its_depth() -> None:
    assert parse_json(b'{"a": [1, {"b": "[[[[{{{{"}]}') == {"a": [1, {"b": "[[[[{{{{"}]}
    assert nesting(b'["\\"[[[", [[]]]') == 3  # an escaped quote does not end the string
    for data, said in [
        (b"[" * 33 + b"]" * 33, "nests deeper than 32"),
        (b"[" * 5000, "nests deeper than 32"),
        (b'{"n": ' + HUGE.encode() + b"}", "not JSON this server reads"),
        (b"\xff{}", "not UTF-8"),
        (b"{nope", "not JSON"),
    ]:
        with pytest.raises(JsonBodyError, match=said):
            parse_json(data)


SIGNUP = {"name": "carol", "password": "correct horse battery staple"}


@pytest.mark.parametrize(
    ("path", "body", "status", "said"),
    [
        ("/api/signup", b"[" * 8000 + b"]" * 8000, 400, "nests deeper than 32"),
        ("/api/signup", b'{"name": ' + HUGE.encode() + b"}", 400, "not JSON this server reads"),
        ("/api/signup", b"x" * 17_000, 413, "over 16 KB"),
        ("/api/signup", b"[1]", 400, "send a JSON object"),
        ("/api/owner/bots", b"[" * 8000 + b"]" * 8000, 400, "nests deeper than 32"),
        ("/api/challenges", b"[" * 2000 + b"]" * 2000, 400, "nests deeper than 32"),
        ("/api/challenges", b'{"opponent": "\xff"}', 400, "not UTF-8"),
        ("/api/bots/alice/challenges", b'{"refuse": ' + b"[" * 2000 + b"]" * 2000 + b"}", 400, "nests"),
    ],
)
async def test_a_json_body_too_deep_too_big_or_not_json_is_a_clear_error(
    site: Ladder, path: str, body: bytes, status: int, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {site.tokens['alice']}".encode()),
    ]
    if path in ("/api/signup", "/api/owner/bots"):
        headers = headers[:1]
    with caplog.at_level(logging.WARNING):
        answer = await call(site.app, "POST", path, headers=headers, body=body)
    assert answer.raised is None and "Traceback" not in caplog.text
    assert answer.status == status and said in answer.json()["error"], answer.text[:300]
    good = json.dumps(SIGNUP).encode()
    assert (await call(site.app, "POST", "/api/signup", headers=headers[:1], body=good)).status == 201


async def test_replays_are_named_by_match_number_never_by_path(site: Ladder) -> None:
    folder = str(site.replay.parent)
    meta = await call(site.app, "GET", "/api/replays/1/meta")
    assert meta.status == 200 and "path" not in meta.json()
    assert meta.json()["name"] == "match 1"
    page = await call(site.app, "GET", "/replays/1/")
    assert page.status == 200 and "<title>match 1: cloth" in page.text
    download = await call(site.app, "GET", "/api/replays/1/file")
    assert download.headers["content-disposition"] == 'attachment; filename="ladder-1.replay"'
    damaged = await call(site.app, "GET", "/api/replays/2/meta")  # the reader's message names the file
    assert damaged.status == 422 and damaged.json()["error"].startswith("match 2: not a cellarena replay")
    pages = [
        "/",
        "/matches",
        "/matches/1",
        "/api/matches/1",
        "/api/matches",
        "/bots/alice",
        "/api/bots/alice",
    ]
    replays = ["/api/replays/1/frames", "/api/replays/1/final", "/api/replays/2/frames", "/replays/2/"]
    for path in pages + replays:
        answer = await call(site.app, "GET", path)
        assert answer.status in (200, 422), (path, answer.status)
        assert folder not in answer.text and "m1.replay" not in answer.text, path


def test_the_player_shows_the_name_it_is_given_not_a_path() -> None:
    script = (Path(__file__).parent.parent / "server" / "web" / "static" / "player.js").read_text()
    assert "m.path" not in script and "${m.name} · seed" in script
    assert REPLAY.name not in script


async def test_an_address_with_raw_bytes_past_ascii_is_a_400_not_a_crash(site: Ladder) -> None:
    answer = await call(site.app, "GET", "/api/matches", query=b"before=\x80")
    assert answer.raised is None and answer.status == 400 and b"not ASCII" in answer.body


def _chunked(chunks: list[bytes], taken: list[int]) -> Request:
    """A request whose body arrives in ``chunks``; ``taken`` counts the chunks the app read."""

    async def receive() -> dict[str, object]:
        index = len(taken)
        taken.append(index)
        return {"type": "http.request", "body": chunks[index], "more_body": index + 1 < len(chunks)}

    return Request({"type": "http", "method": "POST", "headers": []}, receive)


async def test_a_refused_body_is_read_to_its_end_so_its_sender_reads_the_413() -> None:
    # Answering while a client still sends made it see a reset, not the 413 (over TLS, under load).
    chunks = [b"x" * 4096] * 25  # 100 KB against a 16 KB limit
    taken: list[int] = []
    with pytest.raises(HTTPException) as refused:
        await read_body(_chunked(chunks, taken), 16 * 1024)
    assert refused.value.status_code == 413 and "over 16 KB" in refused.value.detail
    assert len(taken) == len(chunks)
    # One far larger is not read to its end: at most DRAIN_BYTES past the limit.
    endless = [b"x" * 65536] * (4 * DRAIN_BYTES // 65536)
    taken = []
    with pytest.raises(HTTPException):
        await read_body(_chunked(endless, taken), 16 * 1024)
    assert len(taken) * 65536 <= 16 * 1024 + DRAIN_BYTES + 65536 < len(endless) * 65536


async def test_a_client_that_leaves_while_its_refused_body_is_drained_still_gets_the_413() -> None:
    messages = [
        {"type": "http.request", "body": b"x" * 20_000, "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, object]:
        return messages.pop(0)

    with pytest.raises(HTTPException) as refused:
        await read_body(Request({"type": "http", "method": "POST", "headers": []}, receive), 16 * 1024)
    assert refused.value.status_code == 413
