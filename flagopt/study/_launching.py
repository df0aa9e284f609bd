"""Launching a trial, waiting for the runs in flight, and collecting what they left (part of the study driver).

:class:`Launching` is a part of :class:`flagopt.study.StudyRunner`: its methods use the runner's ``space``,
``executor``, ``study``, ``folder``, ``running``, ``progress`` and its telling methods.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from flagopt.errors import StudyError
from flagopt.executors import JobResult, TrialJob, TrialLaunch
from flagopt.render import RenderedTrial, render
from flagopt.study import _records as R
from flagopt.decide import baseline_runs
from flagopt.study._collect import Collected, collect
from flagopt.decide import Plan, Verdict, arm_summary
from flagopt.study._faults import WRITE_FAULT_WORDS, StorageFault
from flagopt.study._same_program import DUMP_FOLDER, compare_with_deployed, dumps_program

#: How often at most a Slurm job pending on node trouble (``ReqNodeNotAvail``...) makes the driver ask ``sinfo``.
NODE_RECHECK_S = 10.0
EVIDENCE_FLAGS = ("--xla_dump_hlo_as_text",)
#: the stops that --detach answers by leaving the jobs running (a pending deadline or a failure still cancels)
DETACHING_SIGNALS = ("SIGINT", "SIGTERM")


class PinnedNodesDown(StudyError):
    """A pinned Slurm node cannot run jobs any more: the study stops (verdict ``node-down``) rather than move on."""


@dataclass
class Running:
    plan: Plan
    trial: optuna.trial.Trial
    job: TrialJob
    launch: TrialLaunch
    submitted_at: float
    #: the end of the job ahead of it on its slot: waiting behind the study's own job is not a pending problem
    queued_until: float = 0.0


class Launching:
    """Submitting a planned trial, polling the runs in flight, and collecting each one that ends."""

    # -- launching ----------------------------------------------------------------------------------------------
    def _launch(self, plan: Plan) -> None:
        trial = self._pending_trial if plan.kind == "sampled" else None
        self._pending_trial = None
        if trial is None:
            trial = self.study.ask()
        trial_dir = self.folder / "trials" / str(trial.number)
        trial_dir.mkdir(parents=True, exist_ok=True)
        extra = ()
        if plan.kind == "evidence" or dumps_program(self.space, plan.kind, plan.config, self.records):
            extra = (f"--xla_dump_to={trial_dir / DUMP_FOLDER}", *EVIDENCE_FLAGS)
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
            "render_notes": list(rendered.notes), "executor": self.executor.kind, "slot": plan.slot, **plan.attrs,
        })
        try:
            job = self.executor.submit(launch, plan.slot)
        except BaseException as exc:
            # sbatch refused the job (a bad partition, account, node): it never ran. Record that before the error
            # reaches the user, or the trial stays RUNNING and `status` shows a phantom job until the next `run`.
            why = exc.message if isinstance(exc, StudyError) else (str(exc) or type(exc).__name__)
            self._set_attrs(trial, {"status": R.INVALID, "failure_class": "submit-failed",
                                    "failure_reason": f"not run: the job could not be submitted ({why})"})
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        self._set_attrs(trial, {"job_id": job.job_id})
        self._track(Running(plan, trial, job, launch, submitted_at))
        self.launched += 1
        self.progress.launched(trial.number, plan, job.job_id)

    def _track(self, run: Running) -> None:
        """Watch ``run`` from now on; behind an earlier job of the study on its slot, its pending clock waits."""
        if any(r.plan.slot == run.plan.slot and r.submitted_at <= run.submitted_at for r in self.running):
            run.queued_until = math.inf  # until the job ahead of it ends (_wait_one sets the time)
            run.job.queued_behind_until(math.inf)
        self.running.append(run)

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
                    now = time.time()
                    for behind in self.running:
                        if behind.plan.slot == run.plan.slot:
                            behind.queued_until = now
                            behind.job.queued_behind_until(now)
                    result = run.job.result()
                    self._finish(run, result)
                    if result.state != "FINISHED":
                        self._check_pinned_nodes(run.plan.slot)  # a killed job can be the first sign of a lost node
                    return
                pending_for = time.time() - max(run.submitted_at, run.queued_until)
                deadline = self._pending_deadline()
                if status.state == "PENDING" and "Node" in status.detail \
                        and time.time() - self._nodes_checked_at > NODE_RECHECK_S:
                    self._check_pinned_nodes(run.plan.slot)  # ReqNodeNotAvail, NodeDown: waits forever otherwise
                if run not in self.running:
                    return  # its slot was lost and the job cancelled: the loop plans again
                if status.state == "PENDING" and deadline is not None and pending_for > deadline:
                    self._check_pinned_nodes(run.plan.slot)
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

    def _check_pinned_nodes(self, slot: str | None = None) -> None:
        """Retire a slot whose pinned Slurm node cannot run jobs; stop (verdict ``node-down``) when none is left.

        Trials are compared on the pinned hardware only, so a lost slot never gets other nodes substituted: the
        study goes on with the other slots. ``slot=None`` checks every live slot.
        """
        self._nodes_checked_at = time.time()
        for name in [slot] if slot is not None else self.live_slots():
            if name in self.lost_slots:
                continue
            problem = self.executor.slot_problem(name)
            if problem is not None:
                self._lose_slot(name, problem)

    def _lose_slot(self, slot: str, reason: str) -> None:
        """Stop using ``slot``: cancel its jobs, say so, record it; with no slot left, the ``node-down`` verdict.

        The verdict and the arms so far are stored before :class:`PinnedNodesDown` is raised; ``run`` then cancels
        the jobs still in flight.
        """
        self.lost_slots[slot] = reason
        self.study.set_user_attr("flagopt.lost_slots", dict(self.lost_slots))
        for run in [r for r in self.running if r.plan.slot == slot]:
            run.job.cancel()
            self.running.remove(run)
            self._tell(run.trial, run.plan, Collected(R.CANCELLED, {"failure_reason": f"cancelled: slot {slot} lost "
                                                                    f"({reason})", **R.CANCELLED_WITH_DRIVER}))
        left = self.live_slots()
        if not left:
            message = f"stopped: {reason}" if len(self.slots) == 1 else \
                f"stopped: every slot is lost ({self._lost_sentence()})"
            verdict = Verdict("node-down", message)
            self.study.set_user_attr("flagopt.verdict", verdict.to_json())
            self.study.set_user_attr("flagopt.arms", [arm_summary(a) for a in self._arms()])
            key = "nodelist" if len(self.slots) == 1 else "slots"
            raise PinnedNodesDown("slurm", key, reason if len(self.slots) == 1 else message)
        self.progress.say(f"slot {slot} lost: {reason}; it gets no more trials and no other nodes, the study goes on "
                           f"with {len(left)} slot{'s' if len(left) != 1 else ''} ({', '.join(left)})")

    def _lost_sentence(self) -> str:
        return "slots lost: " + "; ".join(f"{s} ({why})" for s, why in self.lost_slots.items())

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
        fault = write_fault(result)
        if fault:
            # The trial's folder could not be written (a full disk): it measured nothing about its configuration.
            self._tell(run.trial, run.plan, Collected(R.CANCELLED, {"failure_reason": f"not measured: {fault}",
                                                                    **R.CANCELLED_WITH_DRIVER}))
            raise StorageFault(str(self.folder), self.space.name, f"trial {run.trial.number}'s folder could not be "
                               f"written ({fault}): the study stopped; the trial was not counted and runs again. "
                               "Free space there and run again")
        records = self.records()
        baselines = baseline_runs(records, self.space.metric.direction)
        reference = next((r.attrs.get("final_loss") for r in records if r.is_baseline and r.ok), None)
        if run.plan.kind in (R.BASELINE, "evidence") or isinstance(reference, str):
            reference = math.nan  # the baseline is its own reference; a stored "nan" is NaN
        collected = collect(self.space, result, baselines=baselines,
                            reference_loss=reference if isinstance(reference, (int, float)) else None,
                            slot=run.plan.slot)
        collected.attrs.update({f"scheduler_{k}": v for k, v in run.job.times().items() if v is not None})
        dump = Path(run.launch.trial_dir) / DUMP_FOLDER
        if run.plan.kind == "evidence" and collected.status == R.OK:
            collected.attrs.update(evidence_summary(dump))
        elif collected.status == R.OK and dump.is_dir():
            # An XLA-only probe or profile: is it the deployed job's program? (then its effect is exactly zero)
            collected.attrs.update(compare_with_deployed(dump, records))
            if collected.attrs.get("same_program"):
                self.progress.note(f"trial {run.trial.number} {run.plan.config.profile}: the deployed job's program "
                                   "(its flags change nothing XLA emits): its effect is taken as zero")
        if self._stop_requested and collected.status != R.OK:
            collected.status = R.CANCELLED
            collected.attrs.setdefault("failure_reason", f"cancelled ({self._stop_requested})")
            collected.attrs.update(R.CANCELLED_WITH_DRIVER)  # the stop's signal reached the job too: not its doing
        self._tell(run.trial, run.plan, collected)
        self._cached_arms = self._arms()
        self.progress.told(self.study, run.trial.number, run.plan, collected)


def write_fault(result: JobResult) -> str | None:
    """Why a job could not write its trial folder (its log, submitit's files), or ``None``."""
    rank0 = result.rank0
    if rank0 is not None and rank0.extra.get("write_fault"):
        return rank0.extra["write_fault"]
    for line in reversed((result.error or "").splitlines()):
        for words in WRITE_FAULT_WORDS:
            if words in line:  # e.g. "OSError: [Errno 28] No space left on device: '/nfs/.../rank0.log'"
                return words + line.split(words, 1)[1].strip()[:200].replace(": '", " (", 1).rstrip("'") + \
                    (")" if ": '" in line.split(words, 1)[1] else "")
    return None


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
