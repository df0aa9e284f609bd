"""Fit the `h200x2-measured` landscape to every real measurement of the 2xH200 FSDP job (issue 25, item 5).

The data: every measured configuration of the five real studies (docs/validation/h200x2/engine25*/
leaderboard.txt: profiles, one-factor probes, combinations, balanced-screen points), and the four experiments of
../shared/measurements/ (a 12-run Plackett-Burman screen, the recipe's drop-one variants, its neighbourhood, a
4-round A/B). The model is the one the simulated job plays (flagopt/workloads/_landscape.py): a main effect per
setting, a *communication pool* that the overlap settings share (each hides a share of what is still exposed, so
together they add up to less than alone), and three pairs with an effect of their own (Triton GEMMs off pays only
with the pipelined all-gather; the pipelined all-reduce pays with a 1 GiB all-reduce threshold and hurts with
NCCL_PROTO=Simple). ``scipy.optimize.least_squares`` fits it; the script prints each observation against the fit
and the landscape's effects as the YAML of ``h200x2-measured`` in landscapes.yaml.

Usage:
    python benchmarks/calibrate_measured.py [--measurements ../shared/measurements]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
STUDIES = [ROOT / "docs/validation/h200x2" / d / "leaderboard.txt"
           for d in ("engine25", "engine25-head", "engine25-head2", "engine25-head3", "engine25-rerun")]

#: Settings with a main effect of their own (short names). The overlap limit has none: it only hides communication
#: (overlap limit 2 is +1.7 % alone and nothing on top of the recipe). The pipelined reduce-scatter ("prs") has no
#: effect at all: the job's optimized train step is the same program with it unset, on and off (HLO dumps on the
#: 2xH200 machine, docs/validation/h200x2/engine25-head3/NOTES.md), so the model gives it none.
MAIN = ["pag", "par", "dbuf", "tri_off", "no_remat", "simple", "ll", "ll128", "c1", "c8", "c32",
        "ag32", "ag128", "ag512", "ag1g", "ag2g", "rs32", "rs128", "rs512", "rs2g", "ar1g", "lhs_off"]
#: Pool members: (name, the settings that must all be on).
POOL = [("ov2", ("ov2",)), ("ov4", ("ov4",)), ("pag+dbuf", ("pag", "dbuf")), ("c1", ("c1",))]
#: Pairs with their own effect on top.
PAIRS = [("tri_off", "pag"), ("par", "simple"), ("par", "ar1g")]

RECIPE = {"tri_off", "ar1g", "ag1g", "rs128", "pag", "prs", "par", "dbuf", "no_remat", "c1"}
#: Each setting as a study's leaderboard prints it (its flags column), by short name. ``pipelined_rs=false`` compiles
#: to the deployed job's own program (as does ``=true``), so it sets nothing here.
FLAG = {"overlap_limit=2": "ov2", "overlap_limit=4": "ov4", "cuda_connections=1": "c1", "cuda_connections=8": "c8",
        "cuda_connections=32": "c32", "double_buffering=true": "dbuf", "rs_threshold=32 MiB": "rs32",
        "rs_threshold=128 MiB": "rs128", "rs_threshold=512 MiB": "rs512", "rs_threshold=2 GiB": "rs2g",
        "ag_threshold=32 MiB": "ag32", "ag_threshold=128 MiB": "ag128", "ag_threshold=512 MiB": "ag512",
        "ag_threshold=1 GiB": "ag1g", "ag_threshold=2 GiB": "ag2g", "pipelined_ag=true": "pag",
        "pipelined_rs=true": "prs", "pipelined_ar=true": "par", "nccl_proto=Simple": "simple",
        "nccl_proto=LL128": "ll128", "nccl_proto=LL": "ll",
        "lhs=false": "lhs_off", "triton_gemm=false": "tri_off", "reduce_combine_threshold=1 GiB": "ar1g",
        "passes=rematerialization": "no_remat", "pipelined_rs=false": None}
#: Each short name as the landscape's (param, value).
SETTING = {"pag": ("xla_gpu_enable_pipelined_all_gather", True),
           "par": ("xla_gpu_enable_pipelined_all_reduce", True), "dbuf": ("xla_gpu_enable_while_loop_double_buffering", True),
           "ov2": ("xla_gpu_experimental_parallel_collective_overlap_limit", 2),
           "ov4": ("xla_gpu_experimental_parallel_collective_overlap_limit", 4),
           "tri_off": ("xla_gpu_enable_triton_gemm", False), "no_remat": ("xla_disable_hlo_passes", "rematerialization"),
           "simple": ("NCCL_PROTO", "Simple"), "ll": ("NCCL_PROTO", "LL"), "ll128": ("NCCL_PROTO", "LL128"),
           "c1": ("CUDA_DEVICE_MAX_CONNECTIONS", 1), "c8": ("CUDA_DEVICE_MAX_CONNECTIONS", 8),
           "c32": ("CUDA_DEVICE_MAX_CONNECTIONS", 32),
           "ag32": ("xla_gpu_all_gather_combine_threshold_bytes", 33554432),
           "ag128": ("xla_gpu_all_gather_combine_threshold_bytes", 134217728),
           "ag512": ("xla_gpu_all_gather_combine_threshold_bytes", 536870912),
           "ag1g": ("xla_gpu_all_gather_combine_threshold_bytes", 1073741824),
           "ag2g": ("xla_gpu_all_gather_combine_threshold_bytes", 2147483648),
           "rs32": ("xla_gpu_reduce_scatter_combine_threshold_bytes", 33554432),
           "rs128": ("xla_gpu_reduce_scatter_combine_threshold_bytes", 134217728),
           "rs512": ("xla_gpu_reduce_scatter_combine_threshold_bytes", 536870912),
           "rs2g": ("xla_gpu_reduce_scatter_combine_threshold_bytes", 2147483648),
           "ar1g": ("xla_gpu_all_reduce_combine_threshold_bytes", 1073741824),
           "lhs_off": ("xla_gpu_enable_latency_hiding_scheduler", False)}
PB_FACTORS = ["ag1g", "rs128", "pag", "prs", "par", "dbuf", "ov2", "tri_off", "no_remat", "simple", "c1"]
DROP = {"recipe-cdmc1": "c1", "recipe-pipelined_ag": "pag", "recipe-pipelined_rs": "prs", "recipe-rs128MiB": "rs128",
        "recipe-ar1GiB": "ar1g", "recipe-dbuf": "dbuf", "recipe-no_remat": "no_remat"}


def study_rows(path: Path) -> list[tuple[list[str], float, int]]:
    """(flags, gain in %, runs) of each measured row of a study's leaderboard (a row folded over several lines is
    joined); a winner's gain is over its fresh runs, and so is its count."""
    rows: list[tuple[list[str], float, int]] = []
    flags: list[str] = []
    head: list[str] = []

    def close() -> None:
        if head and re.fullmatch(r"[+-][\d.]+", head[5]):
            runs = re.match(r"(\d+)(?: \((\d+) fresh\))?", head[8])
            rows.append(([f.strip() for f in " ".join(flags).split(",") if f.strip()], float(head[5]),
                         int(runs.group(2) or runs.group(1))))

    for line in path.read_text().splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells[0]:  # a new row
            close()
            head, flags = cells, [cells[2]]
        elif cells[2]:
            flags.append(cells[2])
    close()
    return rows


