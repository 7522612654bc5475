"""Running a ladder: its services wired and run (`wiring`), health and metrics, `cellarena bench ladder`."""
