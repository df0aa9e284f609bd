"""Decide what to run next: baselines first, drift controls, confirmations, profiles, then the sampler; or stop.

This is where flagopt differs from plain Optuna: it never trusts one run. Every gain is measured against the
drift-corrected baseline, candidates that could matter are re-run (interleaved with baseline controls) until the
statistics give a verdict, and the study stops on a confirmed winner, on a defensible negative finding, or on budget.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flagopt import stats
from flagopt.space import Space, TrialConfig
from flagopt.study._arms import Arm, baseline_runs, to_run
from flagopt.study._records import BASELINE, CANCELLED, NO_ENV, RunRecord

SAMPLE = "sample"
#: A baseline that fails this many times in a row means the job itself is broken: no trial can be scored.
MAX_BASELINE_FAILURES = 3


@dataclass(frozen=True)
class Plan:
    """One run to launch."""

    config: TrialConfig
    kind: str  # recorded kind: baseline-deployed | baseline-no-env | profile | sampled | repeat | evidence
    reason: str
    repeat_of: int | None = None
    retry_of: int | None = None
    retries: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)  # recorded on the trial as they are


@dataclass(frozen=True)
class Verdict:
    """Why the study stopped, with the evidence behind it (stored on the study as ``flagopt.verdict``)."""

    reason: str  # win | null | budget | time | stopped | baseline-failed
    message: str
    winner: dict[str, Any] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    noise: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, "winner": self.winner, "tried": self.tried,
                "noise": self.noise, "decided_at": time.time()}


def config_of(rec: RunRecord) -> TrialConfig:
    """The configuration a recorded run used, to run it again."""
    if rec.kind in (BASELINE, NO_ENV):
        return TrialConfig(kind=rec.kind, profile=rec.kind)
    s = rec.attrs.get("settings") or {}
    return TrialConfig(kind="repeat", profile=rec.profile, xla=tuple((s.get("xla") or {}).items()),
                       libtpu=tuple((s.get("libtpu") or {}).items()), env=tuple((s.get("env") or {}).items()),
                       args=tuple((s.get("args") or {}).items()))


def arm_summary(arm: Arm) -> dict[str, Any]:
    est = arm.estimate
    return {"label": arm.label, "config_key": arm.config_key, "trial": arm.first.number, "kind": arm.kind,
            "settings": arm.first.attrs.get("settings"), "runs": arm.n, "verdict": arm.verdict,
            "gain": est.gain if est else None, "ci": [est.lo, est.hi] if est else None,
            "numerics_flagged": arm.numerics_flagged}


def _seconds_per_run(records: Sequence[RunRecord]) -> float:
    """Typical wall time of one run: drift is measured per second, controls are spaced in runs."""
    spans = [float(r.attrs["ended_at"]) - float(r.attrs["started_at"]) for r in records
             if r.attrs.get("ended_at") and r.attrs.get("started_at")]
    return sum(spans) / len(spans) if spans else 1.0


class Planner:
    """Chooses the next run from the study's history. Pure: it reads records, it launches nothing."""

    def __init__(self, space: Space, *, started_at: float | None = None) -> None:
        self.space = space
        self._direction = space.metric.direction
        self.started_at = started_at or time.time()
        self._sigma = stats.DEFAULT_NOISE_FLOOR  # run noise, re-estimated from the baselines at every decision

    # -- the decision -------------------------------------------------------------------------------------------
    def next(self, records: Sequence[RunRecord], arms: Sequence[Arm], in_flight: Sequence[Plan]) -> Plan | Verdict | str:
        space = self.space
        flying = {p.kind for p in in_flight}
        # A cancelled run (Ctrl-C, or a driver that died before submitting it) measured nothing: it neither counts
        # as a broken baseline nor as an evaluated baseline-no-env or profile, so a resumed study runs it again.
        baselines = [r for r in records if r.is_baseline and r.status != CANCELLED]
        ok_baselines = [r for r in baselines if r.ok]

        recent = baselines[-MAX_BASELINE_FAILURES:]
        if not ok_baselines and len(recent) >= MAX_BASELINE_FAILURES and not any(r.ok for r in recent):
            return Verdict("baseline-failed", f"baseline-deployed failed {len(recent)} times in a row "
                           f"({recent[-1].attrs.get('failure_class', 'failed')}: {recent[-1].attrs.get('failure_reason', '')}); "
                           "no trial can be scored. Fix the command or the deployed flags and run again.")
        no_env_due = not any(r.kind == NO_ENV and r.status != CANCELLED for r in records) and NO_ENV not in flying
        no_env_due = no_env_due and space.baseline.has_deployed_env  # else no-env is the deployed run again
        if not ok_baselines:
            if BASELINE not in flying:
                return Plan(TrialConfig(BASELINE, BASELINE), BASELINE, "first reference run")
            # Wave 1 is both baselines: with two jobs in flight (Slurm) the second is queued behind the first.
            return Plan(TrialConfig(NO_ENV, NO_ENV), NO_ENV, "effect of the deployed env") if no_env_due else "wait"
        if no_env_due:
            return Plan(TrialConfig(NO_ENV, NO_ENV), NO_ENV, "effect of the deployed env")

        runs = baseline_runs(records, self._direction)
        self._sigma = max(stats.run_noise(runs), 0.003) if len(runs) >= 2 else 0.01
        stop = self.stop_verdict(records, arms)
        if stop is not None and stop.winner and space.configs:
            return self.cross_check(records, stop, in_flight)
        if stop is not None:
            return stop

        confirming = self.candidates(arms, in_flight)
        chosen = self.pick_candidate(confirming) if confirming else None
        # Repeats compared with the same two controls stop improving the estimate (the controls' noise does not
        # average out): confirmation alternates baseline and candidate, A-B-A-B.
        paired = chosen is not None and stats.needs_control(chosen.estimate) and not records[-1].is_baseline
        if BASELINE not in flying and (paired or self.baseline_due(records, confirming=chosen is not None)):
            return Plan(TrialConfig(BASELINE, BASELINE), BASELINE, "drift control", repeat_of=ok_baselines[0].number)

        if chosen is not None:
            return Plan(config_of(chosen.first), "repeat", f"confirming {chosen.label}", repeat_of=chosen.first.number)

        attempted = {r.profile for r in records if r.kind == "profile" and r.status != CANCELLED} \
            | {p.config.profile for p in in_flight}
        for profile in space.profiles:
            if profile.profile not in attempted:
                return Plan(profile, "profile", "catalog profile")
        if not space.params:
            # Same recommendation rule as any other budget stop: a confirmed-better profile below the win bar is
            # still the one to deploy.
            eligible = [a for a in arms if a.estimate is not None and (space.numerics.allow or not a.numerics_flagged)]
            why = "every profile was evaluated and the space has no params to sample" if space.profiles \
                else "the space has no profiles and no params: only the baselines were compared"
            return self.budget_verdict("budget", why, eligible, [arm_summary(a) for a in arms],
                                       self.noise_summary(records))
        return SAMPLE

    # -- the cross-config check --------------------------------------------------------------------------------
    def cross_check(self, records: Sequence[RunRecord], verdict: Verdict, in_flight: Sequence[Plan]) -> Plan | Verdict | str:
        """Re-run the winner against the baseline on every other config (``configs:``) before recommending it.

        Each config gets ``noise.min_runs`` baseline and winner runs, alternated (A-B-A-B) so drift cancels; a
        regression beyond ``noise.min_effect`` (1 %) there makes the recommendation conditional on the config.
        """
        need = self.space.noise.min_runs
        winner = verdict.winner or {}
        settings = winner.get("settings") or {}
        results: dict[str, dict[str, Any]] = {}
        for name, args in self.space.configs:
            mine = [r for r in records if r.attrs.get("cross_config") == name]
            base = [r for r in mine if r.attrs.get("cross_role") == "baseline" and r.ok]
            cand = [r for r in mine if r.attrs.get("cross_role") == "winner" and r.ok]
            failed = sum(1 for r in mine if not r.ok and r.status != "running")
            if (len(base) < need or len(cand) < need) and failed <= 2 * need:
                if any(p.attrs.get("cross_config") == name for p in in_flight):
                    return "wait"
                role = "baseline" if len(base) <= len(cand) else "winner"
                extra = dict(args)
                config = TrialConfig("cross-config", f"{name}:{role}", args=tuple(extra.items())) if role == "baseline" \
                    else TrialConfig("cross-config", f"{name}:{winner.get('label')}",
                                     xla=tuple((settings.get("xla") or {}).items()),
                                     libtpu=tuple((settings.get("libtpu") or {}).items()),
                                     env=tuple((settings.get("env") or {}).items()),
                                     args=tuple({**(settings.get("args") or {}), **extra}.items()))
                return Plan(config, "cross-config", f"cross-config check on {name} ({role})",
                            attrs={"cross_config": name, "cross_role": role})
            if len(base) < need or len(cand) < need:
                results[name] = {"verdict": "unknown", "reason": f"{failed} failed runs", "runs": len(cand)}
                continue
            est = stats.estimate_arm([to_run(r, self._direction) for r in cand],
                                     [to_run(r, self._direction) for r in base],
                                     confidence=self.space.noise.confidence)
            results[name] = {"gain": est.gain, "ci": [est.lo, est.hi], "runs": est.n,
                             "verdict": stats.verdict(est, min_effect=self.space.noise.min_effect, min_runs=need)}
        regressed = [n for n, r in results.items() if r.get("gain") is not None
                     and r["gain"] < -self.space.noise.min_effect]
        note = "; ".join(f"{n}: {r['gain']:+.1%} [{r['ci'][0]:+.1%}, {r['ci'][1]:+.1%}]" if "gain" in r else
                         f"{n}: unknown ({r['reason']})" for n, r in results.items())
        message = verdict.message + (f". Cross-config check: {note}" if note else "")
        if regressed:
            message += f". CONDITIONAL: it regresses on {', '.join(regressed)}, recommend it only for the tuned config"
        winner = {**winner, "cross_config": results, "conditional_on_config": bool(regressed)}
        return Verdict(verdict.reason, message, winner=winner, tried=verdict.tried, noise=verdict.noise)

    # -- pieces ---------------------------------------------------------------------------------------------------
    def baseline_due(self, records: Sequence[RunRecord], *, confirming: bool) -> bool:
        since = 0
        for rec in reversed(records):
            if rec.is_baseline:
                break
            if rec.status != "invalid":  # runs that never started measured nothing
                since += 1
        if confirming:
            # A confirmation compares against its neighbouring baselines: keep them close.
            return since >= 2
        every = self.space.noise.baseline_every
        if every is None:
            every = stats.drift_interval(baseline_runs(records, self._direction), t_per_trial=_seconds_per_run(records))
        return since >= every

    def candidates(self, arms: Sequence[Arm], in_flight: Sequence[Plan]) -> list[Arm]:
        """Arms whose gain could clear the bar and whose verdict is still open: worth more runs."""
        noise = self.space.noise
        bar = self.space.stop.null_gain
        flying = {p.repeat_of for p in in_flight}
        sigma = self._sigma
        out = []
        for arm in arms:
            est = arm.estimate
            if est is None or arm.first.number in flying or arm.n >= noise.max_repeats:
                continue
            if arm.numerics_flagged and not self.space.numerics.allow:
                continue
            # One run is promising when it lands within one run-noise sigma of the bar: a real +bar effect measures
            # at least that high five times out of six, so the null finding does not rest on lucky single runs.
            promising = est.gain >= bar - sigma or (arm.n > 1 and est.hi >= bar)
            open_question = arm.n < noise.min_runs or arm.verdict == "unknown" or (
                arm.verdict == "better" and est.lo < self.space.stop.win <= est.hi)
            if promising and open_question:
                out.append(arm)
        return out

    def pick_candidate(self, candidates: Sequence[Arm]) -> Arm:
        noise = self.space.noise
        by_label = {a.config_key: a for a in candidates}
        chosen = stats.next_to_sample({k: a.estimate for k, a in by_label.items()},
                                      target=(self.space.stop.null_gain, self.space.stop.win),
                                      min_runs=noise.min_runs, max_runs=noise.max_repeats)
        return by_label.get(chosen) or max(candidates, key=lambda a: a.estimate.gain)

    def stop_verdict(self, records: Sequence[RunRecord], arms: Sequence[Arm]) -> Verdict | None:
        space = self.space
        stop = space.stop
        eligible = [a for a in arms if a.estimate is not None and (space.numerics.allow or not a.numerics_flagged)]
        # Many arms are raced: the stop needs a family-wise confidence (Bonferroni over the re-run arms).
        raced = sum(1 for a in eligible if a.n > 1)
        win_conf = stats.win_confidence(space.noise.confidence, raced)
        winners = [a for a in eligible if a.verdict == "better" and a.n >= space.noise.min_runs
                   and a.estimate.bounds(win_conf)[0] >= stop.win]
        noise = self.noise_summary(records)
        tried = [arm_summary(a) for a in arms]
        if winners:
            best = max(winners, key=lambda a: a.estimate.lo)
            est = best.estimate
            return Verdict("win", f"{best.label} is a confirmed winner: {est.gain:+.1%} "
                           f"[{est.lo:+.1%}, {est.hi:+.1%}] over {best.n} runs, lower bound >= {stop.win:.0%}",
                           winner=arm_summary(best), tried=tried, noise=noise)
        used = sum(1 for r in records if r.status != "invalid")
        if used >= stop.max_trials:
            return self.budget_verdict("budget", f"max_trials ({stop.max_trials}) runs used", eligible, tried, noise)
        if stop.max_hours is not None and time.time() - self.started_at > stop.max_hours * 3600:
            return self.budget_verdict("time", f"max_hours ({stop.max_hours}) reached", eligible, tried, noise)
        distinct = [a for a in arms if a.estimate is not None]
        if len(distinct) >= stop.max_null and not self.candidates(arms, ()):
            good = [a for a in eligible if a.verdict == "better" and a.estimate.gain >= stop.null_gain]
            if not good:
                best = max(distinct, key=lambda a: a.estimate.gain)
                return Verdict("null", f"{len(distinct)} distinct profiles evaluated, none better than "
                               f"{stop.null_gain:+.0%} (best: {best.label} {best.estimate.gain:+.1%} "
                               f"[{best.estimate.lo:+.1%}, {best.estimate.hi:+.1%}], {best.verdict}): throughput is "
                               "structurally bounded at the editable scope", tried=tried, noise=noise)
        return None

    def budget_verdict(self, reason: str, why: str, eligible: Sequence[Arm], tried: list, noise: dict) -> Verdict:
        # The recommendation is picked among many raced arms: hold it to the family-wise bound, like the win rule
        # (the decision benchmark measured 20 % false winners on a null landscape without it, 0 % with it).
        raced = sum(1 for a in eligible if a.n > 1)
        conf = stats.win_confidence(self.space.noise.confidence, raced)
        better = [a for a in eligible if a.verdict == "better" and a.estimate.bounds(conf)[0] > 0]
        if better:
            best = max(better, key=lambda a: a.estimate.lo)
            est = best.estimate
            return Verdict(reason, f"{why}; best confirmed: {best.label} {est.gain:+.1%} [{est.lo:+.1%}, {est.hi:+.1%}] "
                           f"over {best.n} runs (below the {self.space.stop.win:.0%} win bar)",
                           winner=arm_summary(best), tried=tried, noise=noise)
        return Verdict(reason, f"{why}; no configuration is confirmed better than baseline-deployed",
                       tried=tried, noise=noise)

    def noise_summary(self, records: Sequence[RunRecord]) -> dict[str, float]:
        runs = baseline_runs(records, self._direction)
        if len(runs) < 2:
            return {"baseline_runs": float(len(runs))}
        return {"baseline_runs": float(len(runs)), "run_sigma": stats.run_noise(runs)}
