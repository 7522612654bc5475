"""What the games' training environments share (`cellarena.server.games.<game>.env` hold the games' own).

Needs the ``[rl]`` extra (pettingzoo, gymnasium).
"""
