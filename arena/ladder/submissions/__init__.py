"""Bots their owners upload: built confined and offline, validated by one unrated match, then played."""
