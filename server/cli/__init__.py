"""The server layer's commands, one module each: `serve`, `match`, `sim`, `bench` (the group) and
`replay`, with what they share: how games meet the command line (`game_cli`), common parameters
(`params`) and running trio (`run`). The root group, in `cellarena.arena.cli`, gathers them.
"""
