"""The read model of a study: its records, arms, leaderboard and verdict, as every reader sees them.

The report, export, the dashboard, ``leaderboard`` and ``status`` all read a study through :class:`StudyData`
(finished or still running). Gains are never re-derived here: arms come from :func:`flagopt.study.arms_of` and
the table from :func:`flagopt.study.leaderboard`, with the noise settings and metric the study recorded.

Example:
    >>> data = study_data("sqlite:///studies/flagopt.db", "demo")  # doctest: +SKIP
    >>> data.best_arm.label  # doctest: +SKIP
    'tree'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import optuna
import pandas as pd

from flagopt import stats
from flagopt.space import NoiseSpec
from flagopt.decide import Arm, arms_of, stragglers
from flagopt.study._leaderboard import leaderboard
from flagopt.study._records import RunRecord, history
from flagopt.study._storage import load_study

DEFAULT_WINDOW = (9, 14)


@dataclass(frozen=True)
class SlotSummary:
    """One slot of a study: its runs, baseline runs, mean baseline level and that level relative to the first slot's.

    ``lost`` says why the study stopped using it (``None`` while it was used to the end).
    """

    slot: str
    runs: int
    ok: int
    baselines: int
    level: float | None
    offset: float | None
    lost: str | None


@dataclass(frozen=True)
class StudyData:
    """A study and everything derived from its records (current epoch only, like the driver)."""

    name: str
    storage: str | None
    study: optuna.Study = field(repr=False)
    all_records: tuple[RunRecord, ...]
    records: tuple[RunRecord, ...]
    noise: NoiseSpec
    direction: str
    window: tuple[int, int]
    arms: tuple[Arm, ...]
    frame: pd.DataFrame = field(repr=False)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.study.user_attrs

    @property
    def space(self) -> dict[str, Any]:
        return self.attrs.get("flagopt.space") or {}

    @property
    def model_tag(self) -> str:
        return str(self.attrs.get("model_tag") or self.space.get("model_tag") or self.name)

    @property
    def parallelism(self) -> str:
        return str(self.attrs.get("parallelism") or self.space.get("parallelism") or "")

    @property
    def verdict(self) -> dict[str, Any] | None:
        return self.attrs.get("flagopt.verdict")

    @property
    def executor(self) -> dict[str, Any]:
        return self.attrs.get("flagopt.executor") or {}

    @property
    def metric_field(self) -> str:
        return str((self.attrs.get("metric") or {}).get("field") or "Tokens/s/device")

    @property
    def winner(self) -> dict[str, Any] | None:
        """The verdict's winner (a confirmed arm summary), if the study drew one."""
        return (self.verdict or {}).get("winner") or None

    @property
    def baselines(self) -> list[RunRecord]:
        return [r for r in self.records if r.is_baseline and r.ok]

    @property
    def lost_slots(self) -> dict[str, str]:
        """Slots the driver stopped using, with why (a node down, a baseline that kept failing there)."""
        return dict(self.attrs.get("flagopt.lost_slots") or {})

    def slot_summary(self) -> list[SlotSummary]:
        """Every slot the study ran on (those the executor declares first), with its runs and level."""
        declared = [s for s in (self.executor.get("slots") or [self.executor.get("nodelist")]) if s]
        names = list(dict.fromkeys([*declared, *(r.slot for r in self.records if r.slot)]))
        out = []
        reference = None
        for name in names:
            runs = [r for r in self.records if r.slot == name and r.status not in ("invalid", "running")]
            base = [float(r.steady) for r in runs if r.is_baseline and r.ok]
            level = sum(base) / len(base) if base else None
            reference = reference if reference is not None else level
            out.append(SlotSummary(name, len(runs), sum(1 for r in runs if r.ok), len(base), level,
                                   None if level is None or not reference else level / reference - 1.0,
                                   self.lost_slots.get(name)))
        return out

    @property
    def best_arm(self) -> Arm | None:
        """The arm to recommend when the study drew no winner, excluding baseline-no-env: the highest estimated gain
        among arms whose verdict is ``better``, else among all.

        An arm still short of its repeats can out-estimate a confirmed one by noise (a cancelled repeat leaves it
        at two runs); recommending it over the confirmed arm would trade evidence for a fraction of a percent.
        """
        scored = [a for a in self.arms if a.estimate is not None and a.kind != "baseline-no-env"]
        better = [a for a in scored if a.verdict == "better"]
        return max(better or scored, key=lambda a: a.estimate.gain) if scored else None

    @property
    def winner_arm(self) -> Arm | None:
        """The arm the verdict confirmed, if any."""
        key = (self.winner or {}).get("config_key")
        return next((a for a in self.arms if key and a.config_key == key), None)

    @property
    def recommended_arm(self) -> Arm | None:
        """The arm a reader is pointed to: the verdict's winner, else :attr:`best_arm`."""
        return self.winner_arm or self.best_arm

    def shown(self, arm: Arm) -> tuple[stats.ArmEstimate | None, int]:
        """The one estimate every reader shows for ``arm`` (status, leaderboard, report, export), with its fresh runs.

        The verdict's winner is shown with what the verdict claims, the runs after the one that selected it
        (statistics.md §11); every other arm with all its runs, as the leaderboard ranks it. One number per arm:
        a single fresh run's estimate (an interval of +-150 % for a noisy job) is never shown beside it.
        """
        if arm.claim is not None and arm is self.winner_arm:
            pulled = (self.winner or {}).get("selection") and self.winner.get("ci")
            if pulled:  # a budget pick's gain pulled toward its close rivals' (flagopt.stats.shrunk_for_selection)
                return replace(arm.reported, gain=float(self.winner["gain"]), lo=float(pulled[0]),
                               hi=float(pulled[1])), arm.fresh_runs
            return arm.reported, arm.fresh_runs
        return arm.estimate, 0

    @property
    def stragglers(self) -> frozenset[int]:
        """The trial numbers of the runs every estimate leaves out as stragglers (docs/statistics.md §18)."""
        return stragglers(self.records, self.direction)

    @property
    def budget(self) -> tuple[int, int]:
        """``(runs used, max_trials)`` as the space now stands: a resumed study with a raised budget shows the new one."""
        from flagopt.decide import runs_used
        from flagopt.space import StopSpec

        stop = self.space.get("stop") or {}
        slots = len(self.executor.get("slots") or []) or 1
        declared = stop.get("max_trials")
        return runs_used(self.records), int(declared) if declared is not None else StopSpec().budget(slots)

    @property
    def verdict_text(self) -> str | None:
        """The verdict's message as readers show it; ``inconclusive: ...`` when the run-to-run noise was too large for
        the runs the study had to support "none better" (the stored message then claims more than the data)."""
        verdict = self.verdict
        if not verdict:
            return None
        message = str(verdict.get("message") or "")
        if self.winner or verdict.get("reason") not in ("null", "budget", "time"):
            return message
        # the controls' noise, or the fit of every run's where it reads more: a few controls can agree by chance
        # (three within 0.1 % on a job of 6 % run noise, tests/decisions/test_noisy_controls.py)
        noise = verdict.get("noise") or {}
        sigmas = [float(noise[k]) for k in ("run_sigma", "all_runs_sigma") if noise.get(k) is not None]
        effect = float((self.space.get("stop") or {}).get("null_gain") or 0.02)
        most = max((a.n for a in self.arms if a.estimate is not None), default=0)
        doubt = stats.inconclusive(max(sigmas) if sigmas else None, effect, most, confidence=self.noise.confidence)
        if doubt is None:
            return message
        return (f"{doubt}: no configuration is shown better or worse than the deployed job, so keep it; measure "
                "the deployed job's own run-to-run spread (several baseline runs), run on idle, pinned machines if "
                "other work shares these (a busy desktop, nodes not allocated --exclusive), and lengthen the steady "
                "window or fix the noise before tuning again")

    def arm_of_trial(self, number: int) -> Arm | None:
        """The arm whose runs (or failures) include trial ``number``."""
        for arm in self.arms:
            if any(r.number == number for r in (*arm.runs, *arm.failures, arm.first)):
                return arm
        return None

    def record(self, number: int) -> RunRecord | None:
        return next((r for r in self.all_records if r.number == number), None)


