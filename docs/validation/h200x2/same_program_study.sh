#!/usr/bin/env bash
# The same-program check inside a study on the 2xH200 machine (one device call, about 4 minutes):
#   bash docs/validation/h200x2/same_program_study.sh
# Writes to $OUT the run log, the leaderboard (JSON and table) and each trial's same_program attrs.
set -u
. docs/validation/h200x2/setup_device.sh || exit 1
space=docs/validation/h200x2/same_program.yaml
storage=sqlite:///studies/flagopt.db
nvidia-smi -L | tee "$OUT/gpus.txt"
timeout -s TERM 480 python3 -m flagopt run --space $space --storage $storage 2>&1 | tee "$OUT/h200x2-same-run.log"
python3 -m flagopt leaderboard h200x2-same --storage $storage | tee "$OUT/leaderboard.txt"
python3 -m flagopt leaderboard h200x2-same --storage $storage --json > "$OUT/leaderboard.json"
python3 - > "$OUT/same_program.json" <<'PY'
import json
from flagopt.study import history, load_study
rows = [{"trial": r.number, "kind": r.kind, "label": r.profile, "status": r.status, "gain": r.gain,
         **{k: v for k, v in r.attrs.items() if k.startswith("same_program")}}
        for r in history(load_study("sqlite:///studies/flagopt.db", "h200x2-same"))]
print(json.dumps(rows, indent=1))
PY
cat "$OUT/same_program.json"
