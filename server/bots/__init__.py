"""Bot programs: starting them, confining them (bubblewrap, cgroups), and stopping them, even if
cellarena is killed."""
