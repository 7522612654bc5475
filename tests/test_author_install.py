"""The bot author's one install (docs/sdk.md, section 1; README's first command).

The fast part: the viewer's static files are served when they are symlinks, as an editable install
in strict mode lays them (its `replay view` was a blank page: every asset a 404)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from starlette.routing import Mount

from cellarena.server.web.app import STATIC, build_app, static_files


async def _get(app: Any, path: str) -> tuple[int, bytes]:
    """GET ``path`` from ``app`` in this process: the status and the body. (tests/asgi_calls.py answers
    every second receive with a disconnect, which cancels a file response before it starts.)"""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8080")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            return {"type": "http.request", "body": b"", "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with trio.fail_after(10):
        await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _linked_static(tmp_path: Path) -> Path:
    """A static folder whose files are symlinks into another folder, as setuptools' strict mode makes."""
    real = tmp_path / "checkout"
    real.mkdir()
    (real / "player.js").write_text("// the player\n")
    (tmp_path / "secret.txt").write_text("not to be served\n")
    linked = tmp_path / "build" / "static"
    linked.mkdir(parents=True)
    (linked / "player.js").symlink_to(real / "player.js")
    return linked


async def test_a_symlinked_static_file_is_served(tmp_path: Path) -> None:
    app = build_app([Mount("/linked", app=static_files(_linked_static(tmp_path)))])
    assert await _get(app, "/linked/player.js") == (200, b"// the player\n")
    # Following links does not let a request climb out of the folder.
    for path in ("/linked/../secret.txt", "/linked/%2e%2e/%2e%2e/secret.txt", "/linked/..%2f..%2fsecret.txt"):
        status, body = await _get(app, path)
        assert status == 404 and b"not to be served" not in body, path


async def test_the_viewer_assets_are_served_from_the_package() -> None:
    app = build_app([])
    assert await _get(app, "/static/player.js") == (200, (STATIC / "player.js").read_bytes())
