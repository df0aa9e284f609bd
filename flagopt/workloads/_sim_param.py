"""One tunable of a simulated landscape: its search-space entry (type, range or choices, default) and its true
effect (``values``, a ``bump`` over log2 of the value, a pipeline ``bubble``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Value = bool | int | float | str | None


@dataclass(frozen=True)
class SimParam:
    """One tunable of a landscape: its search-space entry and its true effect."""

    name: str
    target: str
    type: str
    default: Value
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Value, ...] = ()
    explicit_grid: tuple[Value, ...] = ()
    effect: Mapping[str, Any] | None = None
    #: ``False``: the job reads it (a catalog profile sets it) but the search space does not offer it.
    tunable: bool = True

    def coerce(self, raw: Any) -> Value:
        """Parse a value as the job would (``"true"`` -> True, ``"1073741824"`` -> int)."""
        if raw is None:
            return None
        if self.type == "bool":
            return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("true", "1", "yes")
        if self.type == "int":
            return int(raw)
        if self.type == "float":
            return float(raw)
        if self.choices and all(isinstance(c, int) and not isinstance(c, bool) for c in self.choices):
            try:  # numbers offered as choices (a threshold, a connection count) arrive as text in flags and env
                return int(raw)
            except (TypeError, ValueError):
                pass
        return str(raw)

    def grid(self) -> tuple[Value, ...]:
        """The values ``Landscape.best`` searches: explicit ``grid``, or powers of two / every integer / choices."""
        if self.explicit_grid:
            values: list[Value] = list(self.explicit_grid)
        elif self.type == "bool":
            values = [False, True]
        elif self.type == "categorical":
            values = [None, *self.choices] if self.default is None else list(self.choices)
        elif self.type == "int" and self.log:
            lo, hi = math.ceil(math.log2(self.low or 1)), math.floor(math.log2(self.high or 1))
            values = [2**k for k in range(lo, hi + 1)]
        elif self.type == "int":
            values = list(range(int(self.low or 0), int(self.high or 0) + 1))
        else:
            values = [float(v) for v in np.linspace(self.low or 0.0, self.high or 0.0, 9)]
        return tuple(dict.fromkeys([*values, self.default]))

    def candidates(self, edges: tuple[float, ...] = ()) -> tuple[Value, ...]:
        """:meth:`grid` plus, for a numeric param, the values a sampler can pick that beat every grid point: the
        integers around a bubble's continuous optimum, a bump's centre, and ``edges`` (the last values before an
        OOM cliff, which :meth:`Landscape.best` passes) inside the range.

        The search space lets a sampler pick any integer (27 microbatches, a threshold one byte below the size
        that runs out of memory), so the true best must consider it: the bubble factor is unimodal in the count,
        its optimum ``sqrt((stages - 1) / overhead)``; a bump peaks at its centre.

        Example:
            >>> bump = {"bump": {"center": 100_000_000, "width": 1.0, "height": 0.05}}
            >>> p = SimParam("t", "xla", "int", 1 << 20, low=1 << 20, high=1 << 30, log=True, effect=bump)
            >>> [v for v in p.candidates(edges=(536870911,)) if v not in p.grid()]
            [536870911, 100000000]
        """
        values = list(self.grid())
        if self.type not in ("int", "float") or self.low is None or self.high is None:
            return tuple(dict.fromkeys(values))
        effect = self.effect or {}
        extra: list[float] = list(edges)
        if "bubble" in effect and self.type == "int":
            peak = math.sqrt((float(effect["bubble"]["stages"]) - 1.0) / float(effect["bubble"]["overhead"]))
            extra += [math.floor(peak), math.ceil(peak)]
        if "bump" in effect:
            extra.append(float(effect["bump"]["center"]))
        for v in extra:
            if self.low <= v <= self.high:
                values.append(int(round(v)) if self.type == "int" else float(v))
        return tuple(dict.fromkeys(values))

    def factor(self, value: Value) -> float:
        """Relative throughput factor of ``value`` under this param's effect (1.0 = no effect)."""
        effect = self.effect or {}
        out = 1.0
        if "values" in effect:
            out *= 1.0 + float(effect["values"].get(value, 0.0))
        if "bump" in effect and value:
            bump = effect["bump"]
            z = (math.log2(float(value)) - math.log2(float(bump["center"]))) / float(bump["width"])
            out *= 1.0 + float(bump["height"]) * math.exp(-0.5 * z * z)
        if "bubble" in effect and value:
            stages, overhead = float(effect["bubble"]["stages"]), float(effect["bubble"]["overhead"])
            out /= (1.0 + (stages - 1.0) / float(value)) * (1.0 + overhead * float(value))
        return out

    def lowest_factor(self) -> float:
        """The smallest factor any value can get under this param's effect, a bump's centre included (the bubble
        only divides by terms above 1, so it never drives the factor to zero).

        Example:
            >>> bump = {"bump": {"center": 8, "width": 1.0, "height": -0.2}}
            >>> SimParam("t", "xla", "int", 1, low=1, high=64, log=True, effect=bump).lowest_factor()
            0.8
        """
        effect = self.effect or {}
        out = min((1.0 + float(v) for v in (effect.get("values") or {}).values()), default=1.0)
        if "bump" in effect:
            out = min(out, 1.0 + float(effect["bump"]["height"]))
        return min(out, 1.0)
