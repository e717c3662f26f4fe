#!/usr/bin/env bash
# How long `npm start` takes to answer, from a fresh clone: for each of RUNS clones, the time of
# `npm install`, then of `npm start` until GET /healthz first answers 200 (the first start); then,
# in the last clone with its client releases built, RUNS more starts (the later start). Each
# start gets a new database, dropped afterwards. Prints min, median and max of each.
#
#   bench/first-start.sh [<repository>]     default: this checkout (its committed HEAD)
#   RUNS=<default 3>  BENCH_DATABASE_URL=mysql://root@127.0.0.1:3306/ (the server)
#
# npm install uses the local npm cache first (--prefer-offline), so the figure is the install's own
# work (including `prepare`), not the network's.
set -euo pipefail

REPO=${1:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
RUNS=${RUNS:-3}
SERVER=${BENCH_DATABASE_URL:-mysql://root@127.0.0.1:3306/}
SERVER=${SERVER%/}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-rental-first-start.XXXXXX")
SERVICE_PID=
DATABASES=()

mysql_url() { # the server's host, port and user from a mysql:// URL, as mysql client options
  local rest=${SERVER#mysql://} auth host
  auth=${rest%@*}; host=${rest#*@}
  echo "-h ${host%%:*} -P $( [[ $host == *:* ]] && echo "${host##*:}" || echo 3306) -u ${auth%%:*}"
}

# Ends the service's whole process group and waits until none of it is left.
stop_service() {
  [[ -n $SERVICE_PID ]] || return 0
  kill -TERM -- "-$SERVICE_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 -- "-$SERVICE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$SERVICE_PID" 2>/dev/null || true
  wait "$SERVICE_PID" 2>/dev/null || true
  SERVICE_PID=
}

cleanup() {
  stop_service
  for db in "${DATABASES[@]}"; do mysql $(mysql_url) -e "DROP DATABASE IF EXISTS \`$db\`" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

now_ms() { date +%s%3N; }

# Runs `npm start` in $1 on a new database; prints the milliseconds until /healthz answers 200.
timed_start() {
  local dir=$1 port=$((20000 + RANDOM % 10000)) db="gpu_rental_first_start_$$_$RANDOM" t0 t1
  DATABASES+=("$db")
  t0=$(now_ms)
  # A session of its own: npm start's shell and node (and the background release build) are ended
  # together through the group, since npm does not pass a SIGTERM on to the service.
  (cd "$dir" && exec setsid env DATABASE_URL="$SERVER/$db" PORT="$port" LOG_LEVEL=warn npm start >>"$WORK/service.log" 2>&1) &
  SERVICE_PID=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; do
    kill -0 "$SERVICE_PID" 2>/dev/null || { echo "npm start exited before it answered; see below" >&2; tail -20 "$WORK/service.log" >&2; exit 1; }
    sleep 0.05
  done
  t1=$(now_ms)
  stop_service
  echo $((t1 - t0))
}

summary() { # label, then milliseconds
  local label=$1; shift
  sort -n <<<"$(printf '%s\n' "$@")" | awk -v label="$label" '{ v[NR] = $1 } END { printf "%-34s min %6.1f s  median %6.1f s  max %6.1f s\n", label, v[1] / 1000, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000 }'
}

installs=() firsts=() laters=()
for i in $(seq 1 "$RUNS"); do
  dir="$WORK/clone-$i"
  git clone -q "$REPO" "$dir"
  t0=$(now_ms)
  (cd "$dir" && npm install --prefer-offline --no-audit --no-fund --loglevel=error >>"$WORK/install.log" 2>&1) || { tail -20 "$WORK/install.log" >&2; exit 1; }
  installs+=($(($(now_ms) - t0)))
  firsts+=("$(timed_start "$dir")")
  echo "clone $i: npm install ${installs[-1]} ms, first start ${firsts[-1]} ms" >&2
done
# The later start is the steady state: dist/ and the client releases both built.
(cd "$dir" && npm run --silent release -- --if-missing >/dev/null 2>>"$WORK/install.log")
for i in $(seq 1 "$RUNS"); do
  laters+=("$(timed_start "$dir")")
  echo "later start $i: ${laters[-1]} ms" >&2
done

echo
echo "npm start until GET /healthz answers 200, $RUNS runs each, $(git -C "$REPO" log -1 --format=%h) of $REPO"
summary 'npm install (fresh clone)' "${installs[@]}"
summary 'first start (after npm install)' "${firsts[@]}"
summary 'later start' "${laters[@]}"
grep -h '^start: ' "$WORK/service.log" | sort | uniq -c | sed 's/^/  /'
