"""Two categorical settings that pay only together: each one's swap is asked beside the other's value.

The real driver on a simulated job (SimExecutor), stress-cat-pair of benchmarks/stress_landscapes.yaml: NCCL_ALGO=Tree
gains +0.6 % alone, NCCL_PROTO=Simple costs 0.4 % alone, and the two together pay +7 %. The combination takes Tree
with LL128 (+0.5 % alone). The study had one swap-one run for all its categorical settings; the algorithm's spent it,
the protocol was never swapped beside Tree, and 24 of 30 seeds ended 6 points short of the best.
"""

from __future__ import annotations

from flagopt.decide._plan import varied_param
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import STRESS, run_study


def test_the_protocol_is_swapped_beside_the_algorithm_and_the_pair_wins(tmp_path):
    land = load_landscape("stress-cat-pair", STRESS)
    runner, verdict = run_study(land, tmp_path, 0)
    records = runner.records()
    swaps = [r for r in records if r.attrs.get("design") == "swap-one"]
    swapped = {varied_param(r.profile) for r in swaps}
    assert swapped == {"NCCL_ALGO", "NCCL_PROTO"}, [r.profile for r in swaps]
    together = [r for r in records if r.ok and r.attrs["settings"]["env"].get("NCCL_ALGO") == "Tree"
                and r.attrs["settings"]["env"].get("NCCL_PROTO") == "Simple"]
    assert together, "no run set the algorithm and the protocol that pay together"
    assert verdict is not None and verdict.reason == "win"
    env = verdict.winner["settings"]["env"]
    assert (env.get("NCCL_ALGO"), env.get("NCCL_PROTO")) == ("Tree", "Simple"), verdict.winner["label"]
    assert land.true_gain(verdict.winner["settings"]) >= 0.99 * (1 + land.best().gain) - 1
