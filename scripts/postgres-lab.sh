#!/usr/bin/env bash
# A throwaway PostgreSQL server for the production stores (MLflow tracking + registry, Prefect's server), as an
# operator would run one, on 127.0.0.1 only, in a temporary folder owned by an unprivileged user.
#
#   scripts/postgres-lab.sh start    # initdb (first time) + start; prints the two URLs as shell assignments
#   scripts/postgres-lab.sh status   # exit 0 when the server answers, 1 otherwise
#   scripts/postgres-lab.sh stop     # stop by the PID in the data folder's postmaster.pid (never by name)
#
# Environment: GPUPLAN_PG_DIR (default /tmp/gpuplan-pg-$GPUPLAN_PG_PORT), GPUPLAN_PG_PORT (default 16910),
# GPUPLAN_PG_USER (the OS user owning the cluster; default postgres, created when missing: PostgreSQL refuses to run
# as root). Binaries: the newest /usr/lib/postgresql/*/bin (Debian's postgresql package), or initdb on PATH.
# `start` prints, on stdout:
#   GPUPLAN_TRACKING_URI=postgresql://gpuplan@127.0.0.1:PORT/mlflow
#   PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://gpuplan@127.0.0.1:PORT/prefect
# (trust authentication on 127.0.0.1: a lab server; a production one sets a password, see docs/operations.md).
set -euo pipefail
PORT="${GPUPLAN_PG_PORT:-16910}"
DIR="${GPUPLAN_PG_DIR:-/tmp/gpuplan-pg-$PORT}"
OSUSER="${GPUPLAN_PG_USER:-postgres}"
ROLE=gpuplan

bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  echo "postgres-lab: no PostgreSQL binaries (initdb) found: apt-get install postgresql" >&2
  return 1
}

as_user() {  # run a command as the cluster's OS user (directly when we already are that user)
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$OSUSER" -- "$@"; else "$@"; fi
}

server_pid() {  # the postmaster's PID from its own pid file (first line), empty when not running
  local f="$DIR/data/postmaster.pid" pid
  [ -f "$f" ] || return 0
  pid="$(head -1 "$f")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

answers() {
  local b; b="$(bindir)"
  "$b/pg_isready" -q -h 127.0.0.1 -p "$PORT" >/dev/null 2>&1
}

start() {
  local b; b="$(bindir)"
  if [ "$(id -u)" -eq 0 ]; then
    OSUSER="${GPUPLAN_PG_USER:-postgres}"
    if ! id "$OSUSER" >/dev/null 2>&1; then useradd --system --no-create-home --shell /usr/sbin/nologin "$OSUSER"; fi
  else
    OSUSER="$(id -un)"
  fi
  mkdir -p "$DIR"
  if [ "$(id -u)" -eq 0 ]; then chown "$OSUSER" "$DIR"; fi
  chmod 700 "$DIR"
  if [ ! -f "$DIR/data/PG_VERSION" ]; then
    as_user "$b/initdb" -D "$DIR/data" -A trust -U postgres --no-sync -E UTF8 >"$DIR/initdb.log" 2>&1 \
      || { echo "postgres-lab: initdb failed, see $DIR/initdb.log" >&2; exit 1; }
  fi
  if [ -z "$(server_pid)" ]; then
    # -w waits until the server accepts connections (pg_ctl polls; no sleep here)
    as_user "$b/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
      -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null \
      || { echo "postgres-lab: the server did not start, see $DIR/server.log" >&2; tail -5 "$DIR/server.log" >&2; exit 1; }
  fi
  local psql=("$b/psql" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -tA)
  if [ -z "$("${psql[@]}" -c "select 1 from pg_roles where rolname='$ROLE'")" ]; then
    "${psql[@]}" -c "create role $ROLE login createdb"
  fi
  local db
  for db in mlflow prefect; do
    if [ -z "$("${psql[@]}" -c "select 1 from pg_database where datname='$db'")" ]; then
      "${psql[@]}" -c "create database $db owner $ROLE"
    fi
  done
  echo "GPUPLAN_TRACKING_URI=postgresql://$ROLE@127.0.0.1:$PORT/mlflow"
  echo "PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://$ROLE@127.0.0.1:$PORT/prefect"
  echo "GPUPLAN_PG_PID=$(server_pid)"
}

stop() {
  local pid; pid="$(server_pid)"
  if [ -z "$pid" ]; then echo "postgres-lab: not running ($DIR)"; return 0; fi
  kill -INT "$pid"  # PostgreSQL's "fast shutdown": roll back open transactions, then exit
  local i
  for i in $(seq 1 600); do  # wait for that PID to go (0.1 s polls, at most 60 s), then escalate
    kill -0 "$pid" 2>/dev/null || { echo "postgres-lab: stopped (pid $pid)"; return 0; }
    sleep 0.1
  done
  kill -QUIT "$pid" 2>/dev/null || true
  echo "postgres-lab: pid $pid did not stop in 60 s: sent SIGQUIT" >&2
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if [ -n "$(server_pid)" ] && answers; then echo "postgres-lab: running (pid $(server_pid), port $PORT, $DIR)"; else echo "postgres-lab: not running ($DIR)"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
