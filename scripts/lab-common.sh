# Sourced by scripts/slurm-lab.sh and scripts/prometheus-lab.sh: their daemons are stopped by the PID in their own
# pid file, never by name.
#   pid_alive PIDFILE   true when the file exists and its PID is a live process
#   stop_pid PIDFILE    SIGTERM, up to 10 s for the process to exit, then SIGKILL; the pid file is removed
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pid() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p="$(cat "$f")"
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    local end=$((SECONDS + 10))
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
  fi
  rm -f "$f"
}
