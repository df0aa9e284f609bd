"""One flagopt study on a simulated landscape: the real ``StudyRunner`` with :class:`SimExecutor`.

Example:
    >>> import tempfile
    >>> from flagopt.workloads.sim import load_landscape
    >>> out = run_flagopt(load_landscape("win10"), 0, Path(tempfile.mkdtemp()))  # doctest: +SKIP
    >>> out.detail["verdict"]  # doctest: +SKIP
    'win'
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import optuna

from benchmarks._baselines import Choice, RunLog
from benchmarks._metrics import CONTROL_KINDS
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import write_space
from flagopt import stats
from flagopt.study import Progress, StudyRunner, arms_of
from flagopt.workloads.sim import LANDSCAPES_ENV, Landscape


def clean_environment(land: Landscape) -> dict[str, str]:
    """This process's environment without ``XLA_FLAGS`` or any variable the landscape reads (no leaks into runs)."""
    names = {"XLA_FLAGS", "FLAGOPT_SIM_STATE", LANDSCAPES_ENV, *(n for n, p in land.params.items() if p.target == "env")}
    return {k: v for k, v in os.environ.items() if k not in names}


def run_flagopt(land: Landscape, seed: int, folder: Path, *, max_trials: int | None = 60,
                space_options: dict[str, Any] | None = None, slots: int = 1,
                slot_speed: dict[str, float] | None = None, slot_phase: dict[str, float] | None = None) -> Choice:
    """Run a whole study until its stop verdict; the choice is the verdict's winner (the baseline when none).

    ``space_options`` are merged into the space file (:func:`benchmarks._spaces.space_data`), e.g.
    ``{"stop": {"refine": 20}}``. ``detail`` carries the verdict reason, the winner's label, its estimated
    interval (``ci``), the run kinds, the launch log (:class:`RunLog` per record, from the runner's records), how many
    records the study wrote (``records``: runs, controls and the probes recorded without a launch),
    the simulated run-seconds and the virtual wall time (``wall_seconds``: with ``slots`` > 1 the runs overlap;
    slots are named ``slot0``, ``slot1``...; ``slot_speed`` and ``slot_phase`` by those names), the slot of each
    launch (``slot_launches``) and the slots of the winner's successful runs in launch order (``winner_slots``).
    """
    space = write_space(land, seed, folder, max_trials=max_trials, **(space_options or {}))
    names = [f"slot{i}" for i in range(slots)] if slots > 1 else [""]
    executor = SimExecutor(folder / "jobs", base_env=clean_environment(land), slots=names, slot_speed=slot_speed,
                           slot_phase=slot_phase)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        runner = StudyRunner(space, executor, storage=f"sqlite:///{folder}/flagopt.db",
                             progress=Progress(quiet=True), force=True, poll_s=0.0)
        verdict = runner.run()
    kinds: dict[str, int] = {}
    log: list[RunLog] = []
    for rec in runner.records():
        if rec.status != "invalid":  # recorded without a launch (a flag known to be rejected)
            kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
            log.append(RunLog(rec.attrs.get("settings") or {}, rec.kind in CONTROL_KINDS, rec.ok, 0.0,
                              rec.attrs.get("failure_class")))
    winner = verdict.winner if verdict is not None else None
    settings: dict[str, Any] = {}
    if winner:
        for part in (winner.get("settings") or {}).values():
            settings.update(part)
    detail = {"verdict": verdict.reason if verdict else "none", "kinds": kinds,
              "winner": winner.get("label") if winner else None, "ci": winner.get("ci") if winner else None,
              # a budget pick's own fresh-run claim, before it was pulled toward its close rivals' (selection)
              "selection": winner.get("selection") if winner else None,
              "winner_lo_familywise": _familywise_lo(runner, winner), "winner_slots": _winner_slots(runner, winner),
              "log": log, "records": len(runner.records()),
              "run_seconds": float(sum(executor.run_seconds)), "faults": list(executor.faults),
              "wall_seconds": executor.wall_seconds, "slot_launches": list(executor.slot_launches)}
    return Choice(settings, float(winner["gain"]) if winner else 0.0, executor.launches, detail)


def _familywise_lo(runner: StudyRunner, winner: dict[str, Any] | None) -> float | None:
    """The winner's lower bound at the stop rule's Bonferroni confidence (what a budget pick is *not* held to)."""
    if not winner:
        return None
    space = runner.space
    arms = [a for a in arms_of(runner.records(), space.noise, space.metric.direction) if a.estimate is not None]
    confidence = stats.win_confidence(space.noise.confidence, sum(1 for a in arms if a.n > 1))
    arm = next((a for a in arms if a.config_key == winner.get("config_key")), None)
    return arm.estimate.bounds(confidence)[0] if arm is not None else None


def _winner_slots(runner: StudyRunner, winner: dict[str, Any] | None) -> list[str]:
    """The slot of each successful run of the winner, in launch order (where its evidence was measured)."""
    if not winner:
        return []
    space = runner.space
    arm = next((a for a in arms_of(runner.records(), space.noise, space.metric.direction)
                if a.config_key == winner.get("config_key")), None)
    return [] if arm is None else [r.slot for r in sorted(arm.runs, key=lambda r: r.number)]
