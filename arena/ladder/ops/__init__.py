"""Running a ladder: its health endpoint and metrics, and `cellarena bench ladder` with its load bots."""
