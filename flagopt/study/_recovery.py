"""After a driver died: re-attach to the jobs it left, or record them; on stop, cancel or leave the runs in flight.

:class:`Recovery` is a part of :class:`flagopt.study.StudyRunner`: its methods use the runner's ``space``,
``executor``, ``study``, ``running``, ``detach``, ``progress``, ``_launch_spec`` and ``_tell``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna

from flagopt.executors import JobResult
from flagopt.render import RenderedTrial
from flagopt.space import TrialConfig
from flagopt.study import _records as R
from flagopt.study._collect import Collected
from flagopt.study._launching import Running
from flagopt.decide import Plan


class Recovery:
    """Crash safety: re-attach or record the trials a dead driver left RUNNING; cancel or leave runs at the end."""

    def _recover(self) -> None:
        """Trials left RUNNING by a driver that died: re-attach to their jobs or collect what they left."""
        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            attrs = frozen.user_attrs
            job_id = attrs.get("job_id")
            plan = Plan(_config_from_attrs(attrs), attrs.get("kind", "sampled"), "re-attached",
                        repeat_of=attrs.get("repeat_of"), retry_of=attrs.get("retry_of"), retries=attrs.get("retries", 0),
                        slot=str(attrs.get("slot") or ""),
                        attrs={"phase": attrs["phase"]} if attrs.get("phase") else {})  # its retry keeps the phase
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            launch = None
            if attrs.get("trial_dir"):
                rendered = RenderedTrial(tuple(attrs.get("argv") or ()), attrs.get("env") or {}, str(self.space.workdir))
                launch = self._launch_spec(rendered, Path(attrs["trial_dir"]))
            job = self.executor.attach(str(job_id), launch) if job_id and launch else None
            if job is None:
                self._tell(trial, plan, Collected(R.CANCELLED, {"failure_reason": "driver died before the job could be "
                                                                "found again", **R.CANCELLED_WITH_DRIVER}))
                continue
            where = f" on slot {plan.slot}" if plan.slot and len(self.slots) > 1 else ""
            self.progress.note(f"re-attached trial {frozen.number} (job {job_id}){where}")
            self._track(Running(plan, trial, job, launch, float(attrs.get("submitted_at") or time.time())))

    def _shutdown(self, decided: bool = False) -> None:
        """Cancel the runs in flight, or leave them (``--detach``) unless the study ``decided``: they are not needed."""
        for run in self.running:
            if self.detach and not decided:
                self.progress.note(f"left trial {run.trial.number} (job {run.job.job_id}) running; "
                                   "`flagopt run` again re-attaches it")
                continue
            run.job.cancel()
            try:
                result = run.job.result(timeout_s=30)
            except Exception:  # the job is gone; record what we know
                result = JobResult(run.job.job_id, "CANCELLED", ())
            why = "cancelled: the study had decided" if decided else "cancelled: the driver stopped"
            self._tell(run.trial, run.plan, Collected(R.CANCELLED, {"failure_reason": why, "job_state": result.state,
                                                              **R.CANCELLED_WITH_DRIVER}))
        self.running.clear()


def _config_from_attrs(attrs: dict[str, Any]) -> TrialConfig:
    s = attrs.get("settings") or {}
    kind = attrs.get("kind", "sampled")
    return TrialConfig(kind=kind if kind in (R.BASELINE, R.NO_ENV, "evidence") else "repeat",
                       profile=attrs.get("profile", kind), xla=tuple((s.get("xla") or {}).items()),
                       libtpu=tuple((s.get("libtpu") or {}).items()), env=tuple((s.get("env") or {}).items()),
                       args=tuple((s.get("args") or {}).items()))

