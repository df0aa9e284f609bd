"""The landscapes file (``landscapes.yaml``, or one a test or a benchmark writes): its names, which one a job reads,
and one entry read into a :class:`~flagopt.workloads._landscape.Landscape` (cached while the file is unchanged)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from flagopt.errors import FlagoptError
from flagopt.workloads._landscape import FLAKY_KINDS, LANDSCAPES, LANDSCAPES_ENV, Landscape, SimParam


def landscape_names(path: Path = LANDSCAPES) -> list[str]:
    """Names of the landscapes in ``path``."""
    return list(yaml.safe_load(Path(path).read_text()))


_CACHE: dict[tuple[str, int, str], Landscape] = {}


def landscapes_path(option: str = "", env: Mapping[str, str] | None = None) -> Path:
    """The landscapes file a job reads: ``landscapes=`` if given, else ``$FLAGOPT_SIM_LANDSCAPES``, else the shipped."""
    chosen = option or (os.environ if env is None else env).get(LANDSCAPES_ENV, "")
    return Path(chosen) if chosen else LANDSCAPES


def load_landscape(name: str, path: Path | str = LANDSCAPES) -> Landscape:
    """Read one landscape from ``landscapes.yaml`` (or ``path``); cached while the file is unchanged."""
    path = Path(path)
    try:
        key = (str(path.resolve()), path.stat().st_mtime_ns, name)
    except OSError as exc:
        raise FlagoptError(str(path), "landscapes", f"cannot read the landscapes file: {exc.strerror}") from exc
    if key not in _CACHE:
        _CACHE[key] = _read_landscape(name, path)
    return _CACHE[key]


def _read_landscape(name: str, path: Path) -> Landscape:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or name not in data:
        known = sorted(data) if isinstance(data, dict) else []
        raise FlagoptError(str(path), "landscape", f"unknown landscape {name!r}; choose one of {known}")
    return landscape_from_data(name, data[name], path)


def landscape_from_data(name: str, d: Mapping[str, Any], path: Path | str = LANDSCAPES) -> Landscape:
    """A :class:`Landscape` from one entry of a landscapes file (``path`` is where it is, or will be, written)."""
    path = Path(path)
    flaky = {str(k): float(v) for k, v in (d.get("flaky") or {}).items()}
    bad = sorted(set(flaky) - set(FLAKY_KINDS))
    if bad or any(not 0.0 <= v <= 1.0 for v in flaky.values()) or sum(flaky.values()) > 1.0:
        raise FlagoptError(str(path), f"{name}.flaky", f"probabilities in [0, 1] summing to <= 1 for "
                           f"{', '.join(FLAKY_KINDS)}; got {flaky}")
    pool = _pool(d.get("pool"), f"{name}.pool", path)
    _check_rough(name, d, path)
    params = {
        pname: SimParam(
            name=pname,
            target=p["target"],
            type=p["type"],
            default=p.get("default"),
            low=p.get("low"),
            high=p.get("high"),
            log=bool(p.get("log", False)),
            choices=tuple(p.get("choices", ())),
            explicit_grid=tuple(p.get("grid", ())),
            effect=p.get("effect"),
            tunable=bool(p.get("tunable", True)),
        )
        for pname, p in d["params"].items()
    }
    _check_setting_names(name, d, params, path)
    return Landscape(
        name=name,
        description=d["description"],
        jaxlib=str(d["jaxlib"]),
        devices=int(d["devices"]),
        tokens_per_s=float(d["tokens_per_s"]),
        total_weights=int(d["total_weights"]),
        tflops_per_token=float(d["tflops_per_token"]),
        compile_s=float(d["compile_s"]),
        noise=d["noise"],
        drift_model=d["drift"],
        baseline={k: params[k].coerce(v) for k, v in (d.get("baseline") or {}).items()},
        params=params,
        interactions=tuple(d.get("interactions") or ()),
        ooms=tuple(d.get("oom") or ()),
        unknown_flags=frozenset(d.get("unknown_flags") or ()),
        flaky=flaky,
        pool=pool,
        profiles=dict(d.get("profiles") or {}),
        path="" if path.resolve() == LANDSCAPES.resolve() else str(path.resolve()),
    )


def _check_setting_names(name: str, d: Mapping[str, Any], params: Mapping[str, SimParam], path: Path) -> None:
    """Every setting an entry names (its baseline, the ``when`` of its interactions, OOM rules and pool, its
    profiles) must be one of its params: a misspelt name never matches, and the truth model would silently lose an
    interaction or an OOM cliff (or, in the baseline, fail later with a bare ``KeyError``)."""
    places: list[tuple[str, Any]] = [(f"{name}.baseline", d.get("baseline") or {})]
    for section in ("interactions", "oom"):
        places += [(f"{name}.{section}[{i}].when", rule.get("when") or {})
                   for i, rule in enumerate(d.get(section) or ())]
    hides = (d.get("pool") or {}).get("hides", ())  # checked already: a list of mappings with a ``when``
    places += [(f"{name}.pool.hides[{i}].when", hide["when"]) for i, hide in enumerate(hides)]
    for profile, parts in (d.get("profiles") or {}).items():
        places += [(f"{name}.profiles.{profile}.{part}", settings or {}) for part, settings in (parts or {}).items()]
    for key, settings in places:
        unknown = [str(n) for n in settings if n not in params]
        if unknown:
            raise FlagoptError(str(path), key, f"{', '.join(unknown)}: not a param of this landscape (its params: "
                               f"{', '.join(params)})")


def _check_rough(name: str, d: Mapping[str, Any], path: Path) -> None:
    """The optional stragglers (``noise.straggler``: a probability, ``noise.straggler_cost``: 0..1) and level shift
    (``drift.shift`` above -1, from launch ``drift.shift_at`` >= 0) of an entry, checked."""
    noise, drift = d.get("noise") or {}, d.get("drift") or {}
    checks = [("noise.straggler", noise.get("straggler", 0.0), lambda v: 0.0 <= v <= 1.0, "a probability in [0, 1]"),
              ("noise.straggler_cost", noise.get("straggler_cost", 0.03), lambda v: 0.0 <= v < 0.66,
               "a relative slowdown in [0, 0.66) (a straggler is slower by half to one and a half times it)"),
              ("drift.shift", drift.get("shift", 0.0), lambda v: v > -1.0, "a relative level shift above -1"),
              ("drift.shift_at", drift.get("shift_at", 0.0), lambda v: v >= 0.0, "a launch index >= 0")]
    for key, value, ok, what in checks:
        try:
            good = not isinstance(value, bool) and ok(float(value))
        except (TypeError, ValueError):
            good = False
        if not good:
            raise FlagoptError(str(path), f"{name}.{key}", f"{what}; got {value!r}")


def _pool(pool: Any, key: str, path: Path) -> Mapping[str, Any] | None:
    """A landscape's ``pool:`` section, checked: ``gain`` a number, ``hides`` a list of ``{when: {...}, share: 0..1}``."""
    if pool is None:
        return None
    try:
        ok = math.isfinite(float(pool["gain"])) and isinstance(pool["hides"], list) and bool(pool["hides"]) and all(
            isinstance(m["when"], Mapping) and 0.0 <= float(m["share"]) <= 1.0 for m in pool["hides"])
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise FlagoptError(str(path), key, f"a mapping with a numeric gain and hides: [{{when: {{...}}, share: 0..1}}, "
                           f"...]; got {pool!r}")
    return pool
