"""Carrying out an A/B: submit each planned run through the study's executor, collect it as a study would, record it.

The deployed job (arm 0) runs as the space renders ``baseline-deployed``; a patch arm runs the same command with the
patch file sourced by bash on top, exactly as a user deploys an export (``. patch.env.sh && exec command``). The
script is fixed text: the patch path and the command reach bash as arguments, never as shell text.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flagopt import failures
from flagopt.ab._design import round_order
from flagopt.ab._estimate import log_ratio
from flagopt.ab._record import DONE, RUNNING, STOPPED, AbRecord
from flagopt.ab._summary import FINDING_STATUSES, summarize
from flagopt.executors import BaseExecutor, JobResult, TrialJob, TrialLaunch
from flagopt.render import RenderedTrial, baseline_configs, render
from flagopt.space import Space
from flagopt.study import collect

#: bash sources the patch ($0) and replaces itself with the command ("$@"), plus the workload arguments the patch sets.
SOURCE_THEN_EXEC = '. "$0" >&2 || exit 97; exec "$@" "${FLAGOPT_WORKLOAD_ARGS[@]}"'
#: the attr of a run the driver cancelled (its stop, or a job it could not find again): it measured nothing, runs again
BY_DRIVER = "driver"


@dataclass
class Active:
    entry: dict[str, Any]
    job: TrialJob
    reattached: bool = False


class AbStopped(Exception):
    """The A/B cannot go on (the deployed job fails, a slot is lost...); the record says what was measured."""


class AbRunner:
    """Runs the rounds of ``record`` that are not done yet, one run at a time per slot of ``executor``.

    Args:
        space: the study's space (command, metric, failures, timeouts).
        executor: the study's executor kind, with its folder inside the record's.
        record: a new or resumed record; its ``arms`` give the patch files.
        say: where progress lines go.
        default_of: image defaults of flags, for rendering (as the study renders).
    """

    def __init__(self, space: Space, executor: BaseExecutor, record: AbRecord, *, say: Callable[[str], None],
                 default_of: Callable[[str], Any] | None = None, poll_s: float = 0.5) -> None:
        self.space = space
        self.executor = executor
        self.record = record
        self.say = say
        self.poll_s = poll_s
        self.rendered: RenderedTrial = render(space, baseline_configs(space)[0], default_of=default_of)
        self.active: dict[str, Active] = {}
        self.stop_reason: str | None = None
        #: which driver session submitted a run: a round split over two sessions is flagged in the summary
        self.session = f"{socket.gethostname()}:{os.getpid()}:{time.time():.0f}"

    # -- the plan, read from the record -------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.record.arms)

    @property
    def pairs(self) -> int:
        return int(self.record.doc["pairs"])

    def _entries(self, rnd: int, arm: int) -> list[dict[str, Any]]:
        return [r for r in self.record.runs if r["round"] == rnd and r["arm"] == arm
                and r.get("cancelled_by") != BY_DRIVER]

    def _settled(self, rnd: int, arm: int) -> bool:
        """Measured, failed for good, or out of retries (a flake runs once more, once)."""
        entries = self._entries(rnd, arm)
        if not entries:
            return False
        last = entries[-1]
        if last["status"] == RUNNING:
            return False
        retries = failures.HANDLING[last["failure_class"]].retries if last.get("failure_class") in failures.HANDLING else 0
        return last["status"] == "ok" or retries == 0 or len(entries) >= 2

    def dropped(self) -> set[int]:
        """Patches that failed for a reason of their own (an OOM is a finding): they run no more."""
        return {r["arm"] for r in self.record.runs if r["arm"] > 0 and r.get("status") in FINDING_STATUSES}

    def _round_slot(self, rnd: int) -> str | None:
        slots = {r.get("slot", "") for r in self.record.runs if r["round"] == rnd}
        return next(iter(slots)) if slots else None

    def _next(self, slot: str) -> tuple[int, int] | None:
        """The next (round, arm) for ``slot``: its own unfinished round first, else the first round nobody started."""
        dropped = self.dropped()
        if len(dropped) == self.k - 1:
            return None  # every patch fails here: the deployed job alone measures nothing
        busy = {(a.entry["round"]) for a in self.active.values()}
        for own in (True, False):
            for rnd in range(self.pairs):
                owner = self._round_slot(rnd)
                if (own and owner != slot) or (not own and owner is not None) or rnd in busy:
                    continue
                for arm in round_order(rnd, self.k):
                    if arm not in dropped and not self._settled(rnd, arm):
                        return rnd, arm
        return None

    # -- the loop -----------------------------------------------------------------------------------------------
    def run(self) -> str:
        """Run to the end or to a stop; returns the record's final state (``done`` or ``stopped``)."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._reattach()
            self._loop()
        except AbStopped as exc:
            self.stop_reason = str(exc)
        except BaseException as exc:  # sbatch refused, storage full...: the record says so, the CLI prints the error
            self.stop_reason = self.stop_reason or f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self._cancel_active()
            state = STOPPED if self.stop_reason else DONE
            self.record.doc.update(state=state, stop_reason=self.stop_reason, summary=summarize(self.record.doc))
            self.record.save()
        return state

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop_reason = f"stopped by {signal.Signals(signum).name}"

    def _loop(self) -> None:
        slots = [s or "" for s in self.executor.slots]
        while not self.stop_reason:
            for slot in slots:
                if slot not in self.active and not self.stop_reason:
                    nxt = self._next(slot)
                    if nxt is not None:
                        self._submit(slot, *nxt)
            if not self.active:
                return
            for slot, act in list(self.active.items()):
                if self.stop_reason:
                    break
                if act.job.status().done:
                    del self.active[slot]
                    self._finish(act, act.job.result())
            time.sleep(self.poll_s)

    def _launch(self, entry: dict[str, Any]) -> TrialLaunch:
        arm = self.record.arms[entry["arm"]]
        argv = tuple(self.rendered.argv)
        if arm.get("patch"):
            argv = ("bash", "-c", SOURCE_THEN_EXEC, str(arm["patch"]), *argv)
        f = self.space.failures
        return TrialLaunch(argv=argv, env=self.rendered.env, workdir=self.rendered.workdir,
                           trial_dir=entry["trial_dir"], timeout_s=self.space.timeout_min * 60, hang_s=f.hang_min * 60,
                           init_timeout_s=f.init_timeout_min * 60)

    def _submit(self, slot: str, rnd: int, arm: int) -> None:
        attempt = len(self._entries(rnd, arm))
        name = self.record.arms[arm]["name"]
        before = sum(1 for r in self.record.runs if r["round"] == rnd and r["arm"] == arm)  # cancelled ones too
        trial_dir = self.record.dir / "runs" / f"r{rnd + 1:02d}-{name}-{before}"
        trial_dir.mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"round": rnd, "arm": arm, "attempt": attempt, "slot": slot, "status": RUNNING,
                                 "trial_dir": str(trial_dir), "submitted_at": time.time(), "session": self.session}
        launch = self._launch(entry)
        job = self.executor.submit(launch, slot)
        entry.update(job_id=job.job_id, argv=list(launch.argv))
        self.record.runs.append(entry)
        self.record.save()
        self.active[slot] = Active(entry, job)
        where = f" on {slot}" if slot else ""
        self.say(f"round {rnd + 1}/{self.pairs} {name} ({self.record.arms[arm]['label']}): started{where} "
                 f"[job {job.job_id}]" + (f", attempt {attempt + 1}" if attempt else ""))

    def _reattach(self) -> None:
        """Jobs an earlier driver left running: follow them again, or run them anew when they are gone."""
        for entry in self.record.runs:
            if entry["status"] != RUNNING:
                continue
            job = self.executor.attach(str(entry.get("job_id")), self._launch(entry)) if entry.get("job_id") else None
            if job is None or entry.get("slot", "") in self.active:
                entry.update(status="cancelled", cancelled_by=BY_DRIVER, failure_reason="its job could not be found "
                             "again after the driver stopped; it runs again")
                continue
            self.active[entry.get("slot", "")] = Active(entry, job, reattached=True)
            self.say(f"following job {job.job_id} again (round {entry['round'] + 1}, "
                     f"{self.record.arms[entry['arm']]['name']})")
        self.record.save()

    def _cancel_active(self) -> None:
        for act in self.active.values():
            act.job.cancel()
            act.entry.update(status="cancelled", cancelled_by=BY_DRIVER,
                             failure_reason=f"cancelled ({self.stop_reason or 'driver stopped'}); it runs again on resume")
        self.active.clear()

    # -- one finished run ---------------------------------------------------------------------------------------
    def _finish(self, act: Active, result: JobResult) -> None:
        entry = act.entry
        if result.state == "LOST" or (act.reattached and not result.outcomes and result.state != "FINISHED"):
            # its controller died with the earlier driver (a local job killed with it): nothing about the patch
            entry.update(status="cancelled", cancelled_by=BY_DRIVER, job_state=result.state,
                         failure_reason=f"lost with the earlier driver ({result.error or result.state}); it runs again")
            self.record.save()
            self.say(f"round {entry['round'] + 1}/{self.pairs} {self.record.arms[entry['arm']]['name']}: job "
                     f"{entry.get('job_id')} was lost with the earlier driver; it runs again")
            return
        reference = next((r.get("final_loss") for r in self.record.runs if r["arm"] == 0 and r["status"] == "ok"
                          and isinstance(r.get("final_loss"), float)), None)
        got = collect(self.space, result, baselines=(), reference_loss=reference if entry["arm"] else None,
                      slot=entry.get("slot", ""))
        keep = ("steady", "steady_std", "steady_n", "window_values", "steps", "final_loss", "host", "exit_code",
                "killed_by", "started_at", "ended_at", "log_path", "job_state", "failure_class", "failure_reason",
                "failure_lines", "benign", "numerics_flag", "scheduler_error")
        entry.update({k: got.attrs[k] for k in keep if k in got.attrs}, status=got.status)
        entry.update({f"scheduler_{k}": v for k, v in act.job.times().items() if v is not None})
        self.record.save()
        self._report(entry)
        if entry["status"] != "ok" and result.state not in ("FINISHED", "COMPLETED"):
            problem = self.executor.slot_problem(entry.get("slot", ""))
            if problem:
                raise AbStopped(f"slot {entry.get('slot')} cannot run jobs any more ({problem}); the A/B runs only "
                                "on the pinned nodes: fix them and run the same command again to resume")
        handling = failures.HANDLING.get(entry.get("failure_class") or "")
        if handling is not None and handling.stop_study and self._settled(entry["round"], entry["arm"]):
            raise AbStopped(f"{entry['failure_class']} ({entry.get('failure_reason')}): the cluster is unhealthy; "
                            "run the same command again to resume")
        if entry["arm"] == 0 and entry["status"] in FINDING_STATUSES:
            raise AbStopped(f"the deployed job itself fails ({entry.get('failure_class')}: "
                            f"{entry.get('failure_reason')}); there is nothing to compare against. Log: "
                            f"{entry.get('log_path')}")

    def _report(self, entry: dict[str, Any]) -> None:
        arm = self.record.arms[entry["arm"]]
        head = f"round {entry['round'] + 1}/{self.pairs} {arm['name']} ({arm['label']})"
        if entry["status"] == "ok":
            text = f"{head}: {entry['steady']:,.1f} {self.space.metric.field}"
            deployed = next((r for r in self.record.runs if r["round"] == entry["round"] and r["arm"] == 0
                             and r["status"] == "ok"), None)
            if entry["arm"] and deployed is not None:
                gain = math.expm1(log_ratio(entry["steady"], deployed["steady"], self.space.metric.direction))
                text += f" ({100 * gain:+.2f} % vs A of this round)"
            self.say(text + f"  [job {entry.get('job_id')}]")
            return
        why = f"{entry.get('failure_class') or entry['status']}: {entry.get('failure_reason') or ''}".strip()
        if not self._settled(entry["round"], entry["arm"]):
            self.say(f"{head}: {why}; a flake, run once more")
        elif entry["arm"] and entry["status"] in FINDING_STATUSES:
            self.say(f"{head}: {why}; a finding: this patch fails here and runs no more (log {entry.get('log_path')})")
        else:
            self.say(f"{head}: {why} (log {entry.get('log_path')})")


def patch_copy(source: Path, folder: Path, index: int) -> Path:
    """Freeze a patch into the record's folder: later edits of the user's file never change what a resume runs."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{index}-{source.name}"
    target.write_bytes(source.read_bytes())
    return target
