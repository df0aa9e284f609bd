"""The study's runs as the effects model sees them (:func:`flagopt.stats.fit_effects`), and what it predicts.

Every successful run that changes something (profiles, probes, combinations, drop-one and add-one variants,
sampled points, repeats) informs the effect of every setting it changes, each against the drift-corrected baseline
of its own time and slot. The planner builds the combination from these pooled effects, looks around the leader
with them (what could still be added), and never trusts a prediction it has not measured: a predicted configuration
is only ever a run to make, never a claim.

Example:
    >>> from flagopt.decide._model import feature
    >>> feature("overlap_limit", 2)
    'overlap_limit=2'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flagopt import stats
from flagopt.decide import _design as design
from flagopt.decide._arms import stragglers, to_run
from flagopt.decide._runs import RunRecord
from flagopt.space import Space, render_value

#: A numeric param's values are ranked on effects smoothed over their neighbours only among the values whose own
#: effect is within this many standard errors (of the difference) of the best one.
SMOOTH_TIE_SE = 2.0

#: Kinds of runs that measure a configuration against the deployed job (not the controls or side checks).
_MODELLED_KINDS = frozenset({"profile", "probe", "sampled", "repeat"})


def feature(name: str, value: design.Scalar) -> str:
    """The model's name for one setting: ``param=value`` (or ``target:key=value`` for a profile's own flag)."""
    return f"{name}={render_value(value)}"


@dataclass(frozen=True)
class EffectsModel:
    """The fitted model, with the space's vocabulary: settings in, predicted gains out."""

    space: Space
    deployed: Mapping[str, str | None]
    fit: stats.EffectsFit
    #: Each param's values that some modelled run set (other than the deployed one), and each catalog profile's own
    #: setting's (``target:key``).
    values: Mapping[str, tuple[design.Scalar, ...]]
    #: Settings whose runs compiled to the deployed job's program: exactly no effect (:func:`no_op_features`).
    zero: frozenset[str] = frozenset()

    def features_of(self, settings: Mapping[str, design.Scalar]) -> frozenset[str]:
        return changed_features(self.space, settings, self.deployed) - self.zero

    def predict(self, settings: Mapping[str, design.Scalar], *, own_runs: bool = True) -> stats.Prediction:
        """The gain of the configuration that sets ``settings`` on top of the deployed job.

        ``own_runs=False``: from the effects alone, leaving out what its own runs say beyond them (to compare a
        measured configuration with one nobody ran on the same footing).
        """
        key = design.config_of_settings(self.space, settings, kind="probe", profile="").config_key
        return self.fit.predict(self.features_of(settings), key if own_runs else None)

    def effect(self, name: str, value: design.Scalar) -> tuple[float, float]:
        """The pooled effect of one setting (gain scale) and its standard error."""
        return self.fit.effect(feature(name, value))

    def best_values(self) -> dict[str, tuple[design.Scalar, float, float]]:
        """Each param's value with the largest pooled effect among the values some run set, and each catalog
        profile's own setting (``target:key``) some run set: name -> (value, effect, se).

        A numeric param is chosen on its effects smoothed over neighbouring values (thresholds, microbatch counts
        and channels respond smoothly): one lucky run at a far grid point no longer beats two good neighbours
        (oomcliff: a 64 MiB reduce-scatter threshold measured once above the 256 MiB-1 GiB plateau). The smoothing
        only breaks ties: it chooses among the values within ``SMOOTH_TIE_SE`` standard errors (of the difference) of
        the best own effect, never against a clear one (rand-win-3: an overlap limit of 3, +6.0 % +- 0.4 %, lost to 2,
        +0.1 %, next to a -24 % cliff at 4, and went into no combination). The effect reported is the value's own.
        """
        out: dict[str, tuple[design.Scalar, float, float]] = {}
        params = {p.name: p for p in self.space.params}
        for name, values in self.values.items():
            scored = {v: self.effect(name, v) for v in values}
            param = params.get(name)
            rank = _smoothed(param, scored, self.deployed.get(name)) if param is not None else {}
            top = max(values, key=lambda v: scored[v][0])
            near = [v for v in values if scored[v][0] >= scored[top][0] - SMOOTH_TIE_SE * math.hypot(scored[top][1],
                                                                                                 scored[v][1])]
            best = max(near, key=lambda v: rank.get(v, scored[v][0]))
            out[name] = (best, *scored[best])
        return out


