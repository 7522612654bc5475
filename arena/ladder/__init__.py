"""The public ladder: bots that strangers run join a long-running server and play rated matches.

`identity` makes and checks bot tokens; `store` keeps bots, matches and ratings in SQLite or PostgreSQL.
"""
