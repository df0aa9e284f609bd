#!/usr/bin/env bash
# slurm_cluster_start.sh - a real single-machine Slurm cluster for flagopt's tests and CI.
#
# Several named nodes on one host (one slurmd each, so --nodelist pinning is real), munge auth, and
# slurmdbd + MariaDB so that `sacct` works: submitit reads job states from sacct, and without it the
# result() of a cancelled or timed-out job never returns.
#
# Runs as root, without systemd. Idempotent: while the cluster is up it only checks health; after
# slurm_cluster_stop.sh it restarts the daemons on the kept state (job ids and accounting survive);
# if the generated configuration changed it restarts everything. Every daemon writes a pid file under
# $SLURM_LOCAL_DIR/run, and slurm_cluster_stop.sh kills exactly those pids.
#
# Usage:
#   bash scripts/slurm_cluster_start.sh          # install packages if missing, start, wait until idle
#   source /tmp/slurm-local/env.sh               # exports SLURM_CONF for sbatch/squeue/sacct/submitit
#   bash scripts/slurm_cluster_stop.sh [--clean]
#
# Settings (environment, defaults in brackets):
#   SLURM_LOCAL_DIR [/tmp/slurm-local]   config, state, logs, pid files and the database live here
#   SLURM_LOCAL_NODES [4]                number of nodes, named <prefix>1..<prefix>N
#   SLURM_LOCAL_NODE_PREFIX [node]
#   SLURM_LOCAL_NODE_NAMES [""]          explicit space-separated names; overrides the two above
#   SLURM_LOCAL_CPUS [1]                 CPUs per node (1: jobs pinned to one node run one at a time)
#   SLURM_LOCAL_PARTITION [debug]
#   SLURM_LOCAL_TIMEOUT [90]             seconds to wait for every node to be idle
#   SLURM_LOCAL_KILLWAIT [5]             seconds from SIGTERM to SIGKILL at a time limit or cancel
#   SLURM_LOCAL_CTLD_PORT [6817] SLURM_LOCAL_DBD_PORT [6819] SLURM_LOCAL_DB_PORT [3307]
#   SLURM_LOCAL_SLURMD_PORT0 [17001]     node i listens on PORT0 + i - 1
#   SLURM_LOCAL_FIRST_JOB_ID [time based] first job id of a fresh state
#   SLURM_LOCAL_EXTRA_CONF [""]          lines appended to slurm.conf verbatim
set -euo pipefail

D=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
PREFIX=${SLURM_LOCAL_NODE_PREFIX:-node}
CPUS=${SLURM_LOCAL_CPUS:-1}
PARTITION=${SLURM_LOCAL_PARTITION:-debug}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-90}
KILLWAIT=${SLURM_LOCAL_KILLWAIT:-5}
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-6817}
DBD_PORT=${SLURM_LOCAL_DBD_PORT:-6819}
DB_PORT=${SLURM_LOCAL_DB_PORT:-3307}
PORT0=${SLURM_LOCAL_SLURMD_PORT0:-17001}
EXTRA_CONF=${SLURM_LOCAL_EXTRA_CONF:-}
HERE=$(dirname "$(readlink -f "$0")")

T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[slurm-start %d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts the Slurm daemons)"
if [ -n "${SLURM_LOCAL_NODE_NAMES:-}" ]; then
  read -r -a NAMES <<< "$SLURM_LOCAL_NODE_NAMES"
else
  [[ "${SLURM_LOCAL_NODES:-4}" =~ ^[1-9][0-9]*$ ]] || die "SLURM_LOCAL_NODES must be a positive integer"
  NAMES=(); for i in $(seq 1 "${SLURM_LOCAL_NODES:-4}"); do NAMES+=("$PREFIX$i"); done
fi
for n in "${NAMES[@]}"; do [[ "$n" =~ ^[A-Za-z][A-Za-z0-9_-]*$ ]] || die "bad node name '$n' (letters, digits, _ and -)"; done
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "SLURM_LOCAL_CPUS must be a positive integer"

