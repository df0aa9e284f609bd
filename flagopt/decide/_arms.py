"""Group the study's runs into arms (one per configuration) and estimate each arm's drift-corrected gain.

Every arm is estimated against one drift curve per slot fitted to every run (:func:`flagopt.stats.estimate_arms`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from flagopt import stats
from flagopt.space import NoiseSpec
from flagopt.decide._runs import RunRecord


@dataclass(frozen=True)
class Arm:
    """Every successful run of one configuration and what they say about its gain."""

    config_key: str
    label: str
    kind: str
    first: RunRecord
    runs: tuple[RunRecord, ...]
    estimate: stats.ArmEstimate | None
    verdict: str  # better | worse | same | unknown
    #: The gain measured by the runs after the first (but those after its choice, :attr:`settled`): the first run is the
    #: one that made the arm look worth re-running, so it is high by selection; the later runs are fresh (``None``
    #: below two runs). Confirmation (the win rule) reads it.
    claim: stats.ArmEstimate | None = None
    #: The gain measured by the ``SETTLE_RUNS`` runs made after the arm was chosen the winner, alone: the leader among
    #: close winners is the one whose fresh runs read high (win10 seeds 0-29: +1.2 pp above the truth), and these
    #: runs chose nothing. The claim people read once it exists; confirmation stays with :attr:`claim`, which leaves
    #: them out.
    settled: stats.ArmEstimate | None = None
    numerics_flagged: bool = False
    #: Its first run compiled to the deployed job's program (flagopt.study._same_program): it cannot change speed.
    same_program: bool = False
    failures: tuple[RunRecord, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def fresh_runs(self) -> int:
        """How many runs :attr:`reported` comes from when it is the claim (0: it is the single run's estimate)."""
        return self.reported.n if self.settled or self.claim else 0

    @property
    def reported(self) -> stats.ArmEstimate | None:
        """The estimate people read and act on (verdict, report, export): the runs' after its choice once there are
        any, else the fresh runs' once there are any."""
        return self.settled or self.claim or self.estimate


def to_run(rec: RunRecord, direction: str = "maximize") -> stats.Run:
    """The run as the statistics see it: higher is better, whatever the metric's direction."""
    rec = _normalise(rec, direction)
    return stats.Run(t=rec.t, value=float(rec.steady), step_std=float(rec.attrs.get("steady_std") or 0.0),
                     n_steps=int(rec.attrs.get("steady_n") or 1), block=rec.slot)


def baseline_runs(records: Sequence[RunRecord], direction: str = "maximize") -> list[stats.Run]:
    """The deployed job's successful runs but its stragglers (:func:`stragglers`): the drift gains are read against."""
    slow = stragglers(records, direction)
    return [to_run(r, direction) for r in records if r.is_baseline and r.ok and r.number not in slow]


def stragglers(records: Sequence[RunRecord], direction: str = "maximize") -> frozenset[int]:
    """The numbers of the successful runs that read far below what the study's other runs say they should
    (:func:`flagopt.stats.slow_runs`): a slow node or a neighbour's job measured there, not the configuration. They
    are left out of every estimate, the drift and the run noise, like a launch the infrastructure failed; the
    records keep them.

    Example:
        >>> stragglers([])
        frozenset()
    """
    controls = tuple((r.number, to_run(r, direction)) for r in records if r.is_baseline and r.ok and r.steady)
    groups: dict[str, list[tuple[int, stats.Run]]] = {}
    for rec in records:
        if rec.ok and rec.steady and not rec.is_baseline and rec.config_key \
                and rec.kind not in ("evidence", "cross-config"):
            groups.setdefault(rec.config_key, []).append((rec.number, to_run(rec, direction)))
    if len(controls) < 2 or not groups:
        return frozenset()
    return _slow_numbers(controls, tuple((k, tuple(g)) for k, g in groups.items()))


@functools.lru_cache(maxsize=4)  # a decision asks several times about the same runs
def _slow_numbers(controls: tuple[tuple[int, stats.Run], ...],
                  groups: tuple[tuple[str, tuple[tuple[int, stats.Run], ...]], ...]) -> frozenset[int]:
    slow_controls, slow = stats.slow_runs({k: [run for _, run in g] for k, g in groups}, [run for _, run in controls])
    return frozenset({n for (n, _), s in zip(controls, slow_controls) if s}
                     | {n for k, g in groups for (n, _), s in zip(g, slow[k]) if s})


def value_for(direction: str, value: float) -> float:
    # Gains are always "higher is better": a minimized metric (seconds/step) is inverted before scoring.
    return value if direction == "maximize" else 1.0 / value


def fit_sigma(estimates: Iterable[stats.ArmEstimate | None]) -> float | None:
    """The run noise of the fit ``estimates`` came from (one fit: the same for every measured arm), or ``None``."""
    return next((e.sigma for e in estimates if e is not None and e.n > 0 and e.sigma == e.sigma), None)


def all_runs_sigma(arms: Sequence[Arm]) -> float | None:
    """The run noise of the fit of every run, or ``None``: the repeats of a configuration measure it as the controls
    do, and a few controls can agree by chance."""
    return fit_sigma(a.estimate for a in arms)


#: How many times the claims' own noise the fit of every run must read before the claims read its noise instead. The
#: runs that chose an arm read high by selection, so that fit reads a little above the claims' own on any job (2.1
#: times in tests/decisions/test_around_winner.py, whose companion's two runs disagree by 2 %); where the claims' runs
#: agreed by chance it read four to five times theirs.
CLAIM_NOISE_RATIO = 2.5


def claim_noise_floor(every: dict[str, stats.ArmEstimate], fresh: dict[str, stats.ArmEstimate]) -> float:
    """The run noise a claim may not read below: the noise of the fit of every run (``every``: the runs that chose an
    arm too) where it is more than ``CLAIM_NOISE_RATIO`` times the claims' own fit's (``fresh``), else
    ``stats.DEFAULT_NOISE_FLOOR``.

    A claim's own fit reads the controls and the runs after each arm's choice; in a short budget they are few, they
    can agree by chance, and every claim inherits their noise (below5 at 6 % run noise, seed 12 on 20 runs: controls
    and fresh runs within about 1 %, a +5 % win declared at [+6.4 %, +11.2 %] for a true +1 %; the fit of every run
    read 2-3 %). A floor from that fit wherever it read higher cost 4 of 490 fresh benchmark studies within 1 % of
    the best (docs/benchmark-decisions.md, seventieth-session note); the ratio keeps it to noise the claims' own runs
    cannot explain.
    """
    own, every_sigma = fit_sigma(fresh.values()), fit_sigma(every.values())  # each at least the default floor
    if own is None or every_sigma is None or every_sigma <= CLAIM_NOISE_RATIO * own:
        return stats.DEFAULT_NOISE_FLOOR
    return every_sigma


def arms_of(records: Sequence[RunRecord], noise: NoiseSpec, direction: str = "maximize") -> list[Arm]:
    """Arms in order of first appearance, excluding the baseline-deployed control itself."""
    normalised = [_normalise(r, direction) for r in records]
    slow = stragglers(normalised)
    baselines = baseline_runs(normalised)
    groups: dict[str, list[RunRecord]] = {}
    for rec in normalised:
        if rec.is_baseline or rec.kind in ("evidence", "cross-config") or not rec.config_key:
            continue
        groups.setdefault(rec.config_key, []).append(rec)
    # never all of an arm's runs: its mean is free, so its runs' residuals cannot all be far below zero
    ok_runs = {key: tuple(r for r in recs if r.ok and r.number not in slow) for key, recs in groups.items()}
    every = fresh = settled = {}
    if baselines:
        # One drift curve from every run (controls and repeats alike), not from the two controls around each run.
        # The claim's fit leaves out each arm's first run: it is the one that made the arm worth re-running.
        every = stats.estimate_arms({k: [to_run(r) for r in ok] for k, ok in ok_runs.items() if ok}, baselines,
                                    confidence=noise.confidence)
        # Confirmation reads the fresh runs made before the choice: the runs after it measure what is claimed, and a
        # pair of them reading low cost flaky a confirmed +7.7 % winner in 4 of 60 studies
        before = {k: chosen_on(ok) for k, ok in ok_runs.items()}
        fresh = stats.estimate_arms({k: [to_run(r) for r in runs] for k, runs in before.items() if runs},
                                    baselines, confidence=noise.confidence)
        floor = claim_noise_floor(every, fresh)
        if floor > stats.DEFAULT_NOISE_FLOOR:
            fresh = stats.estimate_arms({k: [to_run(r) for r in runs] for k, runs in before.items() if runs},
                                        baselines, confidence=noise.confidence, noise_floor=floor)
        after = {k: settle_runs(ok) for k, ok in ok_runs.items()}
        settled = stats.estimate_arms({k: [to_run(r) for r in runs] for k, runs in after.items() if runs},
                                      baselines, confidence=noise.confidence, noise_floor=floor)
    arms = []
    for key, recs in groups.items():
        ok = ok_runs[key]
        failures = tuple(r for r in recs if not r.ok and r.status != "running")
        first = recs[0]
        estimate = claim = after_choice = None
        verdict = "unknown"
        if ok and baselines:
            estimate = every[key]
            verdict = stats.verdict(estimate, min_effect=noise.min_effect, min_runs=noise.min_runs)
            claim = fresh.get(key)
            after_choice = settled.get(key)
        arms.append(Arm(config_key=key, label=first.label, kind=first.kind if first.kind != "repeat" else "sampled",
                        first=first, runs=ok, estimate=estimate, verdict=verdict, claim=claim, settled=after_choice,
                        numerics_flagged=any(r.attrs.get("numerics_flag") for r in ok),
                        same_program=any(r.attrs.get("same_program") is True for r in recs), failures=failures))
    return arms


#: The runs of a chosen winner made after its choice (``phase: settle``) that its claim is read from alone.
SETTLE_RUNS = 2
#: The phase of a run made after its configuration was chosen the winner.
SETTLE = "settle"


def chosen_on(ok: Sequence[RunRecord]) -> list[RunRecord]:
    """The fresh runs a winner was confirmed and chosen on: every run after the first, but those made after its
    choice (``phase: settle``).

    Example:
        >>> chosen_on([])
        []
    """
    return [r for r in ok[1:] if r.attrs.get("phase") != SETTLE]


def settle_runs(ok: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs of a chosen winner made after its choice (``phase: settle``) once there are ``SETTLE_RUNS`` of them,
    else none: they selected nothing, so its reported claim is read from them alone.

    Example:
        >>> settle_runs([])
        []
    """
    after = [r for r in ok if r.attrs.get("phase") == SETTLE]
    return after if len(after) >= SETTLE_RUNS else []


def _normalise(rec: RunRecord, direction: str) -> RunRecord:
    if direction == "maximize" or rec.steady is None or rec.steady <= 0:
        return rec
    inverse = value_for(direction, rec.steady)
    attrs = dict(rec.attrs)
    if attrs.get("steady_std"):
        # The noise model reads the spread relative to the value: keep it relative after the inversion.
        attrs["steady_std"] = float(attrs["steady_std"]) * inverse / rec.steady
    return replace(rec, steady=inverse, attrs=attrs)
