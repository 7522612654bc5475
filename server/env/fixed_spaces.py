"""What every environment here shares with PettingZoo: its metadata and one space for every agent."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from cellarena.server.env import ansi


def env_metadata(name: str, *, parallelizable: bool) -> dict[str, Any]:
    """PettingZoo's ``metadata`` of an environment called ``name``, with the render modes all offer."""
    return {"name": name, "render_modes": ansi.RENDER_MODES, "is_parallelizable": parallelizable}


class FixedSpaces:
    """Every agent observes in ``_obs_space`` and acts in ``_act_space``, which ``__init__`` sets."""

    _obs_space: spaces.Space[Any]
    _act_space: spaces.Space[Any]

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._act_space
