"""Owners on the ladder's database: sign-up under the host's policy, names unique up to case and
look-alikes, passwords, sessions that logout ends, the host's reset code, deleting an account, an
owner's bots (limit, rotate, revoke through the change log), and schema version 6's upgrade of a
database made by version 4. Every test runs on SQLite and on a real PostgreSQL server (`ladder_db`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from ladder_checks import assert_consistent, raw
from test_ladder_store import T0, V2, V3, V4, make_v1_database

from cellarena.arena.ladder.accounts import owners, password_cost
from cellarena.arena.ladder.accounts.owners import PASSWORD_MAX, AccountError, Accounts
from cellarena.arena.ladder.accounts.password_cost import PasswordCost
from cellarena.arena.ladder.errors import BadNameError
from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.store.ladder_store import LadderStore, cellarena_release
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, MIGRATIONS

GAME = "rezzo"
PASSWORD = "correct horse battery"

#: Version 6 as it was released, frozen: a released migration never changes.
V6 = (
    "CREATE TABLE owners ( id {id}, name TEXT NOT NULL UNIQUE, name_key TEXT NOT NULL UNIQUE,"
    " password_hash TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('active', 'pending')),"
    " created TEXT NOT NULL, reset_digest TEXT, reset_expires TEXT)",
    "ALTER TABLE bots ADD COLUMN owner_id BIGINT REFERENCES owners (id)",
    "CREATE INDEX bots_by_owner ON bots (owner_id)",
    "CREATE TABLE sessions ( digest TEXT PRIMARY KEY, owner_id BIGINT NOT NULL REFERENCES owners (id),"
    " created TEXT NOT NULL, expires TEXT NOT NULL, revoked TEXT)",
    "CREATE INDEX sessions_by_owner ON sessions (owner_id)",
    "CREATE TABLE invites ( digest TEXT PRIMARY KEY, created TEXT NOT NULL,"
    " used_by BIGINT REFERENCES owners (id), used TEXT)",
)


@pytest.fixture
def accounts(ladder_db: str) -> Iterator[Accounts]:
    with LadderStore(ladder_db) as store:
        yield Accounts(store)


def test_version_6_is_frozen() -> None:
    assert [" ".join(s.split()) for s in MIGRATIONS[5].statements] == [" ".join(s.split()) for s in V6]


def test_a_version_4_database_made_today_gains_owners_and_keeps_everything(ladder_db: str) -> None:
    alice_token, _ = make_v1_database(ladder_db, extra=V2 + V3)
    with raw(ladder_db) as db:
        for statement in V4:
            db.execute(statement)
        for version in (2, 3, 4):
            db.execute("INSERT INTO schema_version VALUES (?, '0.1.0', ?)", (version, T0))
        assert "owners" not in db.table_names()
    with LadderStore(ladder_db) as store:
        assert store.schema_version == CURRENT_VERSION
        alice = store.authenticate(alice_token)
        assert alice is not None and alice.name == "alice"
        accounts = Accounts(store)
        assert accounts.owner_of("alice") is None  # the host's bots have no owner
        ann = accounts.sign_up("ann", PASSWORD, policy="open")
        bot, token = accounts.create_bot(ann, "annbot", GAME, max_bots=2)
        assert store.authenticate(token.secret) == bot and accounts.owner_of("annbot") == "ann"
    with raw(ladder_db) as db:
        versions = db.query("SELECT version, cellarena FROM schema_version ORDER BY version")
        assert db.query("SELECT name FROM bots WHERE owner_id IS NULL ORDER BY name") == [
            ("alice",),
            ("bob",),
        ]
    assert versions == [
        (1, "0.1.0"),
        (2, "0.1.0"),
        (3, "0.1.0"),
        (4, "0.1.0"),
        *((v, cellarena_release()) for v in range(5, CURRENT_VERSION + 1)),
    ]
    assert_consistent(ladder_db, GAME)


def test_sign_up_open_invite_and_approval(accounts: Accounts) -> None:
    assert accounts.sign_up("ann", PASSWORD, policy="open").status == "active"
    with pytest.raises(AccountError, match="by invitation: give the invite code"):
        accounts.sign_up("ben", PASSWORD, policy="invite")
    with pytest.raises(AccountError, match="not one this ladder made"):
        accounts.sign_up("ben", PASSWORD, policy="invite", invite="inv_made-up")
    assert accounts.owner("ben") is None  # the refused sign-up left nothing
    code = accounts.make_invite()
    assert accounts.sign_up("ben", PASSWORD, policy="invite", invite=code).active
    with pytest.raises(AccountError, match="used already"):
        accounts.sign_up("cy", PASSWORD, policy="invite", invite=code)
    dee = accounts.sign_up("dee", PASSWORD, policy="approval")
    assert dee.status == "pending"
    with pytest.raises(AccountError, match="waiting for the host's approval"):
        accounts.check_password("dee", PASSWORD)
    assert accounts.approve("dee").active
    assert accounts.check_password("dee", PASSWORD).name == "dee"
    with pytest.raises(AccountError, match="no owner named 'zed'"):
        accounts.approve("zed")


@pytest.mark.parametrize(
    "twin",
    ["Ann", "ANN", "\u0430nn", "ａｎｎ", "\u0391nn"],  # case, Cyrillic a, fullwidth, Greek capital alpha
)
def test_names_that_differ_by_case_or_look_alikes_are_one(accounts: Accounts, twin: str) -> None:
    accounts.sign_up("ann", PASSWORD, policy="open")
    with pytest.raises(AccountError, match=r"is taken: it reads as 'ann'.*look-alike"):
        accounts.sign_up(twin, PASSWORD, policy="open")


def test_look_alike_keys() -> None:
    assert name_key("paypal") == name_key("paypa1") == name_key("PAYPAL")
    assert name_key("alice") != name_key("alicf")


def test_over_long_names_and_passwords_are_refused_before_hashing(accounts: Accounts) -> None:
    with pytest.raises(BadNameError, match=r"owner name 'xxx.*\(10240 characters\): give 1 to 32"):
        accounts.sign_up("x" * 10240, PASSWORD, policy="open")
    with pytest.raises(AccountError, match=f"10240 characters: give 10 to {PASSWORD_MAX}"):
        accounts.sign_up("ann", "p" * 10240, policy="open")
    with pytest.raises(AccountError, match="3 characters: give 10"):
        accounts.sign_up("ann", "abc", policy="open")
    with pytest.raises(AccountError, match="wrong name or password"):
        accounts.check_password("ann", "p" * 10240)


@contextmanager
def hashing_at(cost: str) -> Iterator[None]:
    """Passwords hashed at ``cost`` in this process, then at the suite's again (tests/conftest.py)."""
    owners.use_password_cost(PasswordCost.parse(cost))
    try:
        yield
    finally:
        owners.use_password_cost(PasswordCost.parse(os.environ[password_cost.VARIABLE]))


