"""The community ladder's HTTP API (`community_pages`), its refusals one by one: each a clear JSON error.

The app is called as ASGI in this process (no server, no port): the refusals are about the requests,
and the processes test (test_ladder_community_processes.py) covers the real `ladder web`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.web.public_pages import LadderSite
from cellarena.arena.ladder.web.public_routes import public_routes
from cellarena.server.web.app import build_app


async def call(
    app: Any, method: str, path: str, *, token: str | None = None, body: bytes = b""
) -> tuple[int, dict[str, Any]]:
    """One request to the ASGI ``app``: (status, JSON body)."""
    headers = [(b"content-type", b"application/json"), (b"accept", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict[str, Any]] = []
    chunks = [body[i : i + 1024] for i in range(0, len(body), 1024)] or [b""]

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(data)


@pytest.fixture
def ladder(tmp_path: Path) -> Any:
    store = LadderStore(tmp_path / "ladder.sqlite")
    tokens = {name: store.add_bot(name, "rezzo")[1].secret for name in ("alice", "bob")}
    tokens["other"] = store.add_bot("other", "cata")[1].secret
    app = build_app(public_routes(LadderSite(store, "rezzo")))
    yield app, store, tokens
    store.close()


async def test_a_change_needs_the_bots_own_token(ladder: Any) -> None:
    app, store, tokens = ladder
    status, body = await call(app, "POST", "/api/bots/alice/resume")
    assert status == 401 and "Authorization: Bearer TOKEN" in body["error"]
    status, body = await call(app, "POST", "/api/bots/alice/resume", token="cla_" + "x" * 43)
    assert status == 401 and "no active bot's" in body["error"]
    status, body = await call(app, "POST", "/api/bots/alice/resume", token=tokens["bob"])
    assert status == 403 and "that token is bob's, not alice's" in body["error"]
    status, body = await call(
        app, "POST", "/api/challenges", token=tokens["other"], body=b'{"opponent": "bob"}'
    )
    assert status == 401  # a bot of another game's ladder
    store.pause("alice", "crashed")
    status, body = await call(app, "POST", "/api/bots/alice/resume", token=tokens["alice"])
    assert (status, body["resumed"]) == (200, True) and store.bot("alice").paused is None
    assert store.audit_log()[0].actor == "alice (api)"
    store.ban("alice", "cheating")
    status, body = await call(app, "POST", "/api/bots/alice/resume", token=tokens["alice"])
    assert status == 409 and "banned by the ladder's host (cheating)" in body["error"]


async def test_bad_bodies_are_refused_saying_what_to_send(ladder: Any) -> None:
    app, store, tokens = ladder
    cases = [
        (b"x" * 5000, 413, "over 4096 bytes"),
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "send a JSON object"),
        (b"{}", 400, '{"opponent": "NAME"}'),
        (json.dumps({"opponent": "b" * 10_240}).encode(), 413, "over 4096 bytes"),
    ]
    for body, status, text in cases:
        got, answer = await call(app, "POST", "/api/challenges", token=tokens["alice"], body=body)
        assert (got, text in answer["error"]) == (status, True), (body[:20], answer)
    got, answer = await call(
        app, "POST", "/api/bots/bob/challenges", token=tokens["bob"], body=b'{"refuse": "yes"}'
    )
    assert got == 400 and '{"refuse": true}' in answer["error"]
    assert store.pending_challenges("rezzo") == []


async def test_challenges_and_refusals_over_the_api(ladder: Any) -> None:
    app, store, tokens = ladder
    store.set_policy(CommunityPolicy(challenges_per_day=1))
    status, body = await call(
        app, "POST", "/api/bots/bob/challenges", token=tokens["bob"], body=b'{"refuse": true}'
    )
    assert (status, body["refuses_challenges"]) == (200, True)
    status, body = await call(
        app, "POST", "/api/challenges", token=tokens["alice"], body=b'{"opponent": "bob"}'
    )
    assert status == 409 and "bob refuses challenges" in body["error"]
    await call(app, "POST", "/api/bots/bob/challenges", token=tokens["bob"], body=b'{"refuse": false}')
    status, body = await call(
        app, "POST", "/api/challenges", token=tokens["alice"], body=b'{"opponent": "bob"}'
    )
    assert status == 201 and (body["challenger"], body["opponent"], body["rated"]) == ("alice", "bob", False)
    status, body = await call(
        app, "POST", "/api/challenges", token=tokens["alice"], body=b'{"opponent": "bob"}'
    )
    assert status == 429 and "--challenges-per-day 1" in body["error"]
    status, body = await call(app, "GET", "/api/bots/bob/challenges")
    assert [c["challenger"] for c in body["challenges"]] == ["alice"]


async def test_stats_of_an_unknown_bot_or_another_games_are_not_found(ladder: Any) -> None:
    app, _, _ = ladder
    for path in ("/api/bots/nobody/stats", "/api/bots/other/stats", "/api/bots/nobody/challenges"):
        status, body = await call(app, "GET", path)
        assert status == 404 and "no bot" in body["error"], path
    status, body = await call(app, "GET", "/api/bots/alice/stats")
    assert status == 200 and body["matches"] == 0 and body["failures"] == {} and body["paused"] is None
