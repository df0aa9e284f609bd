#!/usr/bin/env bash
# Issue 25's real-GPU check on a 2-GPU machine: the FSDP study of fsdp.yaml from scratch with the decision engine of
# flagopt/decide (max_trials 40), then one interleaved A/B (4 rounds, Latin square) of its export and the study's
# next two best configurations against the deployed job. Device calls of at most 10 minutes each:
#   bash docs/validation/h200x2/engine25.sh study 560   # the study (first part)
#   bash docs/validation/h200x2/engine25.sh ab 560      # the study resumed to its verdict, the export, the A/B
#   bash docs/validation/h200x2/engine25.sh ab 560      # again if the A/B was cut: it resumes its rounds
# A machine that went back between calls starts bare: the studies come back as $OUT/studies.tgz after every call;
# put it in .carry/ (git-ignored, named in the call's carry) and the next call resumes from it.
set -u
phase=$1; seconds=$2
here=docs/validation/h200x2
storage=sqlite:///studies/flagopt.db
start=$(date +%s)
if [ ! -f studies/flagopt.db ] && [ -f .carry/studies.tgz ]; then tar xzf .carry/studies.tgz; fi
nvidia-smi -L | tee "$OUT/gpus.txt"
left() { echo $(( seconds - ($(date +%s) - start) )); }
keep_studies() { tar czf "$OUT/studies.tgz" --exclude=hlo studies; }  # what the next call resumes from
# Too little time left for the next step: keep the studies and stop; the next call resumes. (timeout reads 0 as no
# limit and rejects a negative one: at 9c3cd52 call 2's A/B never started, "timeout: invalid option -- '7'".)
enough() {
  [ "$(left)" -ge 30 ] && return 0
  echo "engine25.sh: $(left) s left of $seconds, too few for the next step: stopping here; the next call resumes" \
    | tee -a "$OUT/ab-fsdp.log"
  keep_studies
  exit 0
}
case $phase in
  study) bash $here/run_study.sh $here/fsdp.yaml "$seconds" ;;
  ab)
    . $here/setup_device.sh
    enough
    timeout -s TERM "$(left)" python3 -m flagopt run --space $here/fsdp.yaml --storage $storage 2>&1 \
      | tee -a "$OUT/h200x2-fsdp-run.log"
    python3 -m flagopt leaderboard h200x2-fsdp --storage $storage | tee "$OUT/leaderboard.txt"
    python3 -m flagopt export h200x2-fsdp --storage $storage -o "$OUT/h200x2-fsdp.env.sh" 2>&1 | tee "$OUT/export.log"
    # The study's next two best configurations (by the gain people read), other than the exported one (its trial
    # is in the patch's header); without an export, its three best.
    next=$(python3 - "$OUT/h200x2-fsdp.env.sh" <<'PY'
import re, sys
from pathlib import Path
from flagopt.study import study_data
d = study_data("sqlite:///studies/flagopt.db", "h200x2-fsdp")
patch = Path(sys.argv[1])
head = re.search(r"^# study \S+, trial (\d+) \(", patch.read_text(), re.M) if patch.is_file() else None
exported = {a.config_key for a in d.arms if head and a.first.number == int(head.group(1))}
arms = sorted((a for a in d.arms if a.reported is not None and a.config_key not in exported),
              key=lambda a: -a.reported.gain)
print(" ".join(f"--trial {a.first.number}" for a in arms[:2 if exported else 3]))
PY
)
    patch=()
    [ -s "$OUT/h200x2-fsdp.env.sh" ] && patch=(--patch "$OUT/h200x2-fsdp.env.sh")
    enough
    # shellcheck disable=SC2086  # $next is "--trial N --trial M", made above from trial numbers
    timeout -s TERM "$(left)" python3 -m flagopt ab h200x2-fsdp --storage $storage --space $here/fsdp.yaml \
      "${patch[@]}" $next --pairs 4 2>&1 | tee -a "$OUT/ab-fsdp.log"
    # one file: the device returns at most 8, and a resumed A/B leaves one JSON per record
    tar czf "$OUT/ab.tgz" -C studies/h200x2-fsdp ab 2>/dev/null
    keep_studies ;;
  *) echo "engine25.sh: phase is study or ab" >&2; exit 2 ;;
esac
