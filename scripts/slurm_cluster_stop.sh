#!/usr/bin/env bash
# slurm_cluster_stop.sh - stop the cluster that slurm_cluster_start.sh started.
#
# Kills only the daemons whose pid files are under $SLURM_LOCAL_DIR/run, and only after checking
# /proc/PID/comm, so a recycled pid is never hit. Jobs are cancelled through Slurm first so that their
# slurmstepd and job processes end too.
#
# Usage:
#   bash scripts/slurm_cluster_stop.sh           # stop; keep the state (job ids, accounting, logs)
#   bash scripts/slurm_cluster_stop.sh --clean   # stop and delete $SLURM_LOCAL_DIR
set -uo pipefail
D=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
CLEAN=0; [ "${1:-}" = "--clean" ] && CLEAN=1
T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[slurm-stop %d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
export SLURM_CONF=$D/etc/slurm.conf

pid_of() {  # pid_of PIDFILE COMM: print the pid if it runs and is named COMM
  local pid
  [ -s "$1" ] || return 1
  pid=$(tr -dc '0-9' < "$1"); [ -n "$pid" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}
stop_group() {  # stop_group PIDFILE:COMM...: TERM them all, wait up to 20 s, then KILL the ones left
  local pids=() item pid
  for item in "$@"; do
    if pid=$(pid_of "${item%%:*}" "${item##*:}"); then kill -TERM "$pid" 2>/dev/null && pids+=("$pid"); log "TERM ${item##*:} ($pid)"; fi
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  local end=$(( $(date +%s) + 20 )) alive
  while :; do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && break
    if [ "$(date +%s)" -ge "$end" ]; then
      for pid in "${alive[@]}"; do log "KILL $pid (still running 20 s after TERM)"; kill -KILL "$pid" 2>/dev/null; done
      break
    fi
    sleep 0.1
  done
}

# 1. cancel the jobs while our slurmctld is still there to do it
if pid_of "$D/run/slurmctld.pid" slurmctld >/dev/null; then
  mapfile -t jobs < <(squeue -h -t PD,R,CG,S,CF -o %i 2>/dev/null)
  if [ ${#jobs[@]} -gt 0 ]; then
    log "cancelling jobs: ${jobs[*]}"
    scancel "${jobs[@]}" 2>/dev/null
    end=$(( $(date +%s) + 30 ))
    while [ -n "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.3; done
  fi
fi

# 2. slurmd + slurmctld together, then slurmdbd (it flushes to the database), then MariaDB and munged
group=("$D/run/slurmctld.pid:slurmctld")
for pf in "$D"/run/slurmd-*.pid; do [ -e "$pf" ] && group+=("$pf:slurmd"); done
stop_group "${group[@]}"
stop_group "$D/run/slurmdbd.pid:slurmdbd"
stop_group "$D/run/mariadbd.pid:mariadbd" "$D/run/munged.pid:munged"

# 3. report, never kill, job steps still running: they are not ours to kill by name
left=$(ps -eo pid=,comm= | awk '$2 ~ /^slurmstepd/ {print $1}' | tr '\n' ' ')
[ -n "${left// /}" ] && log "WARNING: slurmstepd still running (pids: $left)"

if [ "$CLEAN" = 1 ]; then rm -rf "$D"; log "removed $D"; fi
log "stopped"
