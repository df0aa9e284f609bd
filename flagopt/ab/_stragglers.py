"""Runs of an A/B that read far below what its other rounds say (pure): a slow node or a neighbour's job.

A round's pairs cancel the machine's drift, but not a run the machine slowed. One run 5 % slow in five rounds
moves the mean by a point and widens the interval of a +3 % patch past zero, and the A/B then reads "no
difference" for a patch that pays. The study leaves such runs out of its estimates (docs/statistics.md §18); the
A/B names them and gives each patch's estimate without them beside the one over every round, which it keeps (it
is the independent check, and it is read as planned).

A run is judged on its pair with A of the same round: how far that pair's log-ratio lies from the median of the
patch's other pairs, in units of the run noise. Five rounds cannot measure their own noise well enough for this
(one pair in five far out is what a small sample of a noisy job looks like): the noise is the study's, measured
on its controls, and never below the noise floor the estimates keep. Without a study there is no such check.
As in the study, only slow runs are flagged: a pair far below the patch's others is the patch's run; a round
where every patch's pair is far above its others is A's run.

Example:
    >>> values = [[100.0, 100.2, 99.9, 100.1, 100.0], [103.0, 103.1, 97.9, 103.2, 102.9]]
    >>> [(s["round"], s["arm"], round(s["reads"], 2)) for s in slow_runs(values, "maximize", 0.003)]
    [(2, 1, -0.05)]
    >>> slow_runs(values, "maximize", None)
    []
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

from flagopt.ab._estimate import log_ratio
from flagopt.stats import DEFAULT_NOISE_FLOOR, STRAGGLER_SIGMAS

#: the fewest pairs of a patch for its median to say what its other rounds read
MIN_PAIRS = 3


def slow_runs(values: Sequence[Sequence[float | None]], direction: str,
              run_sigma: float | None) -> list[dict[str, float | int]]:
    """The runs more than :data:`STRAGGLER_SIGMAS` pair sigmas slow, as ``{"round", "arm", "reads"}``.

    ``values[arm][round]`` as :func:`flagopt.ab.values_by_round` gives them (arm 0 is A); ``run_sigma`` the
    study's relative run noise (``None``: no check); ``reads`` is how far the run read below what the other
    rounds say (-0.05: 5 % slow).
    """
    if run_sigma is None or len(values) < 2:
        return []
    deviations: dict[int, dict[int, float]] = {}  # patch -> round -> pair log-ratio less the patch's median
    for arm, row in enumerate(values[1:], start=1):
        pairs = {rnd: log_ratio(v, a, direction) for rnd, (v, a) in enumerate(zip(row, values[0])) if v and a}
        if len(pairs) >= MIN_PAIRS:
            centre = median(pairs.values())
            deviations[arm] = {rnd: d - centre for rnd, d in pairs.items()}
    if not deviations:
        return []
    pooled = [d for devs in deviations.values() for d in devs.values()]
    mad = 1.4826 * median(abs(d) for d in pooled)
    # a pair is the difference of two runs: its sigma is sqrt(2) run sigmas
    limit = STRAGGLER_SIGMAS * max(mad, math.sqrt(2.0) * max(run_sigma, DEFAULT_NOISE_FLOOR))
    out: list[dict[str, float | int]] = []
    for rnd in range(len(values[0])):
        high = [devs[rnd] for devs in deviations.values() if rnd in devs]
        if high and all(d > limit for d in high):
            out.append({"round": rnd, "arm": 0, "reads": math.expm1(-median(high))})
        for arm, devs in deviations.items():
            if devs.get(rnd, 0.0) < -limit:
                out.append({"round": rnd, "arm": arm, "reads": math.expm1(devs[rnd])})
    return out


def without(values: Sequence[Sequence[float | None]], slow: Sequence[dict[str, float | int]]) -> list[list[float | None]]:
    """``values`` with the slow runs taken out (``None``): a slow A takes its round out of every pair.

    Example:
        >>> without([[1.0, 2.0], [3.0, 4.0]], [{"round": 1, "arm": 0, "reads": -0.05}])
        [[1.0, None], [3.0, 4.0]]
    """
    out = [list(row) for row in values]
    for s in slow:
        out[int(s["arm"])][int(s["round"])] = None
    return out
