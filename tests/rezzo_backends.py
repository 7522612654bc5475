"""The Rezzo steps' backends in tests: numba is in the [rl] extra, so its absence skips a numba run,
except under CI, where it fails it."""

from __future__ import annotations

import os

import pytest

from cellarena.server.games.rezzo.batch import batched


def use(backend: str) -> str:
    """``backend`` if it can run here: numba is in the [rl] extra, so under CI its absence is a failure."""
    if backend == "numba" and not batched.numba_available():
        why = "numba is not installed (the [rl] extra)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; under CI the numba backend must be tested", pytrace=False)
        pytest.skip(why)
    return backend


#: Both backends, for tests that take a ``backend`` argument.
both_backends = pytest.mark.parametrize("backend", ["numpy", "numba"])
