"""Benchmark a small space with one flag the installed XLA rejects: does the study still end on its verdict?

Usage:
    python benchmarks/rejected_flag.py --seeds 30 --first-seed 1000 --jobs 2

The null landscape (nothing matters, 1 % run noise, 3 % drift) cut to two booleans and NCCL_PROTO (deployed unset),
plus ``xla_gpu_enable_async_collectives``, a flag the simulated jaxlib does not know: its probe aborts with XLA's
"Unknown flag" message, or is not run once the study has found it. 31 configurations, 15 of which can run. Each
seed is the real ``StudyRunner`` on :class:`SimExecutor` (60-run budget); the line per seed gives its verdict, how
many records it wrote (runs, controls and the probes not run) and whether it recommended anything. A correct study
measures the 15 and ends ``null`` with no recommendation.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flagopt.workloads.sim import LANDSCAPES, Landscape, landscape_from_data  # noqa: E402

#: The null landscape's params the space keeps (the rest of its space is dropped: a small space).
KEPT = ("xla_gpu_enable_pipelined_all_gather", "xla_gpu_enable_while_loop_double_buffering", "NCCL_PROTO")


def null_with_rejected_flag(folder: Path, kept: tuple[str, ...] = KEPT, oom: tuple[str, ...] = ()) -> Landscape:
    """The null landscape with the params of ``kept`` and a boolean param on its first unknown flag; each boolean of
    ``oom`` runs out of memory when set.

    Example:
        >>> import tempfile
        >>> land = null_with_rejected_flag(Path(tempfile.mkdtemp()))
        >>> sorted(land.space_params())[0], len(land.space_params())
        ('NCCL_PROTO', 4)
    """
    data = copy.deepcopy(yaml.safe_load(Path(LANDSCAPES).read_text())["null"])
    data["params"] = {name: entry for name, entry in data["params"].items() if name in kept}
    data["oom"] = [{"when": {name: True}, "bytes": 2**36} for name in oom]
    rejected = data["unknown_flags"][0]
    data["params"][rejected] = {"target": "xla", "type": "bool", "default": False, "effect": {"values": {}}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "landscapes.yaml"
    path.write_text(yaml.safe_dump({"null-rejected": data}))
    return landscape_from_data("null-rejected", data, path)


def one_seed(seed: int) -> tuple[int, str, int, bool]:
    """``(seed, verdict, records, recommends)`` of one study."""
    import optuna

    from benchmarks._flagopt_run import run_flagopt

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")
    folder = Path(tempfile.mkdtemp(prefix="rejected-"))
    choice = run_flagopt(null_with_rejected_flag(folder), seed, folder / "study")
    return seed, choice.detail["verdict"], choice.detail["records"], choice.detail["winner"] is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one_seed, seeds))
    for seed, reason, records, recommends in results:
        print(f"seed {seed}: {reason}, {records} records{', RECOMMENDS' if recommends else ''}")
    nulls = sum(1 for _, reason, _, _ in results if reason == "null")
    print(f"null verdicts {nulls} of {len(results)}; median records {statistics.median(r[2] for r in results)}; "
          f"recommendations {sum(1 for r in results if r[3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
