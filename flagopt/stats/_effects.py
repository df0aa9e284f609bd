"""An effects model over every run: the drift of each slot, each setting's effect, each configuration's departure.

One-run-per-value screening estimates an effect from two runs (the probe and a baseline), and the baseline level
under it from the two nearest controls, whose own noise lands on every run between them. Every run carries
information about the drift and about the effects of what it sets, so this model pools them. The log of each
run's steady value is

    y = drift(block, t) + sum of the effects of the settings it changes + delta(configuration) + run noise

* ``drift``: one smooth curve per block (slot): piecewise linear in ``t`` with a knot every few runs and a random
  walk between knots, so the level follows slow drift and a slot's offset without reading a run's noise as drift;
* effects: Gaussian prior ``N(0, prior_sd^2)`` each;
* ``delta ~ N(0, tau^2)`` per configuration of two or more settings: the interactions the data show (the communication that overlap flags
  hide is one pool: gains are sub-additive and change sign in company) without enumerating pairs.

``prior_sd``, ``tau`` and the random walk's step are chosen by the marginal likelihood of the runs (empirical
Bayes): where nothing matters the effects shrink to zero, so a combination of each param's luckiest value is not
predicted to win; runs that add up give ``tau`` near 0 and predictions lean on the effects; runs that do not give a
large ``tau``, and then a configuration nobody measured is predicted with that much uncertainty while a measured
one leans on its own runs. It is a Bayesian linear regression solved in closed form with numpy.

Example:
    >>> obs = [Observation(frozenset(), "", 0.0, t=0), Observation(frozenset({"a=1"}), "A", 0.03, t=1),
    ...        Observation(frozenset({"b=1"}), "B", 0.01, t=2), Observation(frozenset(), "", 0.0, t=3),
    ...        Observation(frozenset({"a=1", "b=1"}), "AB", 0.04, t=4), Observation(frozenset(), "", 0.0, t=5)]
    >>> fit = fit_effects(obs, sigma=0.002)
    >>> round(fit.predict({"a=1", "b=1"}).gain, 2)
    0.04
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: Prior standard deviation of a setting's effect on log throughput where the data cannot say (no run set it).
PRIOR_SD = 0.05
#: Candidate prior standard deviations of the effects (relative): from "nothing matters" to a microbatch count.
PRIOR_SD_GRID = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
#: Candidate values of tau, in units of the run noise sigma (0: the settings add up exactly).
TAU_GRID = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
#: Candidate random-walk steps of the drift between two knots, in units of sigma (0: a flat level per block).
WALK_GRID = (0.0, 0.25, 0.5, 1.0, 2.0)
#: Runs of a block per drift knot.
RUNS_PER_KNOT = 6
#: Prior standard deviation of a block's level (relative to the mean of the baselines): flat in practice.
LEVEL_SD = 0.5


@dataclass(frozen=True)
class Observation:
    """One run: the settings it changes against the deployed job (none for a baseline), its configuration (``""``
    for the deployed job), ``log`` of its steady value (any constant offset), its time and block."""

    features: frozenset[str]
    group: str
    y: float
    t: float = 0.0
    block: str = ""


@dataclass(frozen=True)
class Prediction:
    """A configuration's predicted relative gain over the deployed job and its standard error."""

    gain: float
    se: float
    measured: bool

    def upper(self, z: float = 1.0) -> float:
        return self.gain + z * self.se

    def lower_bound(self, confidence: float) -> float:
        """The lower end of the two-sided normal interval at ``confidence`` (as :meth:`ArmEstimate.bounds`).

        Example:
            >>> round(Prediction(gain=0.03, se=0.01, measured=True).lower_bound(0.95), 4)
            0.0104
        """
        return self.gain - float(sps.norm.ppf(0.5 + confidence / 2.0)) * self.se


