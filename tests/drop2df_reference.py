"""Slow, obviously correct references for drop2df, on characters, straight from the rulebook.

`rule` is the canonical table as the rulebook writes it; `reading_a` is the rules as the seed text
writes them (groups R1..R9, mirrored, first match in text order), with the one extension the trace
needs (growth also into a cell whose far side is ``#`` or ``0``). Both must agree with the SDK's table.
"""

from __future__ import annotations

CHARGES = "+-"
OPP = {"+": "-", "-": "+"}


def rule(l: str, c: str, r: str) -> str:  # noqa: E741 - the rulebook's names
    movers = set("+-@")
    if c == "#":
        return "#"
    if c == "@":
        return " "
    if c in CHARGES:
        return "#" if OPP[c] in (l, r) else " "
    lm, rm = l in movers, r in movers
    if lm != rm:
        return l if lm else r
    if lm and l in CHARGES and r in CHARGES and l != r:
        return "#"
    return " "


def _groups() -> list[tuple[str, list[tuple[str, str, str]], str]]:
    """(name, windows, result) with z/s expanded for both charges; '?' is any cell."""
    out = []
    for z in CHARGES:
        s = OPP[z]
        out += [
            ("R1", [(z, " ", " "), (z, " ", "#"), (z, " ", "0")], z),
            ("R2", [(z, s, "?"), (z, " ", s)], "#"),
            ("R3", [(z, z, "#"), (" ", z, "#")], " "),
            ("R4", [("?", z, "0")], " "),
            ("R5", [(z, z, z), (z, z, " "), (z, " ", z)], " "),
            ("R6", [(" ", z, " ")], " "),
        ]
    out += [("R7", [("?", "#", "?")], "#")]
    out += [("R8", [("@", " ", " "), ("@", " ", "#"), ("@", " ", "0")], "@")]
    r9 = [("?", "@", "0")]
    for z in CHARGES:
        r9 += [("@", " ", z), ("@", z, " "), ("@", z, "#")]
    out += [("R9", r9, " ")]
    order = ["R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9"]
    return sorted(out, key=lambda g: order.index(g[0]))


GROUPS = _groups()


def _match(pattern: tuple[str, str, str], window: tuple[str, str, str]) -> bool:
    return all(p in ("?", w) for p, w in zip(pattern, window, strict=True))


def reading_a(l: str, c: str, r: str) -> str:  # noqa: E741
    """The seed's written rules, mirrored, first match in text order; no match gives ``[ ]``."""
    for _name, patterns, result in GROUPS:
        for p in patterns:
            if _match(p, (l, c, r)) or _match(p, (r, c, l)):
                return result
    return " "


def step(row: str) -> str:
    """One generation: the end holes stay, each other cell follows `rule` on the old row."""
    return row[0] + "".join(rule(row[i - 1], row[i], row[i + 1]) for i in range(1, len(row) - 1)) + row[-1]
