"""`cellarena bench ladder --submitted N`: a built Python bot started as the ladder starts a submitted
one, isolated, on a handed connection, timed from its launch to its hello."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from cellarena_cli import invoke


def test_bench_ladder_times_a_submitted_bots_start_to_its_hello() -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is not installed (.ci/run installs it); CI must have it", pytrace=False)
        pytest.skip("bubblewrap is not installed")
    code, out = invoke("bench", "ladder", "--submitted", "3", "--json")
    assert code == 0, out
    result = json.loads(out)
    assert result["starts"] == 3 and result["isolated"] is True
    assert 0 < result["build_s"] < 60
    assert 0 < result["hello_p50_s"] <= result["hello_p90_s"] <= result["hello_max_s"] < 60


def test_bench_ladder_refuses_no_starts() -> None:
    code, out = invoke("bench", "ladder", "--submitted", "0")
    assert code == 2 and "--submitted" in out
