#!/usr/bin/env bash
# slurm-cluster.sh — a single-node Slurm cluster on this host, every file of it under one directory.
#
#   scripts/slurm-cluster.sh start DIR    start munged, slurmctld and slurmd; wait until the node is idle
#   scripts/slurm-cluster.sh stop DIR     stop them (by their pid files) and keep DIR
#   scripts/slurm-cluster.sh status DIR   say what runs; exit 0 only when the node is up
#
# What it is for: running `hybridscope bench SPEC --slurm` (and its test, tests/bench/slurm_test.cpp)
# against a real Slurm — Debian's slurm-wlm and munge (scripts/install-deps.sh installs them) — on
# a machine that has no cluster. What it is not: a production setup. Everything runs as the
# calling user (root: SlurmUser=root), without cgroups (proctrack/linuxproc, task/none), without
# accounting (no slurmdbd; sacct does not work, scontrol show job does), with one partition
# `debug` that allows oversubscription. The node declares HS_SLURM_CPUS CPUs (default 8) whatever
# the machine has (SlurmdParameters=config_overrides), so a 4-rank cell runs on a 2-core machine.
#
# Layout of DIR:
#   slurm.conf            the configuration; `export SLURM_CONF=DIR/slurm.conf` points srun, sbatch,
#                         sinfo, scontrol and scancel at this cluster
#   munge/                munge.key, munge.socket (AuthInfo=socket=... in slurm.conf), munged.pid/.log
#   state/ spool/         slurmctld's StateSaveLocation, slurmd's SlurmdSpoolDir
#   run/ log/             pid files; slurmctld.log and slurmd.log
# Ports: SlurmctldPort and SlurmdPort are chosen free (40000-47999) at the first start and kept in
# slurm.conf.
# Environment: HS_SLURM_CPUS (CPUs the node declares), HS_SLURM_WAIT_S (how long `start` waits for
# the node to become idle, default 60).
set -euo pipefail

