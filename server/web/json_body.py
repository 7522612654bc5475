"""Request bodies, and the one JSON reader with limits that every endpoint taking JSON uses.

A body over its route's size limit is refused (413) before it is parsed. Up to `DRAIN_BYTES` more of it
are read and dropped first, within `DRAIN_SECONDS`: a client still sending when the server answers and
closes gets a connection reset instead of the 413 (seen over TLS), as nginx's lingering close avoids.
JSON then must be UTF-8, nest at most `MAX_DEPTH` deep (Python's parser recurses: a body of ten
thousand ``[`` would raise RecursionError, a 500) and hold no number of more than 4300 digits (which
``json.loads`` refuses with an exception). Each refusal is a 400 that says what was wrong; the app turns
it into ``{"error": ...}`` for the API (`pages.error_response`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import trio
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request

#: The largest JSON body read unless a route says less: a form of names and a password is far below.
MAX_JSON_BYTES = 16 * 1024
#: The deepest nesting of arrays and objects taken; every body the API documents nests one or two.
MAX_DEPTH = 32
#: How much of a refused body, past its limit, is still read and dropped so that its sender reads
#: the 413; and for how long at most.
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 5.0

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
    """The request's body; 413 as soon as more than ``limit`` bytes have come (the rest is read and
    dropped up to `DRAIN_BYTES`, never kept)."""
    chunks: list[bytes] = []
    size = 0
    stream = request.stream()
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            await _drain(stream, size, limit)
            raise HTTPException(413, f"the request's body is over {size_text(limit)}; send less")
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(stream: AsyncIterator[bytes], size: int, limit: int) -> None:
    """Read and drop the rest of a refused body, up to `DRAIN_BYTES` past ``limit`` and `DRAIN_SECONDS`: a
    larger or slower one is cut off (its sender may then see a reset, not the 413)."""
    with trio.move_on_after(DRAIN_SECONDS):
        try:
            async for chunk in stream:
                size += len(chunk)
                if size > limit + DRAIN_BYTES:
                    return
        except ClientDisconnect:
            return  # it gave up sending: the 413 is still the answer, should it read one


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
