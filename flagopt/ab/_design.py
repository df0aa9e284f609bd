"""The order of the runs: one Latin-square row per round over the deployed job and the patches (pure).

With the deployed job ``A`` and one patch ``B`` the rounds are A B, B A, A B, ... so a linear drift adds as much to
A as to B over two rounds. With several patches each round runs every arm once, in the order of a Williams design
(a Latin square where every arm also follows every other arm equally often), so neither the position in a round
nor the arm run just before favours one patch.
"""

from __future__ import annotations


def williams_rows(k: int) -> list[list[int]]:
    """The rows of a Williams design for ``k`` arms: ``k`` rows for even ``k``, ``2k`` (the square and its mirror) for odd.

    Example:
        >>> williams_rows(2)
        [[0, 1], [1, 0]]
        >>> williams_rows(4)
        [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    """
    if k < 1:
        raise ValueError("at least one arm")
    first = [0]
    low, high = 1, k - 1
    for i in range(1, k):
        if i % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(a + r) % k for a in first] for r in range(k)]
    if k % 2:
        rows += [list(reversed(row)) for row in rows]
    return rows


def round_order(round_index: int, k: int) -> list[int]:
    """The arm indices of round ``round_index`` (0 is the deployed job), in run order.

    Example:
        >>> [round_order(r, 2) for r in range(3)]
        [[0, 1], [1, 0], [0, 1]]
    """
    rows = williams_rows(k)
    return rows[round_index % len(rows)]
