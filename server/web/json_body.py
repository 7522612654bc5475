"""Request bodies, and the one JSON reader with limits that every endpoint taking JSON uses.

A body over its route's size limit is refused (413) before it is parsed, while it is still arriving.
JSON then must be UTF-8, nest at most `MAX_DEPTH` deep (Python's parser recurses: a body of ten
thousand ``[`` would raise RecursionError, a 500) and hold no number of more than 4300 digits (which
``json.loads`` refuses with an exception). Each refusal is a 400 that says what was wrong; the app turns
it into ``{"error": ...}`` for the API (`pages.error_response`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

#: The largest JSON body read unless a route says less: a form of names and a password is far below.
MAX_JSON_BYTES = 16 * 1024
#: The deepest nesting of arrays and objects taken; every body the API documents nests one or two.
MAX_DEPTH = 32

#: A JSON string, escapes included: its brackets are text, not nesting.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
#: Every byte but the four brackets, for `bytes.translate` to delete.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class JsonBodyError(ValueError):
    """A body that is not JSON this server reads; ``str()`` says why."""


def size_text(limit: int) -> str:
    """A byte limit as a person reads it: ``16 KB``, ``4096 bytes``."""
    return f"{limit // 1024} KB" if limit % 1024 == 0 and limit >= 10 * 1024 else f"{limit} bytes"


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body; 413 as soon as more than ``limit`` bytes have come (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the request's body is over {size_text(limit)}; send less")
        chunks.append(chunk)
    return b"".join(chunks)


def nesting(data: bytes) -> int:
    """How deep the arrays and objects of the JSON text ``data`` nest (its strings' brackets aside)."""
    depth = deepest = 0
    for bracket in _STRING.sub(b"", data).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json(data: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``data`` as JSON; `JsonBodyError` if it is not UTF-8 JSON within ``max_depth``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonBodyError(f"the body is not UTF-8 (byte {exc.start}); send JSON in UTF-8") from None
    if nesting(data) > max_depth:
        raise JsonBodyError(f"the JSON nests deeper than {max_depth} arrays or objects; send a flat object")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonBodyError(f"the body is not JSON ({exc.msg} at {exc.pos}); send a JSON object") from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, say
        raise JsonBodyError(f"the body is not JSON this server reads ({str(exc)[:80]})") from None


async def read_json_object(
    request: Request, *, limit: int = MAX_JSON_BYTES, max_depth: int = MAX_DEPTH
) -> dict[str, Any]:
    """The request's body as a JSON object (an empty body is ``{}``): 413 past ``limit`` bytes, 400 for
    anything but a JSON object within ``max_depth``."""
    data = await read_body(request, limit)
    if not data.strip():
        return {}
    try:
        body = parse_json(data, max_depth=max_depth)
    except JsonBodyError as exc:
        raise HTTPException(400, str(exc)) from None
    if not isinstance(body, dict):
        raise HTTPException(400, "send a JSON object: {...}")
    return body
