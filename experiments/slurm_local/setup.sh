#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (SLURM 22.05: slurmctld, slurmd, slurmdbd with a
# MariaDB server; munged), every file under one directory, for the scan's submitit test
# (tests/test_scan_slurm.py) and by hand:
#
#   experiments/slurm_local/setup.sh start DIR   # installs the packages if missing
#   export SLURM_CONF=DIR/slurm.conf
#   sbatch --wrap hostname; python -m libra_jax.scan -m ... hydra/launcher=libra_slurm
#   experiments/slurm_local/setup.sh stop DIR    # cancels its jobs, stops its daemons
#
# `start` writes DIR/slurm.conf (the node is this host at 127.0.0.1 with its cores, or
# $SLURM_LOCAL_CPUS, and 90% of its memory, one partition `local`, free TCP ports on
# 127.0.0.1, KillWait 1 s: a cancelled job's processes get SIGKILL 1 s after the SIGTERM
# that submitit's jobs ignore, not SLURM's default 30 s), a fresh munge key and
# socket (the system's /etc/munge is not used), a MariaDB data directory and slurmdbd.conf,
# starts munged, mariadbd, slurmdbd, slurmctld and slurmd as daemons (pid files in DIR) and
# waits until the node is idle. The accounting database is there because submitit polls job
# states with `sacct` (without it a cancelled job is never seen to end). Daemons run as root
# (slurmd must). It exits 3 with the reason on stderr when the packages cannot be installed
# (no apt-get, not root and no password-less sudo, apt-get failing): the test then skips.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$2
packages="slurm-wlm slurmdbd munge mariadb-server"

stop() {
    local name pid
    if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
        # Jobs first: their slurmstepd processes outlive slurmd.
        SLURM_CONF="$dir/slurm.conf" scancel --full --partition=local 2>/dev/null || true
        for _ in $(seq 100); do
            [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    # All at once (a throwaway cluster: nothing to hand over), then wait for each.
    local pids=""
    for name in slurmd slurmctld slurmdbd mariadbd munged; do
        [ -f "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            pids="$pids $pid"
        fi
        rm -f "$dir/$name.pid"
    done
    for pid in $pids; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
}

install_packages() {
    local cmd missing="" sudo=""
    for cmd in slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db; do
        command -v "$cmd" >/dev/null 2>&1 || missing="$missing $cmd"
    done
    [ -z "$missing" ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "cannot install $packages (missing:$missing): no apt-get on this machine" >&2
        exit 3
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
            echo "cannot install $packages (missing:$missing): not root and no" \
                "password-less sudo" >&2
            exit 3
        fi
    fi
    # shellcheck disable=SC2086
    if ! { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $packages; } \
            >"$dir/apt.log" 2>&1; then
        echo "cannot install $packages: apt-get failed ($(tail -n 1 "$dir/apt.log"))" >&2
        exit 3
    fi
}

free_ports() {  # N free TCP ports on 127.0.0.1
    python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
    local seconds=$1 what=$2 end
    shift 2
    end=$((SECONDS + seconds))
    while [ "$SECONDS" -lt "$end" ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$what did not start within $seconds s; logs in $dir/log:" >&2
    tail -n 5 "$dir"/log/*.log >&2 || true
    stop
    exit 1
}

node_idle() { [ "$(timeout 5 sinfo -h -N -o %t)" = "idle" ]; }
listening() { timeout 1 bash -c "echo > /dev/tcp/127.0.0.1/$1"; }

start() {
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    install_packages
    if [ "$(id -u)" -ne 0 ]; then
        echo "cannot start slurmd: it must run as root (it starts the jobs of any user)" >&2
        exit 3
    fi
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    trap stop ERR  # a step failed: stop what started
    local node cpus mem_mb ctld_port slurmd_port dbd_port db_port
    node=$(hostname -s)
    # SLURM_LOCAL_CPUS: CPUs the node offers (default: the machine's); more than the machine
    # has (the tests run 3 one-CPU shards at once on 2 cores) needs config_overrides.
    cpus=${SLURM_LOCAL_CPUS:-$(nproc)}
    overrides=""
    if [ "$cpus" -gt "$(nproc)" ]; then overrides="SlurmdParameters=config_overrides"; fi
    mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
    read -r ctld_port slurmd_port dbd_port db_port < <(free_ports 4)

    head -c 1024 /dev/urandom >"$dir/munge.key"
    chmod 400 "$dir/munge.key"
    munged --force --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
        --pid-file="$dir/munged.pid" --seed-file="$dir/munge.seed" \
        --log-file="$dir/log/munged.log"

    # The accounting database: MariaDB on 127.0.0.1 (user root without a password, data in
    # DIR/db), reached by slurmdbd only.
    mariadb-install-db --no-defaults --datadir="$dir/db" --user=root \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/log/db_install.log" 2>&1
    mariadbd --no-defaults --datadir="$dir/db" --socket="$dir/mariadb.sock" --port="$db_port" \
        --bind-address=127.0.0.1 --user=root --pid-file="$dir/mariadbd.pid" \
        --log-error="$dir/log/mariadb.log" --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
    wait_for 30 mariadbd test -S "$dir/mariadb.sock"
    cat >"$dir/slurm.conf" <<EOF
# Generated by experiments/slurm_local/setup.sh: a one-node cluster on $node.
ClusterName=libralocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
KillWait=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$dir/munge.sock
JobAcctGatherType=jobacct_gather/none
$overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
DbdAddr=127.0.0.1
DbdHost=$node
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/slurmdbd.pid
EOF
    chmod 600 "$dir/slurmdbd.conf"

    # slurmdbd reads the slurmdbd.conf next to $SLURM_CONF.
    export SLURM_CONF="$dir/slurm.conf"
    slurmdbd
    wait_for 30 slurmdbd listening "$dbd_port"
    slurmctld -c -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    wait_for 60 "the SLURM node" node_idle
    wait_for 30 "sacct" timeout 5 sacct -n -X
    echo "SLURM_CONF=$SLURM_CONF"
}

case $action in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
