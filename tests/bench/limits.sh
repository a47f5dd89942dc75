#!/usr/bin/env bash
# What count:, concurrency and delay: cost per proxied request, each side by side with a plain
# limit in one run: the same binary, the same route, a limit no client reaches; in memory, then
# with the limits in Redis.
#
#   tests/bench/limits.sh [ROUNDS] [SECONDS] [CONNECTIONS]   (5 3 32)
#
# One upstream (nginx, one worker, a 20-byte body answered 200). Each pair is two sluice
# processes in thread_per_connection (the default mode), access log off:
#   plain        gcra, 1e8 per second;
#   count        the same with count: {statuses: [401]}: every 200 is charged, then refunded
#                (the costliest case: each request both charged and given back);
#   concurrency  concurrency, 1e8 in flight: a slot taken and given back per request;
#   delay        the plain limit with delay: {max: 1s}: a seat in its queue taken and given
#                back per request, which never waits (the limit is never reached);
#   waiting      gcra 4,000 per second, burst 1, delay: {max: 1s, queue: 1000}: with 32
#                connections asking at once, nearly every request waits for its turn on the
#                sleeper's thread (its rate is the limit's: CPU per request is the figure);
# then plain, count and concurrency again with `store: redis` (a local redis-server): count
# costs a second script call per refunded request, concurrency a second to give its slot back.
# Every target is on 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-3} conns=${3:-32}
[ -x build/sluice ] || { echo "limits: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk curl bc redis-server; do
  command -v $t >/dev/null || { echo "limits: $t is missing" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-limits.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
UP=18390 A=18391 B=18392 REDIS=18393
printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; keepalive_requests 10000000;" \
  "  server { listen 127.0.0.1:$UP; location / { return 200 \"hello from upstream\\n\"; } } }" \
  >"$dir/upstream.conf"
nginx -c "$dir/upstream.conf" & pids+=($!)
redis-server --port $REDIS --bind 127.0.0.1 --save "" --appendonly no >"$dir/redis.log" 2>&1 &
pids+=($!)

# config NAME PORT LIMIT [STORE]
config() {
  printf '%s\n' "server: {listen: \"127.0.0.1:$2\", access_log: \"off\"}" \
    "limiter: {store: ${4:-memory}, redis: {address: \"127.0.0.1:$REDIS\"}}" "routes:" \
    "  - name: api" "    match: {path_prefix: /}" "    upstream: \"http://127.0.0.1:$UP\"" \
    "    limit: $3" >"$dir/$1.yaml"
}
plain='{algorithm: gcra, requests: 100000000, per: 1s}'
config plain $A "$plain"
config count $B '{algorithm: gcra, requests: 100000000, per: 1s, count: {statuses: [401]}}'
config concurrency $B '{algorithm: concurrency, requests: 100000000}'
config delay $B '{algorithm: gcra, requests: 100000000, per: 1s, delay: {max: 1s}}'
config waiting $B '{algorithm: gcra, requests: 4000, per: 1s, burst: 1, delay: {max: 1s, queue: 1000}}'
config redis-plain $A "$plain" redis
config redis-count $B '{algorithm: gcra, requests: 100000000, per: 1s, count: {statuses: [401]}}' redis
config redis-concurrency $B '{algorithm: concurrency, requests: 100000000}' redis

name=limits lua=""
. tests/bench/side_by_side.sh
printf '%-36s %9s %12s %9s %12s %8s\n' "thread_per_connection, $conns conns" "req/s" cpu_us/req \
  "req/s" cpu_us/req "CPU B/A"
for b in count concurrency delay waiting redis-count redis-concurrency; do
  a=plain
  [ "${b#redis-}" != "$b" ] && a=redis-plain
  measure_pair build/sluice "$dir/$a.yaml" $A build/sluice "$dir/$b.yaml" $B $UP
  printf '%-36s %9s %12s %9s %12s %8.3f\n' "$a (A) vs $b (B)" "$a_rps" "$a_cpu" "$b_rps" \
    "$b_cpu" "$(echo "$b_cpu / $a_cpu" | bc -l)"
done
printf '(medians of %d alternating rounds of %d s)\n' "$rounds" "$secs"
