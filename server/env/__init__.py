"""Training environments: Rezzo's vector environment on the batched step, and PettingZoo wrappers."""
