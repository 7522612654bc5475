"""Which backend a Rezzo step runs on: numba's compiled loops where they can run, else numpy.

numba is optional (the ``[rl]`` extra). `BitWorld` (one world, `ca`) and `BatchedRezzo` (many,
`batched`) each keep a numpy step, the reference their compiled twin is tested against, and choose
between the two here, by the same rule and the same environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Callable

#: The backends a step can be asked for: "auto" is numba where it can be imported, unless
#: `NO_NUMBA_VARIABLE` is "1".
BACKENDS = ("auto", "numpy", "numba")
NO_NUMBA_VARIABLE = "CELLARENA_NO_NUMBA"


def resolve(name: str, numba_available: Callable[[], bool], what: str) -> str:
    """``name`` as the backend ``what`` (a class name, for the error) runs: "numpy" or "numba".
    ``numba_available`` tells whether its compiled loops load here."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "auto":
        if os.environ.get(NO_NUMBA_VARIABLE) == "1" or not numba_available():
            return "numpy"
        return "numba"
    if name == "numba" and not numba_available():
        raise ImportError(
            f"the numba backend of {what} needs numba: install the [rl] extra "
            "(pip install 'cellarena[rl]'), or pass backend='numpy'"
        )
    return name
