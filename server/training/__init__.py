"""Training beyond the PettingZoo environments: each game's vector environments, in a package named for it."""