def noise_of(study_attrs: dict[str, Any]) -> NoiseSpec:
    """The study's noise settings from the space it recorded (defaults for keys it did not set)."""
    raw = (study_attrs.get("flagopt.space") or {}).get("noise") or {}
    fields = NoiseSpec.__dataclass_fields__
    return NoiseSpec(**{k: v for k, v in raw.items() if k in fields and k != "baseline_every"})


def study_data_of(study: optuna.Study, storage: str | None = None) -> StudyData:
    """Everything derived from an already loaded study."""
    attrs = study.user_attrs
    metric = attrs.get("metric") or {}
    direction = str(metric.get("direction", "maximize"))
    window = tuple(metric.get("window") or DEFAULT_WINDOW)
    noise = noise_of(attrs)
    every = tuple(history(study))
    epoch = int(attrs.get("flagopt.epoch", 0))
    current = tuple(r for r in every if int(r.attrs.get("epoch", 0)) == epoch)
    arms = tuple(arms_of(current, noise, direction))
    frame = leaderboard(list(current), noise, direction, (int(window[0]), int(window[1])))
    frame = _shown_winner(frame, arms, attrs.get("flagopt.verdict") or {})
    return StudyData(name=study.study_name, storage=storage, study=study, all_records=every, records=current,
                     noise=noise, direction=direction, window=(int(window[0]), int(window[1])), arms=arms, frame=frame)


