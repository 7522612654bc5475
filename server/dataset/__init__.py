"""Matches as a dataset: replays re-simulated into one row per seat and tick, written as Parquet with
a dataset card (`cellarena replay export`, `cellarena ladder export`; docs/datasets.md)."""
