"""One HTTP request to an ASGI app in this process (no server, no port), as hypercorn would send it:
the answer's status, headers and body, and the exception the app raised if any (starlette re-raises a
500's exception after sending the page)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    raised: BaseException | None = None

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


async def call(
    app: Any,
    method: str,
    path: str | bytes,
    *,
    query: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    host: str | None = "127.0.0.1:8080",
    client: str = "127.0.0.1",
) -> Answer:
    """``method path?query`` with ``headers`` (a ``Host`` first, unless ``host`` is None) and ``body``,
    sent in chunks of 1 KB."""
    raw = path if isinstance(path, bytes) else path.encode()
    sent_headers = ([(b"host", host.encode())] if host is not None else []) + list(headers or [])
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        # hypercorn's path: the raw path percent-decoded (as latin-1 bytes read as UTF-8).
        "path": _unquote(raw),
        "raw_path": raw,
        "query_string": query,
        "root_path": "",
        "headers": sent_headers,
        "client": (client, 50000),
        "server": ("127.0.0.1", 8080),
    }
    chunks = [body[i : i + 1024] for i in range(0, len(body), 1024)] or [b""]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raised = None
    try:
        await app(scope, receive, send)
    except Exception as exc:  # what the server would log as a traceback
        raised = exc
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    status = 0 if start is None else start["status"]
    got = {} if start is None else {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(status, got, data, raised)


def _unquote(raw: bytes) -> str:
    from urllib.parse import unquote_to_bytes

    return unquote_to_bytes(raw).decode("utf-8", "replace")
