"""What owners and the host's admins do on the pages, one log line each (`ladder web`'s log, in `serve`'s
format): sign-ups, logins (and failed ones), resets, bots made, tokens renewed, revokes, pauses,
challenges, admin actions. Names, actions and addresses only: never a password, token, code or cookie.

Its own logger, ``cellarena.ladder.web``, which `ladder web` shows without ``-v``; ``-v`` adds the
rest (the store's and the server's lines)."""

from __future__ import annotations

import logging

log = logging.getLogger("cellarena.ladder.web")


def said(who: str, what: str, address: str | None = None) -> None:
    """``who`` (an owner, ``NAME (admin)``, a bot's token) did ``what``, from ``address`` if known."""
    log.info("ladder web: %s %s%s", who, what, f" (from {address})" if address else "")


def refused(who: str, what: str, why: str, address: str | None = None) -> None:
    """An attempt the pages refused that the host may want to see (a failed login, a bad reset code)."""
    log.warning("ladder web: %s %s refused: %s%s", who, what, why, f" (from {address})" if address else "")
