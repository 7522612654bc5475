"""Rezzo's benchmarks: the engine (`engine`), the vector environment (`env`), training (`train`), a
slot's batch (`slot`) and what the server load benchmarks play (`load`)."""
