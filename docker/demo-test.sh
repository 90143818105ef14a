#!/usr/bin/env bash
# The failover demo of docs/docker.md, run and checked: three
# replicas elect exactly one leader, a killed leader (docker compose kill, SIGKILL) is
# replaced by another, and a stopped one (docker compose stop, SIGTERM) hands over.
# Each step is checked against the election row (`casleader status --json`), every
# running replica's casleader_is_leader and casleader_token, and the leader's child
# output, within a bounded time; the demo is removed (`docker compose down -v`)
# whatever the outcome. From the repository root:
#
#   bash docker/demo-test.sh
#
# It runs the commands of docs/docker.md, with `docker-compose` (Compose v1, as Debian bookworm
# packages it) where the Compose v2 plugin is missing. COMPOSE_FILE picks the images:
# unset, it is docker-compose.yml plus docker-compose.local.yml, which needs the images
# of `bash .ci/docker up` and no registry (as in casleader's CI); set it to
# docker-compose.yml for the upstream images. CASLEADER_DSN picks the database as in
# docs/docker.md (MySQL by default). A failed check prints the replicas' logs and exits 1.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export COMPOSE_FILE="${COMPOSE_FILE:-docker-compose.yml:docker-compose.local.yml}"
REPLICAS=(casleader-1 casleader-2 casleader-3)
LEASE=6s # the replicas' --lease in docker-compose.yml
BOUND=90 # seconds any one step may take

start=$SECONDS
say() { printf -- '-- demo [%3ds] %s\n' "$((SECONDS - start))" "$*"; }
fail() {
  printf -- '!! demo: FAILED: %s\n' "$*" >&2
  exit 1
}

if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
else
  fail "no Compose: install the Compose v2 plugin or Debian's docker-compose (bash .ci/docker up does)"
fi
compose() { "${COMPOSE[@]}" "$@"; }

cleanup() {
  local rc=$?
  if ((rc != 0)); then
    compose logs --no-color --tail=60 "${REPLICAS[@]}" migrate >&2 || true
  fi
  compose down -v >/dev/null 2>&1 || printf -- '!! demo: compose down -v failed\n' >&2
  say "removed the demo (compose down -v); exit $rc"
}
trap cleanup EXIT

# field NAME JSON: the string or number NAME of a flat JSON object.
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^\",]*\).*/\1/p" <<<"$2"; }

# on REPLICA CMD...: run CMD in REPLICA's container. The checks use docker itself: a
# Compose v1 call costs a second of CPU, which a loaded machine may not have.
declare -A CONTAINER
on() { docker exec "${CONTAINER[$1]}" "${@:2}"; }

# metric REPLICA NAME: the value of the gauge NAME that REPLICA serves, as an integer;
# empty when REPLICA does not answer.
metric() {
  { on "$1" wget -q -O - http://127.0.0.1:9090/metrics 2>/dev/null || true; } |
    awk -v m="$2" '!found && (index($1, m "{") == 1 || $1 == m) {printf "%.0f\n", $NF; found = 1}'
}

# leader_is_one NOT RUNNING...: the row names a live leader other than NOT, with a
# term; it is the only replica of RUNNING whose casleader_is_leader is 1, its
# casleader_token is the term, and its child prints the term. Sets LEADER and TOKEN;
# WHY says what is missing.
leader_is_one() {
  local not=$1 row r leaders=() token
  shift
  row=$(on "$1" casleader status --key demo --json --lease "$LEASE" 2>&1) || {
    WHY="status: $row"
    return 1
  }
  LEADER=$(field leader "$row") TOKEN=$(field term "$row")
  if [ -z "$LEADER" ] || [ "$LEADER" = "$not" ] || [ "$(field expired "$row")" != false ]; then
    WHY="the row: $row"
    return 1
  fi
  for r in "$@"; do
    [ "$(metric "$r" casleader_is_leader)" != 1 ] || leaders+=("$r")
  done
  if [ "${leaders[*]}" != "$LEADER" ]; then
    WHY="the row names $LEADER; replicas whose casleader_is_leader is 1: ${leaders[*]:-none}"
    return 1
  fi
  token=$(metric "$LEADER" casleader_token)
  if [ "$token" != "$TOKEN" ]; then
    WHY="$LEADER: casleader_token $token, the row's term $TOKEN"
    return 1
  fi
  if ! docker logs "${CONTAINER[$LEADER]}" 2>&1 | grep -c "$LEADER leads, token $TOKEN" >/dev/null; then
    WHY="$LEADER leads in term $TOKEN but its child has not printed it"
    return 1
  fi
}

# await_leader NOT RUNNING...: leader_is_one within BOUND seconds.
await_leader() {
  local deadline=$((SECONDS + BOUND))
  WHY=""
  until leader_is_one "$@"; do
    ((SECONDS < deadline)) || fail "no single leader (other than ${1:-none}) among ${*:2} within ${BOUND}s: $WHY"
    sleep 1
  done
}

say "compose: $(compose version --short 2>/dev/null || compose version | head -n 1); COMPOSE_FILE=$COMPOSE_FILE"
if [[ "$COMPOSE_FILE" == *docker-compose.local.yml* ]]; then
  say "building the static binary for Dockerfile.local"
  (cd .. && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o docker/bin/casleader ./cmd/casleader)
fi

say "docker compose up --build -d"
log=$(mktemp)
if ! timeout 600 "${COMPOSE[@]}" up --build -d >"$log" 2>&1; then
  cat "$log" >&2
  fail "compose up --build -d failed (output above)"
fi
rm -f "$log"
compose ps
for r in "${REPLICAS[@]}"; do CONTAINER[$r]=$(compose ps -q "$r"); done
await_leader "" "${REPLICAS[@]}"
first=$LEADER first_term=$TOKEN
say "one leader: $first, token $first_term"

say "docker compose kill $first"
compose kill "$first"
running=()
for r in "${REPLICAS[@]}"; do [ "$r" = "$first" ] || running+=("$r"); done
await_leader "$first" "${running[@]}"
second=$LEADER
((TOKEN > first_term)) || fail "the new leader $second has term $TOKEN, not larger than $first_term"
say "$first killed, $second took over with token $TOKEN"

say "docker compose start $first"
compose start "$first"
await_leader "" "${REPLICAS[@]}"
[ "$LEADER" = "$second" ] || fail "$first came back and $LEADER leads, not $second"
second_term=$TOKEN
say "$first is back as a follower; $second still leads"

say "docker compose stop $second"
compose stop "$second"
# The container has exited: a leader that resigned no longer holds the row, one that
# did not would hold it until its lease expires.
row=$(on "$first" casleader status --key demo --json --lease "$LEASE") || fail "status: $row"
[ "$(field leader "$row")" != "$second" ] || fail "$second stopped but the row still names it (it did not release the lease): $row"
running=()
for r in "${REPLICAS[@]}"; do [ "$r" = "$second" ] || running+=("$r"); done
await_leader "$second" "${running[@]}"
((TOKEN > second_term)) || fail "the new leader $LEADER has term $TOKEN, not larger than $second_term"
say "$second stopped and released the lease, $LEADER took over with token $TOKEN"
say "passed"
