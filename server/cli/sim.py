"""`cellarena sim GAME`: a game played headless by built-in agents, for games whose plugin has one."""

from __future__ import annotations

from cellarena.server.cli.game_cli import GameGroup

sim = GameGroup("sim", help="Run a game headless, with built-in agents, and report what happened.")
