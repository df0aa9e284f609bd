#!/usr/bin/env bash
# db_server_start.sh - a real MariaDB server for flagopt studies shared through a database (and for its tests).
#
# One mariadbd with its own data directory, pid file, socket and port (3308: apart from the Slurm cluster's
# accounting MariaDB on 3307), a database and a user for flagopt, and an env file exporting the storage URL.
# Without systemd; installs mariadb-server with apt-get when it is missing (that needs root). Idempotent: while the
# server runs it only says so and makes sure the database and the user exist; after db_server_stop.sh it restarts
# on the kept data (studies survive).
#
# Usage:
#   bash scripts/db_server_start.sh          # install if missing, start, create the database and the user
#   source /tmp/flagopt-db/env.sh            # exports FLAGOPT_TEST_DB_URL=mysql+pymysql://...
#   python -m flagopt run --space S.yaml --storage "$FLAGOPT_TEST_DB_URL"
#   bash scripts/db_server_stop.sh [--clean] # stop (keep the data) / stop and delete $FLAGOPT_DB_DIR
#
# Settings (environment, defaults in brackets):
#   FLAGOPT_DB_DIR [/tmp/flagopt-db]     data, socket, pid file, logs and env.sh live here
#   FLAGOPT_DB_PORT [3308]               TCP port
#   FLAGOPT_DB_BIND [127.0.0.1]          address to listen on (0.0.0.0 to share it with other hosts)
#   FLAGOPT_DB_NAME [flagopt]            the database of the URL; the user may also create databases named
#                                        <FLAGOPT_DB_NAME>_<anything> (the tests use one per test)
#   FLAGOPT_DB_USER [flagopt]  FLAGOPT_DB_PASSWORD [flagopt-local]
#   FLAGOPT_DB_TIMEOUT [60]              seconds to wait for the server to answer
set -euo pipefail

D=${FLAGOPT_DB_DIR:-/tmp/flagopt-db}
PORT=${FLAGOPT_DB_PORT:-3308}
BIND=${FLAGOPT_DB_BIND:-127.0.0.1}
DB=${FLAGOPT_DB_NAME:-flagopt}
USER_NAME=${FLAGOPT_DB_USER:-flagopt}
PASSWORD=${FLAGOPT_DB_PASSWORD:-flagopt-local}
TIMEOUT=${FLAGOPT_DB_TIMEOUT:-60}

T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[db-start %d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }

[[ "$PORT" =~ ^[1-9][0-9]*$ ]] || die "FLAGOPT_DB_PORT must be a TCP port, got '$PORT'"
[[ "$DB" =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || die "FLAGOPT_DB_NAME must be letters, digits and _, got '$DB'"
[[ "$USER_NAME" =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || die "FLAGOPT_DB_USER must be letters, digits and _, got '$USER_NAME'"
# the password goes into SQL and into a URL: keep it to characters that need quoting in neither
[[ "$PASSWORD" =~ ^[A-Za-z0-9_.-]+$ ]] || die "FLAGOPT_DB_PASSWORD must be letters, digits and _ . -"

# ------------------------------------------------------------------------------------------ install
if ! command -v mariadbd >/dev/null || ! command -v mariadb-install-db >/dev/null; then
  [ "$(id -u)" = 0 ] || die "mariadb-server is not installed and installing it needs root"
  log "installing: mariadb-server"
  # postinst scripts must not start the distro's own service (no systemd here; we run our own daemon)
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; added_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null
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
SOCK=$D/mysqld.sock
admin() { mariadb --no-defaults --user=root --socket="$SOCK" "$@"; }

mkdir -p "$D"/{run,log}
RUN_AS=(); [ "$(id -u)" = 0 ] && RUN_AS=(--user=root)

# ------------------------------------------------------------------------------------------ server
if pid_alive "$D/run/mariadbd.pid" mariadbd; then
  log "mariadbd already running (pid $(cat "$D/run/mariadbd.pid"), port $PORT)"
else
  if [ ! -d "$D/data/mysql" ]; then
    mariadb-install-db --no-defaults "${RUN_AS[@]}" --datadir="$D/data" --skip-test-db \
      --auth-root-authentication-method=socket --innodb-log-file-size=16M \
      >"$D/log/mariadb-install.log" 2>&1 || { cat "$D/log/mariadb-install.log"; die "mariadb-install-db failed"; }
  fi
  # --no-defaults: nothing from /etc/mysql; so the character set is said here (the built-in default is latin1,
  # and a study's notes hold emoji). utf8mb4_bin: study names compare case-sensitively, as in sqlite.
  # setsid + stdio to /dev/null: the daemon neither shares our process group nor holds a CI runner's pipes.
  setsid mariadbd --no-defaults "${RUN_AS[@]}" --datadir="$D/data" --socket="$SOCK" \
    --pid-file="$D/run/mariadbd.pid" --port="$PORT" --bind-address="$BIND" \
    --log-error="$D/log/mariadbd.log" --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --innodb-buffer-pool-size=64M --innodb-log-file-size=16M \
    </dev/null >/dev/null 2>&1 &
  end=$(( $(date +%s) + TIMEOUT ))
  until mariadb-admin --no-defaults --user=root --socket="$SOCK" ping >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then tail -20 "$D/log/mariadbd.log" >&2 || true; die "mariadbd did not answer within ${TIMEOUT}s"; fi
    sleep 0.2
  done
  log "mariadbd started (pid $(cat "$D/run/mariadbd.pid"), port $PORT, data $D/data)"
fi

# The user connects over TCP from 127.0.0.1 (or, with FLAGOPT_DB_BIND, from other hosts: '%').
HOST_PART="127.0.0.1"; [ "$BIND" = 127.0.0.1 ] || HOST_PART="%"
admin -e "
  CREATE DATABASE IF NOT EXISTS \`$DB\`;
  CREATE USER IF NOT EXISTS '$USER_NAME'@'$HOST_PART' IDENTIFIED BY '$PASSWORD';
  ALTER USER '$USER_NAME'@'$HOST_PART' IDENTIFIED BY '$PASSWORD';
  GRANT ALL ON \`$DB\`.* TO '$USER_NAME'@'$HOST_PART';
  GRANT ALL ON \`${DB}\\_%\`.* TO '$USER_NAME'@'$HOST_PART';" \
  || die "could not create the database '$DB' and the user '$USER_NAME'"

HOST_IN_URL=$BIND; [ "$BIND" = 0.0.0.0 ] && HOST_IN_URL=$(hostname -f 2>/dev/null || hostname)
URL="mysql+pymysql://$USER_NAME:$PASSWORD@$HOST_IN_URL:$PORT/$DB"
cat > "$D/env.sh" <<EOF
# written by flagopt scripts/db_server_start.sh
export FLAGOPT_TEST_DB_URL='$URL'
export FLAGOPT_DB_DIR='$D'
EOF
log "database '$DB' ready for user '$USER_NAME'. Use: source $D/env.sh  (FLAGOPT_TEST_DB_URL=$URL)"
