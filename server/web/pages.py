"""The readable error page (never a stack trace); every page's HTML shell is templates/base.html."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from cellarena.server.web.templating import render


def error_response(request: Request, status: int, message: str, hint: str = "") -> Response:
    """JSON for the player's API calls, a plain page for a person; either says what to do."""
    wants_json = "application/json" in request.headers.get("accept", "") or "/api/" in request.url.path
    if wants_json:
        return JSONResponse({"error": message, "hint": hint}, status_code=status)
    html = render("error.html", title="error", message=message, hint=hint)
    return HTMLResponse(html, status_code=status)
