"""Score each strategy's choices against the landscape's truth and summarise them per landscape and strategy.

Definitions (the write-up quotes them):

* **runs** — launches until the decision: flagopt's stop verdict (baselines, controls, repeats and retries
  included), the other strategies' whole budget.
* **run-seconds** — the simulated duration of those launches summed: startup, compilation and steps of every
  run; a failed run until it failed (an OOM after compilation, a hang until the hang watchdog's 10 minutes).
* **controls** — baseline runs (flagopt: records of kind ``baseline-deployed`` and ``baseline-no-env``) over all
  launches.
* **within 1 %** — the chosen configuration's true throughput is at least 99 % of the true best's
  (``(1 + g) / (1 + g_best) >= 0.99``; ``Landscape.best()``).
* **regret** — ``g_best - g`` in percentage points of the baseline.
* **false winner** — flagopt: it recommends a configuration (a ``win`` verdict, or a confirmed ``better`` arm at
  the budget) whose true gain is below ``null_gain`` (2 %); the others: they claim a gain of at least 2 % for a
  choice whose true gain is below 2 %.
* **claim** — a study that recommends something (flagopt: a winner; the others: a configuration other than the
  baseline). **coverage**: the share of claims with an interval whose 95 % interval contains the true gain.
  **claimed − true**: the mean over claims of the claimed gain minus the true gain.
* **repeated failures** — after the first 10 non-control runs of a study, the share of non-control runs that
  failed for a reason an earlier failed run already showed: the same OOM rule of the landscape (by index) or the
  same unknown flag. Infrastructure failures (NCCL, coordination, hang) are never "explained".

Example:
    >>> r = SeedResult("null", "random", 0, runs=20, true_gain=0.0, best_gain=0.0, claimed_gain=0.031)
    >>> r.false_winner, r.within_1pct, r.kind
    (True, True, 'null')
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flagopt.workloads.sim import Landscape

NULL_GAIN = 0.02
WIN_GAIN = 0.05
WITHIN = 0.01
#: Non-control runs before repeated failures start to count (the issue's "after the first 10 sampled runs").
FAILURE_GRACE = 10
#: flagopt record kinds that are controls: the deployed baseline and the image defaults.
CONTROL_KINDS = ("baseline-deployed", "baseline-no-env")
#: Failure kinds a setting causes (the sim's ``fault`` and the classifier's ``failure_class`` spellings).
SETTING_FAULTS = ("oom", "unknown_flag", "unknown-flag")


def landscape_kind(best_gain: float) -> str:
    """``win`` (a +5 % winner exists), ``below`` (best in [2 %, 5 %)) or ``null`` (best < 2 %)."""
    if best_gain >= WIN_GAIN:
        return "win"
    return "null" if best_gain < NULL_GAIN else "below"


def within_1pct(gain: float, best: float) -> bool:
    """Whether a true ``gain`` is within 1 % (``WITHIN``) of the landscape's true ``best``, on the throughput scale."""
    return (1.0 + gain) / (1.0 + best) >= 1.0 - WITHIN - 1e-12


@dataclass(frozen=True)
class SeedResult:
    """One strategy on one landscape with one seed."""

    landscape: str
    strategy: str
    seed: int
    runs: int
    true_gain: float
    best_gain: float
    claimed_gain: float
    verdict: str | None = None  # flagopt's stop reason; None for the other strategies
    recommends: bool | None = None  # did it name a configuration (flagopt: a confirmed winner)?
    detail: dict[str, Any] = field(default_factory=dict)
    run_seconds: float = 0.0
    controls: int | None = None  # launches that were controls (None: the strategy runs none)
    ci: tuple[float, float] | None = None  # the claim's 95 % interval, when the strategy gives one
    repeated_failures: tuple[int, int] = (0, 0)  # (failed for a known reason, non-control runs) after the grace
    family: str = ""  # held-out family (rand-win, ...); "" for a shipped landscape

    @property
    def kind(self) -> str:
        return landscape_kind(self.best_gain)

    @property
    def within_1pct(self) -> bool:
        return within_1pct(self.true_gain, self.best_gain)

    @property
    def regret(self) -> float:
        return self.best_gain - self.true_gain

    @property
    def claims(self) -> bool:
        return bool(self.recommends)

    @property
    def false_winner(self) -> bool:
        if self.verdict is not None:
            return bool(self.recommends) and self.true_gain < NULL_GAIN
        return self.claimed_gain >= NULL_GAIN and self.true_gain < NULL_GAIN

    @property
    def false_winner_familywise(self) -> bool:
        """flagopt's false winner had a budget pick needed a positive lower bound at the family-wise confidence."""
        if self.verdict == "win" or not self.false_winner:
            return self.false_winner
        lo = self.detail.get("winner_lo_familywise")
        return lo is not None and lo > 0.0

    @property
    def claims_win(self) -> bool:
        """It claims at least +5 % (``stop.win``)."""
        return self.claims and self.claimed_gain >= WIN_GAIN

    @property
    def covered(self) -> bool | None:
        """The claim's interval contains the true gain; ``None`` without a claim or an interval."""
        if not self.claims or self.ci is None:
            return None
        return self.ci[0] <= self.true_gain <= self.ci[1]

    @property
    def controls_share(self) -> float | None:
        return None if self.controls is None or not self.runs else self.controls / self.runs


