"""When two names are one: case, compatibility forms and Unicode confusables folded to one key.

A public ladder shows names to people, and people cannot tell ``alice`` from ``Alice``, ``ａｌｉｃｅ``
(fullwidth) or ``аlice`` (its first letter Cyrillic). An impostor taking such a name would pass for
the owner. So every name has a key: NFKC (compatibility forms to their plain letters), casefold, then
each character replaced by the representative of its class of look-alikes, as in the *skeleton* of
Unicode's UTS #39 (section 4). Two names with one key are one name; the second is refused.

The look-alike classes come from Unicode's confusables.txt as the ``confusable_homoglyphs`` package
ships it (a JSON of each character's look-alikes): single characters that the data says look alike
are joined into classes, and each class is represented by its smallest code point, which for Latin
look-alikes is the ASCII letter (``l``, ``1``, ``I`` and ``|`` share one). Characters of several
code points (``rn`` looks like ``m``) are left out: the key is per character.

Characters that print as nothing (`names.invisible`: default-ignorables such as U+3164 HANGUL FILLER,
variation selectors, the braille blank) are dropped from the key, as UTS #39's skeleton drops
default-ignorables: the profile (`identity.names`) refuses them in new names, and a name
kept from before keeps them out of its key, so ``ann`` cannot be taken again as ``ann`` plus a filler.
The key is also stored (``owners.name_key``, ``bots.name_key``, each under a unique index): a change
to it needs a migration that computes the stored keys again, as schema version 8's did.
"""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from importlib.resources import files

from cellarena.arena.ladder.identity.names import invisible


@cache
def _representatives() -> dict[str, str]:
    """Each confusable character's class representative (union-find over the package's pairs)."""
    data = json.loads((files("confusable_homoglyphs") / "confusables.json").read_text("utf-8"))
    parent: dict[str, str] = {}

    def find(c: str) -> str:
        root = c
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(c, c) != root:  # path compression
            parent[c], c = root, parent[c]
        return root

    def join(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            low, high = sorted((ra, rb))
            parent[high] = low  # the smaller code point represents the class

    for char, alikes in data.items():
        if len(char) != 1:
            continue
        for alike in alikes:
            other = alike.get("c", "")
            if len(other) == 1:
                join(char, other)
    return {c: find(c) for c in parent}


def name_key(name: str) -> str:
    """The key under which ``name`` is unique: NFKC, casefold, invisible characters dropped, then
    look-alikes to one character.

    Casefolding after the classes would split them again (``I`` and ``l``), so the classes are applied
    to the casefolded text and the result folded once more."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    table = _representatives()
    key = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", folded) if not invisible(c))
    return unicodedata.normalize("NFD", key.casefold())
