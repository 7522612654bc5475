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


class NameTakenError(LadderStoreError):
    """A bot's name is taken up to case and look-alikes (`lookalikes.name_key`): ``taken`` is the bot
    that has it (None when a look-alike made at the same moment won, known only by the database's
    unique index); ``name`` the name as given."""

    def __init__(self, message: str, name: str, taken: str | None) -> None:
        super().__init__(message)
        self.name = name
        self.taken = taken


class BotLimitError(LadderStoreError):
    """An owner has ``count`` active bots, their ``limit``; counted in the transaction that would add one."""

    def __init__(self, message: str, count: int, limit: int) -> None:
        super().__init__(message)
        self.count = count
        self.limit = limit


class ChallengeRefusedError(LadderStoreError):
    """A challenge the ladder does not take (quota, a refusing opponent, a paused bot...): the message
    says which rule, to the API's caller or on the terminal."""


class DatabaseUnavailableError(LadderStoreError):
    """The connection to the database is lost; the store reconnects when `LadderStore.reconnect` is
    called (the ladder server does so with back-off), and fails fast until then."""


class ServerClaimLostError(LadderStoreError):
    """After a reconnect, another ladder server holds the database: this one must stop."""


class SeatRefusedError(ValueError):
    """A bot of a pairing cannot play (revoked, its token replaced, another game): the store refuses that
    match, and the server drops the pairing, not the process. ``why``: revoked, rotated,
    game, or paused (paused or banned)."""

    def __init__(self, bot: str, why: str, message: str) -> None:
        super().__init__(message)
        self.bot = bot
        self.why = why
