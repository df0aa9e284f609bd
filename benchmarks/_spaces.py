"""The flagopt search space of a simulated landscape, written as the YAML file a user would write.

The space says what is deployed (the landscape's baseline), what the image defaults are (each param's default,
for ``baseline-no-env``) and the tunables (each landscape param with its range or choices); it knows nothing of
the truth model. It goes through the real loader, so the benchmark runs what ``flagopt run`` would run.

Example:
    >>> from flagopt.workloads.sim import load_landscape
    >>> text = space_yaml(load_landscape("win10"), seed=3)
    >>> "landscape=win10" in text and "seed=3" in text
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flagopt.space import Space, load_space, render_value
from flagopt.workloads.sim import Landscape

_TARGET_KEY = {"xla": "xla", "env": "env", "args": "arg"}


def _param_entry(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {_TARGET_KEY[entry["target"]]: name}
    if entry["type"] == "bool":
        out["choices"] = [True, False]
    elif entry["type"] == "categorical":
        out["choices"] = list(entry["choices"])
    else:
        out.update(type=entry["type"], low=entry["low"], high=entry["high"])
        if entry.get("log"):
            out["log"] = True
    return out


def space_data(land: Landscape, seed: int, *, max_trials: int | None = 60, **options: Any) -> dict[str, Any]:
    """The space file's content for ``land``: default stop rules (win 0.05, null 0.02, max_null 25) and noise.

    ``options`` are merged into the file: a mapping into the section of that name (``stop={"refine": 20}`` keeps
    the other stop rules), anything else replaces the key (``noise={...}``, ``profiles={...}``, ``sampler=...``;
    ``params={...}`` replaces the landscape's tunables, ``params={}`` leaves none).

    Example:
        >>> from flagopt.workloads.sim import load_landscape
        >>> stop = space_data(load_landscape("win10"), 0, stop={"refine": 20})["stop"]
        >>> stop["refine"], stop["win"]
        (20, 0.05)
    """
    deployed = land.baseline_settings()
    # the image defaults a flag registry knows: what the job runs where the deployed state sets nothing
    defaults = {n: p.default for n, p in land.params.items() if p.default is not None and p.target != "args"}
    command = ["{python}", "-m", "flagopt.workloads.sim", f"landscape={land.name}", f"seed={seed}", "steps=15"]
    if land.path:  # a held-out landscape: the job reads it from its own file
        command.append(f"landscapes={land.path}")
    data: dict[str, Any] = {
        "name": f"bench-{land.name}-{seed}",
        "model_tag": f"sim-{land.name}",
        "parallelism": land.description,
        "command": command,
        "timeout_min": 30,
        "metric": {"format": "maxtext", "field": "Tokens/s/device", "window": [9, 14]},
        "baseline": {
            "xla_flags": " ".join(f"--{n}={render_value(v)}" for n, v in deployed["xla"].items()),
            "env": {n: render_value(v) for n, v in deployed["env"].items()},
            "args": dict(deployed["args"]),
            "defaults": defaults,
        },
        "params": {name: _param_entry(name, entry) for name, entry in land.space_params().items()},
        "stop": {"win": 0.05, "null_gain": 0.02, "max_null": 25,
                 **({"max_trials": max_trials} if max_trials is not None else {})},  # None: the default budget
        "seed": seed,
    }
    if land.profiles:  # the catalog profiles a real space of this job offers (h200x2-measured: the JAX-Toolbox recipe)
        data["profiles"] = {name: dict(profile) for name, profile in land.profiles.items()}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "params":
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def space_yaml(land: Landscape, seed: int, **kwargs: Any) -> str:
    """:func:`space_data` as YAML text."""
    return yaml.safe_dump(space_data(land, seed, **kwargs), sort_keys=False)


def write_space(land: Landscape, seed: int, folder: Path, **kwargs: Any) -> Space:
    """Write the space file into ``folder`` and load it with flagopt's own loader."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{land.name}.yaml"
    path.write_text(space_yaml(land, seed, **kwargs))
    return load_space(path)