def _smoothed(param, scored: Mapping[design.Scalar, tuple[float, float]],
              deployed: str | None) -> dict[design.Scalar, float]:
    """Effects of a numeric param's values averaged with their neighbours' (kernel of one rank, weights 1/se^2).

    The deployed value takes part with effect 0, known exactly: it anchors the curve. Empty for a categorical param.
    """
    numeric = [v for v in scored if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numeric) < 2 or len(numeric) != len(scored) or (param.choices is not None and param.type is None
                                                            and not all(isinstance(c, (int, float)) for c in param.choices)):
        return {}
    points = {float(v): scored[v] for v in numeric}
    try:
        # the deployed value's effect is 0 by definition; it weighs like a typical measured value (an exact anchor
        # would flatten its neighbours to 0 and favour the values farthest from it)
        typical = float(np.median([se for _, se in scored.values()]))
        points.setdefault(float(deployed), (0.0, typical)) if deployed is not None else None
    except ValueError:
        pass
    order = sorted(points)
    out: dict[design.Scalar, float] = {}
    for v in numeric:
        i = order.index(float(v))
        num = den = 0.0
        for j, u in enumerate(order):
            effect, se = points[u]
            w = math.exp(-0.5 * (i - j) ** 2) / max(se, 1e-4) ** 2
            num, den = num + w * effect, den + w
        out[v] = num / den
    return out


def changed_features(space: Space, settings: Mapping[str, design.Scalar],
                     deployed: Mapping[str, str | None]) -> frozenset[str]:
    """The model's names of the settings that differ from the deployed job's (a profile's own flags always do)."""
    params = {p.name: p for p in space.params}
    return frozenset(feature(n, v) for n, v in settings.items()
                     if n not in params or not design.same_value(params[n], v, deployed.get(n)))


def no_op_features(space: Space, records: Sequence[RunRecord], deployed: Mapping[str, str | None]) -> frozenset[str]:
    """The settings of every run that compiled to the deployed job's program (``same_program``): exact zeros."""
    return frozenset().union(*(changed_features(space, design.settings_of_record(space, r.attrs.get("settings") or {}),
                                                deployed) for r in records if r.attrs.get("same_program") is True))


def effects_model(space: Space, records: Sequence[RunRecord], deployed: Mapping[str, str | None], *,
                  sigma: float, direction: str = "maximize") -> EffectsModel | None:
    """Fit the effects model to the study's successful runs, controls included; ``None`` before any control ran."""
    if not any(r.is_baseline and r.ok for r in records):
        return None
    observations: list[stats.Observation] = []
    values: dict[str, list[design.Scalar]] = {}
    params = {p.name: p for p in space.params}
    zero = no_op_features(space, records, deployed)
    slow = stragglers(records, direction)  # runs that measured a slow node, not their configuration
    for rec in records:
        if not rec.ok or not (rec.is_baseline or rec.kind in _MODELLED_KINDS and rec.config_key) or rec.number in slow:
            continue
        run = to_run(rec, direction)
        if not run.value > 0:
            continue
        feats: frozenset[str] = frozenset()
        if not rec.is_baseline:
            # a setting that compiles to the deployed program has no effect to estimate: a run of nothing else is
            # one more run of the deployed job (it informs the drift)
            settings = design.settings_of_record(space, rec.attrs.get("settings") or {})
            feats = changed_features(space, settings, deployed) - zero
            for n, v in settings.items():  # a profile's own settings too: a winner's companions may take them
                if (n in params or design.is_own_setting(n)) and feature(n, v) in feats and v not in values.setdefault(n, []):
                    values[n].append(v)
        group = "" if rec.is_baseline or not feats else rec.config_key
        observations.append(stats.Observation(feats, group, math.log(run.value), t=run.t, block=run.block))
    if len(observations) < 2:
        return None
    fit = stats.fit_effects(observations, sigma=sigma)
    return EffectsModel(space, deployed, fit, {n: tuple(vs) for n, vs in values.items()}, zero)
