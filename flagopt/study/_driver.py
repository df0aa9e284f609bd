"""The study driver's loop: plan -> ask -> render -> submit -> watch -> collect -> tell, until a verdict.

:class:`StudyRunner` is put together from four parts, one concern each: the loop (here), asking the sampler and
telling Optuna (:mod:`flagopt.study._asking`), launching, waiting and collecting (:mod:`flagopt.study._launching`),
and crash recovery, re-attach and shutdown (:mod:`flagopt.study._recovery`). It reports what happens through a :class:`~flagopt.study.StudyObserver`.
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
from flagopt.space import Space, TrialConfig
from flagopt.study import _records as R
from flagopt.decide import arms_of
from flagopt.study._domains import optuna_names
from flagopt.study._delete import set_aside_stale_trials
from flagopt.study._faults import as_storage_fault
from flagopt.study._fingerprint import bind_study
from flagopt.study._identity import check_identity, claim_folder, study_id
from flagopt.study._asking import Asking
from flagopt.study._launching import Launching, Running
from flagopt.study._driver_lock import driver_lock
from flagopt.study._observer import StudyObserver
from flagopt.decide import SAMPLE, Plan, Planner, SlotBroken, Verdict, arm_summary, runs_used
from flagopt.study._progress import Progress
from flagopt.study._recovery import Recovery
from flagopt.study._storage import open_storage, prepare_storage, shown_url, storage_file, storage_url, study_folder

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
class StudyRunner(Asking, Launching, Recovery):
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
