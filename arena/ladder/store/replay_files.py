"""A ladder's replay files: named by match id, never overwritten, and held against the database's ids.

Replays are named ``ladder-NNNNNN.replay`` by the match's id in the database. A database that does not
know the ids of the replays beside it (an emptied file, ``: > ladder.sqlite``; a backup older than the
replays) would hand those ids out again, and its new matches would take the names of the old ones. Two
defences:

- every replay file is created exclusively (``O_EXCL``): a name that is taken is an error for that one
  match, which is then played without a replay, and the old file stays as it was;
- `check_replays` refuses to serve when the highest replay id on disk is above the highest match id in
  the database, saying which of the two cases it is and what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.store.ladder_store import LadderStore

_NAME = re.compile(r"ladder-(\d+)\.replay")


def replay_path(folder: Path, match_id: int) -> Path:
    return folder / f"ladder-{match_id:06d}.replay"


def write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a file that must not exist yet (FileExistsError if it does)."""
    with open(path, "xb") as f:
        f.write(data)


def highest_replay(folder: Path) -> tuple[int, Path | None]:
    """The highest match id among the replay files in ``folder``, and that file (0, None for none)."""
    best: tuple[int, Path | None] = (0, None)
    if not folder.is_dir():
        return best
    for path in folder.iterdir():
        found = _NAME.fullmatch(path.name)
        if found is not None and int(found.group(1)) > best[0]:
            best = (int(found.group(1)), path)
    return best


def check_replays(store: LadderStore, folder: Path) -> None:
    """Refuse (LadderStoreError) a database whose match ids stop below the replays in ``folder``."""
    replay_id, replay = highest_replay(folder)
    if replay is None:
        return
    match_id = store.highest_match_id()
    if replay_id <= match_id:
        return
    if match_id == 0:
        state = "holds no match at all (a new or emptied database)"
    else:
        state = f"goes up to match {match_id} (an older copy: a backup restored, say)"
    raise LadderStoreError(
        f"{store.where}: this database {state}, but the replays beside it go up to {replay.name}: "
        "its next matches would take the names of those replays. Restore the database that belongs "
        f"to {folder} (the newest backup), or, to start a new ladder, move {folder} away first; "
        "nothing was changed"
    )
