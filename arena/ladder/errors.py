"""The ladder store's errors. Each message names the database at fault and says what to do."""

from __future__ import annotations


class LadderStoreError(Exception):
    """The ladder database cannot do what was asked; the message says why and what to do."""


class UnknownBotError(LadderStoreError):
    """No bot has that name."""


class MatchNotRunningError(LadderStoreError):
    """A match that is finished or void cannot be finished (or voided) again: a result counts once."""


class BadNameError(LadderStoreError, ValueError):
    """A name the ladder refuses (empty, too long, unprintable, ``..``): the message says which rule."""
