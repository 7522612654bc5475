"""The host's settings: the community policy and each game's endpoint, which ``ladder serve`` writes
for every process to read."""

from __future__ import annotations

from cellarena.arena.ladder.connect_commands import SETTING_PREFIX, Endpoint
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.database import Database


class Settings:
    """The ``settings`` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    @staticmethod
    def read_policy(db: Backend) -> CommunityPolicy:
        """The policy, in the caller's transaction."""
        return CommunityPolicy.from_settings(
            {str(k): str(v) for k, v in db.query("SELECT name, value FROM settings")}
        )

    def policy(self) -> CommunityPolicy:
        """The host's policy as ``ladder serve`` last wrote it (the defaults before it ever did)."""
        with self.database.reading("read the ladder's settings") as db:
            return self.read_policy(db)

    def set_policy(self, policy: CommunityPolicy) -> None:
        """Write the host's policy (``ladder serve`` does as it starts), for every process to read."""
        with self.database.writing("write the ladder's settings") as db:
            for name, value in policy.to_settings().items():
                self._set(db, name, value)

    def endpoints(self) -> dict[str, Endpoint]:
        """Each game's endpoint, by game, as its ``ladder serve`` last recorded it (the connect page)."""
        with self.database.reading("read the games' addresses") as db:
            rows = db.query("SELECT name, value FROM settings WHERE name LIKE ?", (SETTING_PREFIX + "%",))
        found = (Endpoint.from_setting(str(name), str(value)) for name, value in rows)
        return {e.game: e for e in found if e is not None}

    def set_endpoint(self, endpoint: Endpoint) -> None:
        """Record what a game's ``ladder serve`` exposes (as it starts listening): ``ladder web``, a
        process apart, tells owners where to connect from it."""
        with self.database.writing("record the game's address") as db:
            self._set(db, *endpoint.to_setting())

    @staticmethod
    def _set(db: Backend, name: str, value: str) -> None:
        db.execute(
            "INSERT INTO settings (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )
