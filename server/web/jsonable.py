"""Engine frames and requests as JSON: bytes fields become ``{"b64": ...}`` for the browser to decode."""

from __future__ import annotations

import base64
import json
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` with bytes base64-wrapped, numpy scalars as Python numbers and map keys as strings."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON of `jsonable(value)`."""
    return json.dumps(jsonable(value), separators=(",", ":")).encode()
