#!/usr/bin/env bash
# db_server_stop.sh - stop the MariaDB server that db_server_start.sh started.
#
# Kills only the pid in $FLAGOPT_DB_DIR/run/mariadbd.pid, and only after checking /proc/PID/comm, so a recycled pid
# is never hit (the Slurm cluster's own MariaDB, with its pid file elsewhere, is left alone).
#
# Usage:
#   bash scripts/db_server_stop.sh           # stop; keep the data (the studies)
#   bash scripts/db_server_stop.sh --clean   # stop and delete $FLAGOPT_DB_DIR
set -uo pipefail
D=${FLAGOPT_DB_DIR:-/tmp/flagopt-db}
CLEAN=0; [ "${1:-}" = "--clean" ] && CLEAN=1
T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[db-stop %d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }

pid=""
if [ -s "$D/run/mariadbd.pid" ]; then
  pid=$(tr -dc '0-9' < "$D/run/mariadbd.pid")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mariadbd ] || pid=""
fi
if [ -z "$pid" ]; then
  log "mariadbd not running"
else
  # TERM: InnoDB flushes and shuts down cleanly; KILL only if it is still there after 30 s
  kill -TERM "$pid" 2>/dev/null && log "TERM mariadbd ($pid)"
  end=$(( $(date +%s) + 30 ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then log "KILL $pid (still running 30 s after TERM)"; kill -KILL "$pid" 2>/dev/null; break; fi
    sleep 0.1
  done
fi
if [ "$CLEAN" = 1 ]; then rm -rf "$D"; log "removed $D"; fi
log "stopped"
