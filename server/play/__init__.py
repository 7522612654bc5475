"""Matches: the lobby that seats bots, a match's seats, pacing and referee, and matches hosted for
another server."""
