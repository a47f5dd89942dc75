#!/usr/bin/env bash
# What count: and concurrency cost per proxied request, each side by side with a plain limit
# in one run: the same binary, the same route, a limit no client reaches.
#
#   tests/bench/limits.sh [ROUNDS] [SECONDS] [CONNECTIONS]   (5 3 32)
#
# One upstream (nginx, one worker, a 20-byte body answered 200). Each pair is two sluice
# processes in thread_per_connection (the default mode), access log off:
#   plain        gcra, 1e8 per second;
#   count        the same with count: {statuses: [401]}: every 200 is charged, then refunded
#                (the costliest case: each request both charged and given back);
#   concurrency  concurrency, 1e8 in flight: a slot taken and given back per request.
# Every target is on 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-3} conns=${3:-32}
[ -x build/sluice ] || { echo "limits: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk curl bc; do
  command -v $t >/dev/null || { echo "limits: $t is missing" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-limits.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
UP=18390 A=18391 B=18392
printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; keepalive_requests 10000000;" \
  "  server { listen 127.0.0.1:$UP; location / { return 200 \"hello from upstream\\n\"; } } }" \
  >"$dir/upstream.conf"
nginx -c "$dir/upstream.conf" & pids+=($!)

# config NAME PORT LIMIT
config() {
  printf '%s\n' "server: {listen: \"127.0.0.1:$2\", access_log: \"off\"}" "routes:" \
    "  - name: api" "    match: {path_prefix: /}" "    upstream: \"http://127.0.0.1:$UP\"" \
    "    limit: $3" >"$dir/$1.yaml"
}
plain='{algorithm: gcra, requests: 100000000, per: 1s}'
config plain $A "$plain"
config count $B '{algorithm: gcra, requests: 100000000, per: 1s, count: {statuses: [401]}}'
config concurrency $B '{algorithm: concurrency, requests: 100000000}'

name=limits lua=""
. tests/bench/side_by_side.sh
printf '%-36s %9s %12s %9s %12s %8s\n' "thread_per_connection, $conns conns" "req/s" cpu_us/req \
  "req/s" cpu_us/req "CPU B/A"
for b in count concurrency; do
  measure_pair build/sluice "$dir/plain.yaml" $A build/sluice "$dir/$b.yaml" $B $UP
  printf '%-36s %9s %12s %9s %12s %8.3f\n' "plain (A) vs $b (B)" "$a_rps" "$a_cpu" "$b_rps" \
    "$b_cpu" "$(echo "$b_cpu / $a_cpu" | bc -l)"
done
printf '(medians of %d alternating rounds of %d s)\n' "$rounds" "$secs"