# ------------------------------------------------------------------------------------------ install
need=()
for b in slurmctld slurmd sbatch sacct munged mungekey; do command -v "$b" >/dev/null || need+=(slurm-wlm munge); done
command -v slurmdbd >/dev/null || need+=(slurmdbd)
command -v mariadbd >/dev/null || need+=(mariadb-server)
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  log "installing: ${need[*]}"
  # postinst scripts must not start the distro's own services (no systemd here; we run our own daemons)
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; added_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if [ "$added_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  log "install done"
fi

# ------------------------------------------------------------------------------------------ helpers
pid_alive() {  # pid_alive PIDFILE COMM: the pid in PIDFILE runs and is named COMM (never trust a recycled pid)
  local pid
  [ -s "$1" ] || return 1
  pid=$(tr -dc '0-9' < "$1"); [ -n "$pid" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}
wait_for() {  # wait_for SECONDS WHAT CMD...
  local secs=$1 what=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timeout (${secs}s) waiting for $what; see $D/log/"
    sleep 0.2
  done
}

H=$(hostname -s)
mkdir -p "$D"/{etc,run,log,ctld,spool} "$D/munge/sock"
# munged insists on these modes: a traversable socket dir and a private key dir
chmod 755 "$D" "$D/munge/sock"; chmod 711 "$D/munge"
for n in "${NAMES[@]}"; do mkdir -p "$D/spool/$n"; done
SOCK=$D/munge/sock/munge.socket.2
[ -s "$D/munge/munge.key" ] || { mungekey -c -k "$D/munge/munge.key" >/dev/null; chmod 400 "$D/munge/munge.key"; }

# ------------------------------------------------------------------------------------------ config
# A fresh state would restart job ids at 1, and a submitit folder from an earlier run may still hold
# <id>_0_result.pkl, which submitit would return at once as the new job's result. So each fresh state
# starts at a clock-based id; restarts on the kept state continue the sequence.
if [ ! -s "$D/etc/first_job_id" ]; then
  echo "${SLURM_LOCAL_FIRST_JOB_ID:-$(( ($(date +%s) % 60000) * 1000 + 1 ))}" > "$D/etc/first_job_id"
fi
FIRST_JOB_ID=$(cat "$D/etc/first_job_id")

NODE_LINES=""; i=0
for n in "${NAMES[@]}"; do
  NODE_LINES+="NodeName=$n NodeHostname=$H NodeAddr=127.0.0.1 Port=$((PORT0 + i)) CPUs=$CPUS RealMemory=1000 State=UNKNOWN"$'\n'
  i=$((i + 1))
done

cat > "$D/etc/slurm.conf.new" <<EOF
# generated by flagopt scripts/slurm_cluster_start.sh: one host, ${#NAMES[@]} named nodes, one slurmd each
ClusterName=flagoptci
SlurmctldHost=${H}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
CommunicationParameters=NoInAddrAny
StateSaveLocation=$D/ctld
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# the connection to slurmdbd ignores AuthInfo and takes the munge socket from here
AccountingStoragePass=$SOCK
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# schedule a batch job at submit time (the default waits up to 3 s)
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
PropagateResourceLimits=NONE
KillWait=$KILLWAIT
MinJobAge=300
FirstJobId=$FIRST_JOB_ID
${NODE_LINES}PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
${EXTRA_CONF}
EOF

cat > "$D/etc/slurmdbd.conf.new" <<EOF
AuthType=auth/munge
AuthInfo=socket=$SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF

conf_changed=0
for f in slurm.conf slurmdbd.conf; do
  if cmp -s "$D/etc/$f.new" "$D/etc/$f"; then rm -f "$D/etc/$f.new"; else conf_changed=1; mv "$D/etc/$f.new" "$D/etc/$f"; fi
done
chmod 644 "$D/etc/slurm.conf"; chmod 600 "$D/etc/slurmdbd.conf"   # slurmdbd refuses a readable conf
export SLURM_CONF=$D/etc/slurm.conf
echo "export SLURM_CONF=$D/etc/slurm.conf" > "$D/env.sh"

if [ "$conf_changed" = 1 ] && pid_alive "$D/run/slurmctld.pid" slurmctld; then
  # restarting only slurmctld leaves the slurmds on the old config ("appears to have a different slurm.conf")
  log "configuration changed while running: restarting every daemon"
  SLURM_LOCAL_DIR=$D bash "$HERE/slurm_cluster_stop.sh"
fi

# ------------------------------------------------------------------------------------------ daemons
# setsid + stdio to /dev/null: the daemons neither share our process group nor hold a CI runner's pipes
if pid_alive "$D/run/munged.pid" munged; then log "munged already running"; else
  setsid munged --socket="$SOCK" --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" \
    --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed" </dev/null >/dev/null 2>&1
  wait_for 10 munged munge -S "$SOCK" -n
  log "munged started"
fi

if pid_alive "$D/run/mariadbd.pid" mariadbd; then log "mariadbd already running"; else
  if [ ! -d "$D/mysql/data/mysql" ]; then
    mkdir -p "$D/mysql"
    mariadb-install-db --no-defaults --user=root --datadir="$D/mysql/data" --skip-test-db \
      --auth-root-authentication-method=socket --innodb-log-file-size=16M \
      >"$D/log/mariadb-install.log" 2>&1 || { cat "$D/log/mariadb-install.log"; die "mariadb-install-db failed"; }
  fi
  setsid mariadbd --no-defaults --user=root --datadir="$D/mysql/data" --socket="$D/mysql/mysqld.sock" \
    --pid-file="$D/run/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --log-error="$D/log/mariadbd.log" --skip-name-resolve \
    --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-lock-wait-timeout=900 \
    </dev/null >/dev/null 2>&1 &
  wait_for 60 mariadbd mariadb-admin --no-defaults --socket="$D/mysql/mysqld.sock" ping
  mariadb --no-defaults --socket="$D/mysql/mysqld.sock" -e "
    CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  log "mariadbd started"
fi

if pid_alive "$D/run/slurmdbd.pid" slurmdbd; then log "slurmdbd already running"; else
  setsid slurmdbd </dev/null >/dev/null 2>&1 || { tail -20 "$D/log/slurmdbd.log"; die "slurmdbd failed"; }
  wait_for 30 "slurmdbd (port $DBD_PORT)" sacctmgr -n list cluster
  log "slurmdbd started"
fi

if pid_alive "$D/run/slurmctld.pid" slurmctld; then log "slurmctld already running"; else
  setsid slurmctld </dev/null >/dev/null 2>&1 || { tail -20 "$D/log/slurmctld.log"; die "slurmctld failed"; }
  wait_for 30 slurmctld scontrol ping
  log "slurmctld started"
fi

for n in "${NAMES[@]}"; do
  pid_alive "$D/run/slurmd-$n.pid" slurmd && continue
  # Debian's slurmd takes -N NAME, which is what lets several slurmd share one host
  setsid slurmd -N "$n" </dev/null >/dev/null 2>&1 || { tail -20 "$D/log/slurmd-$n.log"; die "slurmd $n failed"; }
done
log "slurmd running for: ${NAMES[*]}"

# ------------------------------------------------------------------------------------------ wait for idle
ready() {
  local out; out=$(sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null) || return 1
  [ "$(printf '%s\n' "$out" | awk '$2=="idle" || $2=="alloc" || $2=="mix" || $2=="comp"' | sort -u | wc -l)" -eq "${#NAMES[@]}" ]
}
end=$(( $(date +%s) + TIMEOUT )); resumed=0
until ready; do
  if [ "$(date +%s)" -ge "$end" ]; then
    sinfo -N -l || true; tail -20 "$D/log/slurmctld.log" || true
    die "nodes not idle after ${TIMEOUT}s"
  fi
  # nodes left DOWN or DRAINED by an earlier run (e.g. an interrupted test): resume them once
  if [ "$resumed" = 0 ] && sinfo -h -N -o '%t' 2>/dev/null | grep -qE 'down|drain|drng|fail'; then
    scontrol update NodeName="$(IFS=,; echo "${NAMES[*]}")" State=RESUME >/dev/null 2>&1 || true; resumed=1
  fi
  sleep 0.3
done
sinfo -N -o '%N %P %c %t'
log "cluster ready: ${#NAMES[@]} nodes idle. Use: source $D/env.sh"
