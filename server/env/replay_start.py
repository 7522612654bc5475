"""Checks of the environments' ``reset(options={"replay": PATH, "tick": N})``.

The state itself comes from `replay.replay_start`, the one rebuild of a state from a replay, as
`replay fork`'s; docs/training.md.
"""

from __future__ import annotations

import os
from typing import Any


def check_shape(path: Any, got: tuple[int, ...], want: tuple[int, ...] | None) -> None:
    """A replay whose board gives observations of another shape than the environment's space (its
    config differs from the environment's): ValueError saying to make the environment with its config."""
    if want is not None and got != tuple(want):
        raise ValueError(
            f"options['replay']: {os.fspath(path)} gives observations of shape {got}, this environment's "
            f"are {tuple(want)}: make the environment with the replay's config (its header's 'config')"
        )
