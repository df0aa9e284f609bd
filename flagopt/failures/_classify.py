"""Classify how a trial ended from its log, exit status, watchdog verdict and scheduler state.

Precedence (the first that applies wins), and why:

1. ``unknown-flag`` - XLA refused a flag or value at start-up; nothing else in the log can be the cause.
2. ``oom`` - the log shows an out-of-memory error or Slurm says ``OUT_OF_MEMORY``. It wins over any way the
   process ended afterwards (an OOM log that ends in SIGTERM is an OOM: the other ranks were torn down).
3. ``numerics-nan`` - a step printed ``loss: nan``/``inf`` (skipped when the reference loss itself is NaN:
   then the workload does not report a meaningful loss).
4. If every window step was printed, the measurement is complete: ``numerics-drift`` if the final loss is
   off the reference by more than ``loss_rtol``; otherwise success (``None``) for a clean exit and
   ``benign-exit`` for anything else (our watchdog's SIGTERM after the window, exit 143, a teardown crash,
   heartbeat errors of ranks killed first).
5. ``node-failure``, ``preemption`` - the scheduler (or slurmstepd's banner) names an infrastructure cause.
6. ``nccl-init``, ``coordination-timeout`` - specific distributed-runtime errors in the log.
7. ``hang`` - the watchdog killed a job that stopped printing steps (or never printed one), or XLA's
   rendezvous warns it is stuck before the first step.
8. ``time-limit`` - our wall-clock limit or the scheduler's ``TIMEOUT``.
9. ``cancelled`` - a user's scancel / signal that came from outside.
10. ``launch-failure`` - flagopt's trial runner never reported (``reported=False``): the job died around the trial,
    e.g. submitit's local controller lost a race for its own log folder on a loaded machine. Infrastructure.
11. ``crash`` - any other non-zero exit or fatal signal (with the most telling line, if any).
12. ``incomplete`` - a clean exit before the window was complete.

Example:
    >>> classify("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.", exit_code=-15).details[
    ...     "requested_bytes"]
    1024
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flagopt import failure_classes as s
from flagopt.failures._signatures import Signature, load_signature_table
from flagopt.flags import FlagRegistry, parse_flag_rejection

_MAX_LINES = 20
_TAIL_LINES = 5
_STEP_LINE = re.compile(r"(?i)completed step:?\s*\d+")


@dataclass(frozen=True)
class Failure:
    """Why a trial did not produce a clean measurement.

    Attributes:
        failure_class: one of :data:`flagopt.failures.FAILURE_CLASSES`.
        reason: one sentence for people, saying what happened and what to do.
        lines: the log lines that decided it.
        details: machine-readable facts, e.g. ``requested_bytes``, ``unknown_flags``, ``signature``.
    """

    failure_class: str
    reason: str
    lines: tuple[str, ...] = ()
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass
class _Match:
    signature: Signature
    lines: list[str] = field(default_factory=list)
    groups: dict[str, object] = field(default_factory=dict)


def _signal_of(exit_code: int | None) -> int | None:
    """The signal that ended the process: ``-15`` (Popen) and ``143`` (shell, Slurm) both give SIGTERM."""
    if exit_code is None or exit_code == 0:
        return None
    if exit_code < 0:
        return -exit_code
    return exit_code - 128 if 128 < exit_code < 160 else None


def _exit_text(exit_code: int | None) -> str:
    sig = _signal_of(exit_code)
    if sig is None:
        return f"exit code {exit_code}"
    try:
        return f"exit code {exit_code} ({signal.Signals(sig).name})"
    except ValueError:
        return f"exit code {exit_code} (signal {sig})"


def _match(lines: Sequence[str], signatures: Sequence[Signature], steps_seen: int) -> dict[str, _Match]:
    found: dict[str, _Match] = {}
    for sig in signatures:
        if sig.requires_no_steps and steps_seen > 0:
            continue
        for line in lines:
            for pattern in sig.patterns:
                hit = pattern.search(line)
                if not hit:
                    continue
                entry = found.setdefault(sig.failure_class, _Match(sig))
                if len(entry.lines) < _MAX_LINES and line not in entry.lines:
                    entry.lines.append(line)
                for key, value in hit.groupdict().items():
                    if value is not None and key not in entry.groups:
                        entry.groups[key] = int(value) if value.isdigit() else value
                break
    return found


def log_tail(lines: Sequence[str], n: int = _TAIL_LINES) -> tuple[str, ...]:
    """The last ``n`` meaningful lines of a log: not blank, not a step line (those say the job was still healthy).

    Shown when no signature explains a failure, so the reason is never only an exit code (docs/failures.md).

    Example:
        >>> log_tail(["completed step: 3, loss: 2.1", "Traceback (most recent call last):", "", "  boom", ""], 2)
        ('Traceback (most recent call last):', '  boom')
    """
    out = [line.rstrip() for line in lines if line.strip() and not _STEP_LINE.search(line)]
    return tuple(line[:300] for line in out[-n:])


def _last_loss(lines: Sequence[str]) -> float | None:
    pattern = load_signature_table().loss_pattern
    for line in reversed(lines):
        hit = pattern.search(line)
        if hit:
            return float(hit["loss"])
    return None


def _unknown_flag(log_text: str, match: _Match) -> tuple[str, dict[str, object]]:
    rejection = parse_flag_rejection(log_text)
    if rejection is None:  # a user signature of this class matched without XLA's own message
        return match.signature.reason or "the job rejected a flag; remove it from the space", {}
    registry = FlagRegistry.load()
    notes = {name: registry.removal_note(name) for name in rejection.names if registry.removal_note(name)}
    details: dict[str, object] = {
        "env_var": rejection.env_var,
        "unknown_flags": list(rejection.flags),
        "flag_names": list(rejection.names),
        "bad_values": [list(pair) for pair in rejection.bad_values],
        "removal_notes": notes,
        "typos": list(rejection.typos),
    }
    parts = []
    if rejection.flags:
        pairs = zip(rejection.flags, rejection.names)
        listed = ", ".join(f"{tok} ({notes[name]})" if name in notes else tok for tok, name in pairs)
        parts.append(f"{rejection.env_var or 'the flags variable'} has flags this jaxlib does not know: {listed}")
    if rejection.typos:
        parts.append(f"{', '.join(rejection.typos)} starts with a look-alike dash: write '--'")
    for name, value in rejection.bad_values:
        parts.append(f"XLA cannot parse the value {value!r} of {name}")
    if not parts:
        parts.append("XLA could not parse XLA_FLAGS (an enum or list value is invalid; the message names no flag)")
    return "; ".join(parts) + ". Remove or fix it in the space file (never retried).", details


def _oom_reason(match: _Match | None, scheduler_state: str | None) -> str:
    if match is None:
        return f"Slurm reports {scheduler_state}: the job exceeded its host memory; the configuration is infeasible"
    requested = match.groups.get("requested_bytes")
    if isinstance(requested, int):
        return (f"out of memory: XLA could not allocate {requested} bytes ({requested / 2**30:.2f} GiB); "
                "the configuration does not fit and is recorded as infeasible")  # fmt: skip
    return (match.signature.reason or "out of memory") + "; the configuration is recorded as infeasible"


class _Groups(dict):
    """A signature's named groups for its ``reason`` template; a group that did not match stays ``{name}``."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _reason(cls: str, match: _Match | None, default: str) -> str:
    if match is not None and match.signature.reason:
        # ``{group}`` in a reason is filled from the signature's named groups (e.g. MaxText's config key).
        try:
            return match.signature.reason.format_map(_Groups(match.groups))
        except (ValueError, IndexError):  # a reason with a lone brace is plain text
            return match.signature.reason
    if match is not None and match.lines:
        return f"{default}: {match.lines[0].strip()[:300]}"
    return default


