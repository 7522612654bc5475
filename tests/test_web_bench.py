"""`cellarena bench web` runs end to end and reports every measure (its goals are checked by reading
its output, never in a timed test)."""

from __future__ import annotations

import json

from browser import chromium_path
from cellarena_cli import cellarena


def test_bench_web_reports_playback_first_frame_and_live_cpu() -> None:
    chromium_path()  # skips (or fails under CI) without a browser
    # --long-ticks 600: the first frame is measured on the replay that plays, not on another of 3,000
    # ticks written for it (the longest part of the run, and the same code either way).
    proc = cellarena(
        "bench", "web", "--seconds", "1", "--spectators", "1", "--long-ticks", "600", "--json", timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["playback"]["fps"] > 0 and result["playback"]["refresh_hz"] > 0
    assert result["big_board"] and all(
        r["size"] == "1024x1024" and r["fps"] > 0 for r in result["big_board"].values()
    )
    assert result["first_frame"]["ticks"] == 600 and result["first_frame"]["seconds"] > 0
    assert set(result["live"]) >= {"cpu_share_without_browsers", "cpu_share_per_spectator"}
