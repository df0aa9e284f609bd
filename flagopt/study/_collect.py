"""Turn a finished job into a trial record: parse the log, classify any failure, score the run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flagopt import failures, stats
from flagopt.executors import JobResult
from flagopt.logs import LogParseError, MetricWindowError, parse_steps, run_info, steady_state
from flagopt.space import Space
from flagopt.study import _records as R
from flagopt.decide import value_for


@dataclass
class Collected:
    """The scored result of one run, ready for ``study.tell``."""

    status: str
    attrs: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    failure: failures.Failure | None = None

    @property
    def handling(self) -> failures.Handling | None:
        return failures.HANDLING.get(self.failure.failure_class) if self.failure else None


def read_log(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def collect(space: Space, result: JobResult, *, baselines: Sequence[stats.Run], reference_loss: float | None,
            slot: str = "") -> Collected:
    """Score ``result`` against the baseline runs recorded so far (those of its ``slot``)."""
    metric = space.metric
    rank0 = result.rank0
    text = read_log(rank0.log_path if rank0 else None)
    attrs: dict[str, Any] = {"job_state": result.state}
    if rank0 is not None:
        attrs.update(host=rank0.host, started_at=rank0.started_at, ended_at=rank0.ended_at, exit_code=rank0.exit_code,
                     killed_by=rank0.killed_by, first_step_at=rank0.first_step_at, log_path=rank0.log_path,
                     rank_logs=[o.log_path for o in result.outcomes])
    if result.error:
        attrs["scheduler_error"] = result.error[-2000:]
    info = run_info(text)
    if info:
        attrs["run_info"] = info

    samples = []
    parse_error = None
    try:
        samples = parse_steps(text, fmt=metric.format, field=metric.field, pattern=metric.pattern,
                              tokens_per_step=metric.tokens_per_step, source=attrs.get("log_path") or "log")
    except LogParseError as exc:
        parse_error = exc.message if hasattr(exc, "message") else str(exc)
    attrs["steps"] = [[s.step, s.value] for s in samples]
    attrs["step_seconds"] = [[s.step, s.seconds] for s in samples if s.seconds is not None]
    losses = [s.loss for s in samples if s.loss is not None]
    final_loss = losses[-1] if losses else None
    attrs["final_loss"] = final_loss if final_loss is None or math.isfinite(final_loss) else str(final_loss)

    steady = None
    window_error = None
    try:
        steady = steady_state(samples, metric.window)
    except MetricWindowError as exc:
        window_error = str(exc)
    extra = failures.signatures_from_data(
        [{"name": f"space-{i}", "class": c, "patterns": [p]} for i, (c, p) in enumerate(space.failures.signatures)],
        str(space.source), "failures.signatures")
    failure = failures.classify(
        text,
        exit_code=rank0.exit_code if rank0 else None,
        killed_by=rank0.killed_by if rank0 else None,
        scheduler_state=None if result.state in ("FINISHED", "COMPLETED") else result.state,
        window_complete=steady is not None,
        steps_seen=len(samples),
        extra_signatures=extra,
        # A NaN reference (the baseline prints loss: nan, or this *is* the baseline) turns the NaN check off:
        # a configuration fails on numerics only where the deployed one does not.
        reference_loss=reference_loss,
        loss_rtol=space.numerics.tolerance if space.numerics.tolerance is not None else math.inf,
        reported=rank0 is not None,
        launch_error=result.error,
    )
    if failure is None and steady is None:
        failure = failures.Failure("incomplete", window_error or parse_error or "no steady-state window", (), {})
    if failure is not None and not failures.HANDLING[failure.failure_class].counts_as_success:
        attrs.update(failure_class=failure.failure_class, failure_reason=failure.reason,
                     failure_lines=list(failure.lines)[:20], failure_details=_jsonable(dict(failure.details)))
        status = failures.HANDLING[failure.failure_class].status
        return Collected(status=status, attrs=attrs, failure=failure)
    if failure is not None and not failures.HANDLING[failure.failure_class].flagged:
        attrs["benign"] = f"{failure.failure_class}: {failure.reason}"  # e.g. SIGTERM after the window

    assert steady is not None
    attrs.update(steady=steady.mean, steady_std=steady.std, steady_n=steady.n, window_values=list(steady.values))
    if failure is not None and failures.HANDLING[failure.failure_class].flagged:
        attrs["numerics_flag"] = failure.reason
    t = attrs.get("started_at") or 0.0
    if steady.mean <= 0:
        # Gains are ratios: a zero or negative throughput (or step time) is a broken measurement, not a score.
        reason = f"steady {metric.field} is {steady.mean:g} over steps {metric.window[0]}-{metric.window[1]}: not a measurement"
        attrs.update(failure_class="incomplete", failure_reason=reason, failure_lines=[], failure_details={})
        return Collected(status=R.FAILED, attrs=attrs,
                         failure=failures.Failure("incomplete", reason, (), {}))
    value = value_for(metric.direction, steady.mean)
    if baselines:
        base = stats.baseline_at(baselines, t, block=slot)
        gain = value / base.value - 1.0
        attrs.update(gain=gain, delta_pct=100.0 * gain, baseline_level=base.value)
    else:
        attrs.update(gain=0.0, delta_pct=0.0, baseline_level=value)
    return Collected(status=R.OK, attrs=attrs, value=attrs["gain"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
