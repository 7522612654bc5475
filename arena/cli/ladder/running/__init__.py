"""The host's commands for running a whole ladder: `ladder up` and `ladder systemd` (from its config
file) and `ladder backup`/`restore`."""
