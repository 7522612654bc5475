"""The HTML shell every page shares, and the readable error page (never a stack trace)."""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from cellarena.server.web.templating import render


def page(title: str, body: str, *, head: str = "") -> str:
    """A whole HTML document with the viewer's stylesheet; ``body`` is trusted HTML."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)} · cellarena</title>"
        '<link rel=stylesheet href="/static/viewer.css"><link rel=icon href="/static/favicon.svg">'
        f"{head}</head><body>{body}</body></html>"
    )


def error_response(request: Request, status: int, message: str, hint: str = "") -> Response:
    """JSON for the player's API calls, a plain page for a person; either says what to do."""
    wants_json = "application/json" in request.headers.get("accept", "") or "/api/" in request.url.path
    if wants_json:
        return JSONResponse({"error": message, "hint": hint}, status_code=status)
    html = render("error.html", title="error", message=message, hint=hint)
    return HTMLResponse(html, status_code=status)
