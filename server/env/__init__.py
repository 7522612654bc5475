"""The games' PettingZoo environments (`games`, a module per game) and what they share (`turns`,
`fixed_spaces`, `ansi`).

Needs the ``[rl]`` extra (pettingzoo, gymnasium).
"""
