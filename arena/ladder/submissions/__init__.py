"""Submitted bots up to their unpacked folder: versions and their states, the content-addressed archive
store, and the safe unpacking of an uploaded archive (no network here)."""
