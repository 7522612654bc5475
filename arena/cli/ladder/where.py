"""The ladder a `cellarena ladder` command acts on: its folder and database, and the names it is given."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.params import (
    writable_folder,
)

if TYPE_CHECKING:
    from cellarena.arena.ladder.store.ladder_store import LadderStore


DB_FILE = "ladder.sqlite"


class BadName(click.BadParameter):
    """A NAME the ladder refuses: one line on stderr (no usage text: the name is what is wrong), or
    one JSON object with ``--json``, and exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param_hint="NAME")

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class Where:
    """The ladder's folder and database, from the group's options."""

    def __init__(self, folder: Path, db: str | None) -> None:
        self.folder = folder
        self.db = db

    @contextlib.contextmanager
    def store(self, *, create: bool = True) -> Iterator[LadderStore]:
        """The store, open for one command: any refusal of the store inside (a name it does not take,
        a duplicate, a database it cannot write) is one line on stderr, or one JSON object with
        ``--json``, and exit status 1; a refused name names NAME (exit status 2)."""
        from cellarena.arena.ladder.store.ladder_store import BadNameError, LadderStoreError

        with self.open(create=create) as store:
            try:
                yield store
            except BadNameError as exc:
                raise BadName(str(exc)) from None
            except LadderStoreError as exc:
                raise click.ClickException(str(exc)) from None

    def open(self, *, create: bool = True, reconnect_every: float | None = None) -> LadderStore:
        from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError

        target: str | Path = self.db if self.db else self.folder / DB_FILE
        if not self.db:
            writable_folder(self.folder, "--dir")
        try:
            return LadderStore(target, create=create, reconnect_every=reconnect_every)
        except LadderStoreError as exc:
            raise click.ClickException(str(exc)) from None


def game_argument(value: str) -> str:
    from cellarena.server.games import is_game, registry

    if not is_game(value):
        raise click.BadParameter(str(registry.unknown_game(value)), param_hint="--game")
    return value


def known_bot(action: Any, name: str) -> Any:
    from cellarena.arena.ladder.store.ladder_store import UnknownBotError

    try:
        return action(name)
    except UnknownBotError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
