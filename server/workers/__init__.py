"""Matches on several cores: the lobby's front to the worker processes, and one worker process."""
