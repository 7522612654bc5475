"""The public ladder: bots that strangers run join a long-running server and play rated matches.

Its rooms, each importing only those drawn below it in docs/architecture.md ("The ladder"):
`identity` (tokens, names, lock-outs), `store` (the database), `accounts` (owners), `scoring` and
`matchmaking` (pure functions), `services` (the running server), `hosting` (workers, a cluster),
`web` (the pages) and `ops` (health, metrics, the bench). Beside them, what every room shares:
`records`, `errors`, `rules` and `policy`.
"""