usage() {
  echo "usage: $0 start DIR | stop DIR | status DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
action=$1
case "$2" in
  /*) dir=$2 ;;
  *) dir=$PWD/$2 ;;
esac
conf=$dir/slurm.conf
cpus=${HS_SLURM_CPUS:-8}
wait_s=${HS_SLURM_WAIT_S:-60}

log() { printf '[slurm-cluster] %s\n' "$*"; }
die() {
  printf '[slurm-cluster] error: %s\n' "$*" >&2
  exit 1
}
# The last lines of a daemon's log, for an error message.
log_tail() {
  if [ -s "$1" ]; then
    echo "--- last lines of $1:" >&2
    tail -n 20 "$1" | sed 's/^/  | /' >&2
  else
    echo "--- $1 is empty or missing" >&2
  fi
}
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# A TCP port nobody listens on (ss from iproute2 when there, else a connect attempt).
port_in_use() {
  if command -v ss >/dev/null; then
    [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
# 40000-47999: outside the ports a job's ranks take by default (20000 + job id mod 20000,
# trainer/dist/dist_env.h).
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((40000 + RANDOM % 8000))
    [ "$p" = "${1:-}" ] && continue
    port_in_use "$p" || { echo "$p"; return; }
  done
  die "no free TCP port found between 40000 and 47999"
}

need_binaries() {
  local missing=()
  for b in munged slurmctld slurmd sinfo scontrol; do
    command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "not installed: ${missing[*]} — install Debian's slurm-wlm and munge (scripts/install-deps.sh, or apt-get install slurm-wlm munge)"
}
sbin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

write_config() {
  local host ctld_port slurmd_port
  host=$(hostname -s)
  ctld_port=$(free_port)
  slurmd_port=$(free_port "$ctld_port")
  cat >"$conf" <<EOF
# Written by scripts/slurm-cluster.sh: a single-node test cluster, every file under $dir.
ClusterName=hybridscope
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# This cluster's own munged, not the system's (/run/munge).
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd.%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups (containers, gVisor), no accounting daemon.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node may declare more CPUs than the machine has (a 4-rank cell on 2 cores).
SlurmdParameters=config_overrides
ReturnToService=2
# Short: a cancelled job's tasks get SIGKILL 5 s after SIGTERM; finished jobs stay visible to
# scontrol show job for 5 minutes (the runner polls it).
KillWait=5
MinJobAge=300
# Job ids start at a random number: two test clusters on one host (ctest -j) then give their jobs
# different default rendezvous ports (20000 + job id mod 20000, trainer/dist/dist_env.h).
FirstJobId=$((1 + RANDOM % 19000))
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

start_munged() {
  local m=$dir/munge
  if pid_alive "$m/munged.pid"; then
    log "munged already running (pid $(cat "$m/munged.pid"))"
    return
  fi
  if [ ! -s "$m/munge.key" ]; then
    if command -v mungekey >/dev/null || [ -x /usr/sbin/mungekey ]; then
      "$(sbin mungekey)" --create --keyfile="$m/munge.key" --force
    else
      dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
    fi
  fi
  chmod 0400 "$m/munge.key"
  rm -f "$m/munge.socket" "$m/munge.socket.lock"
  started_here+=("$m/munged.pid")
  # --force: munged refuses a key or socket directory it considers insecure for a system daemon;
  # this one serves a single user's test cluster.
  if ! "$(sbin munged)" --socket="$m/munge.socket" --key-file="$m/munge.key" --pid-file="$m/munged.pid" \
    --log-file="$m/munged.log" --seed-file="$m/munged.seed" --force >>"$m/munged.out" 2>&1; then
    cat "$m/munged.out" >&2
    log_tail "$m/munged.log"
    die "munged failed to start"
  fi
  for _ in $(seq 1 50); do
    [ -S "$m/munge.socket" ] && pid_alive "$m/munged.pid" && break
    sleep 0.1
  done
  if ! [ -S "$m/munge.socket" ]; then
    log_tail "$m/munged.log"
    die "munged did not create its socket $m/munge.socket"
  fi
  if command -v munge >/dev/null && command -v unmunge >/dev/null; then
    munge --socket="$m/munge.socket" -n | unmunge --socket="$m/munge.socket" >/dev/null ||
      { log_tail "$m/munged.log"; die "munged runs but does not encode/decode a credential"; }
  fi
  log "munged up (pid $(cat "$m/munged.pid"), socket $m/munge.socket)"
}

# start_daemon NAME: slurmctld or slurmd, daemonised, checked through its pid file.
start_daemon() {
  local name=$1 pidfile=$dir/run/$1.pid logfile=$dir/log/$1.log
  if pid_alive "$pidfile"; then
    log "$name already running (pid $(cat "$pidfile"))"
    return
  fi
  local args=(-f "$conf")
  [ "$name" = slurmd ] && args+=(-N "$(hostname -s)")
  started_here+=("$pidfile")
  if ! SLURM_CONF=$conf "$(sbin "$name")" "${args[@]}" >>"$dir/log/$name.out" 2>&1; then
    cat "$dir/log/$name.out" >&2
    log_tail "$logfile"
    die "$name failed to start"
  fi
  for _ in $(seq 1 100); do
    pid_alive "$pidfile" && break
    sleep 0.1
  done
  if ! pid_alive "$pidfile"; then
    cat "$dir/log/$name.out" >&2
    log_tail "$logfile"
    die "$name exited right after starting (no live pid in $pidfile)"
  fi
  log "$name up (pid $(cat "$pidfile"))"
}

node_state() { SLURM_CONF=$conf sinfo -h -N -o '%T' 2>/dev/null | head -n 1; }

# terminate "NAME:PID"...: SIGTERM to all at once (each daemon takes about 2 s to exit), SIGKILL
# to any still there after 10 s (slurmd ignores SIGTERM while it is still registering).
terminate() {
  local entry
  for entry in "$@"; do kill -TERM "${entry#*:}" 2>/dev/null || true; done
  for entry in "$@"; do
    for _ in $(seq 1 100); do
      kill -0 "${entry#*:}" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "${entry#*:}" 2>/dev/null; then
      log "${entry%%:*} (pid ${entry#*:}) ignored SIGTERM for 10 s; sending SIGKILL"
      kill -KILL "${entry#*:}" 2>/dev/null || true
    fi
    log "${entry%%:*} stopped (pid ${entry#*:})"
  done
}

# A failed `start` stops what it started itself (not daemons an earlier `start` left running).
started_here=()
undo_failed_start() {
  local rc=$? pid entries=()
  [ $rc -eq 0 ] && return
  for pidfile in "${started_here[@]}"; do
    pid=$(cat "$pidfile" 2>/dev/null) && entries+=("$(basename "$pidfile" .pid):$pid")
  done
  if [ ${#entries[@]} -gt 0 ]; then
    log "start failed: stopping what it started"
    terminate "${entries[@]}"
  fi
  exit $rc
}

cmd_start() {
  need_binaries
  trap undo_failed_start EXIT
  mkdir -p "$dir"/{munge,state,spool,run,log}
  chmod 0700 "$dir/munge"
  [ -s "$conf" ] || write_config
  start_munged
  start_daemon slurmctld
  start_daemon slurmd
  local state="" waited=0
  while [ "$waited" -lt $((wait_s * 2)) ]; do
    state=$(node_state || true)
    case "$state" in
      idle | mixed | allocated) break ;;
      *down* | *drain* | *fail*)
        # A node that came back after a restart (ReturnToService=2 usually does this itself).
        SLURM_CONF=$conf scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    for d in slurmctld slurmd; do
      pid_alive "$dir/run/$d.pid" || { log_tail "$dir/log/$d.log"; die "$d died while the node was coming up"; }
    done
    sleep 0.5
    waited=$((waited + 1))
  done
  case "$state" in
    idle | mixed | allocated) ;;
    *)
      log_tail "$dir/log/slurmctld.log"
      log_tail "$dir/log/slurmd.log"
      die "the node did not become idle within ${wait_s} s (sinfo says '${state:-nothing}')" ;;
  esac
  trap - EXIT
  log "node $(hostname -s) $state ($cpus CPUs, partition debug); use it with:"
  echo "export SLURM_CONF=$conf"
}

cmd_stop() {
  [ -d "$dir" ] || die "$dir does not exist: nothing to stop"
  local entries=()
  for d in "slurmd:$dir/run/slurmd.pid" "slurmctld:$dir/run/slurmctld.pid" "munged:$dir/munge/munged.pid"; do
    pid_alive "${d#*:}" && entries+=("${d%%:*}:$(cat "${d#*:}")")
    rm -f "${d#*:}"
  done
  if [ ${#entries[@]} -eq 0 ]; then
    log "nothing running under $dir"
    return
  fi
  terminate "${entries[@]}"
}

cmd_status() {
  [ -s "$conf" ] || die "$conf does not exist: start the cluster with $0 start $dir"
  local rc=0
  for d in "munged:$dir/munge/munged.pid" "slurmctld:$dir/run/slurmctld.pid" "slurmd:$dir/run/slurmd.pid"; do
    if pid_alive "${d#*:}"; then
      log "${d%%:*} running (pid $(cat "${d#*:}"))"
    else
      log "${d%%:*} not running"
      rc=1
    fi
  done
  local state
  state=$(node_state || true)
  log "node $(hostname -s): ${state:-unreachable}"
  case "$state" in idle | mixed | allocated) ;; *) rc=1 ;; esac
  [ $rc -eq 0 ] && echo "export SLURM_CONF=$conf"
  return $rc
}

case "$action" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) usage ;;
esac
