"""Each game's command-line options (its `GameCli`) and commands, which its plugin names by module path."""
