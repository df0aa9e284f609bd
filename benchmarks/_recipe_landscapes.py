"""The recipe structure of real jobs, added to a held-out random landscape (family ``rand-recipe``).

Issue 25's measurements on a real 2×H200 FSDP job found a structure the plain random families lack: the
communication that overlap flags hide is one pool, so their gains are sub-additive (a second flag that hides the same
communication adds little); a published recipe (a catalog profile) carries settings the search space does not offer,
some of which cost alone and pay only inside the recipe; and the recipe is a strong start, not the optimum. This
module adds that structure to a drawn landscape entry (``benchmarks/_random_landscapes.py``), from its own random
stream, so ``rand-recipe-N`` has the params of a plain draw plus:

* 1-3 recipe-only settings (``tunable: false``: the space does not offer them, a profile sets them), each with a
  small cost alone and a gain together with one tunable boolean or categorical value;
* a communication pool of +1.5..+5 % that 2-4 conditions on the tunable params hide, each a share of it;
* catalog profiles: ``recipe`` (the recipe-only settings, about two thirds of the tunable values the landscape's
  best uses, half the time one value the best does not use), and two single-setting profiles.

Example:
    >>> import numpy as np
    >>> params = {"NCCL_PROTO": {"target": "env", "type": "categorical", "choices": ["LL", "Simple"], "default": None},
    ...           "xla_gpu_enable_pipelined_all_gather": {"target": "xla", "type": "bool", "default": False}}
    >>> entry, recipe = add_recipe({"params": params, "interactions": [], "baseline": {}}, np.random.default_rng(0))
    >>> profiles = recipe.profiles(entry, {"NCCL_PROTO": "Simple"}, np.random.default_rng(1))
    >>> "recipe" in profiles, "pool" in entry
    (True, True)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Settings a recipe sets that the search space does not offer: (name, target, type, choices, default, recipe value).
_RECIPE_ONLY = (
    ("xla_gpu_enable_triton_gemm", "xla", "bool", None, True, False),
    ("xla_disable_hlo_passes", "xla", "categorical", ["rematerialization"], None, "rematerialization"),
    ("xla_gpu_enable_cudnn_fmha", "xla", "bool", None, False, True),
)
_OVERLAP = "xla_gpu_experimental_parallel_collective_overlap_limit"
_LHS = "xla_gpu_enable_latency_hiding_scheduler"


def _size(rng: np.random.Generator) -> float:
    """An effect size: log-normal around 1 % (unsigned)."""
    return float(rng.lognormal(np.log(0.01), 0.7))


def _switches(params: dict[str, Any], rng: np.random.Generator) -> list[tuple[str, Any]]:
    """One non-deployed value per discrete tunable (bool: true; categorical: a random choice; overlap: 2-4)."""
    out = []
    for name, entry in params.items():
        if name == _LHS or entry.get("tunable", True) is False:
            continue
        if entry["type"] == "bool":
            out.append((name, True))
        elif entry["type"] == "categorical":
            out.append((name, entry["choices"][int(rng.integers(len(entry["choices"])))]))
        elif name == _OVERLAP:
            out.append((name, int(rng.integers(2, 5))))
    return out


def add_recipe(entry: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], Recipe]:
    """``entry`` with recipe-only settings and a communication pool; the profiles wait for its best (:meth:`Recipe.profiles`)."""
    out = copy.deepcopy(entry)
    params, interactions = out["params"], out["interactions"]
    switches = _switches(params, rng)
    recipe: dict[str, dict[str, Any]] = {"xla": {}, "env": {}, "args": {}}
    for i in rng.permutation(len(_RECIPE_ONLY))[: int(rng.integers(1, 4))]:
        name, target, kind, choices, default, value = _RECIPE_ONLY[int(i)]
        spec: dict[str, Any] = {"target": target, "type": kind, "default": default, "tunable": False,
                                "effect": {"values": {value: round(-_size(rng) * 0.5, 5)}}}
        if choices:
            spec["choices"] = list(choices)
        params[name] = spec
        recipe[target][name] = value
        if switches:  # pays only together with one tunable value (which the recipe usually sets too)
            partner, partner_value = switches[int(rng.integers(len(switches)))]
            interactions.append({"when": {name: value, partner: partner_value}, "gain": round(_size(rng) * 1.5, 5)})
    if switches:
        picks = rng.permutation(len(switches))[: int(rng.integers(2, 5))]
        out["pool"] = {"gain": round(float(rng.uniform(0.015, 0.05)), 5),
                       "hides": [{"when": {switches[int(i)][0]: switches[int(i)][1]},
                                  "share": round(float(rng.uniform(0.4, 1.0)), 3)} for i in picks]}
    singles = [switches[int(i)] for i in rng.permutation(len(switches))[:2]]
    return out, Recipe(recipe, singles)


@dataclass(frozen=True)
class Recipe:
    """What a landscape's catalog profiles start from: the recipe-only settings and two single settings."""

    settings: dict[str, dict[str, Any]]
    singles: list[tuple[str, Any]]

    def profiles(self, entry: dict[str, Any], best: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """The catalog profiles of ``entry`` whose true best configuration is ``best``: ``recipe`` (the recipe-only
        settings; each tunable value of the best that differs from the deployed job with probability 0.65; half
        the time one value the best does not use) and one profile per single setting."""
        params, deployed = entry["params"], entry.get("baseline", {})
        recipe = copy.deepcopy(self.settings)
        for name, value in best.items():
            spec = params.get(name)
            if spec is None or spec.get("tunable", True) is False or value == deployed.get(name, spec["default"]):
                continue
            if rng.random() < 0.65:
                recipe[spec["target"]][name] = value
        spare = [(n, v) for n, v in _switches(params, rng) if n not in best or best[n] != v]
        if spare and rng.random() < 0.5:  # a value the recipe's authors liked that this job does not
            name, value = spare[int(rng.integers(len(spare)))]
            recipe[params[name]["target"]][name] = value
        out = {"recipe": {t: v for t, v in recipe.items() if v}}
        for name, value in self.singles:
            out[f"{name.split('_')[-1].lower()}_{str(value).lower()}"] = {params[name]["target"]: {name: value}}
        return out
