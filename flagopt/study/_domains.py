"""Optuna distributions for the space's params, under names Optuna accepts after the space changed.

Optuna's storage binds a param name to its first distribution for the whole study: asking a changed categorical
(``CategoricalDistribution does not support dynamic value space``), another kind or another log scale under the
same name fails after the trial was created, leaving junk trials. A param whose domain is no longer compatible with
the one stored under its name is asked under ``<name>@<n>`` instead (the first compatible or unused one), and
mapped back to the space's name before rendering: the sampler starts afresh on that param, the study goes on.
"""

from __future__ import annotations

import optuna
from optuna.distributions import BaseDistribution, check_distribution_compatibility

from flagopt.space import Param


def distribution(p: Param) -> BaseDistribution:
    if p.choices is not None:
        return optuna.distributions.CategoricalDistribution(list(p.choices))
    if p.type == "int":
        return optuna.distributions.IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
    return optuna.distributions.FloatDistribution(float(p.low), float(p.high), log=p.log, step=p.step)


def _compatible(old: BaseDistribution, new: BaseDistribution) -> bool:
    try:
        check_distribution_compatibility(old, new)
    except ValueError:
        return False
    return True


def optuna_names(study: optuna.Study, params: tuple[Param, ...]) -> dict[str, str]:
    """The Optuna param name for each space param (its own name unless that name holds an incompatible domain)."""
    stored: dict[str, BaseDistribution] = {}
    for trial in study.get_trials(deepcopy=False):
        for name, dist in trial.distributions.items():
            stored.setdefault(name, dist)
    names = {}
    for p in params:
        dist, name, version = distribution(p), p.name, 1
        while name in stored and not _compatible(stored[name], dist):
            version += 1
            name = f"{p.name}@{version}"
        names[p.name] = name
    return names
