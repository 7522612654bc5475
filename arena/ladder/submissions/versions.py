"""A submitted bot's versions: what a version is, and the one table of the moves between its states.

After h11's state machine: every change of a version's state is checked against `MOVES`, in one
place, so the upload, the builder, the validation match and the owner's "make live" cannot disagree
on what may follow what. Pure: no I/O.

    received --> building --> validating --> validated --> live <--> retired
        |            |             |                                   |
        +------------+-------------+--> failed --> received (rebuilt)  +--> building (rebuilt)

``received``: uploaded and unpacked once (its archive is sound), waiting for a build. ``building`` and
``validating``: taken by the builder, then by the validation match. ``validated``: it may play,
and waits for its owner (or the rule that a first version goes live at once) to make it live.
``live``: the one version the ladder plays for its bot (``bots.live_version``). ``retired``: once
live or validated, replaced; it may be made live again (a roll back). ``failed``: its build or its
validation failed; the reason and the log say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast, get_args

VersionState = Literal["received", "building", "validating", "validated", "live", "failed", "retired"]
STATES: tuple[VersionState, ...] = get_args(VersionState)

#: Every allowed move, from each state to the states that may follow it.
MOVES: dict[VersionState, frozenset[VersionState]] = {
    "received": frozenset({"building", "failed"}),
    # A build or validation cut short (the server stopped) goes back to the queue.
    "building": frozenset({"validating", "failed", "received"}),
    "validating": frozenset({"validated", "failed", "received"}),
    "validated": frozenset({"live", "retired"}),
    "live": frozenset({"retired"}),
    # A roll back makes a retired version live again; a host's rebuild (a new SDK) builds it again.
    "retired": frozenset({"live", "building"}),
    "failed": frozenset({"received"}),
}
assert set(MOVES) == set(STATES) and all(v <= set(STATES) for v in MOVES.values())

#: The longest build or validation log kept (characters): its tail, which holds the error.
MAX_LOG = 64 * 1024
#: The longest reason kept (characters).
MAX_REASON = 500


class VersionMoveError(ValueError):
    """A change of state that `MOVES` does not allow; the message names the version and both states."""


def check_move(label: str, old: str, new: str) -> VersionState:
    """``new``, if a version in ``old`` may move to it; `VersionMoveError` saying what may follow."""
    if new not in MOVES:
        raise VersionMoveError(f"{label}: {new!r} is no version state; one of {', '.join(STATES)}")
    allowed = MOVES.get(cast(VersionState, old), frozenset())
    if new not in allowed:
        after = ", ".join(sorted(allowed)) or "nothing"
        raise VersionMoveError(f"{label} is {old}: it cannot become {new} (after {old}: {after})")
    return new


def capped_log(text: str | None, limit: int = MAX_LOG) -> str | None:
    """A log as kept: its last ``limit`` characters (the end says what failed), marked when cut."""
    if text is None or len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n" + text[-limit:]


@dataclass(frozen=True)
class Version:
    """One uploaded version of a bot."""

    id: int
    bot: str
    bot_id: int
    #: 1, 2, ... per bot.
    number: int
    sha256: str
    #: The archive's size in bytes.
    size: int
    #: "tar.gz" or "zip": how the archive is unpacked.
    kind: str
    state: VersionState
    uploaded_by: int | None
    created: datetime
    changed: datetime
    reason: str | None = None
    build_log: str | None = None
    validation_log: str | None = None

    @property
    def label(self) -> str:
        return f"{self.bot} version {self.number}"

    def to_json(self, *, logs: bool = False) -> dict[str, Any]:
        """The version as the API shows it; its logs only for its owner (``logs``)."""
        data: dict[str, Any] = {
            "bot": self.bot,
            "version": self.number,
            "state": self.state,
            "sha256": self.sha256,
            "size": self.size,
            "kind": self.kind,
            "created": self.created.isoformat(),
            "changed": self.changed.isoformat(),
            "reason": self.reason,
        }
        if logs:
            data["build_log"] = self.build_log
            data["validation_log"] = self.validation_log
        return data
