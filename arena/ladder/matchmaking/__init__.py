"""Who meets whom, as pure functions: the matchmaker and the challenges it plays first."""
