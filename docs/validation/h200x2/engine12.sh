#!/usr/bin/env bash
# The issue-12 re-run on the 2-GPU machine, in three device calls that fit one session's 30 minutes of GPU time:
#   bash docs/validation/h200x2/engine12.sh fsdp 540    # FSDP study, first part
#   bash docs/validation/h200x2/engine12.sh fsdp-ab 240  # FSDP study resumed, its export, a 5-pair A/B of the export
#   bash docs/validation/h200x2/engine12.sh pp 420       # pipeline study
# A machine that went back between calls starts bare: the studies come back as $OUT/studies.tgz after every call;
# put it in .carry/ (git-ignored, named in the call's carry) and the next call resumes from it.
set -u
phase=$1; seconds=$2
here=docs/validation/h200x2
if [ ! -f studies/flagopt.db ] && [ -f .carry/studies.tgz ]; then tar xzf .carry/studies.tgz; fi
nvidia-smi -L | tee "$OUT/gpus.txt"
case $phase in
  fsdp) bash $here/run_study.sh $here/fsdp.yaml "$seconds" ;;
  fsdp-ab)
    bash $here/run_study.sh $here/fsdp.yaml "$seconds"
    . $here/setup_device.sh
    python3 -m flagopt export h200x2-fsdp --storage sqlite:///studies/flagopt.db -o "$OUT/h200x2-fsdp.env.sh" \
      && python3 -m flagopt ab h200x2-fsdp --storage sqlite:///studies/flagopt.db --space $here/fsdp.yaml \
           --patch "$OUT/h200x2-fsdp.env.sh" --pairs 5 2>&1 | tee "$OUT/ab-fsdp.log"
    cp studies/h200x2-fsdp/ab/*.json "$OUT/" ;;  # the A/B records; run_study.sh already wrote studies.tgz
  pp) bash $here/run_study.sh $here/pp.yaml "$seconds" ;;
  *) echo "engine12.sh: phase is fsdp, fsdp-ab or pp" >&2; exit 2 ;;
esac
