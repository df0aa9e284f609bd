"""Asking Slurm about jobs and nodes: ``squeue``, ``sacct``, ``sinfo``, ``scontrol`` as argv lists, never a shell.

Example:
    >>> expand_nodelist("node[1-2],gpu[08-09]")
    ['node1', 'node2', 'gpu08', 'gpu09']
    >>> job_state("CANCELLED by 0")
    'CANCELLED'
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from flagopt.errors import StudyError

#: Slurm job state -> the backend-independent :attr:`JobStatus.state`.
SLURM_JOB_STATES: dict[str, str] = {
    "PENDING": "PENDING",
    "CONFIGURING": "PENDING",
    "REQUEUED": "PENDING",
    "REQUEUE_FED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "RUNNING": "RUNNING",
    "COMPLETING": "RUNNING",  # the tasks have ended but the nodes are not released yet
    "STAGE_OUT": "RUNNING",
    "SIGNALING": "RUNNING",
    "RESIZING": "RUNNING",
    "SUSPENDED": "RUNNING",
    "STOPPED": "RUNNING",
    "COMPLETED": "FINISHED",
    "FAILED": "FAILED",
    "SPECIAL_EXIT": "FAILED",
    "CANCELLED": "CANCELLED",
    "REVOKED": "CANCELLED",
    "TIMEOUT": "TIMEOUT",
    "DEADLINE": "TIMEOUT",
    "NODE_FAIL": "NODE_FAIL",
    "BOOT_FAIL": "NODE_FAIL",
    "PREEMPTED": "PREEMPTED",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY",
}
DONE_STATES = frozenset({"FINISHED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"})
#: Node states (``sinfo %T`` without its flag characters) in which a pinned job can start.
UP_NODE_STATES = frozenset(
    {"idle", "allocated", "mixed", "completing", "planned", "reserved", "powered_down", "powering_up"}
)
_NO_TIME = {"", "N/A", "None", "Unknown", "NONE"}


class SlurmUnavailable(RuntimeError):
    """A Slurm command could not answer (controller down, command missing); the job may be fine."""


@dataclass(frozen=True)
class SlurmJobInfo:
    """One job as ``squeue`` or ``sacct`` reports it; times are unix seconds or ``None`` when not known yet."""

    slurm_state: str
    reason: str
    nodelist: str
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None

    @property
    def state(self) -> str:
        return job_state(self.slurm_state)

    @property
    def ran(self) -> bool:
        """Whether nodes were ever allocated (a job cancelled while pending has none)."""
        return self.nodelist not in ("", "None assigned", "(null)")


def job_state(slurm_state: str) -> str:
    """Map a Slurm state (``CANCELLED by 0``, ``TIMEOUT``, ...) to a :attr:`JobStatus.state`."""
    words = slurm_state.split()
    return SLURM_JOB_STATES.get(words[0].rstrip("+") if words else "", "UNKNOWN")


def run_slurm(argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run one Slurm client command; raise :class:`SlurmUnavailable` when it cannot be run at all."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise SlurmUnavailable(f"`{argv[0]}` not found: run flagopt on a Slurm login node (or source env.sh)") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmUnavailable(f"`{' '.join(argv)}` did not answer within {timeout_s:.0f} s") from exc


def parse_slurm_time(text: str) -> float | None:
    """``2026-11-22T00:05:09`` (Slurm prints local time) -> unix seconds; ``N/A``/``Unknown`` -> ``None``."""
    text = text.strip()
    if text in _NO_TIME:
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def query_job(job_id: str) -> SlurmJobInfo | None:
    """The job's current record: ``squeue`` while the controller holds it, ``sacct`` once it has ended.

    Returns ``None`` when Slurm knows no such job.
    """
    live = _from_squeue(job_id)
    if live is not None and live.state not in DONE_STATES:
        return live
    final = _from_sacct(job_id)
    if final is None or final.state not in DONE_STATES:
        return live or final  # accounting can lag a second behind the controller
    if live is not None:
        # sacct forgets why a cancelled job was pending, and for a moment after the end it can hold the final state
        # without the end time or with part of the nodes; the controller still knows all three
        reason = live.reason if final.reason in ("", "None") else final.reason
        nodelist = live.nodelist if live.ran else final.nodelist
        times = [mine if mine is not None else theirs for mine, theirs in zip(_times(final), _times(live))]
        final = SlurmJobInfo(final.slurm_state, reason, nodelist, *times)
    return final


def _times(info: SlurmJobInfo) -> tuple[float | None, float | None, float | None]:
    return info.submitted_at, info.started_at, info.ended_at


def _from_squeue(job_id: str) -> SlurmJobInfo | None:
    proc = run_slurm(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%r|%N|%V|%S|%e"])
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return None  # the controller has purged it (MinJobAge); sacct still knows
        raise SlurmUnavailable(f"squeue: {proc.stderr.strip()}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        return None
    state, reason, nodes, submit, start, end = (lines[0].split("|") + [""] * 6)[:6]
    pending = job_state(state) == "PENDING"
    done = job_state(state) in DONE_STATES
    return SlurmJobInfo(
        state,
        reason,
        nodes,
        parse_slurm_time(submit),
        None if pending else parse_slurm_time(start),  # for a pending job these are only estimates
        parse_slurm_time(end) if done else None,
    )


def _from_sacct(job_id: str) -> SlurmJobInfo | None:
    proc = run_slurm(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,Reason,NodeList,Submit,Start,End"])
    if proc.returncode != 0:
        raise SlurmUnavailable(f"sacct: {proc.stderr.strip()} (flagopt's Slurm backend needs job accounting)")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        return None
    state, reason, nodes, submit, start, end = (lines[-1].split("|") + [""] * 6)[:6]
    return SlurmJobInfo(state, reason, nodes, *(parse_slurm_time(t) for t in (submit, start, end)))


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm host list (``node[1-3,5]``, ``a,b``, zero padding kept) into node names."""
    names: list[str] = []
    for part in _split_top_level(nodelist):
        match = re.search(r"\[([^\]]*)\]", part)
        if match is None:
            if "[" in part or "]" in part:
                raise StudyError("slurm", "nodelist", f"cannot read host list {nodelist!r}: unbalanced brackets")
            names.append(part)
            continue
        head, tail = part[: match.start()], part[match.end() :]
        for piece in match.group(1).split(","):
            low, _, high = piece.partition("-")
            if not low.isdigit() or not (high or low).isdigit():
                raise StudyError("slurm", "nodelist", f"cannot read host list {nodelist!r}: range {piece!r}")
            for number in range(int(low), int(high or low) + 1):
                names.extend(expand_nodelist(f"{head}{number:0{len(low)}d}{tail}"))
    return names


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text.strip():
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _node_rows(nodelist: str) -> dict[str, tuple[str, str]]:
    proc = run_slurm(["sinfo", "-h", "-N", "-n", nodelist, "-o", "%N|%T|%E"])
    if proc.returncode != 0:
        raise StudyError("slurm", "nodelist", f"sinfo -n {nodelist}: {proc.stderr.strip() or proc.stdout.strip()}")
    rows: dict[str, tuple[str, str]] = {}
    for line in proc.stdout.splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        if name.strip():
            rows[name.strip()] = (state.strip(), reason.strip())  # a node in several partitions repeats
    return rows


