"""The ladder's one identifier profile (issue 39, item 1; `cellarena.arena.ladder.identity.names`): a table of
names taken and refused, by category, for owners and bots alike; the look-alike key without invisible
characters; and schema version 8, which puts bots' keys under a unique index and computes owners'
again, upgraded from a version 7 database on SQLite and PostgreSQL (`ladder_db`)."""

from __future__ import annotations

import re

import pytest
from ladder_checks import raw
from test_ladder_accounts import V6
from test_ladder_store import T0, V2, V3, V4, V5, V7, make_v1_database

from cellarena.arena.ladder.accounts.owners import AccountError, Accounts
from cellarena.arena.ladder.errors import BadNameError
from cellarena.arena.ladder.identity import names
from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, LEGACY_KEY

GAME = "rezzo"
PASSWORD = "correct horse battery"

#: Names the profile takes: (category, as given, as kept).
TAKEN = [
    ("ASCII letters", "alice", "alice"),
    ("ASCII punctuation the ladder always took", "a/../b?c=%2e#<b>\\", "a/../b?c=%2e#<b>\\"),
    ("Latin with accents, single spaces, a symbol", "Zoë the 2nd ♞", "Zoë the 2nd ♞"),
    ("Cyrillic alone", "Ренат", "Ренат"),
    ("Greek alone", "Ελένη", "Ελένη"),
    ("Devanagari with its combining vowel signs", "नमस्ते", "नमस्ते"),
    ("Hebrew with a digit", "אב 1", "אב 1"),
    ("Arabic-Indic digits alone", "١٢٣", "١٢٣"),
    ("Latin with Han (highly restrictive)", "Tokyo東京", "Tokyo東京"),
    ("Han, Hiragana, Katakana, Latin", "とうきょうトウキョウ東京 bot", "とうきょうトウキョウ東京 bot"),
    ("Latin with Hangul", "한국 bot", "한국 bot"),
    ("Latin with Han and Bopomofo", "ㄅㄆ台北 bot", "ㄅㄆ台北 bot"),
    ("NFD accents composed (NFC)", "Zoe\u0308", "Zoë"),
    ("fullwidth to ASCII (NFKC)", "ａｌｉｃｅ", "alice"),
    ("a ligature to its letters (NFKC)", "ﬁsh", "fish"),
    ("a no-break space to the plain space (NFKC)", "a\u00a0b", "a b"),
    ("two different marks on one letter", "a\u0301\u0308", "á\u0308"),
]

