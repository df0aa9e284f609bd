"""Held-out landscapes: random truth models this project does not ship, one per (family, seed).

The shipped landscapes were written by the people who tune flagopt, so a rule can fit them by accident. These are
drawn from an integer seed instead, with the structure flag spaces have in practice: 4-8 params of mixed types
(log-scale combine thresholds with a bump of random centre and height, booleans, categoricals, an overlap limit,
sometimes the pipeline microbatch count with a bubble), sparse effects with heavy-tailed sizes, 0-2 interactions
(a sign flip, or a pair that only helps together), sometimes an OOM cliff (a threshold too large, or a flag that
always runs out of memory), run noise 0.3-1 % and drift of 1-4 % over 80 launches with a slow sine.

Three families, each checked against the truth (:meth:`Landscape.best`):

* ``rand-win`` — the true best gain is at least +6 %;
* ``rand-below`` — the true best gain is in +2.5..+4.5 % (no +5 % winner exists);
* ``rand-null`` — every single effect and interaction is below 0.3 % in size.

Each family also comes on flaky infrastructure (``rand-win-flaky``...: the same landscape for the same seed, with the
shipped ``flaky`` landscape's failure rates per launch, independent of the settings), so a rule that only holds
where every run succeeds shows up seed by seed.

They are written to a landscapes file of the shipped schema and run like shipped ones: the space command carries
``landscapes=<file>`` (``Landscape.path``), so ``SimExecutor`` and ``python -m flagopt.workloads.sim`` read them.

Example:
    >>> import tempfile
    >>> land = random_landscape("rand-win", 3, Path(tempfile.mkdtemp()))
    >>> land.name, land.best().gain >= 0.06
    ('rand-win-3', True)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks._recipe_landscapes import add_recipe
from flagopt.workloads.sim import Landscape, landscape_from_data, load_landscape

FAMILIES = ("rand-win", "rand-below", "rand-null")
#: Families a benchmark runs only when named: ``rand-recipe`` (a rand-win landscape with the recipe structure of
#: real jobs, ``benchmarks/_recipe_landscapes.py``).
EXTRA_FAMILIES = ("rand-recipe",)
#: The true best gain each family must have (low, high); rand-null is defined by its effect sizes instead.
BEST_RANGE = {"rand-win": (0.06, 0.25), "rand-below": (0.025, 0.045), "rand-recipe": (0.06, 0.25)}
NULL_EFFECT = 0.003
_FAMILY_ID = {name: i for i, name in enumerate(FAMILIES + EXTRA_FAMILIES)}
#: A family's name with this suffix: its landscapes on flaky infrastructure, at the shipped ``flaky`` landscape's
#: rates per launch (NCCL bootstrap failure, coordination timeout, hang, exit 143 after every step printed).
FLAKY = "-flaky"
#: Every family a benchmark can name (the default runs use ``FAMILIES``).
CHOICES = FAMILIES + EXTRA_FAMILIES + tuple(family + FLAKY for family in FAMILIES + EXTRA_FAMILIES)
MiB = 2**20

# (name, kind, extra): the pool a landscape draws its params from.
_THRESHOLDS = ("xla_gpu_all_gather_combine_threshold_bytes", "xla_gpu_reduce_scatter_combine_threshold_bytes",
               "xla_gpu_all_reduce_combine_threshold_bytes")
_BOOLS = ("xla_gpu_enable_pipelined_all_gather", "xla_gpu_enable_pipelined_reduce_scatter",
          "xla_gpu_enable_while_loop_double_buffering", "xla_gpu_enable_pipelined_p2p",
          "xla_gpu_enable_latency_hiding_scheduler")
_CATEGORICALS = {"NCCL_PROTO": ["LL", "LL128", "Simple"], "NCCL_ALGO": ["Ring", "Tree", "NVLS"]}
_OVERLAP = "xla_gpu_experimental_parallel_collective_overlap_limit"
_MICROBATCHES = "num_pipeline_microbatches"
_MB_GRID = [4, 8, 16, 32, 64]


def _size(rng: np.random.Generator, family: str) -> float:
    """One effect size: heavy-tailed (log-normal around 1 %), signed; below 0.3 % on a null landscape."""
    if family == "rand-null":
        return float(rng.uniform(-1.0, 1.0)) * NULL_EFFECT * 0.95
    size = float(rng.lognormal(np.log(0.01), 0.9))
    return size if rng.random() < 0.6 else -size


def _draw(family: str, seed: int, attempt: int) -> dict[str, Any]:
    """One unscaled landscape entry (effects at their drawn sizes)."""
    rng = np.random.default_rng([seed, _FAMILY_ID[family], attempt, 0xBE7C])
    n_params = int(rng.integers(4, 9))
    pool: list[tuple[str, str]] = [(n, "threshold") for n in _THRESHOLDS] + [(n, "bool") for n in _BOOLS]
    pool += [(n, "categorical") for n in _CATEGORICALS] + [(_OVERLAP, "overlap")]
    with_bubble = family != "rand-null" and rng.random() < 0.35
    chosen = [pool[i] for i in rng.permutation(len(pool))[: n_params - int(with_bubble)]]
    if with_bubble:
        chosen.append((_MICROBATCHES, "bubble"))
    params: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    ooms: list[dict[str, Any]] = []
    active = lambda: rng.random() < 0.55  # noqa: E731 - sparse effects: about half the knobs do something
    for name, kind in chosen:
        if kind == "threshold":
            lo_exp = int(rng.choice([20, 26]))
            low, high = 2**lo_exp, 2 ** (lo_exp + 10)
            entry: dict[str, Any] = {"target": "xla", "type": "int", "low": low, "high": high, "log": True,
                                     "default": 31457287}
            if active() or family == "rand-null":
                centre = 2 ** int(rng.integers(lo_exp + 1, lo_exp + 10))
                entry["effect"] = {"bump": {"center": centre, "width": round(float(rng.uniform(0.8, 1.6)), 2),
                                            "height": round(_size(rng, family) * 1.5, 5)}}
                if rng.random() < 0.3:  # deployed at a non-default value
                    baseline[name] = 2 ** int(rng.integers(lo_exp, lo_exp + 11))
                if rng.random() < 0.3:  # an OOM cliff one or two octaves above the bump's centre
                    cliff = min(centre * 2 ** int(rng.integers(1, 3)), high)
                    ooms.append({"when": {name: {"ge": cliff}}, "bytes": int(rng.integers(40, 90)) * 2**30})
        elif kind == "bool":
            default = False
            entry = {"target": "xla", "type": "bool", "default": default}
            if name == "xla_gpu_enable_latency_hiding_scheduler":
                baseline[name] = True  # deployed on; switching it off costs
                entry["effect"] = {"values": {False: round(-abs(_size(rng, family)), 5)}}
            elif active() or family == "rand-null":
                entry["effect"] = {"values": {True: round(_size(rng, family), 5)}}
            if name != "xla_gpu_enable_latency_hiding_scheduler" and rng.random() < 0.12:
                ooms.append({"when": {name: True}, "bytes": int(rng.integers(30, 80)) * 2**30})
        elif kind == "categorical":
            choices = _CATEGORICALS[name]
            entry = {"target": "env", "type": "categorical", "choices": list(choices), "default": None}
            values = {c: round(_size(rng, family), 5) for c in choices if active() or family == "rand-null"}
            if values:
                entry["effect"] = {"values": values}
        elif kind == "overlap":
            entry = {"target": "xla", "type": "int", "low": 1, "high": 4, "default": 1}
            values = {v: round(_size(rng, family), 5) for v in (2, 3, 4) if active() or family == "rand-null"}
            if values:
                entry["effect"] = {"values": values}
        else:  # the pipeline microbatch count: a bubble, deployed at 8 or 16
            entry = {"target": "args", "type": "int", "low": 4, "high": 64, "log": True, "default": 8,
                     "grid": list(_MB_GRID),
                     "effect": {"bubble": {"stages": int(rng.choice([2, 4, 8])),
                                           "overhead": round(float(rng.uniform(0.002, 0.008)), 4)}}}
            baseline[name] = int(rng.choice([8, 16]))
            ooms.append({"when": {name: {"le": 4}}, "bytes": 25769803776})
        params[name] = entry
    interactions = _interactions(rng, family, params)
    drift_total = float(rng.uniform(0.01, 0.04))
    return {
        "description": f"held-out random landscape ({family}, seed {seed})",
        "source": "benchmarks/_random_landscapes.py",
        "jaxlib": "0.10.2",
        "devices": 8,
        "tokens_per_s": 12000.0,
        "total_weights": 262144,
        "tflops_per_token": 0.0552,
        "compile_s": round(float(rng.uniform(10.0, 120.0)), 1),
        "noise": {"run": round(float(rng.uniform(0.003, 0.01)), 4), "step": 0.004},
        "drift": {"total": round(drift_total, 4), "launches": 80, "sine": round(float(rng.uniform(0.1, 0.25)) *
                                                                                 drift_total, 4),
                  "period": int(rng.integers(15, 36))},
        "baseline": baseline,
        "params": params,
        "interactions": interactions,
        "oom": ooms,
        "unknown_flags": ["xla_gpu_enable_async_collectives"],
    }


def _interactions(rng: np.random.Generator, family: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """0-2 pairwise interactions between boolean / categorical params: a sign flip or a pair that helps together."""
    discrete = [n for n, e in params.items() if e["type"] in ("bool", "categorical")
                and n != "xla_gpu_enable_latency_hiding_scheduler"]
    out: list[dict[str, Any]] = []
    for _ in range(int(rng.integers(0, 3))):
        if len(discrete) < 2:
            break
        a, b = (discrete[i] for i in rng.choice(len(discrete), 2, replace=False))
        when = {n: (True if params[n]["type"] == "bool" else str(rng.choice(params[n]["choices"]))) for n in (a, b)}
        if family == "rand-null":
            gain = _size(rng, family)
        elif rng.random() < 0.5:  # only together: a sizeable gain that neither shows alone
            gain = abs(_size(rng, family)) * 2.0
        else:  # sign flip: the pair costs what each gains
            gain = -abs(_size(rng, family)) * 1.5
        out.append({"when": when, "gain": round(gain, 5)})
    return out


def _scaled(entry: dict[str, Any], factor: float) -> dict[str, Any]:
    """The entry with every flag effect (values, bump heights, interaction gains) times ``factor``; bubbles kept."""
    out = copy.deepcopy(entry)
    for param in out["params"].values():
        effect = param.get("effect") or {}
        if "values" in effect:
            effect["values"] = {k: round(v * factor, 6) for k, v in effect["values"].items()}
        if "bump" in effect:
            effect["bump"]["height"] = round(effect["bump"]["height"] * factor, 6)
    for inter in out["interactions"]:
        inter["gain"] = round(inter["gain"] * factor, 6)
    return out


def _best_gain(name: str, entry: dict[str, Any]) -> float:
    return landscape_from_data(name, entry).best().gain


def random_landscape_data(family: str, seed: int) -> dict[str, Any]:
    """The landscapes-file entry of ``{family}-{seed}``: drawn, then scaled until the family's definition holds.

    Raises:
        ValueError: an unknown family.
    """
    if family not in CHOICES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(CHOICES)}")
    if family.endswith(FLAKY):
        entry = random_landscape_data(family[:-len(FLAKY)], seed)
        return {**entry, "description": f"{entry['description']} On flaky infrastructure.",
                "flaky": dict(load_landscape("flaky").flaky)}
    name = f"{family}-{seed}"
    for attempt in range(50):
        entry = _draw(family, seed, attempt)
        if landscape_from_data(name, entry).oom_bytes({}) is not None:
            continue  # the deployed job itself runs out of memory: no study of it can score anything
        if family == "rand-null":
            if _null_sizes(landscape_from_data(name, entry)) < NULL_EFFECT:
                return entry
            continue
        low, high = BEST_RANGE[family]
        rng = np.random.default_rng([seed, _FAMILY_ID[family], attempt, 1])
        target = float(rng.uniform(low + 0.002, min(high, 0.16) - 0.002))
        recipe = None
        if family == "rand-recipe":
            entry, recipe = add_recipe(entry, rng)
        fit = _fit_scale(name, entry, target)
        land = landscape_from_data(name, fit) if fit is not None else None
        if land is None or land.lowest_factor() <= 0:
            continue  # scaled until a setting's throughput factor is negative: no job behaves so (lowest_factor)
        best = land.best()
        if low <= best.gain <= high:
            if recipe is not None:
                fit["profiles"] = recipe.profiles(fit, best.settings, rng)
            return fit
    raise RuntimeError(f"no {family} landscape found for seed {seed} in 50 attempts")  # pragma: no cover


def _fit_scale(name: str, entry: dict[str, Any], target: float) -> dict[str, Any] | None:
    """Bisect the effect scale so the true best gain is ``target`` (the best gain grows with the scale)."""
    lo, hi = 0.0, 1.0
    while _best_gain(name, _scaled(entry, hi)) < target:
        hi *= 2.0
        if hi > 64:
            return None
    if _best_gain(name, _scaled(entry, lo)) > target:
        return None  # the bubble alone is already above the target
    for _ in range(18):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _best_gain(name, _scaled(entry, mid)) < target else (lo, mid)
    return _scaled(entry, hi)


def _null_sizes(land: Landscape) -> float:
    """The largest single effect of ``land``: any one param changed from the deployed value, or any interaction."""
    largest = max((abs(float(i["gain"])) for i in land.interactions), default=0.0)
    for name, param in land.params.items():
        for value in param.grid():
            if land.oom_bytes({name: value}) is None:
                largest = max(largest, abs(land.true_gain({name: value})))
    return largest


def write_landscapes(path: Path, picks: Iterable[tuple[str, int]]) -> list[str]:
    """Write ``{family}-{seed}`` for each ``(family, seed)`` to one landscapes file; returns the names."""
    data = {f"{family}-{seed}": random_landscape_data(family, seed) for family, seed in picks}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# held-out random landscapes (benchmarks/_random_landscapes.py); not shipped\n"
                    + yaml.safe_dump(data, sort_keys=False))
    return list(data)


def random_landscape(family: str, seed: int, folder: Path) -> Landscape:
    """Write ``{family}-{seed}`` to ``folder/{family}-{seed}.yaml`` and load it as a job would."""
    path = folder / f"{family}-{seed}.yaml"
    name = write_landscapes(path, [(family, seed)])[0]
    return load_landscape(name, path)
