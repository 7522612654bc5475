"""The public ladder: bots that strangers run join a long-running server and play rated matches.

`identity` makes and checks bot tokens; `store` keeps bots, matches and ratings in SQLite or PostgreSQL.
The server is four services with one lifecycle (`lifecycle`): `admission`, the queue (`matchmaking`),
the match `starter` and `results`, wired by `service` and seated in a lobby by `seating`.
"""
