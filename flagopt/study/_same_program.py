"""Which runs compile to the deployed job's program: an XLA flag that leaves the optimized module unchanged cannot
change speed, so what its run measured is noise, and the decisions treat its effect as exactly zero.

With ``evidence: true`` the study already dumps the deployed job's HLO (the evidence run). The first run of a
configuration that changes XLA flags only (a one-factor probe, a catalog profile) is dumped too, and compared with it
(:func:`flagopt.evidence.compare_programs`: autotuning choices, metadata and ids left out). On the 2xH200 FSDP job
the pipelined reduce-scatter compiled to the deployed program on, off and unset, yet a 12-run screen had credited it
with +1.1 % and a study's export carried it (docs/validation/h200x2/engine25-head3/NOTES.md). The dump is deleted
once compared: only the answer is kept (trial attrs ``same_program`` and ``same_program_summary``).

Example:
    >>> from flagopt.space import TrialConfig
    >>> xla_only(TrialConfig("probe", "p", xla=(("xla_gpu_enable_pipelined_all_gather", True),)))
    True
    >>> xla_only(TrialConfig("probe", "p", env=(("NCCL_PROTO", "LL128"),)))
    False
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flagopt.decide import RunRecord
from flagopt.errors import FlagoptError
from flagopt.evidence import compare_programs
from flagopt.space import Space, TrialConfig

#: Kinds of first runs whose program is compared with the deployed job's.
COMPARED_KINDS = ("probe", "profile")
#: Where a run's dump goes, inside its trial folder (the evidence run's too).
DUMP_FOLDER = "hlo"


def xla_only(config: TrialConfig) -> bool:
    """Whether ``config`` changes XLA flags and nothing else (an env variable or an arg can change speed with the
    same program)."""
    return bool(config.xla) and not (config.env or config.args or config.libtpu)


def dumps_program(space: Space, kind: str, config: TrialConfig, records: Callable[[], Sequence[RunRecord]]) -> bool:
    """Whether this run is dumped to compare its program with the deployed job's: ``evidence`` is on, it is the
    first run of an XLA-only probe or profile, and the deployed job's dump is there to compare with (with several
    slots the first probes may start before the evidence run ends: they are not dumped, and count as measured).
    ``records`` reads the study's runs, only for a run that could be dumped (it is a storage read)."""
    if not space.evidence or kind not in COMPARED_KINDS or not xla_only(config):
        return False
    runs = records()
    return evidence_dump(runs) is not None and not any(r.config_key == config.config_key and r.ok for r in runs)


def evidence_dump(records: Sequence[RunRecord]) -> Path | None:
    """The deployed job's dump (the evidence run's), if it ran and its folder is there."""
    for rec in records:
        if rec.kind == "evidence" and rec.ok and rec.attrs.get("trial_dir"):
            path = Path(rec.attrs["trial_dir"]) / DUMP_FOLDER
            if path.is_dir():
                return path
    return None


def compare_with_deployed(dump: Path, records: Sequence[RunRecord]) -> dict[str, Any]:
    """Trial attrs saying whether the run at ``dump`` is the deployed job's program; the dump is removed when
    compared (a MaxText dump is tens of megabytes a run). Kept, with the reason, when it cannot be read or the
    deployed job's dump is gone: ``flagopt evidence A --same-as B`` answers it by hand."""
    deployed = evidence_dump(records)
    if deployed is None:  # removed meanwhile
        return {"same_program_error": "the deployed job's dump (the evidence run) is not there: not compared"}
    try:
        comparison = compare_programs(dump, deployed)
    except FlagoptError as exc:
        return {"same_program_error": exc.message}
    shutil.rmtree(dump, ignore_errors=True)
    return {"same_program": comparison.same, "same_program_summary": comparison.summary()}
