#!/usr/bin/env bash
# A real single-host Slurm for tests and for trying gpuplan (issue 28): munge, MariaDB, slurmdbd, slurmctld and
# six `slurmd -N` nodes with fake GPU devices, everything on 127.0.0.1, every daemon stopped by its own PID.
#
#   bash scripts/slurm-lab.sh start  [STATE_DIR]   # prints `export SLURM_CONF=...` lines; exit 0 when nodes are idle
#   bash scripts/slurm-lab.sh status [STATE_DIR]   # each daemon's PID and whether it is alive; sinfo
#   bash scripts/slurm-lab.sh stop   [STATE_DIR]   # SIGTERM to each recorded PID (then SIGKILL after 10 s)
#
# STATE_DIR: the argument, else $SLURM_LAB_DIR, else a new `mktemp -d` folder (start prints it). Ports: 16800-16899
# only (SLURM_LAB_PORT_BASE, default 16800: MariaDB +6, slurmctld +17, slurmdbd +19, slurmd +21...+26).
# Cluster: ClusterName=gpulab, time zone SLURM_LAB_TZ (default Europe/Berlin: the daemons and clients run with
# TZ set to it, so sacct prints that zone's wall-clock time). Nodes (SlurmdParameters=config_overrides: the
# hardware in slurm.conf, not the host's):
#   h100-[0-3]: 8 GPUs  Type=h100 (/dev/tty[20-27]), 16 CPUs, partition h100
#   a100-[0-1]: 4 GPUs  Type=a100 (/dev/tty[30-33]),  8 CPUs, partition a100
# Accounts research and inference (user root in both), QoS normal, high (Priority=100), low (Priority=10).
# The Debian packages (slurm-wlm slurmdbd munge mariadb-server) are installed with apt-get when missing.
set -euo pipefail

cmd="${1:-status}"
S="${2:-${SLURM_LAB_DIR:-}}"
BASE="${SLURM_LAB_PORT_BASE:-16800}"
LAB_TZ="${SLURM_LAB_TZ:-Europe/Berlin}"
DB_PORT=$((BASE + 6)); CTLD_PORT=$((BASE + 17)); DBD_PORT=$((BASE + 19)); NODE_PORT0=$((BASE + 21))
NODES=(h100-0 h100-1 h100-2 h100-3 a100-0 a100-1)

die() { echo "slurm-lab: $*" >&2; exit 2; }
# shellcheck source=scripts/lab-common.sh
. "$(cd "$(dirname "$0")" && pwd)/lab-common.sh"

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v slurmdbd >/dev/null || missing+=(slurmdbd)
  command -v munged >/dev/null || missing+=(munge)
  command -v mariadbd >/dev/null || command -v mysqld >/dev/null || missing+=(mariadb-server)
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "slurm-lab: installing ${missing[*]} (apt-get)" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $end ] && die "$what not up after ${t}s (logs in $S/log)"
    sleep 0.2
  done
}

write_conf() {
  local run_user; run_user="$(id -un)"
  mkdir -p "$S"/{log,run,munge,spool/ctld,spool/d,job-out}
  cat >"$S/slurm.conf" <<EOF
# gpuplan lab cluster (scripts/slurm-lab.sh)
ClusterName=gpulab
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=$run_user
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$S/spool/ctld
SlurmdSpoolDir=$S/spool/d/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2,sched_min_interval=200000
PriorityType=priority/multifactor
PriorityWeightQOS=10000
PriorityWeightAge=0
PriorityWeightFairshare=0
PriorityWeightJobSize=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$S/munge/munge.sock
AccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/gpu:a100
AccountingStorageEnforce=associations,limits,qos
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=2
OverTimeLimit=0
MinJobAge=600
InactiveLimit=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
MaxArraySize=10001
EOF
  local i=0 n
  for n in "${NODES[@]}"; do
    case $n in
      h100-*) echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + i)) CPUs=16 RealMemory=64000 Gres=gpu:h100:8 State=UNKNOWN" ;;
      a100-*) echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + i)) CPUs=8 RealMemory=32000 Gres=gpu:a100:4 State=UNKNOWN" ;;
    esac >>"$S/slurm.conf"
    i=$((i + 1))
  done
  cat >>"$S/slurm.conf" <<EOF
