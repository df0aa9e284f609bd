"""The study driver: plan -> ask -> render -> submit -> watch -> collect -> tell, until a verdict."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from flagopt import failures, stats
from flagopt.errors import StudyError
from flagopt.executors import BaseExecutor, JobResult, TrialJob, TrialLaunch
from flagopt.render import RenderedTrial, config_from_params, render
from flagopt.space import Space, TrialConfig
from flagopt.study import _records as R
from flagopt.study._arms import arms_of, baseline_runs
from flagopt.study._collect import Collected, _jsonable, collect
from flagopt.study._domains import distribution, optuna_names
from flagopt.study._fingerprint import bind_study
from flagopt.study._lock import StudyLock
from flagopt.study._planner import SAMPLE, Plan, Planner, Verdict, arm_summary
from flagopt.study._observer import StudyObserver
from flagopt.study._progress import Progress
from flagopt.study._storage import open_storage, prepare_storage, storage_url, study_folder

#: How often at most a Slurm job pending on node trouble (``ReqNodeNotAvail``...) makes the driver ask ``sinfo``.
NODE_RECHECK_S = 10.0
#: How many times a sampled config may hit an excluded value before we give up sampling.
MAX_RESAMPLES = 30
EVIDENCE_FLAGS = ("--xla_dump_hlo_as_text",)
#: the stops that --detach answers by leaving the jobs running (a pending deadline or a failure still cancels)
DETACHING_SIGNALS = ("SIGINT", "SIGTERM")


class PinnedNodesDown(StudyError):
    """A pinned Slurm node cannot run jobs any more: the study stops (verdict ``node-down``) rather than move on."""


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    if name == "gp":
        try:
            import torch  # noqa: F401  (GPSampler needs it; say so up front rather than at the first ask)
        except ImportError:
            raise StudyError("--sampler", "gp", "GPSampler needs PyTorch: pip install torch, or use --sampler tpe") from None
        return optuna.samplers.GPSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(multivariate=True, group=True, seed=seed, n_startup_trials=8)


@dataclass
class Running:
    plan: Plan
    trial: optuna.trial.Trial
    job: TrialJob
    launch: TrialLaunch
    submitted_at: float


@dataclass
class StudyRunner:
    """Runs (or resumes) the study of one space."""

    space: Space
    executor: BaseExecutor
    storage: str | None = None
    sampler: str | None = None
    n_trials: int | None = None
    force: bool = False
    detach: bool = False
    rebaseline: bool = False
    max_in_flight: int = 1
    progress: StudyObserver = field(default_factory=Progress)  # where the run reports (console, live view...)
    default_of: Callable[[str], Any] | None = None
    preflight_excluded: tuple[str, ...] = ()
    poll_s: float = 0.5

    def __post_init__(self) -> None:
        self.folder = study_folder(self.storage, self.space.name)
        prepare_storage(self.storage, self.space.name)  # before the study exists: a bad path writes nothing
        sampler_name = self.sampler or self.space.sampler
        self.study = optuna.create_study(
            study_name=self.space.name, storage=open_storage(self.storage), direction="maximize",
            sampler=make_sampler(sampler_name, self.space.seed), load_if_exists=True)
        stored = len(self.study.get_trials(deepcopy=False))
        if self.space.seed is not None and stored:
            # A seeded sampler re-created on resume would replay the first invocation's proposals (the same params
            # again): offset the seed by the trials already stored, which keeps a fresh study reproducible.
            self.study.sampler = make_sampler(sampler_name, self.space.seed + stored)
        self.planner = Planner(self.space)
        self._optuna_names = optuna_names(self.study, self.space.params)  # a changed domain gets a fresh name
        self.running: list[Running] = []
        self.retry_queue: list[Plan] = []
        self.launched = 0
        self._stop_requested: str | None = None
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
        lock = StudyLock(self.folder, self.space.name)
        lock.acquire(force=self.force)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._record_study()
            if self.preflight_excluded:
                self.study.set_user_attr("flagopt.excluded", sorted(self._excluded() | set(self.preflight_excluded)))
            self._recover()
            return self._loop()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self._shutdown()
            lock.release()
            self.progress.close()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._stop_requested = signal.Signals(signum).name

    def _loop(self) -> Verdict | None:
        verdict: Verdict | None = None
        while True:
            if self._stop_requested:
                verdict = Verdict("stopped", f"stopped by {self._stop_requested}")
                break
            while len(self.running) < self.max_in_flight and not self._budget_spent():
                self._check_pinned_nodes()  # never submit to a pinned node that went down
                step = self._next_plan()
                if isinstance(step, Verdict):
                    verdict = step
                    break
                if step is None:
                    break
                self._launch(step)
            if verdict is not None and not self.running:
                break
            if not self.running:
                # Out of launches (--trials): still say where the study stands, without asking the sampler.
                step = self.planner.next(self.records(), self._arms(), [])
                verdict = step if isinstance(step, Verdict) else None
                break
            self._wait_one()
            if verdict is not None:
                verdict = None  # a run finished after the verdict was drawn: decide again with it
        if verdict is not None and verdict.reason != "stopped":
            self.study.set_user_attr("flagopt.verdict", verdict.to_json())
        self.study.set_user_attr("flagopt.arms", [arm_summary(a) for a in self._arms()])
        self.progress.verdict(self.study, verdict)
        return verdict

    def _budget_spent(self) -> bool:
        return self.n_trials is not None and self.launched >= self.n_trials

    def _arms(self):
        return arms_of(self.records(), self.space.noise, self.space.metric.direction)

    def _next_plan(self) -> Plan | Verdict | None:
        records = self.records()
        max_trials = self.space.stop.max_trials
        if sum(1 for r in records if r.status != R.INVALID) >= max_trials:
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
        step = self.planner.next(records, self._arms(), in_flight)
        if step == "wait":
            return None
        if step == SAMPLE:
            return self._sample_plan()
        return step

    # -- asking ---------------------------------------------------------------------------------------------------
    def _excluded(self) -> set[str]:
        return set(self.study.user_attrs.get("flagopt.excluded", []))

    def _sample_plan(self) -> Plan | Verdict | None:
        names = self._optuna_names
        dists = {names[p.name]: distribution(p) for p in self.space.params}
        excluded = self._excluded()
        for _ in range(MAX_RESAMPLES):
            trial = self.study.ask(fixed_distributions=dists)
            config = config_from_params(self.space, {p.name: trial.params[names[p.name]] for p in self.space.params})
            tokens = set(render(self.space, config, inherited={}, default_of=self.default_of).xla_flags.split())
            hit = sorted(tokens & excluded)
            if not hit:
                self._pending_trial = trial
                return Plan(config, "sampled", "sampler")
            # The installed XLA rejected this value before: never spend a run on it again.
            self._tell_static(trial, config, "sampled", R.INVALID, failure_class="unknown-flag",
                              failure_reason=f"excluded: {', '.join(hit)} was rejected by the installed XLA")
        return Verdict("budget", f"the sampler kept proposing excluded flag values ({', '.join(sorted(excluded))}); "
                                 "remove them from the space")

    def _tell_static(self, trial: optuna.trial.Trial, config: TrialConfig, kind: str, status: str, **attrs: Any) -> None:
        self._set_attrs(trial, {"kind": kind, "profile": config.profile, "config_key": config.config_key,
                                "settings": config.settings(), "status": status,
                                "epoch": int(self.study.user_attrs.get("flagopt.epoch", 0)), **attrs})
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _set_attrs(self, trial: optuna.trial.Trial | int, attrs: dict[str, Any]) -> None:
        trial_id = trial._trial_id if isinstance(trial, optuna.trial.Trial) else trial
        for key, value in attrs.items():
            self.study._storage.set_trial_user_attr(trial_id, key, _jsonable(value))

    # -- launching ----------------------------------------------------------------------------------------------
    def _launch(self, plan: Plan) -> None:
        trial = self._pending_trial if plan.kind == "sampled" else None
        self._pending_trial = None
        if trial is None:
            trial = self.study.ask()
        trial_dir = self.folder / "trials" / str(trial.number)
        trial_dir.mkdir(parents=True, exist_ok=True)
        extra = ()
        if plan.kind == "evidence":
            extra = (f"--xla_dump_to={trial_dir / 'hlo'}", *EVIDENCE_FLAGS)
        rendered = render(self.space, plan.config, default_of=self.default_of, extra_flags=extra)
        hit = sorted(set(rendered.xla_flags.split()) & self._excluded())
        if hit:
            # Known to abort at XLA start (pre-flight or an earlier trial): record it, spend no allocation on it.
            self._tell_static(trial, plan.config, plan.kind, R.INVALID, failure_class="unknown-flag",
                              failure_reason=f"not run: the installed XLA rejects {', '.join(hit)}",
                              xla_flags=rendered.xla_flags)
            self.progress.note(f"trial {trial.number} {plan.config.profile}: not run, XLA rejects {', '.join(hit)}")
            return
        launch = self._launch_spec(rendered, trial_dir)
        write_trial_files(trial_dir, rendered)
        submitted_at = time.time()
        self._set_attrs(trial, {
            "kind": plan.kind, "profile": plan.config.profile, "config_key": plan.config.config_key,
            "settings": plan.config.settings(), "reason": plan.reason, "repeat_of": plan.repeat_of,
            "retry_of": plan.retry_of, "retries": plan.retries, "status": R.RUNNING,
            "epoch": int(self.study.user_attrs.get("flagopt.epoch", 0)),
            "xla_flags": rendered.xla_flags, "libtpu_init_args": rendered.libtpu_init_args, "env": rendered.env,
            "argv": list(rendered.argv), "trial_dir": str(trial_dir), "submitted_at": submitted_at,
            "render_notes": list(rendered.notes), "executor": self.executor.kind, **plan.attrs,
        })
        job = self.executor.submit(launch)
        self._set_attrs(trial, {"job_id": job.job_id})
        self.running.append(Running(plan, trial, job, launch, submitted_at))
        self.launched += 1
        self.progress.launched(trial.number, plan, job.job_id)

    def _launch_spec(self, rendered: RenderedTrial, trial_dir: Path) -> TrialLaunch:
        f = self.space.failures
        return TrialLaunch(argv=rendered.argv, env=rendered.env, workdir=rendered.workdir, trial_dir=str(trial_dir),
                           timeout_s=self.space.timeout_min * 60, hang_s=f.hang_min * 60,
                           init_timeout_s=f.init_timeout_min * 60)

    # -- waiting and collecting --------------------------------------------------------------------------------
    def _wait_one(self) -> None:
        first = self.running[0]
        last = self.space.metric.window[1]
        while True:
            for run in list(self.running):
                status = run.job.status()
                if status.done:
                    self.running.remove(run)
                    result = run.job.result()
                    self._finish(run, result)
                    if result.state != "FINISHED":
                        self._check_pinned_nodes()  # a killed or cancelled job can be the first sign of a lost node
                    return
                pending_for = time.time() - run.submitted_at
                deadline = self._pending_deadline()
                if status.state == "PENDING" and "Node" in status.detail \
                        and time.time() - self._nodes_checked_at > NODE_RECHECK_S:
                    self._check_pinned_nodes()  # ReqNodeNotAvail, NodeDown: waits forever if a pinned node is down
                if status.state == "PENDING" and deadline is not None and pending_for > deadline:
                    self._check_pinned_nodes()
                    run.job.cancel()
                    self._stop_requested = self._stop_requested or "pending-deadline"
                    self.progress.note(f"trial {run.trial.number} still PENDING after {pending_for:.0f} s "
                                       f"({status.detail}); cancelled")
            if self._stop_requested in DETACHING_SIGNALS and self.detach:
                return  # leave the jobs running (_shutdown says so); the next `run` re-attaches them
            if self._stop_requested and not self.detach:
                for run in self.running:
                    run.job.cancel()
            self.progress.waiting(first.trial.number, first.launch.trial_dir, last, self._best())
            time.sleep(self.poll_s)

    def _check_pinned_nodes(self) -> None:
        """Stop the study with verdict ``node-down`` when a pinned Slurm node cannot run jobs.

        Trials are compared on the pinned hardware only, so the study never carries on elsewhere. The verdict and
        the arms so far are stored before :class:`PinnedNodesDown` is raised; ``run`` then cancels the jobs still
        in flight.
        """
        nodelist = self.executor.describe().get("nodelist") if self.executor.kind == "slurm" else None
        if not nodelist:
            return
        from flagopt.executors import check_pinned_nodes

        self._nodes_checked_at = time.time()
        try:
            check_pinned_nodes(str(nodelist))
        except StudyError as exc:
            verdict = Verdict("node-down", f"stopped: {exc.reason}")
            self.study.set_user_attr("flagopt.verdict", verdict.to_json())
            self.study.set_user_attr("flagopt.arms", [arm_summary(a) for a in self._arms()])
            raise PinnedNodesDown(exc.source, exc.key, exc.reason) from exc

    def _pending_deadline(self) -> float | None:
        if self.executor.kind != "slurm":
            return None
        return self.space.executor.slurm.pending_deadline_min * 60

    def _best(self) -> str:
        best = None
        for arm in self._cached_arms:
            if arm.estimate is not None and (best is None or arm.estimate.gain > best.estimate.gain):
                best = arm
        return f"{best.label} {best.estimate.gain:+.1%}" if best else "-"

    def _finish(self, run: Running, result: JobResult) -> None:
        records = self.records()
        baselines = baseline_runs(records, self.space.metric.direction)
        reference = next((r.attrs.get("final_loss") for r in records if r.is_baseline and r.ok), None)
        if run.plan.kind in (R.BASELINE, "evidence") or isinstance(reference, str):
            reference = math.nan  # the baseline is its own reference; a stored "nan" is NaN
        collected = collect(self.space, result, baselines=baselines,
                            reference_loss=reference if isinstance(reference, (int, float)) else None)
        collected.attrs.update({f"scheduler_{k}": v for k, v in run.job.times().items() if v is not None})
        if run.plan.kind == "evidence" and collected.status == R.OK:
            collected.attrs.update(evidence_summary(Path(run.launch.trial_dir) / "hlo"))
        if self._stop_requested and collected.status != R.OK:
            collected.status = R.CANCELLED
            collected.attrs.setdefault("failure_reason", f"cancelled ({self._stop_requested})")
        self._tell(run.trial, run.plan, collected)
        self._cached_arms = self._arms()
        self.progress.told(self.study, run.trial.number, run.plan, collected)

    def _tell(self, trial: optuna.trial.Trial, plan: Plan, collected: Collected) -> None:
        attrs = dict(collected.attrs)
        attrs["status"] = collected.status
        self._set_attrs(trial, attrs)
        handling = collected.handling
        if collected.status == R.OK:
            self.study.tell(trial, collected.value)
            return
        if collected.status == R.INFEASIBLE:
            # OOM: a constraint the samplers read, so they steer away from the region.
            trial.set_constraint("oom", 1.0)
            self.study.tell(trial, -1.0)
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

    # -- crash safety -------------------------------------------------------------------------------------------
    def _recover(self) -> None:
        """Trials left RUNNING by a driver that died: re-attach to their jobs or collect what they left."""
        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            attrs = frozen.user_attrs
            job_id = attrs.get("job_id")
            plan = Plan(_config_from_attrs(attrs), attrs.get("kind", "sampled"), "re-attached",
                        repeat_of=attrs.get("repeat_of"), retry_of=attrs.get("retry_of"), retries=attrs.get("retries", 0))
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            launch = None
            if attrs.get("trial_dir"):
                rendered = RenderedTrial(tuple(attrs.get("argv") or ()), attrs.get("env") or {}, str(self.space.workdir))
                launch = self._launch_spec(rendered, Path(attrs["trial_dir"]))
            job = self.executor.attach(str(job_id), launch) if job_id and launch else None
            if job is None:
                self._tell(trial, plan, Collected(R.CANCELLED, {"failure_reason": "driver died before the job could be "
                                                                "found again"}))
                continue
            self.progress.note(f"re-attached trial {frozen.number} (job {job_id})")
            self.running.append(Running(plan, trial, job, launch, float(attrs.get("submitted_at") or time.time())))

    def _shutdown(self) -> None:
        for run in self.running:
            if self.detach:
                self.progress.note(f"left trial {run.trial.number} (job {run.job.job_id}) running; "
                                   "`flagopt run` again re-attaches it")
                continue
            run.job.cancel()
            try:
                result = run.job.result(timeout_s=30)
            except Exception:  # the job is gone; record what we know
                result = JobResult(run.job.job_id, "CANCELLED", ())
            self._tell(run.trial, run.plan, Collected(R.CANCELLED, {"failure_reason": "cancelled: the driver stopped",
                                                                    "job_state": result.state}))
        self.running.clear()


def evidence_summary(dump_dir: Path) -> dict[str, Any]:
    """What the evidence run's HLO dump says, small enough for a trial attr (the full analysis stays on disk)."""
    from flagopt.errors import FlagoptError
    from flagopt.evidence import analyze, suggest_brackets

    try:
        ev = analyze(dump_dir)
    except FlagoptError as exc:
        return {"evidence_error": exc.message}
    (dump_dir.parent / "evidence.json").write_text(ev.to_json())
    return {"evidence": {kind: summary.to_dict() for kind, summary in ev.summary().items()},
            "evidence_module": str(ev.source) if hasattr(ev, "source") else "",
            "evidence_brackets": {k: list(v) for k, v in suggest_brackets(ev).items()},
            "evidence_path": str(dump_dir.parent / "evidence.json")}


