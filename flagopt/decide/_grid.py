"""The values the screen tries: each param's probe grid and its order, the line search around the best grid point,
and a finite space's configurations.

Flag effects are mostly separable (a threshold, a protocol, a scheduler switch each move throughput on their own)
with a few interactions and cliffs. So the screen probes each param alone on top of the deployed job, as a careful
engineer does (booleans and categoricals over their choices, numeric ranges over a coarse geometric or linear grid),
then the neighbours of a numeric param's best grid point.

Example:
    >>> from flagopt.space import Param
    >>> p = Param("ag", "xla", "xla_gpu_all_gather_combine_threshold_bytes", type="int", low=2**26, high=2**36,
    ...           log=True)
    >>> [v.bit_length() - 1 for v in probe_values(p, str(2**33))]
    [26, 28, 30, 32, 34, 36]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

from flagopt.decide._design import Scalar, same_value
from flagopt.space import Param

#: Grid points of one numeric param in the screen; more cost runs, fewer miss a narrow optimum.
MAX_GRID = 6
#: A numeric range wider than this many octaves is screened every two octaves, then refined around the best.
WIDE_OCTAVES = 8.0


def _numeric_grid(param: Param) -> list[float]:
    low, high = float(param.low), float(param.high)  # type: ignore[arg-type]
    if param.log and low > 0:
        octaves = math.log2(high / low)
        step = 2.0 if octaves > WIDE_OCTAVES else 1.0
        count = int(math.floor(octaves / step + 1e-9)) + 1
        if count > MAX_GRID:
            step, count = octaves / (MAX_GRID - 1), MAX_GRID
        return [low * 2.0 ** (i * step) for i in range(count)]
    count = MAX_GRID if param.type == "float" else min(MAX_GRID, int(high - low) + 1)
    return [low + (high - low) * i / max(count - 1, 1) for i in range(count)]


def _cast(param: Param, value: float) -> Scalar:
    if param.type == "int":
        out = int(round(value))
        if param.step:
            out = int(param.low + round((out - param.low) / param.step) * param.step)  # type: ignore[operator]
        return int(min(max(out, param.low), param.high))  # type: ignore[type-var]
    if param.step:
        value = param.low + round((value - param.low) / param.step) * param.step  # type: ignore[operator]
    # six significant digits: a grid point of 0.5..0.95 is 0.68 in a label, an env.sh patch and a flag, not
    # 0.6799999999999999
    return float(min(max(float(f"{value:.6g}"), param.low), param.high))  # type: ignore[type-var]


def _values(param: Param) -> Sequence[Scalar] | None:
    """Every value ``param`` can take: its choices, or its int range (a lazy ``range``); ``None`` if continuous."""
    if param.choices is not None:
        return list(dict.fromkeys(param.choices))
    if param.type == "int":
        return range(int(param.low), int(param.high) + 1, int(param.step or 1))
    return None


def configurations(params: Sequence[Param], deployed: Mapping[str, str | None],
                   excluded: Callable[[str, Scalar], bool] | None = None) -> float:
    """How many configurations other than the deployed job ``params`` can set (``math.inf`` if one is continuous).

    ``excluded(name, value)``: a value no run may set (one that failed alone): it counts out of the space, as a
    value the study can never measure. The deployed value always counts.

    Example:
        >>> flags = [Param(f"f{i}", "xla", f"xla_f{i}", choices=(True, False)) for i in range(4)]
        >>> configurations(flags, {p.name: "false" for p in flags})
        15
        >>> configurations(flags, {p.name: "false" for p in flags}, excluded=lambda n, v: n == "f0" and v is True)
        7
        >>> mb = Param("mb", "arg", "num_microbatches", type="int", low=4, high=32, step=4)
        >>> configurations(flags + [mb], {"mb": "8", **{p.name: "false" for p in flags}})
        127
    """
    total = 1
    for param in params:
        values = _values(param)
        if values is None:
            return math.inf
        if isinstance(values, range) and (excluded is None or len(values) > 4096):
            total *= max(len(values), 1)  # a wide range counts as it is: it is only enumerated to count values out
            continue
        current = deployed.get(param.name)
        kept = sum(1 for v in values if same_value(param, v, current) or not (excluded and excluded(param.name, v)))
        deployed_among = any(same_value(param, v, current) for v in values)
        total *= max(kept + (0 if deployed_among else 1), 1)  # the deployed value the sampler cannot set back
    return total - 1


def every_configuration(params: Sequence[Param], deployed: Mapping[str, str | None],
                        excluded: Callable[[str, Scalar], bool] | None = None) -> list[dict[str, Scalar]]:
    """Every configuration of a finite space other than the deployed job, as the settings it changes (a param at its
    deployed value is left out), without ``excluded`` values; the few settings first. Only for a small space: see
    :func:`configurations` for its size.

    Example:
        >>> flags = [Param(f"f{i}", "xla", f"xla_f{i}", choices=(True, False)) for i in range(2)]
        >>> every_configuration(flags, {p.name: "false" for p in flags})
        [{'f1': True}, {'f0': True}, {'f0': True, 'f1': True}]
    """
    choices: list[list[Scalar | None]] = []
    for param in params:
        values = _values(param)
        if values is None:
            raise ValueError(f"{param.name}: a continuous param has no finite set of configurations")
        current = deployed.get(param.name)
        kept = [v for v in values if not same_value(param, v, current) and not (excluded and excluded(param.name, v))]
        choices.append([None, *kept])  # None: the deployed value
    out = [{p.name: v for p, v in zip(params, combo) if v is not None} for combo in itertools.product(*choices)]
    return sorted((c for c in out if c), key=len)


def probe_values(param: Param, deployed: str | None) -> list[Scalar]:
    """The values one-factor screening tries for ``param`` (never the deployed one), in order."""
    if param.choices is not None:
        values: list[Scalar] = list(param.choices)
    else:
        values = [_cast(param, v) for v in _numeric_grid(param)]
    out: list[Scalar] = []
    for v in values:
        if not same_value(param, v, deployed) and v not in out:
            out.append(v)
    return out


def probe_order(params: Sequence[Param], deployed: Mapping[str, str | None], budget: int) -> list[tuple[Param, Scalar]]:
    """Every one-factor probe ``(param, value)`` in the order the screen runs them.

    Param by param, each value in turn (the engineer's order), while the whole screen fits in three quarters of
    ``budget`` (every shipped space and random family: at most 27 probes of 60; every shipped space at the engineer's
    own run count), leaving the rest to the model's combination and the confirmations. A wider space goes breadth
    first: every param's first value, then every param's second, and so on, each numeric param's values spread out
    (its ends, then between them). Param by param, a 20-setting space spent its 60 runs on the first seventeen
    settings' probes and never measured the last one, a +6 % setting (stress-huge, docs/benchmark-decisions.md,
    fifty-first session note).

    Example:
        >>> a = Param("a", "xla", "a", type="bool", choices=(True, False))
        >>> b = Param("b", "env", "B", choices=("x", "y"))
        >>> [(p.name, v) for p, v in probe_order([a, b], {}, 60)]
        [('a', True), ('a', False), ('b', 'x'), ('b', 'y')]
        >>> [(p.name, v) for p, v in probe_order([a, b], {}, 4)]
        [('a', True), ('b', 'x'), ('a', False), ('b', 'y')]
    """
    values = {p.name: probe_values(p, deployed.get(p.name)) for p in params}
    if 4 * sum(len(v) for v in values.values()) <= 3 * budget:
        return [(p, v) for p in params for v in values[p.name]]
    spread = {p.name: values[p.name] if p.choices is not None else _spread(values[p.name]) for p in params}
    rounds = max((len(v) for v in spread.values()), default=0)
    return [(p, spread[p.name][i]) for i in range(rounds) for p in params if i < len(spread[p.name])]


def _spread(values: Sequence[Scalar]) -> list[Scalar]:
    """``values`` (ascending) reordered so that each prefix covers their range: both ends, then the midpoints.

    Example:
        >>> _spread([1, 2, 3, 4, 5, 6])
        [1, 6, 3, 2, 4, 5]
    """
    if len(values) <= 2:
        return list(values)
    out = [0, len(values) - 1]
    gaps = [(0, len(values) - 1)]
    while gaps:
        lo, hi = gaps.pop(0)
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        out.append(mid)
        gaps += [(lo, mid), (mid, hi)]
    return [values[i] for i in out] + [v for i, v in enumerate(values) if i not in out]


def refine_values(param: Param, measured: Mapping[Scalar, float], deployed: str | None, *,
                  around_deployed: bool = False) -> list[Scalar]:
    """Neighbours of the best screened value of a numeric param, halfway to the grid points beside it.

    ``measured`` maps screened values (the deployed one included, with gain 0) to their estimated gains. Returns
    nothing for a categorical param, and when the best value is the deployed one unless ``around_deployed``: then
    the point halfway to its better neighbour (the response is curved there, and its peak may lie between them).

    Example:
        >>> mb = Param("mb", "args", "num_microbatches", type="int", low=4, high=64, log=True)
        >>> refine_values(mb, {8: -0.09, 16: 0.0, 32: -0.005, 64: -0.1}, "16", around_deployed=True)
        [23]
    """
    if param.choices is not None or len(measured) < 2:
        return []
    ordered = sorted(measured, key=float)
    best = max(ordered, key=lambda v: measured[v])
    i = ordered.index(best)
    sides = (i - 1, i + 1)
    if same_value(param, best, deployed):
        if not around_deployed:
            return []
        sides = (max((j for j in sides if 0 <= j < len(ordered)), key=lambda j: measured[ordered[j]]),)
    out: list[Scalar] = []
    for j in sides:
        if 0 <= j < len(ordered):
            value = halfway(param, best, ordered[j])
            if value not in measured and not same_value(param, value, deployed) and value not in out:
                out.append(value)
    return out


def halfway(param: Param, a: Scalar, b: Scalar) -> Scalar:
    """The value of numeric ``param`` halfway between ``a`` and ``b``: geometric on a log scale, on its step.

    Example:
        >>> ag = Param("ag", "xla", "xla_gpu_all_gather_combine_threshold_bytes", type="int", low=2**20, high=2**33,
        ...            log=True)
        >>> halfway(ag, 2**29, 2**30)
        759250125
    """
    x, y = float(a), float(b)  # type: ignore[arg-type]
    return _cast(param, math.sqrt(x * y) if param.log and x > 0 and y > 0 else (x + y) / 2.0)


def refinements(params: Sequence[Param], measured: Mapping[str, Mapping[Scalar, float]],
                failed: Mapping[str, Sequence[Scalar]], deployed: Mapping[str, str | None], *, stands_out: float,
                clearly_below: float) -> Iterator[tuple[Param, Scalar]]:
    """The line search between grid points, param by param: ``(param, value)`` from :func:`refine_values`.

    ``measured`` holds each param's probed values and their gains; a param is refined only where its best grid point
    stands out of the noise (a gain of at least ``stands_out``), or where its response is curved around the deployed
    value: the deployed value measured best among values that clearly matter (one ``clearly_below`` the deployed
    job, a microbatch count between a large bubble and a large overhead), and the peak may lie between it and its
    better neighbour, worth one run. A grid point in ``failed`` (an OOM cliff) is a neighbour too: the optimum often
    sits right below it.

    Example:
        >>> mb = Param("mb", "args", "num_microbatches", type="int", low=4, high=64, log=True)
        >>> [v for _, v in refinements([mb], {"mb": {8: -0.09, 32: -0.005, 64: -0.1}}, {}, {"mb": "16"},
        ...                            stands_out=0.01, clearly_below=0.05)]
        [23]
        >>> list(refinements([mb], {"mb": {8: 0.004, 32: -0.005}}, {}, {"mb": "16"}, stands_out=0.01,
        ...                  clearly_below=0.05))  # inside the noise, nothing curved: no refinement
        []
    """
    for param in params:
        points = dict(measured.get(param.name, {}))
        if not points:
            continue
        curved = min(points.values()) < -clearly_below and deployed.get(param.name) is not None
        if not (max(points.values()) >= stands_out or curved):
            continue
        points.update({v: -math.inf for v in failed.get(param.name, ()) if v not in points})
        if deployed.get(param.name) is not None and param.choices is None:
            try:
                points[float(deployed[param.name])] = 0.0  # type: ignore[arg-type]
            except ValueError:
                pass
        for value in refine_values(param, points, deployed.get(param.name), around_deployed=curved):
            yield param, value


__all__ = ["configurations", "every_configuration", "probe_order", "probe_values", "refine_values", "refinements"]