#: Names the profile refuses: (category, as given, what the message says).
REFUSED = [
    ("Hangul filler", "ann\u3164", "U+3164 HANGUL FILLER is invisible"),
    ("Hangul choseong filler", "\u115fann", "U+115F HANGUL CHOSEONG FILLER is invisible"),
    ("Hangul jungseong filler", "ann\u1160", "U+1160 HANGUL JUNGSEONG FILLER is invisible"),
    ("halfwidth Hangul filler", "ann\uffa0", "U+FFA0 HALFWIDTH HANGUL FILLER is invisible"),
    ("braille blank", "ann\u2800", "U+2800 BRAILLE PATTERN BLANK is invisible"),
    ("variation selector", "ann\ufe0f", "U+FE0F VARIATION SELECTOR-16 is invisible"),
    ("variation selector supplement", "ann\U000e0100", "U+E0100 VARIATION SELECTOR-17 is invisible"),
    ("Mongolian free variation selector", "ann\u180b", "U+180B MONGOLIAN FREE VARIATION SELECTOR ONE is"),
    ("Mongolian vowel separator", "ann\u180e", "U+180E MONGOLIAN VOWEL SEPARATOR is invisible"),
    ("zero-width space", "ann\u200b", "U+200B ZERO WIDTH SPACE is invisible"),
    ("zero-width joiner", "ann\u200d", "U+200D ZERO WIDTH JOINER is invisible"),
    ("soft hyphen", "ann\u00ad", "U+00AD SOFT HYPHEN is invisible"),
    ("combining grapheme joiner", "ann\u034f", "U+034F COMBINING GRAPHEME JOINER is invisible"),
    ("word joiner", "ann\u2060", "U+2060 WORD JOINER is invisible"),
    ("byte order mark", "\ufeffann", "U+FEFF ZERO WIDTH NO-BREAK SPACE is invisible"),
    ("Khmer inherent vowel", "ann\u17b4", "U+17B4 KHMER VOWEL INHERENT AQ is invisible"),
    ("right-to-left override", "evil\u202etxt.exe", "U+202E RIGHT-TO-LEFT OVERRIDE is an invisible control"),
    ("right-to-left isolate", "ann\u2067", "U+2067 RIGHT-TO-LEFT ISOLATE is an invisible control"),
    ("right-to-left mark", "ann\u200f", "U+200F RIGHT-TO-LEFT MARK is an invisible control"),
    ("Arabic letter mark", "ann\u061c", "U+061C ARABIC LETTER MARK is an invisible control"),
    ("tag character", "ann\U000e0041", "U+E0041 TAG LATIN CAPITAL LETTER A is an invisible tag"),
    ("NUL", "ann\x00", "U+0000 is a control character"),
    ("tab", "tab\there", "U+0009 is a control character"),
    ("newline", "two\nlines", "U+000A is a control character"),
    ("format character", "ann\u0600", "U+0600 ARABIC NUMBER SIGN is a format character"),
    ("private use", "ann\ue000", "U+E000 is a private-use character"),
    ("unassigned", "ann\u0378", "U+0378 is not a character Unicode"),
    ("surrogate", "ann\ud800", "U+D800 is half of a surrogate pair"),
    ("line separator", "a\u2028b", "U+2028 LINE SEPARATOR is a space or line break"),
    ("Ogham space mark", "a\u1680b", "U+1680 OGHAM SPACE MARK is a space or line break"),
    ("enclosing mark", "a\u20dd", "U+20DD COMBINING ENCLOSING CIRCLE is an enclosing mark"),
    ("space first", " ann", "no space at either end"),
    ("space last", "ann ", "no space at either end"),
    ("ideographic space last (NFKC: a space)", "ann\u3000", "no space at either end"),
    ("two spaces", "a  b", "two spaces in a row show as one"),
    ("mark first", "\u0301ann", "begins with the combining mark U+0301 COMBINING ACUTE ACCENT"),
    ("one mark twice", "a\u0301\u0301", "U+0301 COMBINING ACUTE ACCENT twice in a row prints as once"),
    ("five marks", "a\u0300\u0301\u0302\u0303\u0304", "more than 4 combining marks in a row"),
    ("digits of two systems", "bot1\u09e7", "mixes the digits of U+0030 DIGIT ZERO and of U+09E6"),
    ("Cyrillic in Latin", "\u0430nn", "mixes Cyrillic ('\u0430') and Latin ('n') letters"),
    ("Greek in Latin", "\u0391nn", "mixes Greek ('\u0391') and Latin ('n') letters"),
    ("Cyrillic with Greek", "\u0431\u03b1", "mixes Cyrillic ('\u0431') and Greek ('\u03b1') letters"),
    ("Hangul with Han and kana", "한국とう", "mixes Hangul"),
    ("dot", ".", "cannot be reached"),
    ("dot dot", "..", "cannot be reached"),
    ("empty", "", "give 1 to 64 characters"),
    ("65 characters", "x" * 65, r"\(65 characters\): give 1 to 64 characters"),
    ("64 characters that NFKC makes 72", "\ufdfa" * 4, r"\(72 characters\): give 1 to 64 characters"),
]


@pytest.mark.parametrize(("given", "kept"), [t[1:] for t in TAKEN], ids=[t[0] for t in TAKEN])
def test_the_profile_takes(given: str, kept: str) -> None:
    assert names.check_name(given) == kept
    assert names.check_name(kept) == kept  # what is kept is taken again as it is


