"""The slow, obviously correct Colorblocks colour change, to check the SDK's fast versions against.

Plain lists, one direction at a time, written straight from the rule: walk away from the placed
cell; neutral and enemy blocks without a guard are collected; an unguarded own block converts what
was collected (if anything); every other cell, or the edge, ends the walk with nothing converted.
"""

from __future__ import annotations

NEUTRAL, RED, BLUE = 0, 1, 2


def reference_color_change(
    blocks: list[list[int]], guards: list[list[int]], x: int, y: int, seat: int
) -> set[tuple[int, int]]:
    own = RED if seat == 0 else BLUE
    enemy = BLUE if seat == 0 else RED
    height, width = len(blocks), len(blocks[0])
    converted: set[tuple[int, int]] = set()
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        collected = []
        step = 1
        while True:
            cx, cy = x + dx * step, y + dy * step
            if not (0 <= cx < width and 0 <= cy < height):
                break  # the edge: nothing converts
            if guards[cy][cx] != -1:
                break  # a guard of either side stops it
            block = blocks[cy][cx]
            if block in (NEUTRAL, enemy):
                collected.append((cx, cy))
            elif block == own:
                converted.update(collected)
                break
            else:
                break  # true neutral, dead, objective, spawn
            step += 1
    return converted


def reference_gains(blocks: list[list[int]], guards: list[list[int]], seat: int) -> list[list[int]]:
    """For every cell, how many cells a block placed there would convert."""
    return [
        [len(reference_color_change(blocks, guards, x, y, seat)) for x in range(len(blocks[0]))]
        for y in range(len(blocks))
    ]
