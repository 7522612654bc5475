"""The ladder's one identifier profile: what the name of an owner, a bot or a game may be (issue 39).

A name is shown to people, on pages and terminals, so two names must never look alike and no part of
one may be invisible. The profile follows PRECIS (RFC 8264's IdentifierClass, RFC 8265's usernames)
and Unicode's UTS #39 (identifier characters, "highly restrictive" script mixing):

1. **Characters.** Letters, combining marks after a letter, numbers, punctuation and symbols that
   print, and the plain space (U+0020). Refused, each with a message that names the character:
   controls; format characters; everything Unicode calls default-ignorable (zero-width characters,
   soft hyphen, variation selectors, Mongolian free variation selectors, Hangul fillers, tags, bidi
   controls, which Python's ``isprintable`` lets through partly); characters that print as a blank
   though Unicode does not call them ignorable (the braille blank U+2800); other spaces and line
   separators; private-use, unassigned and surrogate code points; enclosing marks.
2. **NFKC.** The name is normalised to NFKC (compatibility forms to their plain letters: fullwidth
   ``ａ`` to ``a``, the ligature ``ﬁ`` to ``fi``, a no-break space to a space), and kept so.
3. **Shape.** No space at either end, no two in a row (a page shows two as one), not ``.`` or ``..``
   (a bot's page is ``/bots/NAME``), no combining mark first (it would sit on what is before the
   name), neither the same nonspacing mark twice in a row nor more than 4 together (either prints
   like fewer), digits from one numbering system.
4. **Scripts** (`check_scripts`). Characters of the Common and Inherited scripts (digits,
   punctuation, combining accents) go with any one script; otherwise a name keeps to one script, or
   mixes Latin with Han and Japanese kana, with Han and Bopomofo, or with Han and Hangul (UTS #39's
   "highly restrictive"). Scripts come from the ``confusable_homoglyphs`` package's copy of Unicode's
   Scripts.txt. Callers check scripts after the look-alike key (`lookalikes.name_key`), so a name that
   copies a taken one hears "taken", which says more than "mixes scripts".

Which names look alike is `cellarena.arena.ladder.identity.lookalikes`; both owners and bots use one key.
"""

from __future__ import annotations

import bisect
import json
import unicodedata
from functools import cache
from importlib.resources import files

from cellarena.arena.ladder.errors import BadNameError

#: A bot's (or game's) name, in characters of its NFKC form.
NAME_MAX = 64
#: A name longer than this many times its limit is refused before it is normalised (NFKC may grow
#: a text up to 18-fold: no megabyte is normalised to be told it is too long).
_RAW_FACTOR = 4

#: Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (15.1; the property has
#: not grown since 6.3), which Python's unicodedata lacks: first and last code point of each range.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space, (non-)joiner, direction marks
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # zero-width no-break space (byte order mark)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # unassigned, reserved as ignorable
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol formatting
    (0xE0000, 0xE0FFF),  # tags, variation selectors supplement, reserved
)
_IGNORABLE_STARTS = [first for first, _ in DEFAULT_IGNORABLE]
#: Characters that print as nothing (or as a blank) though Unicode does not call them ignorable.
BLANK = frozenset(
    {
        0x2800,  # braille pattern blank
        0x16FE4,  # Khitan small script filler
        0x1D159,  # musical symbol null notehead
    }
)
#: The bidi controls, which reorder the text around them (all default-ignorable).
_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
#: UTS #39's "highly restrictive": the sets of scripts a name may mix (besides one script alone).
_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
_ANY_SCRIPT = ("COMMON", "INHERITED")
#: UTS #39 (5.4): more nonspacing marks in a row than this on one letter stack out of sight.
_MARKS_IN_A_ROW = 4


def ignorable(c: str) -> bool:
    """Whether ``c`` is a Default_Ignorable_Code_Point (renders as nothing where not supported)."""
    cp = ord(c)
    i = bisect.bisect_right(_IGNORABLE_STARTS, cp) - 1
    return i >= 0 and cp <= DEFAULT_IGNORABLE[i][1]


def invisible(c: str) -> bool:
    """Whether ``c`` prints as nothing: default-ignorable, or a blank (`BLANK`)."""
    return ignorable(c) or ord(c) in BLANK


def describe(c: str) -> str:
    """``U+3164 HANGUL FILLER``: a character as a message names it (controls have no name)."""
    name = unicodedata.name(c, "")
    return f"U+{ord(c):04X} {name}" if name else f"U+{ord(c):04X}"


def shown(name: str) -> str:
    """``name`` quoted for a message: what does not print is written as its escape (``\\u3164``)."""
    out = []
    for c in name:
        if c in "\\'":
            out.append("\\" + c)
        elif _unfit(c) is None:
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return "'" + "".join(out) + "'"


def _unfit(c: str) -> str | None:
    """Why the single character ``c`` cannot be part of a name, or None if it may."""
    if c == " ":
        return None
    category = unicodedata.category(c)
    if ord(c) in _BIDI:
        return f"{describe(c)} is an invisible control that reorders the text around it"
    if 0xE0000 <= ord(c) <= 0xE007F:
        return f"{describe(c)} is an invisible tag character"
    if invisible(c):
        return f"{describe(c)} is invisible"
    if category == "Cc":
        return f"{describe(c)} is a control character"
    if category == "Cf":
        return f"{describe(c)} is a format character, not one that prints"
    if category == "Co":
        return f"{describe(c)} is a private-use character (each font draws what it likes there)"
    if category == "Cs":
        return f"{describe(c)} is half of a surrogate pair, not a character"
    if category == "Cn":
        return f"{describe(c)} is not a character Unicode {unicodedata.unidata_version} assigns"
    if category == "Zs" and unicodedata.normalize("NFKC", c) == " ":
        return None  # a no-break or ideographic space: NFKC makes it the plain space
    if category[0] == "Z":
        return f"{describe(c)} is a space or line break other than the plain space"
    if category == "Me":
        return f"{describe(c)} is an enclosing mark, drawn over the characters beside it"
    return None


