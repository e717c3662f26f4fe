#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on loopback, for `npm run test:cluster` and for trying the
# service on a multi-primary database by hand.
#
#   scripts/galera-cluster.sh start    # starts whatever node is down; waits for size 3 and ready
#   scripts/galera-cluster.sh stop     # stops the nodes and removes their data directories
#   scripts/galera-cluster.sh status   # one line per node
#   scripts/galera-cluster.sh kill N   # SIGKILLs node N (1..3), as a crash would
#
# Nodes listen on SQL 3311..3313 (gcomm 4571.., IST 4581.., SST 4591..), keep their data under
# GALERA_DIR (default /tmp/gpu-rental-galera) and run as root with no password, like the shared
# test server. `start` is idempotent: nodes that answer are left alone, a node that is down joins
# the running ones (or bootstraps the cluster when none runs).
set -euo pipefail

DIR=${GALERA_DIR:-/tmp/gpu-rental-galera}
BASE_SQL=${GALERA_BASE_PORT:-3310}
NODES=(1 2 3)
PROVIDER=/usr/lib/galera/libgalera_smm.so

log() { printf '[galera] %s\n' "$*" >&2; }
sql_port() { echo $((BASE_SQL + $1)); }
gcomm_port() { echo $((4570 + $1)); }

answers() {
  mariadb --no-defaults -h127.0.0.1 -P"$(sql_port "$1")" -uroot --connect-timeout=1 -N -e 'SELECT 1' >/dev/null 2>&1
}

status_of() {
  mariadb --no-defaults -h127.0.0.1 -P"$(sql_port "$1")" -uroot --connect-timeout=1 -N -B -e \
    "SELECT CONCAT(MAX(IF(VARIABLE_NAME='WSREP_CLUSTER_SIZE',VARIABLE_VALUE,NULL)),' ',MAX(IF(VARIABLE_NAME='WSREP_READY',VARIABLE_VALUE,NULL)),' ',MAX(IF(VARIABLE_NAME='WSREP_LOCAL_STATE_COMMENT',VARIABLE_VALUE,NULL))) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('WSREP_CLUSTER_SIZE','WSREP_READY','WSREP_LOCAL_STATE_COMMENT')" 2>/dev/null
}

cluster_address() {
  local peers=() n
  for n in "${NODES[@]}"; do [ "$n" = "$1" ] || peers+=("127.0.0.1:$(gcomm_port "$n")"); done
  local IFS=,
  echo "gcomm://${peers[*]}"
}

start_node() {
  local n=$1 bootstrap=$2 d="$DIR/node$1"
  if [ ! -d "$d/data/mysql" ]; then
    mkdir -p "$d/data"
    log "node $n: mariadb-install-db into $d/data"
    mariadb-install-db --no-defaults --user=root --datadir="$d/data" --auth-root-authentication-method=normal \
      --skip-test-db >"$d/install.log" 2>&1 || { cat "$d/install.log" >&2; exit 1; }
  fi
  # A node that ran before and was killed must not refuse to bootstrap for want of a clean shutdown.
  if [ "$bootstrap" = 1 ] && [ -f "$d/data/grastate.dat" ]; then
    sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
  fi
  local extra=()
  [ "$bootstrap" = 1 ] && extra+=(--wsrep-new-cluster)
  log "node $n: starting on SQL port $(sql_port "$n")$([ "$bootstrap" = 1 ] && echo ' (bootstrapping a new cluster)')"
  # wsrep_sst_rsync runs the joiner's rsync daemon as root, which rsync turns into "nobody": the
  # data directory and every file the node makes must be writable by all, or the state transfer
  # fails with "Permission denied". (Throw-away test data on loopback only.)
  chmod -R a+rwX "$d/data"
  UMASK=0666 UMASK_DIR=0777 setsid /usr/sbin/mariadbd --no-defaults --user=root --datadir="$d/data" \
    --port="$(sql_port "$n")" --bind-address=127.0.0.1 --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
    --skip-name-resolve --innodb-buffer-pool-size=64M --innodb-log-file-size=48M \
    --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
    --innodb-flush-log-at-trx-commit=0 --max-connections=500 \
    --wsrep-on=ON --wsrep-provider="$PROVIDER" --wsrep-cluster-name=gpu-rental-test \
    --wsrep-node-name="node$n" --wsrep-node-address="127.0.0.1:$(gcomm_port "$n")" \
    --wsrep-cluster-address="$(cluster_address "$n")" \
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$n");ist.recv_addr=127.0.0.1:$((4580 + n));gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S" \
    --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((4590 + n))" \
    --wsrep-slave-threads=2 --log-error="$d/error.log" "${extra[@]}" \
    </dev/null >/dev/null 2>&1 &
  echo $! >"$d/launcher.pid"
}

wait_ready() {
  local n=$1 deadline=$((SECONDS + ${GALERA_START_TIMEOUT:-90})) s
  while :; do
    s=$(status_of "$n" || true)
    case "$s" in *" ON Synced") return 0 ;; esac
    if [ $SECONDS -gt $deadline ]; then
      log "node $n: not ready after ${GALERA_START_TIMEOUT:-90}s (status: ${s:-no answer}); last lines of $DIR/node$n/error.log:"
      tail -20 "$DIR/node$n/error.log" >&2 || true
      exit 1
    fi
    sleep 0.3
  done
}

node_pid() { cat "$DIR/node$1/mysqld.pid" 2>/dev/null || cat "$DIR/node$1/launcher.pid" 2>/dev/null || true; }

cmd_start() {
  mkdir -p "$DIR"
  local n any=0 up=()
  for n in "${NODES[@]}"; do
    if answers "$n"; then any=1; up+=("$n"); fi
  done
  for n in "${NODES[@]}"; do
    answers "$n" && continue
    if [ $any = 0 ]; then start_node "$n" 1; any=1; else start_node "$n" 0; fi
    wait_ready "$n"
    log "node $n: synced"
  done
  local size deadline=$((SECONDS + 60))
  while :; do
    size=$(status_of 1 | cut -d' ' -f1)
    [ "$size" = 3 ] && break
    [ $SECONDS -gt $deadline ] && { log "cluster size stays at ${size:-?}"; exit 1; }
    sleep 0.3
  done
  for n in "${NODES[@]}"; do wait_ready "$n"; done
  log "cluster ready: wsrep_cluster_size=3, wsrep_ready=ON on ports $(sql_port 1),$(sql_port 2),$(sql_port 3)"
}

cmd_stop() {
  local n pid
  for n in "${NODES[@]}"; do
    pid=$(node_pid "$n")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      log "node $n: stopping (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$DIR"
  log "stopped; removed $DIR"
}

cmd_status() {
  local n
  for n in "${NODES[@]}"; do
    printf 'node %s port %s: %s\n' "$n" "$(sql_port "$n")" "$(status_of "$n" || echo down)"
  done
}

cmd_kill() {
  local pid
  pid=$(node_pid "$1")
  [ -n "$pid" ] || { log "node $1 has no pid"; exit 1; }
  log "node $1: SIGKILL (pid $pid)"
  kill -KILL "$pid"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  kill) cmd_kill "${2:?node number}" ;;
  *) echo "usage: $0 start|stop|status|kill N" >&2; exit 2 ;;
esac
