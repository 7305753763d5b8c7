#!/usr/bin/env bash
# A real Prometheus 2.42 for tests (issue 28): two weeks of the shipped ServeGen series backfilled into its TSDB
# with `promtool tsdb create-blocks-from openmetrics`, and a live exporter (scripts/prometheus_lab.py) scraped
# every second for the last hour. Everything on 127.0.0.1, stopped by PID.
#
#   bash scripts/prometheus-lab.sh start  [STATE_DIR]   # prints `export PROM_LAB_URL=... PROM_LAB_END=...`
#   bash scripts/prometheus-lab.sh status [STATE_DIR]
#   bash scripts/prometheus-lab.sh stop   [STATE_DIR]
#
# STATE_DIR: the argument, else $PROM_LAB_DIR, else a new `mktemp -d`. Ports: PROM_LAB_PORT (16890, Prometheus)
# and PROM_LAB_PORT+1 (the exporter). PROM_LAB_END (default: now floored to 600 s) is the time of the series'
# last sample; the backfilled blocks end one hour before it (the exporter serves that hour, with timestamps).
# Prometheus 2.42 rules followed (docs/storage.md "Backfilling from OpenMetrics format"): the input ends with
# `# EOF`; blocks overlapping the head are allowed by default since 2.39; backfilled data is subject to the
# retention, so --storage.tsdb.retention.time=30d keeps the two weeks. Installs `prometheus` from apt if missing.
set -euo pipefail

cmd="${1:-status}"
S="${2:-${PROM_LAB_DIR:-}}"
PORT="${PROM_LAB_PORT:-16890}"
EXP_PORT=$((PORT + 1))
HERE="$(cd "$(dirname "$0")" && pwd)"

die() { echo "prometheus-lab: $*" >&2; exit 2; }
# shellcheck source=scripts/lab-common.sh
. "$HERE/lab-common.sh"

case "$cmd" in
  start)
    if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
      sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
      echo "prometheus-lab: installing prometheus (apt-get)" >&2
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq prometheus >&2
    fi
    [ -n "$S" ] || S="$(mktemp -d /tmp/prometheus-lab.XXXXXX)"
    mkdir -p "$S"/{data,log,run}; S="$(cd "$S" && pwd)"
    END="${PROM_LAB_END:-$(( $(date +%s) / 600 * 600 ))}"
    t0=$(date +%s.%N)
    py=python3
    n=$($py "$HERE/prometheus_lab.py" openmetrics "$S/backfill.om" "$END")
    promtool tsdb create-blocks-from openmetrics --max-block-duration=24h "$S/backfill.om" "$S/data" \
      >"$S/log/promtool.log" 2>&1 || die "promtool failed (see $S/log/promtool.log)"
    cat >"$S/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: servegen-live
    honor_timestamps: true
    static_configs:
      - targets: ["127.0.0.1:$EXP_PORT"]
EOF
    ($py "$HERE/prometheus_lab.py" exporter "$EXP_PORT" "$END" >"$S/log/exporter.log" 2>&1 & echo $! >"$S/run/exporter.pid")
    (prometheus --config.file="$S/prometheus.yml" --storage.tsdb.path="$S/data" \
       --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$PORT" \
       >"$S/log/prometheus.log" 2>&1 & echo $! >"$S/run/prometheus.pid")
    end=$((SECONDS + 60))
    ready() { python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1"; }
    until ready "http://127.0.0.1:$PORT/-/ready" >/dev/null 2>&1; do
      [ $SECONDS -ge $end ] && die "prometheus not ready after 60 s (see $S/log/prometheus.log)"
      pid_alive "$S/run/prometheus.pid" || die "prometheus exited (see $S/log/prometheus.log)"
      sleep 0.2
    done
    t1=$(date +%s.%N)
    echo "prometheus-lab: up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, $n samples backfilled, state $S" >&2
    echo "export PROM_LAB_DIR=$S PROM_LAB_URL=http://127.0.0.1:$PORT PROM_LAB_EXPORTER=http://127.0.0.1:$EXP_PORT PROM_LAB_END=$END"
    ;;
  stop)
    [ -n "$S" ] || die "stop needs the state dir (argument or \$PROM_LAB_DIR)"
    stop_pid "$S/run/prometheus.pid"
    stop_pid "$S/run/exporter.pid"
    echo "prometheus-lab: stopped ($S)" >&2
    ;;
  status)
    [ -n "$S" ] || die "status needs the state dir (argument or \$PROM_LAB_DIR)"
    rc=0
    for f in prometheus exporter; do
      if pid_alive "$S/run/$f.pid"; then echo "$f: running (pid $(cat "$S/run/$f.pid"))"; else echo "$f: stopped"; rc=3; fi
    done
    exit $rc
    ;;
  *) die "usage: prometheus-lab.sh start|stop|status [STATE_DIR]" ;;
esac