_USE = "use letters, digits, punctuation and symbols that print, and single spaces inside"


def _refuse(what: str, name: str, why: str, then: str = _USE) -> BadNameError:
    return BadNameError(f"{what} {shown(name)}: {why}; {then}")


def normalise(name: object, what: str = "bot name", max_length: int = NAME_MAX) -> str:
    """The name as the ladder keeps it (NFKC), if the profile takes it (all but `check_scripts`);
    else `BadNameError` saying which rule, naming the character at fault."""
    if not isinstance(name, str) or not name:
        raise BadNameError(f"{what} {name!r}: give 1 to {max_length} characters")
    if len(name) > max_length * _RAW_FACTOR:
        raise _too_long(name, what, max_length)
    for c in name:  # the characters as given, so that the message names what was typed
        if (why := _unfit(c)) is not None:
            raise _refuse(what, name, why)
    text = unicodedata.normalize("NFKC", name)
    if len(text) > max_length:
        raise _too_long(text, what, max_length)
    for c in text:  # NFKC maps a few compatibility characters to ones refused (U+FFA0 to U+1160)
        if (why := _unfit(c)) is not None:
            raise _refuse(what, name, why)
    if text != text.strip(" "):
        raise BadNameError(
            f"{what} {shown(name)}: use printable characters only, with no space at either end"
        )
    if "  " in text:
        raise _refuse(what, name, "two spaces in a row show as one on a page")
    if text in (".", ".."):
        raise BadNameError(f"{what} {name!r}: its page /bots/{name} cannot be reached; choose another name")
    _check_marks(unicodedata.normalize("NFD", text), what, name)  # NFD: "á" + U+0301 is two marks
    _check_digits(text, what, name)
    return text


def _too_long(name: str, what: str, max_length: int) -> BadNameError:
    return BadNameError(
        f"{what} {name[:max_length]!r}... ({len(name)} characters): give 1 to {max_length} characters"
    )


def _check_marks(text: str, what: str, name: str) -> None:
    if unicodedata.category(text[0])[0] == "M":
        raise _refuse(what, name, f"it begins with the combining mark {describe(text[0])}")
    run: list[str] = []
    for c in text:
        if unicodedata.category(c) != "Mn":
            run = []
            continue
        if run and run[-1] == c:
            raise _refuse(what, name, f"{describe(c)} twice in a row prints as once")
        run.append(c)
        if len(run) > _MARKS_IN_A_ROW:
            raise _refuse(
                what, name, f"more than {_MARKS_IN_A_ROW} combining marks in a row stack out of sight"
            )


def _check_digits(text: str, what: str, name: str) -> None:
    """Digits of one numbering system: ``1`` beside Bengali ``১`` (which looks like a ``d``) would let
    numbers pass for letters."""
    zeros = {ord(c) - unicodedata.digit(c) for c in text if unicodedata.category(c) == "Nd"}
    if len(zeros) > 1:
        first, second = sorted(zeros)[:2]
        raise _refuse(
            what, name, f"it mixes the digits of {describe(chr(first))} and of {describe(chr(second))}"
        )


def check_name(name: object, what: str = "bot name", max_length: int = NAME_MAX) -> str:
    """`normalise` and then `check_scripts`: the whole profile, for names with no look-alike to look up."""
    text = normalise(name, what, max_length)
    check_scripts(text, what)
    return text


@cache
def _scripts() -> tuple[list[int], list[tuple[int, str]]]:
    """Unicode's Scripts.txt as confusable_homoglyphs carries it: range starts, (range end, script)."""
    data = json.loads((files("confusable_homoglyphs") / "categories.json").read_text("utf-8"))
    aliases: list[str] = data["iso_15924_aliases"]
    ranges = sorted(data["code_points_ranges"])
    return [r[0] for r in ranges], [(r[1], aliases[r[2]]) for r in ranges]


def script(c: str) -> str:
    """The Unicode script of ``c``, upper case (``LATIN``, ``CYRILLIC``, ``COMMON``); ``UNKNOWN``."""
    starts, ends = _scripts()
    i = bisect.bisect_right(starts, ord(c)) - 1
    if i < 0 or ord(c) > ends[i][0]:
        return "UNKNOWN"
    return ends[i][1]


def _script_name(alias: str) -> str:
    return alias.replace("_", " ").title()


def check_scripts(name: str, what: str = "bot name") -> None:
    """`BadNameError` unless ``name`` keeps to one script or mixes only as UTS #39's "highly
    restrictive" allows (Common and Inherited characters go with any)."""
    first: dict[str, str] = {}  # script -> its first character in the name
    for c in name:
        s = script(c)
        if s not in _ANY_SCRIPT:
            first.setdefault(s, c)
    if len(first) <= 1 or any(set(first) <= mix for mix in _MIXES):
        return
    (a, ca), (b, cb) = list(first.items())[:2]
    raise _refuse(
        what,
        name,
        f"it mixes {_script_name(a)} ({ca!r}) and {_script_name(b)} ({cb!r}) letters, a common disguise",
        "keep to one script (Latin may go with Han and kana, with Han and Bopomofo, or with Han and Hangul)",
    )