def node_states(nodelist: str) -> dict[str, str]:
    """``{node: sinfo state}`` for each node of ``nodelist`` that Slurm knows (``idle``, ``down*``, ``drained``...).

    Raises:
        StudyError: ``sinfo`` cannot be run or rejects the list.
    """
    try:
        return {name: state for name, (state, _) in _node_rows(nodelist).items()}
    except SlurmUnavailable as exc:
        raise StudyError("slurm", "nodelist", str(exc)) from exc


def node_is_up(state: str) -> bool:
    """Whether a job can start on a node in this ``sinfo %T`` state (``*`` marks a node that does not respond)."""
    base = re.match(r"[a-z_]*", state.lower())
    return "*" not in state and base is not None and base.group(0) in UP_NODE_STATES


def check_pinned_nodes(nodelist: str) -> None:
    """Fail before submitting when a pinned node cannot run jobs, so no trial waits forever in PENDING.

    Raises:
        StudyError: naming each node that is not up with its state and reason, or with Slurm's own message for a
            node Slurm does not know.
    """
    try:
        rows = _node_rows(nodelist)
        problems: list[str] = []
        for name in expand_nodelist(nodelist):
            if name not in rows:
                proc = run_slurm(["scontrol", "show", "node", name])
                problems.append((proc.stderr or proc.stdout).strip() or f"Node {name} not found")
            elif not node_is_up(rows[name][0]):
                state, reason = rows[name]
                problems.append(f"{name} is {state}" + (f" (reason: {reason})" if reason.lower() != "none" else ""))
    except SlurmUnavailable as exc:
        raise StudyError("slurm", "nodelist", str(exc)) from exc
    if problems:
        raise StudyError(
            "slurm",
            "nodelist",
            f"pinned nodes {nodelist} cannot run trials: {'; '.join(problems)}. "
            "Resume them (scontrol update nodename=NODE state=resume) or pin other nodes.",
        )


def check_slots(slots: Sequence[str], nodes: int) -> dict[str, str]:
    """Check a study's slots before it starts: disjoint node groups of ``nodes`` nodes each, and which are up.

    Returns ``{slot: why it cannot run trials}`` for each slot that is down (the study runs on the others).

    Raises:
        StudyError: two slots share a node, a slot's size is not ``nodes``, or no slot can run trials.
    """
    owner: dict[str, str] = {}
    for slot in slots:
        names = expand_nodelist(slot)
        if len(names) != nodes:
            raise StudyError("slurm", "slots", f"slot {slot} has {len(names)} node{'s' if len(names) != 1 else ''} but "
                             f"executor.slurm.nodes is {nodes}: every slot must run the job's shape")
        for name in names:
            if name in owner:
                raise StudyError("slurm", "slots", f"slots {owner[name]} and {slot} share node {name}: each slot must "
                                 "be its own node group")
            owner[name] = slot
    down: dict[str, str] = {}
    for slot in slots:
        try:
            check_pinned_nodes(slot)
        except StudyError as exc:
            down[slot] = exc.reason
    if down and len(down) == len(slots):
        raise StudyError("slurm", "slots", "no slot can run trials: " + "; ".join(down.values()))
    return down