def _shown_winner(frame: pd.DataFrame, arms: tuple[Arm, ...], verdict: dict[str, Any]) -> pd.DataFrame:
    """The winner's row carries the verdict's claim (the runs after its choice, else its fresh runs), as
    :meth:`StudyData.shown` does: the leaderboard once showed a settled winner's fresh runs (+11.8 % [+6.8, +16.9])
    beside a verdict of +10.8 % [+7.4, +14.2]."""
    frame = frame.assign(fresh_runs=0)
    key = (verdict.get("winner") or {}).get("config_key")
    arm = next((a for a in arms if key and a.config_key == key and a.claim is not None), None)
    if arm is not None and not frame.empty:
        row = frame["trial"] == arm.first.number
        claim = arm.reported
        assert claim is not None  # it has a claim
        frame.loc[row, ["delta_pct", "ci_lo_pct", "ci_hi_pct"]] = [100 * claim.gain, 100 * claim.lo, 100 * claim.hi]
        frame.loc[row, "fresh_runs"] = arm.fresh_runs
        ok = frame["delta_pct"].notna()
        frame = frame.assign(_ok=ok).sort_values(["_ok", "delta_pct"], ascending=[False, False], kind="stable")
        frame = frame.drop(columns="_ok").reset_index(drop=True)
    return frame


def study_data(storage: str | None, name: str) -> StudyData:
    """Load study ``name`` from ``storage``; raises :class:`flagopt.errors.StudyError` when it does not exist."""
    return study_data_of(load_study(storage, name), storage)


def other_cells(data: StudyData) -> list[StudyData]:
    """Studies in the same storage for the same model_tag but another parallelism (for the sign-flip table)."""
    storage = data.study._storage
    out = []
    for summary in optuna.study.get_all_study_summaries(storage, include_best_trial=False):
        if summary.study_name == data.name:
            continue
        attrs = summary.user_attrs
        if attrs.get("model_tag") == data.model_tag and attrs.get("parallelism") != data.parallelism:
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            out.append(study_data_of(study, data.storage))
    return out


def is_nan(value: object) -> bool:
    """True for None and float NaN (pandas' missing values)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def slot_line(slot: SlotSummary) -> str:
    """``gpu[01-08]: 14 runs, 4 baselines, level -2.9 % vs the first slot, LOST (node gpu03 is down)``."""
    text = f"{slot.slot}: {slot.runs} runs, {slot.baselines} baselines"
    if slot.offset is not None and slot.offset != 0.0:
        text += f", level {100 * slot.offset:+.1f} % vs the first slot"
    return text + (f", LOST ({slot.lost})" if slot.lost else "")
