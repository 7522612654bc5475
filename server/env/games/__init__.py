"""Each game's PettingZoo environment, a module named for the game (docs/training.md)."""