def failure_reason(land: Landscape, settings: Mapping[str, Any]) -> tuple[str, Any] | None:
    """Why ``settings`` fail on ``land`` whatever the infrastructure does: an unknown flag or an OOM rule.

    Example:
        >>> from flagopt.workloads.sim import load_landscape
        >>> failure_reason(load_landscape("oomcliff"), {"xla_gpu_enable_pipelined_reduce_scatter": True})
        ('oom', 1)
    """
    flat = {str(k).lstrip("-"): v for part in settings.values() for k, v in part.items()} \
        if settings and all(isinstance(v, Mapping) for v in settings.values()) else \
        {str(k).lstrip("-"): v for k, v in settings.items()}
    unknown = sorted(n for n in flat if n in land.unknown_flags)
    if unknown:
        return ("flag", unknown[0])
    rule = land.oom_rule(flat)
    return ("oom", rule) if rule is not None else None


def repeated_failures(land: Landscape, log: Iterable[Any], grace: int = FAILURE_GRACE) -> tuple[int, int]:
    """``(repeated, counted)``: non-control runs after the first ``grace`` that failed for an already-seen reason.

    ``log`` holds objects with ``settings``, ``control``, ``ok`` and ``fault`` (:class:`RunLog`), in launch order.
    """
    seen: set[tuple[str, Any]] = set()
    index = repeated = counted = 0
    for run in log:
        if run.control:
            continue
        reason = None
        if not run.ok and run.fault in SETTING_FAULTS:
            reason = failure_reason(land, run.settings)
        if index >= grace:
            counted += 1
            repeated += int(reason is not None and reason in seen)
        if reason is not None:
            seen.add(reason)
        index += 1
    return repeated, counted


@dataclass(frozen=True)
class Summary:
    """One landscape x strategy over its seeds."""

    landscape: str
    strategy: str
    seeds: int
    kind: str
    best_gain: float
    runs_median: float
    runs_q25: float
    runs_q75: float
    seconds_median: float
    seconds_q25: float
    seconds_q75: float
    controls_median: float | None
    within_1pct: float
    regret_mean: float
    regret_median: float
    false_winner: float
    false_winner_familywise: float
    claimed_mean: float
    true_mean: float
    verdicts: dict[str, int]
    claims: int
    claims_win: float
    recommends: float
    coverage: float | None
    coverage_n: int
    claim_error_mean: float | None
    repeated_failures: tuple[int, int]
    family: str = ""

    @property
    def repeated_share(self) -> float | None:
        repeated, counted = self.repeated_failures
        return repeated / counted if counted else None


def _summary(key: tuple[str, str], rs: Sequence[SeedResult]) -> Summary:
    runs = np.array([r.runs for r in rs], dtype=float)
    seconds = np.array([r.run_seconds for r in rs], dtype=float)
    regret = np.array([r.regret for r in rs])
    verdicts: dict[str, int] = {}
    for r in rs:
        if r.verdict is not None:
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
    shares = [r.controls_share for r in rs if r.controls_share is not None]
    claims = [r for r in rs if r.claims]
    covered = [r.covered for r in claims if r.covered is not None]
    return Summary(
        landscape=key[0], strategy=key[1], seeds=len(rs), kind=rs[0].kind, best_gain=rs[0].best_gain,
        runs_median=float(np.median(runs)), runs_q25=float(np.percentile(runs, 25)),
        runs_q75=float(np.percentile(runs, 75)), seconds_median=float(np.median(seconds)),
        seconds_q25=float(np.percentile(seconds, 25)), seconds_q75=float(np.percentile(seconds, 75)),
        controls_median=float(np.median(shares)) if shares else None,
        within_1pct=float(np.mean([r.within_1pct for r in rs])), regret_mean=float(regret.mean()),
        regret_median=float(np.median(regret)), false_winner=float(np.mean([r.false_winner for r in rs])),
        false_winner_familywise=float(np.mean([r.false_winner_familywise for r in rs])),
        claimed_mean=float(np.mean([r.claimed_gain for r in rs])), true_mean=float(np.mean([r.true_gain for r in rs])),
        verdicts=verdicts, claims=len(claims), claims_win=float(np.mean([r.claims_win for r in rs])),
        recommends=float(np.mean([bool(r.recommends) for r in rs])),
        coverage=float(np.mean(covered)) if covered else None, coverage_n=len(covered),
        claim_error_mean=float(np.mean([r.claimed_gain - r.true_gain for r in claims])) if claims else None,
        repeated_failures=(sum(r.repeated_failures[0] for r in rs), sum(r.repeated_failures[1] for r in rs)),
        family=rs[0].family)


