"""An effects model over every run: each setting's effect, each configuration's departure from additivity.

One-run-per-value screening estimates an effect from two runs (the probe and a baseline). Every later run that sets
the same value (the combination, its drop-one variants, repeats, sampled points) carries information about it too.
This model pools them: the log of each run's drift-corrected throughput ratio is

    y = sum of the effects of the settings it changes + delta(configuration) + run noise

with a Gaussian prior ``N(0, prior_sd^2)`` on the effects, and ``delta ~ N(0, tau^2)`` per configuration: the
interactions the data show (the communication that overlap flags hide is one pool: gains are sub-additive and change
sign in company) without enumerating pairs. ``prior_sd`` and ``tau`` are chosen by the marginal likelihood of the runs
(empirical Bayes): where nothing matters the effects shrink to zero, so a combination of each param's luckiest value
is not predicted to win; runs that add up give ``tau`` near 0 and predictions lean on the effects; runs that do not
give a large ``tau``, and then a configuration nobody measured is predicted with that much uncertainty, while a
measured one leans on its own runs. It is a Bayesian linear regression (ridge with a random effect), solved in
closed form with numpy.

Example:
    >>> obs = [Observation(frozenset({"a=1"}), "A", 0.03), Observation(frozenset({"b=1"}), "B", 0.01),
    ...        Observation(frozenset({"a=1", "b=1"}), "AB", 0.04)]
    >>> fit = fit_effects(obs, sigma=0.002)
    >>> round(fit.predict({"a=1", "b=1"}).gain, 2)
    0.04
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

#: Prior standard deviation of a setting's effect on log throughput where the data cannot say (no run set it).
PRIOR_SD = 0.05
#: Candidate prior standard deviations of the effects (relative): from "nothing matters" to a microbatch count.
PRIOR_SD_GRID = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
#: Candidate values of tau, in units of the run noise sigma (0: the settings add up exactly).
TAU_GRID = (0.0, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class Observation:
    """One run: the settings it changes against the deployed job, its configuration, ``log(1 + gain)``."""

    features: frozenset[str]
    group: str
    y: float


@dataclass(frozen=True)
class Prediction:
    """A configuration's predicted relative gain and its standard error (on the gain scale)."""

    gain: float
    se: float
    measured: bool

    def upper(self, z: float = 1.0) -> float:
        return self.gain + z * self.se


@dataclass(frozen=True)
class EffectsFit:
    """The posterior of the effects and of each measured configuration's departure from additivity."""

    features: tuple[str, ...]
    groups: tuple[str, ...]
    mean: np.ndarray
    cov: np.ndarray
    sigma: float
    tau: float
    runs: int
    prior_sd: float = PRIOR_SD

    def effect(self, feature: str) -> tuple[float, float]:
        """The effect of one setting on the gain scale, and its standard error; ``(0, prior)`` if never run."""
        if feature not in self.features:
            return 0.0, self.prior_sd
        i = self.features.index(feature)
        return float(math.expm1(self.mean[i])), float(math.sqrt(self.cov[i, i]))

    def predict(self, features: Iterable[str], group: str | None = None) -> Prediction:
        """The gain of a configuration that changes ``features``; ``group``: its key, if it was measured."""
        w = np.zeros(len(self.mean))
        extra = 0.0
        for f in set(features):
            if f in self.features:
                w[self.features.index(f)] = 1.0
            else:
                extra += self.prior_sd**2  # a setting no run has changed: the prior alone
        measured = group is not None and group in self.groups
        if measured:
            w[len(self.features) + self.groups.index(group)] = 1.0
        else:
            extra += self.tau**2
        mu = float(w @ self.mean)
        var = float(w @ self.cov @ w) + extra
        gain = math.expm1(mu)
        return Prediction(gain=gain, se=(1.0 + gain) * math.sqrt(max(var, 0.0)), measured=measured)


def fit_effects(observations: Sequence[Observation], *, sigma: float, prior_sd: float | None = None,
                tau: float | None = None) -> EffectsFit:
    """Fit the model to ``observations`` with run noise ``sigma`` (relative).

    ``prior_sd`` and ``tau``: chosen by the marginal likelihood of the runs when ``None``.
    """
    features = tuple(sorted({f for o in observations for f in o.features}))
    groups = tuple(dict.fromkeys(o.group for o in observations))
    n, p, c = len(observations), len(features), len(groups)
    sigma = max(float(sigma), 1e-6)
    x = np.zeros((n, p))
    z = np.zeros((n, c))
    for i, o in enumerate(observations):
        for f in o.features:
            x[i, features.index(f)] = 1.0
        z[i, groups.index(o.group)] = 1.0
    y = np.array([o.y for o in observations], dtype=float)
    if tau is None or prior_sd is None:
        prior_sd, tau = _most_likely(x, z, y, sigma, prior_sd, tau) if n else (prior_sd or PRIOR_SD, tau or 0.0)
    w = np.hstack([x, z])
    prior_prec = np.concatenate([np.full(p, 1.0 / prior_sd**2), np.full(c, 1.0 / max(tau, 1e-9) ** 2)])
    precision = w.T @ w / sigma**2 + np.diag(prior_prec)
    cov = np.linalg.inv(precision)
    mean = cov @ (w.T @ y) / sigma**2
    return EffectsFit(features=features, groups=groups, mean=mean, cov=cov, sigma=sigma, tau=float(tau), runs=n,
                      prior_sd=float(prior_sd))


def _most_likely(x: np.ndarray, z: np.ndarray, y: np.ndarray, sigma: float, prior_sd: float | None,
                 tau: float | None) -> tuple[float, float]:
    """The ``(prior_sd, tau)`` of the grids under which the runs are most likely (a given one stays fixed)."""
    xx, zz, eye = x @ x.T, z @ z.T, sigma**2 * np.eye(len(y))
    best, best_ll = (prior_sd or PRIOR_SD, tau or 0.0), -math.inf
    for s in (prior_sd,) if prior_sd is not None else PRIOR_SD_GRID:
        for t in (tau,) if tau is not None else tuple(k * sigma for k in TAU_GRID):
            v = eye + s**2 * xx + t**2 * zz
            sign, logdet = np.linalg.slogdet(v)
            if sign <= 0:
                continue
            ll = -0.5 * (logdet + float(y @ np.linalg.solve(v, y)))
            if ll > best_ll + 1e-9:
                best, best_ll = (s, t), ll
    return best