@dataclass(frozen=True)
class EffectsFit:
    """The posterior of the effects, of each measured configuration's departure, and of the drift."""

    features: tuple[str, ...]
    groups: tuple[str, ...]
    mean: np.ndarray  # [drift knots | effects | departures]
    cov: np.ndarray
    offset: int  # index of the first effect in ``mean``
    sigma: float
    tau: float
    prior_sd: float
    walk: float
    runs: int

    def effect(self, feature: str) -> tuple[float, float]:
        """The effect of one setting on the gain scale, and its standard error; ``(0, prior_sd)`` if never run."""
        if feature not in self.features:
            return 0.0, self.prior_sd
        i = self.offset + self.features.index(feature)
        return float(math.expm1(self.mean[i])), float(math.sqrt(self.cov[i, i]))

    def predict(self, features: Iterable[str], group: str | None = None) -> Prediction:
        """The gain of a configuration that changes ``features``; ``group``: its key, if it was measured."""
        w = np.zeros(len(self.mean))
        extra = 0.0
        for f in set(features):
            if f in self.features:
                w[self.offset + self.features.index(f)] = 1.0
            else:
                extra += self.prior_sd**2  # a setting no run has changed: the prior alone
        measured = group is not None and group in self.groups
        if measured:
            w[self.offset + len(self.features) + self.groups.index(group)] = 1.0
        elif len(set(features)) >= 2:
            extra += self.tau**2  # an unmeasured departure; one setting alone departs from nothing (its effect)
        mu = float(w @ self.mean)
        var = float(w @ self.cov @ w) + extra
        gain = math.expm1(mu)
        return Prediction(gain=gain, se=(1.0 + gain) * math.sqrt(max(var, 0.0)), measured=measured)


@dataclass(frozen=True)
class _Design:
    drift: np.ndarray  # n x knots: piecewise-linear interpolation weights
    walk: np.ndarray  # knots x knots: the random walk's precision (per unit step variance)
    x: np.ndarray  # n x features
    z: np.ndarray  # n x groups
    y: np.ndarray


def _design(observations: Sequence[Observation], features: tuple[str, ...], groups: tuple[str, ...]) -> _Design:
    n = len(observations)
    blocks = tuple(dict.fromkeys(o.block for o in observations))
    knots: list[tuple[str, float]] = []
    for block in blocks:
        times = sorted({float(o.t) for o in observations if o.block == block})
        count = max(2, math.ceil(len(times) / RUNS_PER_KNOT) + 1) if len(times) > 1 else 1
        # every few runs, not evenly in time: a pause (a night, a resumed study) would leave the knots where no run
        # is and the runs with too few knots to follow their drift
        positions = np.unique(np.quantile(times, np.linspace(0.0, 1.0, count))) if count > 1 else np.array(times[:1])
        knots.extend((block, float(p)) for p in positions)
    drift = np.zeros((n, len(knots)))
    for i, o in enumerate(observations):
        mine = [(j, p) for j, (b, p) in enumerate(knots) if b == o.block]
        if len(mine) == 1:
            drift[i, mine[0][0]] = 1.0
            continue
        pos = [p for _, p in mine]
        k = int(np.clip(np.searchsorted(pos, o.t), 1, len(pos) - 1))
        (ja, a), (jb, b) = mine[k - 1], mine[k]
        share = min(max((o.t - a) / (b - a), 0.0), 1.0) if b > a else 0.0
        drift[i, ja], drift[i, jb] = 1.0 - share, share
    walk = np.zeros((len(knots), len(knots)))
    for j in range(1, len(knots)):
        if knots[j][0] == knots[j - 1][0]:  # consecutive knots of one block: their difference is one step
            walk[np.ix_([j - 1, j], [j - 1, j])] += np.array([[1.0, -1.0], [-1.0, 1.0]])
    x = np.zeros((n, len(features)))
    z = np.zeros((n, len(groups)))
    for i, o in enumerate(observations):
        for f in o.features:
            x[i, features.index(f)] = 1.0
        if o.group:
            z[i, groups.index(o.group)] = 1.0
    return _Design(drift, walk, x, z, np.array([o.y for o in observations], dtype=float))


