"""The validated, frozen search space: what the YAML file means once it has been checked."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Target = Literal["xla", "libtpu", "env", "arg"]
Scalar = bool | int | float | str

#: The variable each flag target is appended to.
FLAG_VARIABLES: dict[str, str] = {"xla": "XLA_FLAGS", "libtpu": "LIBTPU_INIT_ARGS"}


@dataclass(frozen=True)
class Param:
    """One tuned knob: exactly one target and one domain (``choices`` or ``low``/``high``)."""

    name: str
    target: Target
    key: str  # flag name without dashes, env var name, or workload arg name
    choices: tuple[Scalar, ...] | None = None
    type: Literal["int", "float"] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    #: the value the job runs with when this param sets nothing (e.g. XLA's own default ``true`` for
    #: ``xla_cpu_multi_thread_eigen``); baseline-deployed already measures it, so the screen need not probe it.
    #: ``None``: not stated (the flag registry's ``xla_default`` may still know it).
    default: Scalar | None = None


@dataclass(frozen=True)
class TrialConfig:
    """What a trial sets on top of the deployed baseline, in the order it is applied.

    Example:
        >>> c = TrialConfig(kind="profile", profile="p", xla=(("xla_gpu_enable_pipelined_all_gather", True),))
        >>> c.settings()["xla"]
        {'xla_gpu_enable_pipelined_all_gather': True}
    """

    kind: str  # baseline-deployed | baseline-no-env | profile | sampled | evidence
    profile: str
    xla: tuple[tuple[str, Scalar], ...] = ()
    libtpu: tuple[tuple[str, Scalar], ...] = ()
    env: tuple[tuple[str, Scalar | None], ...] = ()
    args: tuple[tuple[str, Scalar], ...] = ()
    params: tuple[tuple[str, Scalar], ...] = ()  # Optuna params behind a sampled config

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"xla": dict(self.xla), "libtpu": dict(self.libtpu), "env": dict(self.env), "args": dict(self.args)}

    @property
    def config_key(self) -> str:
        """Stable identity of the settings: repeats of one configuration share it, whatever their kind."""
        payload = self.settings() if self.kind != "baseline-no-env" else {"restore": "baseline-no-env"}
        blob = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Metric:
    format: Literal["maxtext", "regex"] = "maxtext"
    field: str = "Tokens/s/device"
    pattern: str | None = None
    window: tuple[int, int] = (9, 14)
    direction: Literal["maximize", "minimize"] = "maximize"
    tokens_per_step: float | None = None


@dataclass(frozen=True)
class Baseline:
    """What is deployed today (``baseline-deployed``) and the image defaults (``baseline-no-env``)."""

    xla_flags: tuple[str, ...] = ()  # ``--name=value`` tokens, in order
    libtpu_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[tuple[str, Scalar], ...] = ()
    defaults: tuple[tuple[str, Scalar], ...] = ()  # flag name or env var -> image default
    env_file: str | None = None

    @property
    def has_deployed_env(self) -> bool:
        """Whether the deployed state adds anything (XLA or libtpu flags, env vars) to the inherited environment.

        When it adds nothing, ``baseline-no-env`` is the same run as ``baseline-deployed``: a study skips it.

        Example:
            >>> Baseline(args=(("per_device_batch_size", 1),)).has_deployed_env
            False
        """
        return bool(self.xla_flags or self.libtpu_flags or self.env)


@dataclass(frozen=True)
class SlurmSpec:
    """Where and how trials run on Slurm: the space file's ``executor.slurm``, declared once.

    :class:`flagopt.executors.SlurmSettings` is this plus what only the executor decides; ``run --nodelist`` and
    ``--partition`` replace fields of it. The YAML key ``time`` is ``time_min`` here.

    ``slots`` are several pinned nodelists of the same shape: a trial runs on one of them, each is its own block
    of hardware (own baselines and drift). ``nodelist`` is the one-slot case; a spec has one or the other.

    Example:
        >>> SlurmSpec(slots=("gpu[01-02]", "gpu[03-04]"), nodes=2).slot_nodelists
        ('gpu[01-02]', 'gpu[03-04]')
        >>> SlurmSpec(nodelist="gpu[01-02]").slot_nodelists
        ('gpu[01-02]',)
    """

    partition: str | None = None
    nodelist: str | None = None
    slots: tuple[str, ...] = ()
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    time_min: int | None = None
    account: str | None = None
    qos: str | None = None
    exclusive: bool = True
    additional: tuple[tuple[str, str], ...] = ()
    pending_deadline_min: float = 10.0

    @property
    def slot_nodelists(self) -> tuple[str | None, ...]:
        """The pinned nodelist of every slot; ``(None,)`` when nothing is pinned (any nodes of the partition)."""
        return self.slots or (self.nodelist,)


@dataclass(frozen=True)
class ExecutorSpec:
    kind: Literal["local", "slurm", "slurm-steps"] = "local"
    slurm: SlurmSpec = field(default_factory=SlurmSpec)


#: The run budget of a one-slot study when the space sets no ``stop.max_trials``.
DEFAULT_MAX_TRIALS = 60
#: What each further slot adds to that default budget.
MAX_TRIALS_PER_EXTRA_SLOT = 10


@dataclass(frozen=True)
class StopSpec:
    win: float = 0.05
    null_gain: float = 0.02
    max_null: int = 25
    #: the run budget; None: :data:`DEFAULT_MAX_TRIALS` on one slot and :data:`MAX_TRIALS_PER_EXTRA_SLOT` more per
    #: further slot (see :meth:`budget`)
    max_trials: int | None = None
    max_hours: float | None = None
    #: runs after the first confirmed winner spent racing the remaining contenders against it (0: stop at once)
    refine: int = 20

    def budget(self, slots: int = 1) -> int:
        """The run budget of a study on ``slots`` slots: ``max_trials`` when the space sets it.

        Decisions taken while other slots' runs are in flight cost more runs than one at a time (each slot also
        measures its own baseline level): on 4 slots a null study needed a median 50 runs where one slot needed 40
        (docs/benchmark-slots.md), so the default grows with the slots rather than stop 4-slot studies undecided.

        Example:
            >>> StopSpec().budget(1), StopSpec().budget(4), StopSpec(max_trials=50).budget(4)
            (60, 90, 50)
        """
        if self.max_trials is not None:
            return self.max_trials
        return DEFAULT_MAX_TRIALS + MAX_TRIALS_PER_EXTRA_SLOT * max(slots - 1, 0)


@dataclass(frozen=True)
class NoiseSpec:
    baseline_every: int | None = None  # None: adaptive to the measured drift
    min_runs: int = 3  # per arm before a verdict
    confidence: float = 0.95
    min_effect: float = 0.01  # smaller gains are "same" even when significant
    max_repeats: int = 6  # per candidate


@dataclass(frozen=True)
class FailureSpec:
    hang_min: float = 10.0
    init_timeout_min: float = 20.0
    signatures: tuple[tuple[str, str], ...] = ()  # (class, regex) added to the built-in table


@dataclass(frozen=True)
class NumericsSpec:
    tolerance: float | None = None  # relative final-loss difference that flags a config
    allow: bool = False


@dataclass(frozen=True)
class ExportSpec:
    guard_variable: str = "FLAGOPT_PARALLELISM"
    guard: bool = True


@dataclass(frozen=True)
class Space:
    """A validated search-space file."""

    source: Path
    name: str
    model_tag: str
    parallelism: str
    command: tuple[str, ...]
    workdir: Path
    timeout_min: float
    metric: Metric
    baseline: Baseline
    params: tuple[Param, ...]
    profiles: tuple[TrialConfig, ...]
    executor: ExecutorSpec
    stop: StopSpec
    noise: NoiseSpec
    failures: FailureSpec
    numerics: NumericsSpec
    export: ExportSpec
    configs: tuple[tuple[str, tuple[tuple[str, Scalar], ...]], ...] = ()
    evidence: bool = False
    #: one-factor screening of every param (and the combination of what helped) before the sampler
    screen: bool = True
    sampler: Literal["tpe", "gp", "random"] = "tpe"
    seed: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)
