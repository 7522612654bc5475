"""Owners' choice to keep their bots' matches out of the ladder's datasets (`cellarena ladder export`)."""

from __future__ import annotations

from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store.bot_tables import BotTable


class DatasetChoices:
    """The ``bots.keep_out_of_datasets`` column: written by the owner's page, read by the export."""

    def __init__(self, bots: BotTable) -> None:
        self.bots = bots
        self.database = bots.database

    def keep_out_of_datasets(self, name: str, keep_out: bool, *, actor: str | None = None) -> BotRecord:
        """From now on, whether exports leave out every match ``name`` played (audit-logged)."""
        what = "keep out of datasets" if keep_out else "let into datasets"
        return self.bots.set_bot(name, what, "keep_out_of_datasets = ?", (keep_out,), None, actor)

    def kept_out_of_datasets(self) -> set[int]:
        """The ids of the bots whose matches exports leave out."""
        with self.database.reading("read which bots are kept out of datasets") as db:
            rows = db.query("SELECT id FROM bots WHERE keep_out_of_datasets")
        return {int(r[0]) for r in rows}
