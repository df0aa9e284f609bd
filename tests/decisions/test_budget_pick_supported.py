"""A budget verdict recommends only what both the arm's fresh runs and the effects model support.

rand-null-140023 (a held-out random landscape where nothing matters, at 540efdb): the study ended on `budget`
recommending a pair row (Ring, LL, the pipelined reduce-scatter) at +3.2 % [+1.7, +4.8] over two fresh runs, true
+0.24 %: the two runs were lucky at 1 % run noise, and the family-wise bound over the nine raced arms still cleared
zero. The effects model, which pools every run and fits how far configurations depart from their parts, predicted
it at +0.30 % +- 0.27. A null job must end with no recommendation of any size (issue 25). Since the sixty-ninth
session the study runs the pair rows earlier and its last pick is another pair row (+2.4 % over four fresh runs, the
model +0.9 %): the fresh runs clear the null bar, the model does not, and nothing is recommended.
"""

from __future__ import annotations

import re

from benchmarks._random_landscapes import random_landscape
from flagopt import stats
from flagopt.study import arms_of
from tests.decisions.sim_study import run_study


def test_a_pick_its_fresh_runs_confirm_but_the_model_does_not_is_not_recommended(tmp_path):
    land = random_landscape("rand-null", 140023, tmp_path)
    runner, verdict = run_study(land, tmp_path / "study", 140023)
    assert verdict is not None and verdict.winner is None, verdict.message
    assert "no configuration is confirmed better" in verdict.message
    withheld = re.search(r"read \+([\d.]+)% over \d+ fresh runs, but the effects model over every run puts it at "
                         r"\+([\d.]+)% \+- [\d.]+%: not recommended", verdict.message)
    assert withheld, verdict.message
    fresh, modelled = (float(g) / 100 for g in withheld.groups())
    assert fresh >= runner.space.stop.null_gain > modelled, verdict.message
    # the fresh runs alone would have recommended one: the model is what withheld it
    space, planner = runner.space, runner.planner
    eligible = planner.eligible(arms_of(runner.records(), space.noise, space.metric.direction))
    conf = stats.win_confidence(space.noise.confidence, sum(1 for a in eligible if a.n > 1))
    claimed = [a for a in eligible if a.verdict == "better" and a.claim is not None and a.claim.bounds(conf)[0] > 0]
    assert claimed and not any(planner.model_supports(a, conf) for a in claimed)
