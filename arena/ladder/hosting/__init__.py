"""Where a match is hosted outside the ladder's own lobby: local worker processes, a Dask cluster."""