@pytest.fixture
def production_hashes() -> Iterator[None]:
    """The default cost, which a ladder hashes at (the suite's is argon2id's cheapest:
    tests/conftest.py), and the dummy hash made at it."""
    with hashing_at(password_cost.DEFAULT):
        yield


@pytest.mark.usefixtures("production_hashes")
def test_passwords_are_argon2_hashes_and_wrong_ones_one_answer(accounts: Accounts, ladder_db: str) -> None:
    accounts.sign_up("ann", PASSWORD, policy="open")
    with raw(ladder_db) as db:
        (stored,) = db.query("SELECT password_hash FROM owners")[0]
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    for name, password in (("ann", "wrong password"), ("nobody", PASSWORD)):
        with pytest.raises(AccountError, match=r"^wrong name or password$"):
            accounts.check_password(name, password)
    # A wrong name costs the verification of a hash made as an owner's is (the one the module keeps
    # rather than hashing at every start), so it takes as long as a wrong password.
    assert owners._dummy_hash() == owners._DUMMY_HASH
    assert owners._DUMMY_HASH.split("$")[:4] == stored.split("$")[:4]  # argon2id, version, parameters
    assert not PasswordHasher().check_needs_rehash(owners._DUMMY_HASH)
    # The default cost is argon2-cffi's own, in every parameter.
    ours, theirs = PasswordCost.parse(password_cost.DEFAULT).hasher(), PasswordHasher()
    for parameter in ("time_cost", "memory_cost", "parallelism", "hash_len", "salt_len", "type"):
        assert getattr(ours, parameter) == getattr(theirs, parameter), parameter


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("m=65536,t=3", "give m=KIB,t=PASSES,p=LANES, each once"),
        ("m=8,t=1,p=1,p=2", "each once"),
        ("m=8, t=1, p=x", "is no argon2id cost"),
        ("", "is no argon2id cost"),
        ("m=1024,t=0,p=1", "give 1 to 64 passes"),
        ("m=16,t=1,p=4", "at least 8 KiB of memory a lane"),
        ("m=99999999,t=1,p=1", "at most 4194304"),
    ],
)
def test_a_password_cost_argon2id_cannot_use_is_refused_saying_what_to_give(given: str, why: str) -> None:
    with pytest.raises(password_cost.PasswordCostError, match=why):
        PasswordCost.parse(given)