def _config_from_attrs(attrs: dict[str, Any]) -> TrialConfig:
    s = attrs.get("settings") or {}
    kind = attrs.get("kind", "sampled")
    return TrialConfig(kind=kind if kind in (R.BASELINE, R.NO_ENV, "evidence") else "repeat",
                       profile=attrs.get("profile", kind), xla=tuple((s.get("xla") or {}).items()),
                       libtpu=tuple((s.get("libtpu") or {}).items()), env=tuple((s.get("env") or {}).items()),
                       args=tuple((s.get("args") or {}).items()))


def write_trial_files(trial_dir: Path, rendered: RenderedTrial) -> None:
    """``command.json`` for tools, ``rerun.sh`` for people: the exact command, every value shell-quoted."""
    (trial_dir / "command.json").write_text(json.dumps(
        {"argv": list(rendered.argv), "env": rendered.env, "workdir": rendered.workdir}, indent=2))
    lines = ["#!/usr/bin/env bash", "# Re-run this trial by hand (written by flagopt).", "set -euo pipefail",
             f"cd {shlex.quote(rendered.workdir)}"]
    for name, value in rendered.env.items():
        lines.append(f"unset {name}" if value is None else f"export {name}={shlex.quote(value)}")
    lines.append(shlex.join(rendered.argv))
    path = trial_dir / "rerun.sh"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
