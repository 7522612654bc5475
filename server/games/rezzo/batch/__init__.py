"""Rezzo's batched step: many worlds (a training batch, or the matches of one phase slot) as one
array operation, in numpy or numba, bit-identical to `engine` world by world."""
