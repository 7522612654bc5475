"""The benchmarks of the server as a whole: `bench server` (`server`, with its load process
`loadgen`) and the harness every benchmark shares (`harness`). Each game's own benchmark lives in its
package, and its plugin adds it to `cellarena bench`.
"""
