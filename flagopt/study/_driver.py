"""The study driver's loop: plan -> ask -> render -> submit -> watch -> collect -> tell, until a verdict.

:class:`StudyRunner` is put together from three parts, one concern each: the loop, asking and telling (here),
launching, waiting and collecting (:mod:`flagopt.study._launching`), and crash recovery, re-attach and shutdown
(:mod:`flagopt.study._recovery`). It reports what happens through a :class:`~flagopt.study.StudyObserver`.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import optuna

from flagopt.errors import StudyError
from flagopt.executors import BaseExecutor
from flagopt.render import render
from flagopt.space import Param, Space, TrialConfig
from flagopt.study import _records as R
from flagopt.decide import arms_of
from flagopt.decide import blamed_by
from flagopt.study._collect import Collected, _jsonable
from flagopt.decide import changed_settings, config_of_settings, same_value
from flagopt.study._domains import distribution, optuna_names
from flagopt.study._delete import set_aside_stale_trials
from flagopt.study._faults import as_storage_fault
from flagopt.study._fingerprint import bind_study
from flagopt.study._identity import check_identity, claim_folder, study_id
from flagopt.study._launching import Launching, Running
from flagopt.study._lock import driver_lock
from flagopt.study._observer import StudyObserver
from flagopt.decide import SAMPLE, Plan, Planner, SlotBroken, Verdict, arm_summary, runs_used
from flagopt.study._progress import Progress
from flagopt.study._recovery import Recovery
from flagopt.study._storage import open_storage, prepare_storage, shown_url, storage_file, storage_url, study_folder

#: How many times a sampled config may hit an excluded value before we give up sampling.
MAX_RESAMPLES = 30
#: Verdicts the runs still in flight cannot overturn, so the study ends on them at once and cancels those runs.
#: A sequential test decides when its bound is crossed; waiting for the runs of the other slots (up to a run
#: length each) only made the user wait. A budget verdict waits: its last runs are paid for and may decide.
FINAL_WITH_RUNS_IN_FLIGHT = ("win", "null")


def make_sampler(name: str, seed: int | None, *, parallel: bool = False) -> optuna.samplers.BaseSampler:
    """The proposal engine; ``parallel``: several trials are in flight when it is asked (slots, queued jobs)."""
    if name == "gp":
        try:
            import torch  # noqa: F401  (GPSampler needs it; say so up front rather than at the first ask)
        except ImportError:
            raise StudyError("--sampler", "gp", "GPSampler needs PyTorch: pip install torch, or use --sampler tpe") from None
        return optuna.samplers.GPSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: a point still running counts as a poor result, so runs in flight are not proposed twice
    return optuna.samplers.TPESampler(multivariate=True, group=True, seed=seed, n_startup_trials=8,
                                      constant_liar=parallel)


@dataclass
class StudyRunner(Launching, Recovery):
    """Runs (or resumes) the study of one space."""

    space: Space
    executor: BaseExecutor
    storage: str | None = None
    sampler: str | None = None
    n_trials: int | None = None
    force: bool = False
    detach: bool = False
    rebaseline: bool = False
    max_in_flight: int | None = None  # jobs per slot at once; None: what the executor queues (Slurm 2, local 1)
    progress: StudyObserver = field(default_factory=Progress)  # where the run reports (console, live view...)
    default_of: Callable[[str], Any] | None = None
    preflight_excluded: tuple[str, ...] = ()
    poll_s: float = 0.5
    #: Catch SIGINT/SIGTERM and stop cleanly (cancel or, with ``detach``, leave the runs in flight). Only the CLI's own
    #: run sets it: a driver inside another program (a test suite, a notebook) must let Ctrl-C interrupt that program.
    handle_signals: bool = False

    def __post_init__(self) -> None:
        self.folder = study_folder(self.storage, self.space.name)
        prepare_storage(self.storage, self.space.name)  # before the study exists: a bad path writes nothing
        self._stale = set_aside_stale_trials(self.storage, self.space.name)  # a deleted namesake's trial folders
        sampler_name = self.sampler or self.space.sampler
        if self.max_in_flight is None:
            self.max_in_flight = self.executor.jobs_per_slot
        self.slots: list[str] = list(self.executor.slots)
        self.lost_slots: dict[str, str] = {}
        parallel = self.max_in_flight * len(self.slots) > 1
        storage = open_storage(self.storage)
        # never adopt a study flagopt did not make; never share the trial folder of another storage's study
        check_identity(storage, self.space.name, self.folder, shown_url(storage_url(self.storage)))
        self.study = optuna.create_study(
            study_name=self.space.name, storage=storage, direction="maximize",
            sampler=make_sampler(sampler_name, self.space.seed, parallel=parallel), load_if_exists=True)
        stored = len(self.study.get_trials(deepcopy=False))
        if self.space.seed is not None and stored:
            # A seeded sampler re-created on resume would replay the first invocation's proposals (the same params
            # again): offset the seed by the trials already stored, which keeps a fresh study reproducible.
            self.study.sampler = make_sampler(sampler_name, self.space.seed + stored, parallel=parallel)
        self.planner = Planner(self.space, default_of=self.default_of, slot_count=len(self.slots))
        self._optuna_names = optuna_names(self.study, self.space.params)  # a changed domain gets a fresh name
        self.running: list[Running] = []
        self.retry_queue: list[Plan] = []
        self.launched = 0
        self._stop_requested: str | None = None
        #: the signal (SIGINT, SIGTERM) that stopped the run, when one did
        self.stop_signal: int | None = None
        self._cached_arms: list = []
        self._pending_trial: optuna.trial.Trial | None = None
        self._nodes_checked_at = 0.0

    # -- study-level bookkeeping --------------------------------------------------------------------------------
    def _record_study(self) -> None:
        for note in bind_study(self.study, self.space, rebaseline=self.rebaseline):  # refuses incomparable changes
            self.progress.say(note)
        self.study.set_user_attr("flagopt.executor", self.executor.describe())
        self.study.set_user_attr("flagopt.space", json.loads(json.dumps(self.space.raw, default=str)))
        self.study.set_user_attr("flagopt.space_path", str(self.space.source))
        self.study.set_user_attr("model_tag", self.space.model_tag)
        self.study.set_user_attr("parallelism", self.space.parallelism)
        self.study.set_user_attr("metric", {"field": self.space.metric.field, "window": list(self.space.metric.window),
                                            "direction": self.space.metric.direction})

    def records(self) -> list[R.RunRecord]:
        return R.current_history(self.study)

    # -- the loop -----------------------------------------------------------------------------------------------
    def run(self) -> Verdict | None:
        lock = driver_lock(self.storage, self.folder, self.space.name)  # a file, or a row on a database server
        lock.acquire(force=self.force)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)} \
            if self.handle_signals else {}
        try:
            if self._stale is not None:
                self.progress.say(f"a study {self.space.name!r} deleted outside flagopt left trial folders here: "
                                  f"moved to {self._stale} (python -m flagopt delete removes both)")
            # the trial folders belong to this study of this storage: another one of the same name is refused
            claim_folder(self.folder, study_id(self.study), shown_url(storage_url(self.storage)), self.space.name)
            self._record_study()
            if self.study.user_attrs.get("flagopt.verdict"):
                # It judged the records and budget of the last run (a raised max_trials, new runs): this run decides
                # again, and until it does, `status` and `leaderboard` must not repeat the old one.
                self.study.set_user_attr("flagopt.verdict", None)
            if self.preflight_excluded:
                self.study.set_user_attr("flagopt.excluded", sorted(self._excluded() | set(self.preflight_excluded)))
            self._recover()
            return self._loop()
        except Exception as exc:
            url = storage_url(self.storage)
            fault = as_storage_fault(exc, shown_url(url), self.space.name, storage_file(url))
            if fault is None:
                raise
            # Where the study is kept failed: leave the runs in flight running (their ends cannot be recorded now);
            # the next `run` re-attaches them. Nothing is recorded as a configuration's failure.
            self.detach = True
            raise fault from None
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            try:
                self._shutdown()
            except Exception as exc:  # the storage is still failing: the runs stay RUNNING, resume re-attaches them
                if as_storage_fault(exc, "", "", None) is None:
                    raise
            lock.release()
            self.progress.close()

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._stop_requested in ("SIGINT", "SIGTERM"):
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for the clean stop (``run`` still cancels)
        self._stop_requested = signal.Signals(signum).name
        self.stop_signal = signum

    def live_slots(self) -> list[str]:
        return [s for s in self.slots if s not in self.lost_slots]

    def _fill_slots(self) -> Verdict | None:
        """Give every live slot work until it holds ``max_in_flight`` jobs; a verdict when the planner draws one."""
        for slot in self.live_slots():
            while sum(1 for r in self.running if r.plan.slot == slot) < self.max_in_flight \
                    and not self._budget_spent() and slot not in self.lost_slots:
                self._check_pinned_nodes(slot)  # never submit to a pinned node that went down
                if slot in self.lost_slots:
                    break
                step = self._next_plan(slot)
                if isinstance(step, Verdict):
                    return step
                if isinstance(step, SlotBroken):
                    self._lose_slot(step.slot, step.reason)
                    break
                if step is None:
                    break
                self._launch(replace(step, slot=slot))
        return None

    def _loop(self) -> Verdict | None:
        verdict: Verdict | None = None
        while True:
            if self._stop_requested:
                verdict = Verdict("stopped", f"stopped by {self._stop_requested}")
                break
            verdict = self._fill_slots()
            if verdict is not None and (not self.running or verdict.reason in FINAL_WITH_RUNS_IN_FLIGHT):
                self._shutdown(decided=True)  # runs still in flight are cancelled: the answer is in, nodes go back
                break
            if not self.running:
                # Out of launches (--trials): still say where the study stands, without asking the sampler.
                step = self.planner.next(self.records(), self._arms(), [], slot=(self.live_slots() or [""])[0],
                                         slots=self.live_slots())
                verdict = step if isinstance(step, Verdict) else None
                break
            self._wait_one()
            if verdict is not None:
                verdict = None  # a run finished after the verdict was drawn: decide again with it
        if verdict is not None and self.lost_slots:
            verdict = replace(verdict, message=f"{verdict.message}; {self._lost_sentence()}")
        if verdict is not None and verdict.reason != "stopped":
            self.study.set_user_attr("flagopt.verdict", verdict.to_json())
        self.study.set_user_attr("flagopt.arms", [arm_summary(a) for a in self._arms()])
        self.study.set_user_attr("flagopt.blames", [b.to_json() for b in self.planner.blames(self.records())])
        self.progress.verdict(self.study, verdict)
        return verdict

    def _budget_spent(self) -> bool:
        return self.n_trials is not None and self.launched >= self.n_trials

    def _arms(self):
        return arms_of(self.records(), self.space.noise, self.space.metric.direction)

    def _next_plan(self, slot: str = "") -> Plan | Verdict | SlotBroken | None:
        records = self.records()
        max_trials = self.planner.max_trials
        if runs_used(records) >= max_trials:
            # Retries are runs like any other, and a baseline that never ran ok must not be re-planned past the
            # budget either: max_trials is a hard cap.
            self.retry_queue.clear()
            if not any(r.is_baseline and r.ok for r in records):
                last = next((r for r in reversed(records) if r.is_baseline), None)
                why = f" ({last.attrs.get('failure_class', last.status)}: {last.attrs.get('failure_reason', '')})" \
                    if last else ""
                return Verdict("baseline-failed", f"max_trials ({max_trials}) runs used and baseline-deployed never "
                               f"ran ok{why}; fix the command or the deployed flags and run again.")
        if self.retry_queue:
            return self.retry_queue.pop(0)
        in_flight = [r.plan for r in self.running]
        if self.space.evidence and not any(r.kind == "evidence" for r in records) and any(r.is_baseline and r.ok for r in records) \
                and not any(p.kind == "evidence" for p in in_flight):
            return Plan(TrialConfig("evidence", "evidence"), "evidence", "HLO dump of baseline-deployed")
        step = self.planner.next(records, self._arms(), in_flight, slot=slot, slots=self.live_slots())
        if step == "wait":
            return None
        if step == SAMPLE:
            return self._sample_plan()
        return step

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
            kept = tuple(v for v in p.choices if not self._rejected({p.name: v}, excluded))
            if any(not same_value(p, v, self.planner.deployed.get(p.name)) for v in kept):
                out.append(p if kept == p.choices else replace(p, choices=kept))
        return tuple(out)

    def _rejected(self, settings: dict[str, Any], excluded: set[str]) -> bool:
        config = config_of_settings(self.space, settings, kind="sampled", profile="sampled")
        tokens = set(render(self.space, config, inherited={}, default_of=self.default_of).xla_flags.split())
        return bool(tokens & excluded)

    def _sample_plan(self) -> Plan | Verdict | None:
        excluded = self._excluded()
        sampled = self._sampled_params(excluded)
        if not sampled:
            return Verdict("budget", "every value the sampler could propose was rejected by the installed XLA "
                                     f"({', '.join(sorted(excluded))}); nothing is left to sample")
        names = self._optuna_names if all(p in self.space.params for p in sampled) \
            else optuna_names(self.study, sampled)
        dists = {names[p.name]: distribution(p) for p in sampled}
        blames = self.planner.blames(self.records())
        for _ in range(MAX_RESAMPLES):
            trial = self.study.ask(fixed_distributions=dists)
            params = {p.name: trial.params[names[p.name]] for p in sampled}
            # Only what differs from the deployed job is set: a sampled point equal to a probe joins its arm.
            changed = changed_settings(self.space, params, self.planner.deployed)
            config = config_of_settings(self.space, changed, kind="sampled", profile="sampled")
            tokens = set(render(self.space, config, inherited={}, default_of=self.default_of).xla_flags.split())
            hit = sorted(tokens & excluded)
            blame = blamed_by(blames, changed)
            if not hit and blame is None and changed:
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
            settings_tokens = set(str(attrs.get("xla_flags") or "").split()) if not flags else set()
            tokens.update(flags or settings_tokens)
            self.study.set_user_attr("flagopt.excluded", sorted(tokens))
        if plan.retries < handling.retries:
            self.retry_queue.append(Plan(plan.config, plan.kind, f"retry {plan.retries + 1} after "
                                         f"{collected.failure.failure_class}", repeat_of=plan.repeat_of,
                                         retry_of=plan.retry_of if plan.retry_of is not None else trial.number,
                                         retries=plan.retries + 1))
        elif handling.stop_study:
            self._stop_requested = f"{collected.failure.failure_class} (retries exhausted)"