def classify(
    log_text: str,
    *,
    exit_code: int | None,
    killed_by: str | None = None,
    scheduler_state: str | None = None,
    window_complete: bool = False,
    steps_seen: int = 0,
    extra_signatures: Sequence[Signature] = (),
    final_loss: float | None = None,
    reference_loss: float | None = None,
    loss_rtol: float = 0.05,
    reported: bool = True,
    launch_error: str = "",
) -> Failure | None:
    """Classify one trial's end; ``None`` means a clean, complete measurement.

    Args:
        log_text: the rank's log (stdout and stderr).
        exit_code: the process status as ``Popen.returncode`` (``-15``) or shell/Slurm style (``143``).
        killed_by: our watchdog's verdict: ``"timeout"``, ``"hang"``, ``"init-timeout"``, ``"signal"`` or ``None``.
        scheduler_state: Slurm's job state (``COMPLETED``, ``FAILED``, ``CANCELLED``, ``TIMEOUT``, ``NODE_FAIL``,
            ``PREEMPTED``, ``OUT_OF_MEMORY``) when known.
        window_complete: every step of the measurement window was printed.
        steps_seen: how many step lines were printed.
        extra_signatures: more signatures (e.g. from the space file), tried before the shipped ones.
        final_loss: the last step's loss (read from the log when ``None``).
        reference_loss: the baseline's final loss; enables the drift check (NaN disables the NaN check).
        loss_rtol: the relative loss difference above which a complete run is flagged ``numerics-drift``.
        reported: flagopt's trial runner reported how the command ended. A job without that report failed around the
            trial (its executor or its machine), never inside it: the configuration only reaches the command.
        launch_error: what the executor said about such a job (submitit's or the scheduler's message).
    """
    table = load_signature_table()
    lines = [line for line in log_text.splitlines() if not any(p.search(line) for p in table.noise)]
    found = _match(lines, (*extra_signatures, *table.signatures), steps_seen)
    state = (scheduler_state or "").upper() or None
    base: dict[str, object] = {"exit_code": exit_code, "killed_by": killed_by, "scheduler_state": state,
                               "steps_seen": steps_seen}  # fmt: skip

    def make(cls: str, reason: str, extra: Mapping[str, object] | None = None) -> Failure:
        match = found.get(cls)
        details = dict(base)
        if match is not None:
            details["signature"] = match.signature.name
            details.update(match.groups)
        details.update(extra or {})
        return Failure(cls, reason, tuple(match.lines) if match else (), details)

    if s.UNKNOWN_FLAG in found:
        reason, extra = _unknown_flag("\n".join(lines), found[s.UNKNOWN_FLAG])
        return make(s.UNKNOWN_FLAG, reason, extra)
    if s.OOM in found or state == "OUT_OF_MEMORY":
        return make(s.OOM, _oom_reason(found.get(s.OOM), state))
    nan_is_failure = reference_loss is None or not math.isnan(reference_loss)
    if s.NUMERICS_NAN in found and nan_is_failure:
        return make(s.NUMERICS_NAN, _reason(s.NUMERICS_NAN, found[s.NUMERICS_NAN], "the loss became NaN/Inf"))

    sig = _signal_of(exit_code)
    clean_exit = exit_code == 0 and killed_by is None and state in (None, "COMPLETED")
    if window_complete:
        loss = final_loss if final_loss is not None else _last_loss(lines)
        if loss is not None and reference_loss is not None and math.isfinite(loss) and math.isfinite(reference_loss):
            drift = abs(loss - reference_loss) / max(abs(reference_loss), 1e-12)
            if drift > loss_rtol:
                reason = (f"final loss {loss:g} differs from the baseline's {reference_loss:g} by {100 * drift:.1f}% "
                          f"(> {100 * loss_rtol:g}%); the speed-up may change the numerics")  # fmt: skip
                extra = {"final_loss": loss, "reference_loss": reference_loss, "relative_drift": drift}
                return make(s.NUMERICS_DRIFT, reason, extra)
        if clean_exit:
            return None
        how = f"killed by our {killed_by} watchdog" if killed_by else _exit_text(exit_code)
        return make(s.BENIGN_EXIT, f"all window steps were printed, then the job ended ({how}); counted as success")

    if s.NODE_FAILURE in found or state == "NODE_FAIL":
        return make(s.NODE_FAILURE, _reason(s.NODE_FAILURE, found.get(s.NODE_FAILURE),
                                            "a node failed; check the cluster before resuming the study"))  # fmt: skip
    if s.PREEMPTION in found or state == "PREEMPTED":
        return make(s.PREEMPTION, "the scheduler preempted the job; it will be resubmitted")
    if s.NCCL_INIT in found:
        return make(s.NCCL_INIT, _reason(s.NCCL_INIT, found[s.NCCL_INIT], "NCCL failed to set up communicators"))
    if s.COORDINATION_TIMEOUT in found:
        lost = "the JAX coordination service lost a task; look for an earlier error in the other ranks' logs"
        return make(s.COORDINATION_TIMEOUT, _reason(s.COORDINATION_TIMEOUT, found[s.COORDINATION_TIMEOUT], lost))
    if killed_by in ("hang", "init-timeout") or s.HANG in found:
        if killed_by == "init-timeout" or (killed_by is None and steps_seen == 0):
            default = "no step was printed within the init deadline; the job was killed as hung"
        else:
            default = f"no new step after step line {steps_seen}; the job was killed as hung"
        return make(s.HANG, _reason(s.HANG, found.get(s.HANG), default) if killed_by is None else default)
    if killed_by == "timeout" or state == "TIMEOUT" or s.TIME_LIMIT in found:
        return make(s.TIME_LIMIT, f"the time limit ended the job after {steps_seen} steps, before the window was "
                    "complete; raise the limit or lower steps")  # fmt: skip
    if killed_by == "signal" or state == "CANCELLED" or s.CANCELLED in found:
        return make(s.CANCELLED, "the job was cancelled from outside (scancel or a signal to the runner)")
    if not reported:
        said = next((line.strip() for line in reversed(launch_error.splitlines()) if line.strip()), "")
        return make(s.LAUNCH_FAILURE, "the job ended without a report from flagopt's trial runner (job state "
                    f"{state or 'unknown'}): its executor or machine failed around the trial, not the configuration"
                    + (f"; it said: {said[:300]}" if said else ""))
    if s.CRASH in found or sig is not None or (exit_code not in (0, None)) or state == "FAILED":
        hint = " (SIGKILL from outside: often the kernel's OOM killer)" if sig == signal.SIGKILL else ""
        default = f"the job failed with {_exit_text(exit_code)}{hint}"
        if s.CRASH in found:
            return make(s.CRASH, _reason(s.CRASH, found[s.CRASH], default))
        tail = log_tail(lines)
        # No signature explains it: the log's last words are the best lead there is.
        crash = make(s.CRASH, f"{default}; the log ends: {tail[-1].strip()}" if tail else f"{default}; the log is empty")
        return Failure(crash.failure_class, crash.reason, tail, crash.details)
    return make(s.INCOMPLETE, f"the job ended ({_exit_text(exit_code)}) after {steps_seen} steps, before the "
                "measurement window was complete; raise steps or shorten the window")  # fmt: skip