PartitionName=h100 Nodes=h100-[0-3] Default=YES MaxTime=INFINITE State=UP
PartitionName=a100 Nodes=a100-[0-1] MaxTime=INFINITE State=UP
EOF
  cat >"$S/gres.conf" <<EOF
NodeName=h100-[0-3] Name=gpu Type=h100 File=/dev/tty[20-27]
NodeName=a100-[0-1] Name=gpu Type=a100 File=/dev/tty[30-33]
EOF
  cat >"$S/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=$run_user
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=gpulab
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$S/slurmdbd.conf"
  cat >"$S/env.sh" <<EOF
export SLURM_CONF=$S/slurm.conf
export TZ=$LAB_TZ
export SLURM_LAB_DIR=$S
EOF
}

start_munge() {
  pid_alive "$S/run/munged.pid" && return 0
  [ -f "$S/munge/munge.key" ] || { dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 700 "$S/munge"; chmod 400 "$S/munge/munge.key"
  munged --force --key-file="$S/munge/munge.key" --socket="$S/munge/munge.sock" \
    --pid-file="$S/run/munged.pid" --log-file="$S/log/munged.log" --seed-file="$S/munge/munge.seed" \
    || die "munged did not start (see $S/log/munged.log)"
  wait_for 10 munged munge -n -S "$S/munge/munge.sock"
}

start_mariadb() {
  pid_alive "$S/run/mariadb.pid" && return 0
  local user_opt=()
  [ "$(id -u)" -eq 0 ] && user_opt=(--user=root)   # mysqld refuses to run as root unless told so
  if [ ! -d "$S/mysql/mysql" ]; then
    mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$S/mysql" --auth-root-authentication-method=normal \
      --skip-test-db >"$S/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed (see $S/log/mariadb-install.log)"
  fi
  (mariadbd --no-defaults "${user_opt[@]}" --datadir="$S/mysql" --socket="$S/run/mariadb.sock" \
      --pid-file="$S/run/mariadb.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$S/log/mariadb.log" \
      --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --skip-name-resolve \
      </dev/null >/dev/null 2>&1 &)
  wait_for 60 MariaDB mariadb --no-defaults -S "$S/run/mariadb.sock" -uroot -e 'SELECT 1'
  mariadb --no-defaults -S "$S/run/mariadb.sock" -uroot -e \
    "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'gpulab';
     CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'gpulab';
     GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
     FLUSH PRIVILEGES;"
}

start_slurmdbd() {
  pid_alive "$S/run/slurmdbd.pid" && return 0
  SLURM_CONF="$S/slurm.conf" slurmdbd || die "slurmdbd did not start (see $S/log/slurmdbd.log)"
  wait_for 60 slurmdbd env SLURM_CONF="$S/slurm.conf" sacctmgr -n show cluster
}

setup_accounts() {
  export SLURM_CONF="$S/slurm.conf"
  local u; u="$(id -un)"
  if ! sacctmgr -n -P show cluster format=cluster | grep -qx gpulab; then
    sacctmgr -i add cluster gpulab >/dev/null
  fi
  sacctmgr -i add qos high Priority=100 >/dev/null 2>&1 || true
  sacctmgr -i add qos low Priority=10 >/dev/null 2>&1 || true
  sacctmgr -i add account research,inference Cluster=gpulab >/dev/null 2>&1 || true
  sacctmgr -i add user "$u" Account=research,inference DefaultAccount=research >/dev/null 2>&1 || true
  sacctmgr -i modify user "$u" set QOS=normal,high,low DefaultQOS=normal >/dev/null 2>&1 || true
}

start_slurmctld() {
  pid_alive "$S/run/slurmctld.pid" && return 0
  SLURM_CONF="$S/slurm.conf" slurmctld -i || die "slurmctld did not start (see $S/log/slurmctld.log)"
  wait_for 60 slurmctld env SLURM_CONF="$S/slurm.conf" scontrol ping
}

start_slurmd() {
  local n
  for n in "${NODES[@]}"; do
    pid_alive "$S/run/slurmd-$n.pid" && continue
    mkdir -p "$S/spool/d/$n"
    SLURM_CONF="$S/slurm.conf" slurmd -N "$n" || die "slurmd -N $n did not start (see $S/log/slurmd-$n.log)"
  done
  nodes_idle() {
    local out; out="$(SLURM_CONF="$S/slurm.conf" sinfo -h -N -o '%N %t')"
    [ "$(grep -c ' idle$' <<<"$out")" -eq ${#NODES[@]} ]
  }
  wait_for 90 "the ${#NODES[@]} nodes (idle)" nodes_idle
}

case "$cmd" in
  start)
    install_packages
    [ -n "$S" ] || S="$(mktemp -d /tmp/slurm-lab.XXXXXX)"
    mkdir -p "$S"; S="$(cd "$S" && pwd)"
    export TZ="$LAB_TZ"
    t0=$(date +%s.%N)
    write_conf
    start_munge
    start_mariadb
    start_slurmdbd
    setup_accounts
    start_slurmctld
    start_slurmd
    t1=$(date +%s.%N)
    echo "slurm-lab: up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, state $S" >&2
    cat "$S/env.sh"
    ;;
  stop)
    [ -n "$S" ] || die "stop needs the state dir (argument or \$SLURM_LAB_DIR)"
    # cancel the lab's jobs first: a slurmstepd (and its job) outlives its slurmd otherwise
    if pid_alive "$S/run/slurmctld.pid"; then
      ids="$(SLURM_CONF="$S/slurm.conf" squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')"
      [ -n "${ids// /}" ] && SLURM_CONF="$S/slurm.conf" scancel $ids 2>/dev/null || true
      end=$((SECONDS + 30))
      while [ -n "$(SLURM_CONF="$S/slurm.conf" squeue -h -o %A 2>/dev/null)" ] && [ $SECONDS -lt $end ]; do
        sleep 0.5
      done
    fi
    for n in "${NODES[@]}"; do stop_pid "$S/run/slurmd-$n.pid" & done
    wait
    # a step daemon or job process left over (its job did not end in time): killed by its PID, found by this
    # lab's SLURM_CONF in its environment and being a slurmstepd or a job's process (SLURM_JOB_ID set)
    for p in $(ps -eo pid=); do
      [ "$p" = "$$" ] && continue
      envs="$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null || true)"
      grep -qx "SLURM_CONF=$S/slurm.conf" <<<"$envs" || continue
      if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] || grep -q "^SLURM_JOB_ID=" <<<"$envs"; then
        kill -KILL "$p" 2>/dev/null || true
      fi
    done
    stop_pid "$S/run/slurmctld.pid"
    stop_pid "$S/run/slurmdbd.pid"
    stop_pid "$S/run/mariadb.pid"
    stop_pid "$S/run/munged.pid"
    echo "slurm-lab: stopped ($S)" >&2
    ;;
  status)
    [ -n "$S" ] || die "status needs the state dir (argument or \$SLURM_LAB_DIR)"
    rc=0
    for f in munged mariadb slurmdbd slurmctld "${NODES[@]/#/slurmd-}"; do
      if pid_alive "$S/run/$f.pid"; then echo "$f: running (pid $(cat "$S/run/$f.pid"))"; else echo "$f: stopped"; rc=3; fi
    done
    [ $rc -eq 0 ] && SLURM_CONF="$S/slurm.conf" sinfo -N -o '%N %P %G %t'
    exit $rc
    ;;
  *) die "usage: slurm-lab.sh start|stop|status [STATE_DIR]" ;;
esac
