#!/usr/bin/env bash
# Fleetline's local development Slurm cluster: 8 nodes with 8 fake GPUs each, 2 racks, accounting
# (slurmdbd over a private MariaDB) and slurmrestd with JWT auth, all as processes on this host.
#
#   deploy/slurm/devcluster.sh install|up|down|status|env|kill-node NODE|restart-node NODE
#
# Everything lives under ${FLEETLINE_SLURM_DIR:-var/slurm} (relative to the repository root); it
# touches no system daemon (MariaDB, PostgreSQL, Redis) and no other Slurm. See README.md here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${FLEETLINE_SLURM_DIR:-var/slurm}"
[[ "$DIR" = /* ]] || DIR="$ROOT/$DIR"
CLUSTER=fleetline-dev
NODES=(node01 node02 node03 node04 node05 node06 node07 node08)
CTLD_PORT="${FLEETLINE_SLURM_CTLD_PORT:-6817}"
DBD_PORT="${FLEETLINE_SLURM_DBD_PORT:-6819}"
REST_PORT="${FLEETLINE_SLURM_REST_PORT:-6820}"
SLURMD_PORT_BASE="${FLEETLINE_SLURM_SLURMD_PORT_BASE:-6901}" # node01 -> 6901 ... node08 -> 6908
MYSQL_PORT="${FLEETLINE_SLURM_MYSQL_PORT:-3307}"
USERS="${FLEETLINE_SLURM_USERS:-fl-lead fl-member}"
GPUS="${FLEETLINE_SLURM_GPUS_PER_NODE:-8}" # fake GPUs per node (benchmarks ask for more)
CPUS=$((GPUS * 2 > 16 ? GPUS * 2 : 16))
STOP_BOUND_S="${FLEETLINE_SLURM_STOP_BOUND_S:-20}"

ETC="$DIR/etc"
RUN="$DIR/run"
LOG="$DIR/log"
CONF="$ETC/slurm.conf"
MUNGE_SOCK="$RUN/munge/munge.sock"
MYSQL_SOCK="$RUN/mysql/mysqld.sock"
JWT_KEY="$ETC/jwt.key"

PACKAGES=(slurm-wlm slurmctld slurmd slurm-client slurmrestd munge slurm-wlm-jwt-plugin slurmdbd mariadb-server)

export SLURM_CONF="$CONF"

log() { printf '%s\n' "$*" >&2; }
die() {
    log "devcluster: $*"
    exit 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------------------------------
# install

cmd_install() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
            missing+=("$p")
        fi
    done
    if ((${#missing[@]} == 0)); then
        log "devcluster: packages already installed"
        return 0
    fi
    [[ $EUID -eq 0 ]] || die "installing ${missing[*]} needs root"
    local created_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        # No init script may start a daemon of these packages: this script runs its own.
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        created_policy=1
    fi
    local rc=0
    {
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    } || rc=$?
    if ((created_policy)); then rm -f /usr/sbin/policy-rc.d; fi
    ((rc == 0)) || die "apt-get failed ($rc)"
    log "devcluster: installed ${missing[*]}"
}

# ---------------------------------------------------------------------------------------------
# processes

# pid_alive PIDFILE COMM: prints the pid when the process recorded in PIDFILE runs and is COMM.
pid_alive() {
    local file="$1" comm="$2" pid
    [[ -s "$file" ]] || return 1
    pid="$(tr -dc '0-9' <"$file")"
    [[ -n "$pid" && -r "/proc/$pid/comm" ]] || return 1
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm" ]] || return 1
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 1 # killed, not yet reaped
    printf '%s\n' "$pid"
}

# procs_with_env VAR=VALUE...: pids whose initial environment holds every given VAR=VALUE ("VAR="
# alone: VAR with any value), never this script's own process or its parents.
procs_with_env() {
    local p ok kv self_chain=" $$ $PPID "
    local q=$PPID
    while [[ "$q" -gt 1 && -r /proc/$q/stat ]]; do
        q="$(awk '{ print $4 }' "/proc/$q/stat")"
        self_chain+="$q "
    done
    for p in /proc/[0-9]*; do
        p="${p#/proc/}"
        [[ "$self_chain" == *" $p "* ]] && continue
        ok=1
        for kv in "$@"; do
            if [[ "$kv" == *= ]]; then
                grep -qz -- "^$kv" "/proc/$p/environ" 2>/dev/null && continue
                ok=0
                break
            fi
            if ! grep -qzxF -- "$kv" "/proc/$p/environ" 2>/dev/null; then
                ok=0
                break
            fi
        done
        ((ok)) && printf '%s\n' "$p"
    done
    return 0
}

# node_procs NODE: that node's slurmstepd processes (started by its slurmd, whose environment we
# set) and its jobs' processes (Slurm sets SLURMD_NODENAME and SLURM_CONF in a job's environment).
node_procs() {
    local node="$1"
    {
        procs_with_env "FLEETLINE_DEVCLUSTER_SLURMD=$DIR" "FLEETLINE_DEVCLUSTER_NODE=$node"
        procs_with_env "SLURM_CONF=$CONF" "SLURMD_NODENAME=$node" "SLURM_JOB_ID="
    } | sort -un
}

# Every slurmstepd and job process of this cluster.
cluster_job_procs() {
    {
        procs_with_env "FLEETLINE_DEVCLUSTER_SLURMD=$DIR"
        procs_with_env "SLURM_CONF=$CONF" "SLURM_JOB_ID="
    } | sort -un
}

# stop_pids PID...: TERM, wait up to STOP_BOUND_S, then KILL whatever is left.
stop_pids() {
    local pids=("$@") left p deadline
    ((${#pids[@]})) || return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    deadline=$(($(date +%s) + STOP_BOUND_S))
    while :; do
        left=()
        for p in "${pids[@]}"; do [[ -d /proc/$p ]] && [[ "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" != Z ]] && left+=("$p"); done
        ((${#left[@]})) || return 0
        if (($(date +%s) >= deadline)); then
            log "devcluster: killing ${left[*]} (did not stop within ${STOP_BOUND_S}s)"
            kill -KILL "${left[@]}" 2>/dev/null || true
            sleep 0.2
            return 0
        fi
        sleep 0.1
    done
}

running() { pid_alive "$1" "$2" >/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local bound="$1" what="$2" deadline
    shift 2
    deadline=$(($(date +%s) + bound))
    until "$@" >/dev/null 2>&1; do
        (($(date +%s) < deadline)) || die "timed out after ${bound}s waiting for $what (logs: $LOG)"
        sleep 0.1
    done
}

node_port() { # node01 -> SLURMD_PORT_BASE
    local n="${1#node}"
    echo $((SLURMD_PORT_BASE + 10#$n - 1))
}

# ---------------------------------------------------------------------------------------------
# configuration

write_configs() {
    local host
    host="$(hostname -s)"
    mkdir -p "$ETC" "$RUN/munge" "$RUN/mysql" "$LOG" "$DIR/spool/ctld" "$DIR/dev" "$DIR/shared" "$DIR/mysql"
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
    chmod 755 "$DIR" "$ETC" "$RUN" "$RUN/munge" "$DIR/dev"
    chmod 1777 "$DIR/shared"
    chmod 700 "$RUN/mysql" "$DIR/mysql"

    # Fake GPUs: Slurm's gres File= must be character devices; these are aliases of /dev/null.
    for ((i = 0; i < GPUS; i++)); do
        [[ -c "$DIR/dev/nvidia$i" ]] || { rm -f "$DIR/dev/nvidia$i" && mknod -m 666 "$DIR/dev/nvidia$i" c 1 3; }
    done

    # Keys: created once, kept across runs.
    if [[ ! -s "$ETC/munge.key" ]]; then
        head -c 1024 /dev/urandom >"$ETC/munge.key"
    fi
    chmod 400 "$ETC/munge.key"
    if [[ ! -s "$JWT_KEY" ]]; then
        head -c 32 /dev/urandom >"$JWT_KEY"
    fi
    chmod 600 "$JWT_KEY"
    if [[ ! -s "$ETC/mysql.pass" ]]; then
        head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$ETC/mysql.pass"
    fi
    chmod 600 "$ETC/mysql.pass"

    local nodelines="" n
    for n in "${NODES[@]}"; do
        nodelines+="NodeName=$n NodeAddr=127.0.0.1 NodeHostname=$host Port=$(node_port "$n") CPUs=$CPUS RealMemory=16000 Gres=gpu:$GPUS State=UNKNOWN"$'\n'
    done
    cat >"$CONF.tmp" <<EOF
# Generated by deploy/slurm/devcluster.sh: the fleetline-dev development cluster.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
SlurmdTimeout=10
SlurmctldTimeout=30
ReturnToService=2
JobRequeue=0
KillWait=5
MinJobAge=300
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
# Fleetline releases a tick's runs together: let each scheduling pass look at all of them.
SchedulerParameters=default_queue_depth=1000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
TopologyPlugin=topology/tree
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MUNGE_SOCK
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
${nodelines}PartitionName=gpu Nodes=node[01-08] Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    cat >"$ETC/gres.conf" <<EOF
AutoDetect=off
NodeName=node[01-08] Name=gpu File=$DIR/dev/nvidia[0-$((GPUS - 1))]
EOF
    cat >"$ETC/topology.conf" <<EOF
SwitchName=rack1 Nodes=node[01-04]
SwitchName=rack2 Nodes=node[05-08]
SwitchName=spine Switches=rack[1-2]
EOF
    cat >"$ETC/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$(cat "$ETC/mysql.pass")
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$ETC/slurmdbd.conf"
    chmod 644 "$CONF" "$ETC/gres.conf" "$ETC/topology.conf"
}

# Every directory from / down to the cluster dir must be traversable by the job users and by
# slurmrestd's user (nobody): give the missing o+x (never read or write) where it lacks.
ensure_traversable() {
    local d="$DIR"
    while [[ "$d" != / ]]; do
        if [[ -d "$d" ]] && ! [[ "$(stat -c %A "$d")" =~ ^d........[xt]$ ]]; then
            log "devcluster: adding o+x to $d so job users can reach $DIR/shared"
            chmod o+x "$d"
        fi
        d="$(dirname "$d")"
    done
}

ensure_users() {
    local u
    for u in $USERS; do
        if ! id -u "$u" >/dev/null 2>&1; then
            useradd -M -s /usr/sbin/nologin -c "Fleetline dev cluster user" "$u"
            log "devcluster: created user $u"
        fi
    done
}

# ---------------------------------------------------------------------------------------------
# daemons

start_munged() {
    munged --socket="$MUNGE_SOCK" --key-file="$ETC/munge.key" --pid-file="$RUN/munged.pid" \
        --log-file="$LOG/munged.log" --seed-file="$RUN/munge/munged.seed" --force 9>&-
    wait_for 10 munged test -S "$MUNGE_SOCK"
}

start_mysqld() {
    local fresh=0
    if [[ ! -d "$DIR/mysql/data/mysql" ]]; then
        fresh=1
        rm -rf "$DIR/mysql/data"
        mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root \
            --auth-root-authentication-method=socket --skip-test-db >"$LOG/mysql-install.log" 2>&1 ||
            die "mariadb-install-db failed: $LOG/mysql-install.log"
    fi
    # --no-defaults: nothing from /etc/mysql (the system server's datadir, socket and port).
    setsid mariadbd --no-defaults --datadir="$DIR/mysql/data" --socket="$MYSQL_SOCK" \
        --port="$MYSQL_PORT" --bind-address=127.0.0.1 --pid-file="$RUN/mysqld.pid" --user=root \
        --log-error="$LOG/mysqld.log" --skip-name-resolve --innodb-buffer-pool-size=64M \
        --innodb-lock-wait-timeout=900 --max-connections=50 </dev/null >/dev/null 2>&1 9>&- &
    wait_for 30 "the private MariaDB" mariadb-admin --no-defaults --socket="$MYSQL_SOCK" -uroot ping
    wait_for 10 "the private MariaDB pid file" pid_alive "$RUN/mysqld.pid" mariadbd
    if ((fresh)) || ! mariadb --no-defaults --socket="$MYSQL_SOCK" -uroot -Nse \
        "SELECT 1 FROM mysql.user WHERE user='slurm'" | grep -q 1; then
        local pass
        pass="$(cat "$ETC/mysql.pass")"
        mariadb --no-defaults --socket="$MYSQL_SOCK" -uroot -e "
            CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
            ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
            FLUSH PRIVILEGES;"
    fi
}

start_slurmdbd() {
    # slurmdbd finds slurmdbd.conf beside $SLURM_CONF.
    slurmdbd 9>&-
    wait_for 30 slurmdbd port_open "$DBD_PORT"
    wait_for 10 "slurmdbd pid file" pid_alive "$RUN/slurmdbd.pid" slurmdbd
}

register_accounting() {
    # The cluster, an account and the job users (no enforcement: this only names them in sacct).
    sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
    sacctmgr -i add account fleetline Cluster="$CLUSTER" Description=fleetline Organization=fleetline >/dev/null 2>&1 || true
    local u
    for u in $USERS; do
        sacctmgr -i add user "$u" Account=fleetline Cluster="$CLUSTER" >/dev/null 2>&1 || true
    done
}

start_slurmctld() {
    slurmctld -f "$CONF" 9>&-
    wait_for 30 slurmctld scontrol ping
    wait_for 10 "slurmctld pid file" pid_alive "$RUN/slurmctld.pid" slurmctld
}

# start_slurmd NODE: its slurmstepd processes inherit FLEETLINE_DEVCLUSTER_SLURMD/_NODE, which is how
# kill-node and down find them.
start_slurmd() {
    local node="$1"
    env FLEETLINE_DEVCLUSTER_SLURMD="$DIR" FLEETLINE_DEVCLUSTER_NODE="$node" SLURM_CONF="$CONF" \
        slurmd -f "$CONF" -N "$node" 9>&-
}

start_slurmrestd() {
    # slurmrestd refuses root; as nobody with rest_auth/jwt it forwards each caller's token
    # (SLURM_JWT=daemon makes it accept them at all).
    SLURM_JWT=daemon setsid slurmrestd -u nobody -g nogroup -a rest_auth/jwt \
        -s openapi/v0.0.38,openapi/dbv0.0.38 "127.0.0.1:$REST_PORT" \
        </dev/null >>"$LOG/slurmrestd.log" 2>&1 9>&- &
    echo $! >"$RUN/slurmrestd.pid"
    wait_for 15 slurmrestd port_open "$REST_PORT"
}

rest_ping() {
    local token
    token="$(scontrol token username=root lifespan=60 | sed -n 's/^SLURM_JWT=//p')"
    curl -fsS -m 3 -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $token" \
        "http://127.0.0.1:$REST_PORT/slurm/v0.0.38/ping" | grep -q '"UP"'
}

all_idle() {
    local n
    # Ready: answering and schedulable or drained (a drain a previous run left stays until resumed).
    n="$(sinfo -h -N -p gpu -o '%N %T' 2>/dev/null | awk '$2 ~ /^(idle|drained|draining|mixed|allocated)$/ { c++ } END { print c + 0 }')"
    [[ "$n" == "${#NODES[@]}" ]]
}

daemons_up() { # prints "name pid" of each running daemon; returns 0 when all are up
    local all=0 pid n
    check() {
        if pid="$(pid_alive "$1" "$2")"; then echo "up    $3 (pid $pid)"; else
            echo "down  $3"
            all=1
        fi
    }
    check "$RUN/munged.pid" munged munged
    check "$RUN/mysqld.pid" mariadbd "mariadbd (port $MYSQL_PORT)"
    check "$RUN/slurmdbd.pid" slurmdbd "slurmdbd (port $DBD_PORT)"
    check "$RUN/slurmctld.pid" slurmctld "slurmctld (port $CTLD_PORT)"
    for n in "${NODES[@]}"; do check "$RUN/slurmd-$n.pid" slurmd "slurmd $n (port $(node_port "$n"))"; done
    check "$RUN/slurmrestd.pid" slurmrestd "slurmrestd (http://127.0.0.1:$REST_PORT)"
    return $all
}

cmd_up() {
    local t0 n
    t0="$(now)"
    [[ $EUID -eq 0 ]] || die "up needs root (the daemons run as root, jobs as the cluster users)"
    if daemons_up >/dev/null; then
        echo "fleetline-dev is already up ($DIR)"
        return 0
    fi
    cmd_install
    ensure_users
    if ! pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        write_configs
    fi
    ensure_traversable
    running "$RUN/munged.pid" munged || start_munged
    running "$RUN/mysqld.pid" mariadbd || start_mysqld
    running "$RUN/slurmdbd.pid" slurmdbd || start_slurmdbd
    register_accounting
    running "$RUN/slurmctld.pid" slurmctld || start_slurmctld
    for n in "${NODES[@]}"; do running "$RUN/slurmd-$n.pid" slurmd || start_slurmd "$n"; done
    running "$RUN/slurmrestd.pid" slurmrestd || start_slurmrestd
    wait_for 60 "all nodes idle" all_idle
    wait_for 30 "the REST API" rest_ping
    echo "fleetline-dev up in $(elapsed "$t0") s ($DIR)"
}

cmd_down() {
    local t0 pids=() pid n
    t0="$(now)"
    # Jobs end as cancelled (so a later up does not requeue leftovers).
    if pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        timeout 5 bash -c 'squeue -h -o %i | xargs -r scancel' 2>/dev/null || true
    fi
    # slurmrestd, all slurmd and their steps and jobs, slurmctld: together.
    pid="$(pid_alive "$RUN/slurmrestd.pid" slurmrestd)" && pids+=("$pid")
    for n in "${NODES[@]}"; do pid="$(pid_alive "$RUN/slurmd-$n.pid" slurmd)" && pids+=("$pid"); done
    pid="$(pid_alive "$RUN/slurmctld.pid" slurmctld)" && pids+=("$pid")
    mapfile -t -O "${#pids[@]}" pids < <(cluster_job_procs)
    stop_pids "${pids[@]}"
    pids=()
    pid="$(pid_alive "$RUN/slurmdbd.pid" slurmdbd)" && pids+=("$pid")
    stop_pids "${pids[@]}"
    pids=()
    pid="$(pid_alive "$RUN/mysqld.pid" mariadbd)" && pids+=("$pid")
    pid="$(pid_alive "$RUN/munged.pid" munged)" && pids+=("$pid")
    stop_pids "${pids[@]}"
    # Stragglers started by this cluster's slurmd (e.g. after kill-node).
    mapfile -t pids < <(cluster_job_procs)
    ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
    rm -f "$RUN"/*.pid
    echo "fleetline-dev down in $(elapsed "$t0") s"
}

cmd_status() {
    local rc=0
    daemons_up || rc=$?
    if pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        echo
        sinfo -N -o '%N %8T %10G %E' 2>/dev/null || true
    fi
    return 0
}

cmd_env() {
    cat <<EOF
export SLURM_CONF=$CONF
export FLEETLINE_SLURM_URL=http://127.0.0.1:$REST_PORT
export FLEETLINE_SLURM_JWT_KEY=$JWT_KEY
export FLEETLINE_SLURM_SHARED_DIR=$DIR/shared
export FLEETLINE_SLURM_CLUSTER=$CLUSTER
EOF
}

check_node() {
    local node="${1:-}"
    [[ " ${NODES[*]} " == *" $node "* ]] || die "unknown node '$node' (one of ${NODES[*]})"
}

cmd_kill_node() {
    local node="$1" pids=() pid
    check_node "$node"
    pid="$(pid_alive "$RUN/slurmd-$node.pid" slurmd)" && pids+=("$pid")
    mapfile -t -O "${#pids[@]}" pids < <(node_procs "$node")
    if ((${#pids[@]})); then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
    echo "killed $node: ${#pids[@]} processes (slurmd, slurmstepd, jobs)"
}

cmd_restart_node() {
    local node="$1"
    check_node "$node"
    pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null || die "the cluster is not up"
    if running "$RUN/slurmd-$node.pid" slurmd; then
        echo "slurmd $node is already running"
    else
        start_slurmd "$node"
        echo "restarted slurmd $node"
    fi
}

# One command at a time per cluster dir (two `up`s racing would start everything twice). The
# daemons are started with fd 9 closed so that they do not keep holding it.
lock() {
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock -w 120 9 || die "another devcluster.sh holds $DIR/.lock"
}

case "${1:-}" in
up | down | kill-node | restart-node) lock ;;
esac

case "${1:-}" in
install) cmd_install ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
kill-node) cmd_kill_node "${2:-}" ;;
restart-node) cmd_restart_node "${2:-}" ;;
*)
    echo "usage: $0 install|up|down|status|env|kill-node NODE|restart-node NODE" >&2
    exit 2
    ;;
esac