@pytest.mark.parametrize(("given", "why"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_the_profile_refuses_naming_the_character(given: str, why: str) -> None:
    with pytest.raises(
        BadNameError, match=r"^bot name .*" + (why if "\\(" in why else re.escape(why))
    ) as info:
        names.check_name(given)
    assert "\n" not in str(info.value)  # one line, on a terminal too: what does not print is escaped


def test_owners_and_the_hosts_bots_are_under_the_one_profile(ladder_db: str) -> None:
    with LadderStore(ladder_db) as store:
        accounts = Accounts(store)
        with pytest.raises(
            BadNameError, match="owner name 'ann\\\\u3164': U\\+3164 HANGUL FILLER is invisible"
        ):
            accounts.sign_up("ann\u3164", PASSWORD, policy="open")
        with pytest.raises(BadNameError, match="U\\+2800 BRAILLE PATTERN BLANK is invisible"):
            store.add_bot("bob\u2800", GAME)
        with pytest.raises(BadNameError, match="mixes Cyrillic"):
            accounts.sign_up("\u0430nn", PASSWORD, policy="open")
        with pytest.raises(BadNameError, match=r"\(33 characters\): give 1 to 32"):
            accounts.sign_up("x" * 33, PASSWORD, policy="open")
        # Kept in NFKC, and found so at login whatever form is typed.
        ann = accounts.sign_up("ａｎｎ", PASSWORD, policy="open")
        assert ann.name == "ann" and accounts.check_password("ａｎｎ", PASSWORD) == ann
        bot, _ = store.add_bot("Zoe\u0308", GAME)
        assert bot.name == "Zoë" and [b.name for b in store.list_bots()] == ["Zoë"]
        assert store.list_bots() == [b for b in store.list_bots() if b.name == "Zoë"]
        bot, _ = accounts.create_bot(ann, "ﬁsh", GAME, max_bots=5)
        assert bot.name == "fish"
        assert store.bot("ﬁsh") is None


def test_invisible_characters_are_out_of_the_look_alike_key() -> None:
    """One key for owners and bots; a name kept from before with a filler reads as the name without."""
    for invisible in ("\u3164", "\u115f", "\u2800", "\ufe0f", "\U000e0100", "\u180b", "\u200b", "\U000e0041"):
        assert name_key(f"ann{invisible}") == name_key("ann") == name_key("ANN")


def test_the_hosts_bots_are_unique_up_to_look_alikes(ladder_db: str) -> None:
    """Before, the host's `ladder bot add` compared case only: ``paypa1`` passed beside ``paypal``."""
    with LadderStore(ladder_db) as store:
        store.add_bot("paypal", GAME)
        with pytest.raises(LadderStoreError, match=r"already a bot named 'paypal'.*look-alike"):
            store.add_bot("PAYPA1", GAME)
        with pytest.raises(LadderStoreError, match=r"already a bot named 'paypal'.*look-alike"):
            store.add_bot("ｐａｙｐａｌ", GAME)
        assert [b.name for b in store.list_bots()] == ["paypal"]


def _old_key(name: str) -> str:
    """The key as version 6 and 7 computed it: invisible characters kept."""
    import unicodedata

    from cellarena.arena.ladder.identity.lookalikes import _representatives

    folded = unicodedata.normalize("NFKC", name).casefold()
    key = "".join(_representatives().get(c, c) for c in unicodedata.normalize("NFD", folded))
    return unicodedata.normalize("NFD", key.casefold())


def test_a_version_7_database_gets_unique_bot_keys_and_owner_keys_without_invisibles(ladder_db: str) -> None:
    make_v1_database(ladder_db, extra=V2 + V3)  # bots alice and bob
    with raw(ladder_db) as db:
        for statement in (*V4, *V5, *V6, *V7):
            db.execute(statement.replace("{id}", db.id_column))
        for version in range(2, 8):
            db.execute("INSERT INTO schema_version VALUES (?, '0.1.0', ?)", (version, T0))
        # What versions 6 and 7 let in: look-alike host bots, names with invisible characters.
        for i, name in enumerate(["paypal", "paypa1", "bob\u2800"]):
            db.execute(
                "INSERT INTO bots (name, game, token_digest, kind, created) VALUES (?, ?, ?, 'outside', ?)",
                (name, GAME, f"digest{i}", T0),
            )
        for name in ("ann", "ann\u3164", "cy"):
            db.execute(
                "INSERT INTO owners (name, name_key, password_hash, status, created)"
                " VALUES (?, ?, 'x', 'active', ?)",
                (name, _old_key(name), T0),
            )
        assert _old_key("ann\u3164") != _old_key("ann")  # the bug: a second "ann"
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        with raw(ladder_db) as db:
            bots = dict(db.query("SELECT name, name_key FROM bots"))
            owners = dict(db.query("SELECT name, name_key FROM owners"))
            (ann_id,) = db.query("SELECT id FROM owners WHERE name = ?", ("ann\u3164",))[0]
        # The oldest of look-alikes holds the key; the later ones keep their names, keyless.
        assert bots == {
            "alice": name_key("alice"),
            "bob": name_key("bob"),
            "paypal": name_key("paypal"),
            "paypa1": None,
            "bob\u2800": None,
        }
        assert owners == {"ann": "ann", "ann\u3164": f"{LEGACY_KEY}{ann_id}", "cy": "cy"}
        with pytest.raises(LadderStoreError, match="already a bot named 'bob'"):
            store.add_bot("BOB", GAME)
        with pytest.raises(LadderStoreError, match="already a bot named 'paypal'"):
            store.add_bot("PAYPAL", GAME)
        accounts = Accounts(store)
        with pytest.raises(AccountError, match="it reads as 'ann'"):
            accounts.sign_up("ANN", PASSWORD, policy="open")
        assert accounts.sign_up("dee", PASSWORD, policy="open").name == "dee"
        store.add_bot("carol", GAME)
    # The database itself refuses a second key, whoever writes.
    with raw(ladder_db) as db, pytest.raises(Exception, match=r"(?i)unique"):
        db.execute(
            "INSERT INTO bots (name, name_key, game, token_digest, kind, created)"
            " VALUES ('Carol', ?, ?, 'digest9', 'outside', ?)",
            (name_key("carol"), GAME, T0),
        )