def observations(measurements: Path) -> list[tuple[str, frozenset[str], float, float]]:
    """(label, settings, gain, weight): every measured configuration against its own experiment's deployed runs."""
    out: list[tuple[str, frozenset[str], float, float]] = []
    runs_of: dict[frozenset[str], list[tuple[float, int]]] = {}  # settings -> (gain, runs) in each study
    for path in STUDIES:
        for flags, gain_pct, runs in study_rows(path):
            names = [FLAG.get(f, "?") for f in flags]
            if "?" not in names:  # the baselines' rows and any setting the model does not know
                runs_of.setdefault(frozenset(n for n in names if n), []).append((gain_pct / 100, runs))
    for on, seen in runs_of.items():  # each study against its own deployed runs: weight by runs
        n = sum(r for _, r in seen)
        label = "the recipe" if on == RECIPE else ", ".join(sorted(on))
        label = label or "nothing (pipelined_rs=false)"
        out.append((f"studies: {label}", on, sum(g * r for g, r in seen) / n, math.sqrt(n)))
    pb = json.loads((measurements / "fsdp_h200x2_plackett_burman12.json").read_text())
    base = statistics.mean(s for _, lv, s in pb["runs"] if all(v < 0 for v in lv))
    for i, levels, steady in pb["runs"]:
        if any(v > 0 for v in levels):
            on = frozenset(f for f, v in zip(PB_FACTORS, levels) if v > 0)
            out.append((f"PB run {i}", on, steady / base - 1, 1.0))
    predicted = frozenset(f for f, v in zip(PB_FACTORS, pb["predicted"]) if v > 0)
    out.append(("PB main-effects best", predicted, pb["gains"]["predicted"]["gain"], math.sqrt(3)))
    out.append(("PB recipe", frozenset(RECIPE), pb["gains"]["recipe"]["gain"], math.sqrt(3)))
    drop = json.loads((measurements / "fsdp_h200x2_recipe_drop_one.json").read_text())["gains"]
    out.append(("drop-one exp: recipe", frozenset(RECIPE), drop["recipe"]["gain"], math.sqrt(2)))
    for arm, name in DROP.items():
        out.append((f"drop-one exp: {arm}", frozenset(RECIPE - {name}), drop[arm]["gain"], math.sqrt(2)))
    near = json.loads((measurements / "fsdp_h200x2_recipe_neighbourhood.json").read_text())["gains"]
    for arm, settings in {"recipe": RECIPE, "recipe+overlap2": RECIPE | {"ov2"}, "recipe-pipelined_ar": RECIPE - {"par"},
                          "recipe-ag1GiB": RECIPE - {"ag1g"}, "recipe-triton_off": RECIPE - {"tri_off"}}.items():
        out.append((f"neighbourhood: {arm}", frozenset(settings), near[arm]["gain"], math.sqrt(3)))
    ab = json.loads((measurements / "fsdp_h200x2_ab_4arms.json").read_text())["gains"]
    for arm, settings in {"overlap2": {"ov2"}, "recipe": RECIPE, "comb2": {"ov2", "c1"}}.items():
        out.append((f"A/B: {arm}", frozenset(settings), ab[arm]["gain"], 2.0))
    return out


