"""The running ladder server: admission, queue, starter, results, their lifecycle and wiring."""
