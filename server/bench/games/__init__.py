"""Each game's own benchmarks, which its plugin adds to `cellarena bench`."""
