"""Numbers sent by a client: match numbers in paths, frame indices in query strings, ids in bodies.

One reading for every route: ASCII digits only (``"²".isdigit()`` is true, and ``int("٣")`` is 3), at
most `MAX_DIGITS` of them (``int()`` refuses more than 4300 digits with an exception, and no number
here needs more than 19), and no sign, space or underscore (``int(" -1_0 ")`` is -10). Anything else is
not a number, and the route answers 400 (a query parameter) or 404 (a path: no such thing) saying so,
never with an exception.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection

#: The longest digit string read: 2**63 - 1 has 19 digits; a few leading zeros are let through.
MAX_DIGITS = 24
#: The largest number any route takes unless it says less: what a BIGINT column holds.
MAX_NUMBER = 2**63 - 1


def _shown(text: str) -> str:
    """``text`` for a message: short, and quoted so that a control character stays visible."""
    return repr(text[:40]) + ("…" if len(text) > 40 else "")


def is_digits(text: str) -> bool:
    """Whether ``text`` is ASCII digits only (any number of them)."""
    return text.isascii() and text.isdigit()


def parse_number(text: str, *, maximum: int = MAX_NUMBER) -> int | None:
    """``text`` as a whole number from 0 to ``maximum``, or None if it is not one."""
    if not 0 < len(text) <= MAX_DIGITS or not is_digits(text):
        return None
    number = int(text)
    return number if number <= maximum else None


def path_number(request: HTTPConnection, name: str, what: str, *, maximum: int = MAX_NUMBER) -> int:
    """The path parameter ``name`` as a number; 404 (there is no such ``what``) if it is not one."""
    text = str(request.path_params[name])
    number = parse_number(text, maximum=maximum)
    if number is None:
        reason = "no number is that large" if is_digits(text) else "give its number in ASCII digits"
        raise HTTPException(404, f"no {what} {_shown(text)}: {reason}")
    return number


def query_number(
    request: HTTPConnection,
    name: str,
    default: int,
    *,
    maximum: int = MAX_NUMBER,
    too_large: int = 400,
) -> int:
    """The query parameter ``name`` as a number (``default`` when absent): 400 if it is not a whole
    number of ASCII digits; ``too_large`` (400, or 404 where a larger one names nothing) past
    ``maximum``."""
    text = request.query_params.get(name)
    if text is None:
        return default
    number = parse_number(text, maximum=maximum)
    if number is not None:
        return number
    if is_digits(text):
        raise HTTPException(too_large, f"{name}={_shown(text)}: at most {maximum}")
    raise HTTPException(
        400, f"{name}={_shown(text)}: give a whole number in ASCII digits, e.g. {name}={min(12, maximum)}"
    )
