#!/usr/bin/env bash
# What the test suite needs beyond npm packages, checked before every `npm test` (its pretest step)
# and by .ci/run:
#   chromium            /usr/bin/chromium, the browser the browser tests drive
#   openssh-client      `ssh`, which the CLI's `gpr ssh` tests exec
#   openssl             `openssl`, which makes the TLS certificate of the client metadata document tests
#   util-linux          `unshare` and `setpriv`, the local provider's sandbox
#   mariadb-server      `mariadb-install-db` and /usr/sbin/mariadbd (tests start private servers)
#   a MariaDB answering at TEST_DATABASE_URL's host and port (default 127.0.0.1:3306)
# and, with --cluster (what `npm run test:cluster` runs first), for the three-node Galera cluster:
#   galera-4            /usr/lib/galera/libgalera_smm.so, the replication library
#   mariadb-client      `mariadb`, which scripts/galera-cluster.sh asks each node's state with
#   rsync               the state transfer a node that joins (or rejoins) the cluster receives
# A missing package is installed with apt-get when this runs as root on a system that has it, and a
# local MariaDB that is installed but down is started; either is said in one line. When that is not
# possible the script stops with one line naming the package or command. Silent when all is there.
#
# Options: --dry-run says what it would install or start, and does neither; --cluster also checks
# what the Galera cluster suite needs.
# TEST_PREREQUISITES_ROOT prefixes the fixed paths checked and created (/usr/bin/chromium,
# /usr/sbin/mariadbd, /run/mysqld, the Galera library), so the missing paths can be exercised without removing packages.
set -uo pipefail

ROOT=${TEST_PREREQUISITES_ROOT:-}
DRY_RUN=0
CLUSTER=0
for arg in "$@"; do
  case $arg in
    --dry-run) DRY_RUN=1 ;;
    --cluster) CLUSTER=1 ;;
    *) printf 'test prerequisites: unknown option %s (--dry-run, --cluster)\n' "$arg" >&2; exit 2 ;;
  esac
done
WAIT_SECONDS=${TEST_PREREQUISITES_DB_WAIT_SECONDS:-60}

say() { printf 'test prerequisites: %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }

# The database the tests use; only a server on this machine is ours to start.
url=${TEST_DATABASE_URL:-mysql://root@127.0.0.1:3306/}
hostport=${url#*://}
hostport=${hostport##*@}
hostport=${hostport%%/*}
db_host=${hostport%%:*}
db_port=3306
[[ "$hostport" == *:* ]] && db_port=${hostport##*:}
local_db=0
[[ "$db_host" == localhost || "$db_host" == 127.* ]] && local_db=1

# A TCP connect is enough to know the server is up; the tests report a refused login themselves.
db_reachable() { timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$db_host" "$db_port" 2>/dev/null; }

missing=()
need_file() { [ -x "${ROOT}$1" ] || missing+=("$2"); }
need_command() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need_readable() { [ -r "${ROOT}$1" ] || missing+=("$2"); }

need_file /usr/bin/chromium chromium
need_command ssh openssh-client
need_command openssl openssl
need_command unshare util-linux
need_command setpriv util-linux
need_command mariadb-install-db mariadb-server
need_file /usr/sbin/mariadbd mariadb-server
if [ "$CLUSTER" = 1 ]; then
  need_readable /usr/lib/galera/libgalera_smm.so galera-4
  need_command mariadb mariadb-client
  need_command rsync rsync
fi
# Each package once, in the order found.
packages=()
for p in "${missing[@]}"; do [[ " ${packages[*]} " == *" $p "* ]] || packages+=("$p"); done

if [ "${#packages[@]}" -gt 0 ]; then
  can_install=0
  if [ "$EUID" = 0 ] && command -v apt-get >/dev/null 2>&1; then can_install=1; fi
  if [ "$can_install" = 0 ]; then
    fail "missing ${packages[*]}; install with: apt-get install ${packages[*]}"
  fi
  if [ "$DRY_RUN" = 1 ]; then
    say "would install ${packages[*]} (apt-get install ${packages[*]})"
  else
    say "installing ${packages[*]} with apt-get"
    log=$(mktemp)
    # Another run installing at the same time holds the lock: wait for it rather than fail.
    if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${packages[@]}"; } >"$log" 2>&1; then
      fail "apt-get install ${packages[*]} failed; its output is in $log"
    fi
    rm -f "$log"
    for p in "${packages[@]}"; do
      case $p in
        chromium) [ -x "${ROOT}/usr/bin/chromium" ] || fail "apt-get installed chromium but ${ROOT}/usr/bin/chromium is still missing" ;;
      esac
    done
  fi
fi

if ! db_reachable; then
  if [ "$local_db" = 0 ]; then
    fail "no MariaDB answers at ${db_host}:${db_port} (TEST_DATABASE_URL); start it there"
  fi
  if [ ! -x "${ROOT}/usr/sbin/mariadbd" ] && [ "$DRY_RUN" = 0 ]; then
    fail "no MariaDB answers at ${db_host}:${db_port} and /usr/sbin/mariadbd is missing; install with: apt-get install mariadb-server"
  fi
  if [ "$EUID" != 0 ]; then
    fail "no MariaDB answers at ${db_host}:${db_port}; start it as root: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
  fi
  if [ "$DRY_RUN" = 1 ]; then
    say "would start MariaDB (start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd)"
    exit 0
  fi
  say "starting MariaDB on ${db_host}:${db_port}"
  # Its socket and pid file live here, and /run is emptied on every boot of a machine without systemd.
  if [ ! -d "${ROOT}/run/mysqld" ]; then
    mkdir -p "${ROOT}/run/mysqld" && { chown mysql:mysql "${ROOT}/run/mysqld" 2>/dev/null || true; }
  fi
  start-stop-daemon --start --oknodo --background --exec "${ROOT}/usr/sbin/mariadbd" >/dev/null 2>&1 \
    || fail "start-stop-daemon --start --exec /usr/sbin/mariadbd failed; start MariaDB by hand"
  for ((i = 0; i < WAIT_SECONDS * 4; i++)); do
    db_reachable && exit 0
    sleep 0.25
  done
  fail "MariaDB did not answer at ${db_host}:${db_port} within ${WAIT_SECONDS} s of starting; see its error log"
fi
exit 0