def gain(theta: np.ndarray, on: frozenset[str]) -> float:
    """The model's gain of the configuration that sets ``on`` (the simulated job's arithmetic)."""
    main = theta[:len(MAIN)]
    size = theta[len(MAIN)]
    shares = theta[len(MAIN) + 1:len(MAIN) + 1 + len(POOL)]
    pairs = theta[len(MAIN) + 1 + len(POOL):]
    factor = math.prod(1 + m for name, m in zip(MAIN, main) if name in on)
    left = math.prod(1 - s for (_, need), s in zip(POOL, shares) if all(n in on for n in need))
    factor *= 1 + size * (1 - left)
    factor *= math.prod(1 + w for (a, b), w in zip(PAIRS, pairs) if a in on and b in on)
    return factor - 1


def fit(obs: list[tuple[str, frozenset[str], float, float]], ridge: float = 0.3) -> np.ndarray:
    n_main, n_pool = len(MAIN), len(POOL)
    x0 = np.r_[np.zeros(n_main), 0.03, np.full(n_pool, 0.3), np.zeros(len(PAIRS))]
    lo = np.r_[np.full(n_main, -0.2), 0.0, np.zeros(n_pool), np.full(len(PAIRS), -0.1)]
    hi = np.r_[np.full(n_main, 0.2), 0.2, np.ones(n_pool), np.full(len(PAIRS), 0.1)]

    def residuals(theta: np.ndarray) -> np.ndarray:
        r = [(gain(theta, on) - g) * w / 0.003 for _, on, g, w in obs]  # in units of the job's run noise
        # a weak pull of the pairs and the main effects of pool members toward zero: the data decide, not the prior
        r += list(ridge * theta[n_main + 1 + n_pool:] / 0.01)
        return np.array(r)

    return least_squares(residuals, x0, bounds=(lo, hi)).x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurements", type=Path, default=ROOT.parent / "shared" / "measurements")
    args = parser.parse_args()
    obs = observations(args.measurements)
    theta = fit(obs)
    res = []
    for label, on, g, w in obs:
        model = gain(theta, on)
        res.append(model - g)
        print(f"{label:48s} measured {100 * g:+6.2f} %  model {100 * model:+6.2f} %")
    print(f"rms residual {100 * math.sqrt(statistics.mean(r * r for r in res)):.2f} pp over {len(res)} configurations")
    n_main, n_pool = len(MAIN), len(POOL)
    effects: dict[str, dict] = {}
    for name, value in zip(MAIN, theta[:n_main]):
        param, setting = SETTING[name]
        effects.setdefault(param, {})[setting] = round(float(value), 4)
    hides = [{"when": dict(SETTING[n] for n in need), "share": round(float(v), 3)}
             for (_, need), v in zip(POOL, theta[n_main + 1:n_main + 1 + n_pool])]
    pairs = [{"when": dict(SETTING[n] for n in pair), "gain": round(float(v), 4)}
             for pair, v in zip(PAIRS, theta[n_main + 1 + n_pool:])]
    print(yaml.safe_dump({"effects (values)": effects, "pool": {"gain": round(float(theta[n_main]), 4), "hides": hides},
                          "interactions": pairs}, sort_keys=False, default_flow_style=None, width=118))


if __name__ == "__main__":
    main()