def test_a_cost_below_every_owasp_least_is_weak() -> None:
    assert not PasswordCost.parse(password_cost.DEFAULT).weak
    assert not PasswordCost.parse("p=1,t=2,m=19456").weak  # any order
    assert not PasswordCost.parse("m=7168,t=5,p=1").weak
    assert PasswordCost.parse("m=19455,t=2,p=1").weak
    assert PasswordCost.parse("m=8,t=1,p=1").weak


def test_a_login_rehashes_a_password_hashed_at_another_cost(accounts: Accounts, ladder_db: str) -> None:
    with hashing_at("m=16,t=2,p=1"):
        accounts.sign_up("ann", PASSWORD, policy="open")
    with raw(ladder_db) as db:
        (before,) = db.query("SELECT password_hash FROM owners")[0]
    accounts.check_password("ann", PASSWORD)
    with raw(ladder_db) as db:
        (after,) = db.query("SELECT password_hash FROM owners")[0]
    assert "$m=16,t=2,p=1$" in before and f"${os.environ[password_cost.VARIABLE]}$" in after
    accounts.check_password("ann", PASSWORD)  # and the new hash is the password's


def test_logout_revokes_the_session_everywhere(accounts: Accounts, ladder_db: str) -> None:
    ann = accounts.check_password(accounts.sign_up("ann", PASSWORD, policy="open").name, PASSWORD)
    session = accounts.new_session(ann)
    with raw(ladder_db) as db:
        assert session not in str(db.query("SELECT * FROM sessions"))  # only its hash is stored
    assert accounts.session_owner(session) == ann
    accounts.end_session(session)
    assert accounts.session_owner(session) is None  # a copy of the cookie is worth nothing now
    assert accounts.session_owner("x" * 10240) is None


def test_a_session_ends_when_its_lifetime_does(accounts: Accounts) -> None:
    from datetime import timedelta

    ann = accounts.sign_up("ann", PASSWORD, policy="open")
    short = accounts.new_session(ann, timedelta(seconds=-1))  # already past its lifetime
    long = accounts.new_session(ann, timedelta(days=14))
    assert accounts.session_owner(short) is None and accounts.session_owner(long) == ann


def test_a_reset_code_sets_a_new_password_once_and_ends_sessions(accounts: Accounts) -> None:
    ann = accounts.sign_up("ann", PASSWORD, policy="open")
    session = accounts.new_session(ann)
    code = accounts.make_reset_code("ann")
    with pytest.raises(AccountError, match="wrong, used or expired"):
        accounts.reset_password("ann", "rst_guess", "a new password!")
    accounts.reset_password("ann", code, "a new password!")
    assert accounts.session_owner(session) is None
    assert accounts.check_password("ann", "a new password!").name == "ann"
    with pytest.raises(AccountError, match="wrong, used or expired"):
        accounts.reset_password("ann", code, "another password")


