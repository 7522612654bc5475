"""C.A.T.A.'s part of `cellarena train cata` (docs/training.md)."""