def _prior_precision(d: _Design, prior_sd: float, tau: float, walk: float) -> np.ndarray:
    k, p, c = d.drift.shape[1], d.x.shape[1], d.z.shape[1]
    prec = np.zeros((k + p + c, k + p + c))
    prec[:k, :k] = d.walk / max(walk, 1e-9) ** 2 + np.eye(k) / LEVEL_SD**2
    prec[k:k + p, k:k + p] = np.eye(p) / prior_sd**2
    prec[k + p:, k + p:] = np.eye(c) / max(tau, 1e-9) ** 2
    return prec


def _log_evidence(d: _Design, sigma: float, prior_sd: float, tau: float, walk: float) -> float:
    """log p(y | hyperparameters) of the Gaussian linear model, up to a constant."""
    return gaussian_evidence(np.hstack([d.drift, d.x, d.z]), _prior_precision(d, prior_sd, tau, walk), d.y, sigma)


def gaussian_evidence(w: np.ndarray, prior: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """log p(y) of ``y = w @ beta + N(0, sigma^2)`` with ``beta ~ N(0, prior^-1)``, up to a constant."""
    post = prior + w.T @ w / sigma**2
    sign_post, logdet_post = np.linalg.slogdet(post)
    sign_prior, logdet_prior = np.linalg.slogdet(prior)
    if sign_post <= 0 or sign_prior <= 0:
        return -math.inf
    b = w.T @ y / sigma**2
    quad = float(y @ y) / sigma**2 - float(b @ np.linalg.solve(post, b))
    return -0.5 * (quad + logdet_post - logdet_prior + len(y) * math.log(sigma**2))


def fit_effects(observations: Sequence[Observation], *, sigma: float, prior_sd: float | None = None,
                tau: float | None = None, walk: float | None = None) -> EffectsFit:
    """Fit the model to ``observations`` with run noise ``sigma`` (relative).

    ``prior_sd``, ``tau`` and ``walk`` (the drift's step between knots): chosen by the marginal likelihood of the
    runs when ``None`` (coordinate ascent over their grids).
    """
    features = tuple(sorted({f for o in observations for f in o.features}))
    # A departure from additivity is an interaction: a configuration of one setting has none (its effect is that)
    observations = [o if len(o.features) >= 2 else Observation(o.features, "", o.y, o.t, o.block) for o in observations]
    groups = tuple(dict.fromkeys(o.group for o in observations if o.group))
    sigma = max(float(sigma), 1e-6)
    center = float(np.mean([o.y for o in observations])) if observations else 0.0
    centred = [Observation(o.features, o.group, o.y - center, o.t, o.block) for o in observations]
    d = _design(centred, features, groups)
    chosen = {"prior_sd": prior_sd, "tau": tau, "walk": walk}
    grids = {"prior_sd": PRIOR_SD_GRID, "tau": tuple(k * sigma for k in TAU_GRID),
             "walk": tuple(k * sigma for k in WALK_GRID)}
    free = [k for k, v in chosen.items() if v is None]
    current = {"prior_sd": prior_sd or 0.02, "tau": tau if tau is not None else sigma,
               "walk": walk if walk is not None else 0.5 * sigma}
    for _ in range(2 if free else 0):
        for name in free:
            scores = {v: _log_evidence(d, sigma, **{**current, name: v}) for v in grids[name]}
            current[name] = max(scores, key=lambda v: scores[v])
    w = np.hstack([d.drift, d.x, d.z])
    post = _prior_precision(d, current["prior_sd"], current["tau"], current["walk"]) + w.T @ w / sigma**2
    cov = np.linalg.inv(post)
    mean = cov @ (w.T @ d.y) / sigma**2
    return EffectsFit(features=features, groups=groups, mean=mean, cov=cov, offset=d.drift.shape[1], sigma=sigma,
                      tau=float(current["tau"]), prior_sd=float(current["prior_sd"]), walk=float(current["walk"]),
                      runs=len(observations))
