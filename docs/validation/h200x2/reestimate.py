"""Re-estimate the arms of a recorded study: each run against its two controls (statistics.md §4) and against one
drift curve fitted to every run (§16). Usage: python docs/validation/h200x2/reestimate.py STUDIES_TGZ"""

import sys
import tarfile
import tempfile

import optuna

from flagopt import stats
from flagopt.decide import arms_of, baseline_runs, to_run
from flagopt.space import NoiseSpec
from flagopt.study import history

optuna.logging.set_verbosity(optuna.logging.WARNING)
folder = tempfile.mkdtemp()
with tarfile.open(sys.argv[1]) as tar:
    tar.extract("studies/flagopt.db", folder, filter="data")
storage = f"sqlite:///{folder}/studies/flagopt.db"
records = history(optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage))
controls = baseline_runs(records)
print(f"{len(records)} runs, {len(controls)} controls; the controls' own run-to-run sigma "
      f"{100 * stats.run_noise(controls):.2f} %")
print("arm | runs | fresh runs vs two controls | fresh runs vs one curve (every run)")
for arm in sorted(arms_of(records, NoiseSpec()), key=lambda a: -a.estimate.gain if a.estimate else 9):
    if arm.claim is None:
        continue
    pair = stats.estimate_arm([to_run(r) for r in arm.runs[1:]], controls)
    joint = arm.claim
    print(f"{arm.label[:50]} | {arm.n} | {100 * pair.gain:+.2f} % [{100 * pair.lo:+.2f}, {100 * pair.hi:+.2f}] "
          f"sigma {100 * pair.sigma:.2f} % df {pair.df:.0f} | {100 * joint.gain:+.2f} % [{100 * joint.lo:+.2f}, "
          f"{100 * joint.hi:+.2f}] sigma {100 * joint.sigma:.2f} % df {joint.df:.0f}")
