#!/usr/bin/env bash
# Run (or resume) one validation study on the device for at most $2 seconds, then write its outputs to $OUT.
# Usage: bash docs/validation/h200x2/run_study.sh <space.yaml> <seconds>
set -u
. docs/validation/h200x2/setup_device.sh || exit 1
space=$1; limit=${2:-500}
name=$(python3 -c "import sys; from flagopt.space import load_space; print(load_space(sys.argv[1]).name)" "$space")
start=$(date +%s)
timeout -s TERM "$limit" python3 -m flagopt run --space "$space" --storage sqlite:///studies/flagopt.db 2>&1 \
  | tee -a "$OUT/$name-run.log"
echo "study wall: $(( $(date +%s) - start )) s"
python3 -m flagopt leaderboard "$name" --storage sqlite:///studies/flagopt.db
tar czf "$OUT/studies.tgz" --exclude=hlo studies
# The evidence run's train-step module, kept as a test fixture (the rest of the dump stays on the device).
dump=$(find studies -path '*hlo*' -name '*train_step*after_optimizations.txt' | head -1)
[ -n "$dump" ] && gzip -c "$dump" > "$OUT/${name}_train_step_after_optimizations.txt.gz"
