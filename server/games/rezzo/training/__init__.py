"""Training Rezzo bots: the Gymnasium vector environment over `batch`, its rewards, opponents and
pictures. The PettingZoo environment stays `rezzo.env`, where every game keeps its own."""
