#!/usr/bin/env bash
# A flood from a client already refused, with its limit in memory and in Redis, side by side
# in one run: how near the Redis store comes to the memory store when this replica answers
# Redis's refusals itself while they hold (limiter.redis.refusal_cache, default 1 s), and
# without that (refusal_cache: 0); in both serving modes; and the Redis commands each request
# costs.
#
#   tests/bench/refusals.sh [ROUNDS] [SECONDS] [CONNECTIONS]   (5 3 32)
#
# Every client here is 127.0.0.1, under a limit of 1 an hour: after the first request every
# answer is a 429 (wrk's "answers not 2xx" are expected). A local redis-server; nginx as the
# upstream, which the flood never reaches. Every target is on 127.0.0.1; every run ends by
# itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-3} conns=${3:-32}
[ -x build/sluice ] || { echo "refusals: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk curl bc redis-server redis-cli; do
  command -v $t >/dev/null || { echo "refusals: $t is missing" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-refusals.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
UP=18490 A=18491 B=18492 REDIS=18493
printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; server { listen 127.0.0.1:$UP; location / { return 200 \"ok\\n\"; } } }" \
  >"$dir/upstream.conf"
nginx -c "$dir/upstream.conf" & pids+=($!)
redis-server --port $REDIS --bind 127.0.0.1 --save "" --appendonly no >"$dir/redis.log" 2>&1 &
pids+=($!)

# config NAME PORT MODE STORE CACHE
config() {
  local mode="mode: $3"
  [ "$3" = event ] && mode="mode: event, workers: 2"
  printf '%s\n' "server: {listen: \"127.0.0.1:$2\", access_log: \"off\", $mode}" \
    "limiter: {store: $4, redis: {address: \"127.0.0.1:$REDIS\", refusal_cache: $5}}" \
    "routes:" "  - name: api" "    match: {path_prefix: /}" "    upstream: \"http://127.0.0.1:$UP\"" \
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}" >"$dir/$1.yaml"
}

# Redis commands per request for CONFIG on PORT: one wrk run of 2 s, INFO commandstats around.
commands_per_request() {
  local pid calls n
  build/sluice -c "$1" >"$1.cmd.log" 2>&1 & pid=$!
  pids+=("$pid")
  wait_up "$2"
  redis-cli -p $REDIS CONFIG RESETSTAT >/dev/null
  n=$(timeout 30 wrk -t1 -c"$conns" -d2s "http://127.0.0.1:$2/" 2>/dev/null |
    awk '/requests in/ { print $1 }')
  calls=$(redis-cli -p $REDIS INFO commandstats | tr -d '\r' |
    awk -F'[=,]' '/^cmdstat_evalsha:/ { print $2 }')
  kill $pid; wait $pid 2>/dev/null
  echo "scale=4; ${calls:-0} / $n" | bc -l
}

name=refusals lua=""
. tests/bench/side_by_side.sh
printf '%-44s %9s %11s %9s %11s %8s %8s %10s\n' "$conns conns, a refused client" "A req/s" \
  "A cpu_us/r" "B req/s" "B cpu_us/r" "B/A r/s" "CPU B/A" "B evalsha/r"
for mode in thread_per_connection event; do
  config memory $A $mode memory 1s
  config cached $B $mode redis 1s
  config uncached $B $mode redis 0s
  for b in cached uncached; do
    redis-cli -p $REDIS FLUSHALL >/dev/null
    measure_pair build/sluice "$dir/memory.yaml" $A build/sluice "$dir/$b.yaml" $B $UP 2>/dev/null
    per=$(commands_per_request "$dir/$b.yaml" $B)
    printf '%-44s %9s %11s %9s %11s %8.3f %8.3f %10s\n' "$mode: memory (A) vs redis $b (B)" \
      "$a_rps" "$a_cpu" "$b_rps" "$b_cpu" "$(echo "$b_rps / $a_rps" | bc -l)" \
      "$(echo "$b_cpu / $a_cpu" | bc -l)" "$per"
  done
done
printf '(medians of %d alternating rounds of %d s)\n' "$rounds" "$secs"
