"""`cellarena train rezzo` (`cellarena.server.cli.imitate`), as Rezzo's plug-in names it."""

from __future__ import annotations

from cellarena.server.cli.imitate import imitation_command
from cellarena.server.training.rezzo.imitation import IMITATION

command = imitation_command(IMITATION)
