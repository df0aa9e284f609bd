"""Asking Optuna for a sampled point and telling it what a run measured (part of :class:`StudyRunner`).

The sampler is asked only over values that can run: a choice the installed XLA rejected is left out of its
distribution, a point with a blamed setting is told as a constraint violation without a run, and every finished run
is told with its drift-corrected gain (a control as 0, an out-of-memory run as PRUNED with constraint ``oom``).

A sampled point the study has measured already is not run again: repeats are the race's to decide (it re-runs what
could matter, against controls). In a small space TPE re-proposes its favourite: on a four-param null job 30 of 47
sampled runs re-measured configurations run before, the distinct count a null verdict needs never grew, and the
study ended on budget. Such a point is told as not run, and a uniform draw among the unmeasured ones replaces it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import optuna

from flagopt import failures
from flagopt.decide import Blame, Plan, Verdict, blamed_by, changed_settings, config_of_settings, same_value
from flagopt.render import render
from flagopt.space import Param, TrialConfig
from flagopt.study import _records as R
from flagopt.study._collect import Collected, _jsonable
from flagopt.study._domains import distribution, optuna_names

#: How many times a sampled config may hit an excluded value before we give up sampling.
MAX_RESAMPLES = 30
#: Uniform draws tried for a configuration not measured yet, before the sampler's repeat is run after all.
UNMEASURED_DRAWS = 200


class Asking:
    """Part of :class:`~flagopt.study.StudyRunner`: the sampler's side of the loop."""

    # -- asking ---------------------------------------------------------------------------------------------------
    def _excluded(self) -> set[str]:
        return set(self.study.user_attrs.get("flagopt.excluded", []))

    def _sampled_params(self, excluded: set[str]) -> tuple[Param, ...]:
        """The params as the sampler sees them: without the choices the installed XLA rejected.

        A value pre-flight (or a run) found unknown is never proposed; a param left with no choice but the deployed
        one is not sampled at all (it stays as deployed).
        """
        out = []
        for p in self.space.params:
            if p.choices is None or not excluded:
                out.append(p)
                continue
            kept = tuple(v for v in p.choices if not self._rejected(
                config_of_settings(self.space, {p.name: v}, kind="sampled", profile="sampled"), excluded))
            if any(not same_value(p, v, self.planner.deployed.get(p.name)) for v in kept):
                out.append(p if kept == p.choices else replace(p, choices=kept))
        return tuple(out)

    def _sample_plan(self) -> Plan | Verdict | None:
        excluded = self._excluded()
        sampled = self._sampled_params(excluded)
        if not sampled:
            return Verdict("budget", "every value the sampler could propose was rejected by the installed XLA "
                                     f"({', '.join(sorted(excluded))}); nothing is left to sample")
        names = self._optuna_names if all(p in self.space.params for p in sampled) \
            else optuna_names(self.study, sampled)
        dists = {names[p.name]: distribution(p) for p in sampled}
        records = self.records()
        blames = self.planner.blames(records)
        measured = {r.config_key for r in records if r.ok} | {r.plan.config.config_key for r in self.running}
        for _ in range(MAX_RESAMPLES):
            trial = self.study.ask(fixed_distributions=dists)
            params = {p.name: trial.params[names[p.name]] for p in sampled}
            changed, config = self._point(params)
            hit = self._rejected(config, excluded)
            blame = blamed_by(blames, changed)
            if not hit and blame is None and changed:
                unmeasured = self._unmeasured_point(sampled, names, dists, measured | {config.config_key}, excluded,
                                                    blames) if config.config_key in measured else None
                if unmeasured is not None:
                    self._tell_static(trial, config, "sampled", R.INVALID, failure_reason="not run: this "
                                      "configuration was measured already (its repeats are the race's to decide)")
                    self.study.enqueue_trial(unmeasured)  # the next ask takes it
                    continue
                self._pending_trial = trial
                return Plan(config, "sampled", "sampler")
            if blame is not None:
                # A setting that made earlier runs fail deterministically: a constraint violation the sampler
                # learns from, without spending a run.
                self._tell_static(trial, config, "sampled", R.INVALID, constraint="failure",
                                  failure_class=blame.failure_class, failure_reason=f"not run: {blame.sentence()}")
                continue
            if not changed:
                self._tell_static(trial, config, "sampled", R.INVALID, failure_reason="not run: the sampled point is "
                                  "the deployed configuration")
                continue
            # The installed XLA rejected this value before: never spend a run on it again.
            self._tell_static(trial, config, "sampled", R.INVALID, failure_class="unknown-flag",
                              failure_reason=f"excluded: {', '.join(hit)} was rejected by the installed XLA")
        return Verdict("budget", f"the sampler kept proposing excluded or failing values "
                                 f"({', '.join(sorted(excluded) + [b.sentence() for b in blames])}); "
                                 "remove them from the space")

    def _point(self, params: dict[str, Any]) -> tuple[dict[str, Any], TrialConfig]:
        """A sampled point's settings (only what differs from the deployed job: a point equal to a probe joins its
        arm) and its configuration."""
        changed = changed_settings(self.space, params, self.planner.deployed)
        return changed, config_of_settings(self.space, changed, kind="sampled", profile="sampled")

    def _rejected(self, config: TrialConfig, excluded: set[str]) -> list[str]:
        """The flag tokens ``config`` renders that the installed XLA rejected."""
        tokens = set(render(self.space, config, inherited={}, default_of=self.default_of).xla_flags.split())
        return sorted(tokens & excluded)

    def _runnable_unmeasured(self, params: dict[str, Any], measured: set[str], excluded: set[str],
                             blames: list[Blame]) -> bool:
        # the cheap checks first: rendering is the costliest, and up to UNMEASURED_DRAWS points are checked
        changed, config = self._point(params)
        return bool(changed) and config.config_key not in measured and blamed_by(blames, changed) is None \
            and not self._rejected(config, excluded)

    def _unmeasured_point(self, sampled: tuple[Param, ...], names: dict[str, str], dists: dict[str, Any],
                          measured: set[str], excluded: set[str], blames: list[Blame]) -> dict[str, Any] | None:
        """A uniform draw (Optuna's RandomSampler) among the runnable configurations not measured yet, by Optuna
        name; ``None`` when every draw was one measured already (a small space, measured through)."""
        seed = None if self.space.seed is None else self.space.seed + len(self.study.trials)
        uniform = optuna.samplers.RandomSampler(seed=seed)
        for _ in range(UNMEASURED_DRAWS):
            point = {n: uniform.sample_independent(self.study, None, n, d) for n, d in dists.items()}  # type: ignore[arg-type]
            if self._runnable_unmeasured({p.name: point[names[p.name]] for p in sampled}, measured, excluded, blames):
                return point
        return None

    def _tell_static(self, trial: optuna.trial.Trial, config: TrialConfig, kind: str, status: str, *,
                     constraint: str | None = None, **attrs: Any) -> None:
        """Record a trial that never ran: FAIL, or PRUNED with ``constraint`` violated (samplers learn from that)."""
        self._set_attrs(trial, {"kind": kind, "profile": config.profile, "config_key": config.config_key,
                                "settings": config.settings(), "status": status,
                                "epoch": int(self.study.user_attrs.get("flagopt.epoch", 0)), **attrs})
        if constraint is not None:
            trial.set_constraint(constraint, 1.0)
        self.study.tell(trial, state=optuna.trial.TrialState.PRUNED if constraint else optuna.trial.TrialState.FAIL)

    def _set_attrs(self, trial: optuna.trial.Trial | int, attrs: dict[str, Any]) -> None:
        trial_id = trial._trial_id if isinstance(trial, optuna.trial.Trial) else trial
        for key, value in attrs.items():
            self.study._storage.set_trial_user_attr(trial_id, key, _jsonable(value))

    # -- telling -------------------------------------------------------------------------------------------------
    def _tell(self, trial: optuna.trial.Trial, plan: Plan, collected: Collected) -> None:
        attrs = dict(collected.attrs)
        attrs["status"] = collected.status
        self._set_attrs(trial, attrs)
        handling = collected.handling
        if collected.status == R.OK:
            # A control is the reference itself: gain 0 by definition, so it is never Optuna's "best trial".
            self.study.tell(trial, 0.0 if plan.kind in (R.BASELINE, R.NO_ENV) else collected.value)
            return
        if collected.status == R.INFEASIBLE:
            # OOM: a constraint violation the samplers read (TPE ranks infeasible trials below every feasible one),
            # with no made-up value to squash the history plot or the importances.
            trial.set_constraint("oom", 1.0)
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        if collected.status == R.CANCELLED or handling is None:
            return
        if handling.exclude_value:
            flags = (collected.failure.details or {}).get("unknown_flags") or []
            tokens = set(self._excluded())
            # never the dump options flagopt adds itself (the evidence run, a compared probe)
            settings_tokens = {t for t in str(attrs.get("xla_flags") or "").split()
                               if not t.startswith("--xla_dump")} if not flags else set()
            tokens.update(flags or settings_tokens)
            self.study.set_user_attr("flagopt.excluded", sorted(tokens))
        failure_class = collected.failure.failure_class
        first = plan.retry_of if plan.retry_of is not None else trial.number
        earlier = [str(r.attrs.get("failure_class")) for r in self.records() if r.number != trial.number
                   and (r.number == first or r.attrs.get("retry_of") == first) and r.attrs.get("failure_class")]
        step = failures.after_failure(failure_class, earlier)
        if step == failures.RETRY:
            self.retry_queue.append(plan.retry(f"retry {plan.retries + 1} after {failure_class}", first))
        elif step == failures.STOP:
            self._stop_requested = f"{failure_class} (retries exhausted)"
