"""Training Rezzo bots: the Gymnasium vector environment over the batched engine, its rewards, opponents
and pictures. The PettingZoo environment is `cellarena.server.env.games.rezzo`, like every game's."""
