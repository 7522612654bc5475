"""The running ladder server's services: admission, the queue, the starter, results, and their lifecycle."""