def test_an_owners_bots_limit_rotate_revoke_reach_the_change_log(accounts: Accounts) -> None:
    store = accounts.store
    ann = accounts.sign_up("ann", PASSWORD, policy="open")
    ben = accounts.sign_up("ben", PASSWORD, policy="open")
    start = store.last_change()
    one, token = accounts.create_bot(ann, "one", GAME, max_bots=2)
    accounts.create_bot(ann, "two", GAME, max_bots=2)
    with pytest.raises(AccountError, match=r"2 active bots, this ladder's limit \(--max-bots-per-owner 2\)"):
        accounts.create_bot(ann, "three", GAME, max_bots=2)
    with pytest.raises(AccountError, match="it reads as 'one'"):
        accounts.create_bot(ben, "ONE", GAME, max_bots=2)
    with pytest.raises(AccountError, match="you have no bot named 'one'"):
        accounts.rotate_bot(ben, "one")
    with pytest.raises(AccountError, match="you have no bot named 'one'"):
        accounts.revoke_bot(ben, "one")
    new = accounts.rotate_bot(ann, "one")
    assert store.authenticate(token.secret) is None and store.authenticate(new.secret) == one
    accounts.revoke_bot(ann, "two")
    accounts.create_bot(ann, "three", GAME, max_bots=2)  # a revoked bot frees its place
    assert [b.name for b in accounts.bots(ann)] == ["one", "three", "two"]
    changes = [(c.kind, c.bot) for c in store.changes_since(start)]
    assert changes == [
        ("bot_added", "one"),
        ("bot_added", "two"),
        ("token_rotated", "one"),
        ("bot_revoked", "two"),
        ("bot_added", "three"),
    ]


def test_deleting_an_account_revokes_its_bots_and_keeps_their_matches(accounts: Accounts) -> None:
    store = accounts.store
    ann = accounts.sign_up("ann", PASSWORD, policy="open")
    session = accounts.new_session(ann)
    one, _ = accounts.create_bot(ann, "one", GAME, max_bots=3)
    host_bot, _ = store.add_bot("house", GAME)
    match_id = store.begin_match(GAME, None, 1, [one.id, host_bot.id])
    assert accounts.delete_owner("ann") == ["one"]
    assert accounts.owner("ann") is None and accounts.session_owner(session) is None
    bot = store.bot("one")
    assert bot is not None and not bot.active and accounts.owner_of("one") is None
    assert store.match(match_id) is not None
    assert accounts.sign_up("ann", PASSWORD, policy="open").active  # the name is free again


def test_an_address_limit_counts_a_sliding_window_per_address() -> None:
    from cellarena.arena.ladder.web.owner_guard import AddressLimit

    now = [0.0]
    limit = AddressLimit(2, window=60.0, clock=lambda: now[0])
    assert limit.allow("203.0.113.5") and limit.allow("203.0.113.5")
    assert not limit.allow("203.0.113.5")  # the third within the hour
    assert limit.allow("203.0.113.6")  # another address has its own count
    now[0] = 59.0
    assert not limit.allow("203.0.113.5")  # refusals are not counted, nor do they reset it
    now[0] = 60.5
    assert limit.allow("203.0.113.5")  # the first has left the window


def test_the_session_key_file_is_made_private_and_checked(tmp_path: Path) -> None:
    import stat

    from cellarena.arena.ladder.web.owner_guard import KeyFileError, load_key

    path = tmp_path / "session.key"
    key = load_key(path)
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(path) == key  # kept across restarts: sessions survive them
    path.write_text("not hex")
    with pytest.raises(KeyFileError, match=r"not a session key .* delete it and a new one is made"):
        load_key(path)
    with pytest.raises(KeyFileError, match="cannot create the session key"):
        load_key(tmp_path / "missing" / "session.key")


async def test_a_database_fault_on_the_owners_pages_is_a_503_that_shows_no_path() -> None:
    import logging

    from starlette.exceptions import HTTPException
    from starlette.requests import Request

    from cellarena.arena.ladder.errors import LadderStoreError
    from cellarena.arena.ladder.web.owner_guard import guarded

    async def down(_request: Request) -> None:
        raise LadderStoreError("/srv/ladder/ladder.sqlite: cannot log in: the disk is full")

    async def refused(_request: Request) -> None:
        raise AccountError("you have no bot named 'x'")

    request = Request({"type": "http", "method": "POST", "path": "/login", "headers": []})
    # A handler on the logger itself: another test in this process may have stopped it propagating.
    logged: list[str] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("cellarena.ladder")
    logger.addHandler(handler)
    try:
        with pytest.raises(HTTPException) as fault:
            await guarded(down)(request)  # type: ignore[arg-type]
    finally:
        logger.removeHandler(handler)
    assert fault.value.status_code == 503 and "try again in a minute" in fault.value.detail
    assert "/srv/ladder" not in fault.value.detail and any("disk is full" in line for line in logged)
    with pytest.raises(HTTPException) as bad:
        await guarded(refused)(request)  # type: ignore[arg-type]
    assert bad.value.status_code == 400 and bad.value.detail == "you have no bot named 'x'"