def summarise(results: Sequence[SeedResult], *, by_family: bool = False) -> list[Summary]:
    """One :class:`Summary` per (landscape, strategy), in first-seen order; per (family, strategy) with
    ``by_family`` (held-out landscapes: each seed is its own landscape)."""
    groups: dict[tuple[str, str], list[SeedResult]] = {}
    for r in results:
        name = r.family if by_family and r.family else r.landscape
        groups.setdefault((name, r.strategy), []).append(r)
    return [_summary(key, rs) for key, rs in groups.items()]


@dataclass(frozen=True)
class TargetCheck:
    """One of the issue's targets, measured."""

    name: str
    target: str
    measured: str
    met: bool


def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def is_flagopt(strategy: str) -> bool:
    """flagopt itself or one of its budget variants (``flagopt-eq``, ``flagopt-1.5x``): scored as flagopt, no rival."""
    return strategy.startswith("flagopt")


def check_targets(results: Sequence[SeedResult], strategy: str = "flagopt", *,
                  by_family: bool = False) -> list[TargetCheck]:
    """The issue's targets for ``strategy`` on the landscapes it ran, per landscape kind (issue 25's table).

    ``by_family``: one row per held-out family instead of per landscape.
    """
    summaries = summarise(results, by_family=by_family)
    mine = [s for s in summaries if s.strategy == strategy]
    others: dict[str, list[Summary]] = {}
    for s in summaries:
        if not is_flagopt(s.strategy):
            others.setdefault(s.landscape, []).append(s)
    out: list[TargetCheck] = []
    for s in mine:
        rivals = others.get(s.landscape, [])
        if s.kind == "win":
            won = s.verdicts.get("win", 0) / s.seeds
            out.append(TargetCheck(f"{s.landscape}: win verdict", ">= 95 %", _pct(won), won >= 0.95))
            manual = next((r for r in rivals if r.strategy == "manual"), None)
            floor = max(0.85, manual.within_1pct if manual is not None else 0.0)
            out.append(TargetCheck(f"{s.landscape}: within 1 % of the true best",
                                   f">= {floor:.0%} (85 %, manual {_pct(manual.within_1pct if manual else None)})",
                                   _pct(s.within_1pct), s.within_1pct >= floor - 1e-12))
            if rivals:
                best = min(rivals, key=lambda r: r.regret_mean)
                out.append(TargetCheck(f"{s.landscape}: mean regret <= the best other strategy's",
                                       f"<= {100 * best.regret_mean:.2f} pp ({best.strategy})",
                                       f"{100 * s.regret_mean:.2f} pp", s.regret_mean <= best.regret_mean + 1e-12))
            if manual is not None:
                out.append(TargetCheck(f"{s.landscape}: median runs <= the manual protocol's",
                                       f"<= {manual.runs_median:g}", f"{s.runs_median:g}",
                                       s.runs_median <= manual.runs_median))
        elif s.kind == "below":
            out.append(TargetCheck(f"{s.landscape}: a +5 % claim", "<= 2 %", _pct(s.claims_win), s.claims_win <= 0.02))
            out.append(TargetCheck(f"{s.landscape}: within 1 % of the true best", ">= 75 %", _pct(s.within_1pct),
                                   s.within_1pct >= 0.75))
        else:
            enough = s.seeds >= 50
            out.append(TargetCheck(f"{s.landscape}: a confirmed recommendation of any size", "0 over >= 50 seeds",
                                   f"{_pct(s.recommends)} over {s.seeds} seeds", enough and s.recommends == 0))
            nulls = s.verdicts.get("null", 0) / s.seeds
            out.append(TargetCheck(f"{s.landscape}: null verdict within the budget", ">= 95 %", _pct(nulls),
                                   nulls >= 0.95))
            out.append(TargetCheck(f"{s.landscape}: median runs", "<= 35", f"{s.runs_median:g}", s.runs_median <= 35))
    own = [r for r in results if r.strategy == strategy]
    covered = [r.covered for r in own if r.covered is not None]
    errors = [r.claimed_gain - r.true_gain for r in own if r.claims]
    if covered:
        share = float(np.mean(covered))
        out.append(TargetCheck("every claim: 95 % interval covers the true gain", ">= 90 %",
                               f"{share:.0%} of {len(covered)} claims", share >= 0.90))
    if errors:
        mean = float(np.mean(errors))
        out.append(TargetCheck("every claim: mean claimed - true gain", "<= 0.5 pp",
                               f"{100 * mean:+.2f} pp over {len(errors)} claims", mean <= 0.005))
    shares = [r.controls_share for r in own if r.controls_share is not None]
    if shares:
        median = float(np.median(shares))
        out.append(TargetCheck("every study: controls (median share of runs)", "<= 15 %", f"{median:.0%}",
                               median <= 0.15))
    repeated = sum(r.repeated_failures[0] for r in own)
    counted = sum(r.repeated_failures[1] for r in own)
    if counted:
        out.append(TargetCheck("every study: after 10 sampled runs, runs failing for a known reason", "<= 15 %",
                               f"{repeated / counted:.1%} ({repeated}/{counted})", repeated / counted <= 0.15))
    return out
