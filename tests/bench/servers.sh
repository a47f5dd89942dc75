#!/usr/bin/env bash
# What several upstream servers cost: a route proxying to one server against the same route
# spread over three (round_robin, the servers' state and choice on every request), side by
# side in one run, in each serving mode.
#
#   tests/bench/servers.sh [ROUNDS] [SECONDS] [CONNECTIONS]   (3 3 32)
#
# The upstream is one nginx (one worker, a 20-byte body) listening on three ports, so both
# routes reach the same backend capacity; only sluice's side differs. Two sluice processes
# from the same binary, access log off, no limit. Every target is on 127.0.0.1; every run ends
# by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-3} secs=${2:-3} conns=${3:-32}
[ -x build/sluice ] || { echo "servers: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk curl bc; do
  command -v $t >/dev/null || { echo "servers: $t is missing" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-servers.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }
trap 'stop_all; rm -rf "$dir"' EXIT
cp build/sluice "$dir/sluice"
UP1=18390 UP2=18391 UP3=18392 ONE=18393 THREE=18394

printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; keepalive_requests 10000000;" \
  "  server { listen 127.0.0.1:$UP1; listen 127.0.0.1:$UP2; listen 127.0.0.1:$UP3;" \
  "    location / { return 200 \"hello from upstream\\n\"; } } }" >"$dir/upstream.conf"
nginx -c "$dir/upstream.conf" & pids+=($!)

name=servers lua=""
. tests/bench/side_by_side.sh
printf '\n%-38s %9s %12s\n' "route ($conns conns)" req/s cpu_us/req
for mode in event thread_per_connection; do
  printf '%s\n' "server: {listen: \"127.0.0.1:$ONE\", access_log: \"off\", mode: $mode}" \
    "routes:" "  - {name: one, match: {path_prefix: /}, upstream: \"http://127.0.0.1:$UP1\"}" \
    >"$dir/one.yaml"
  printf '%s\n' "server: {listen: \"127.0.0.1:$THREE\", access_log: \"off\", mode: $mode}" \
    "routes:" "  - name: three" "    match: {path_prefix: /}" \
    "    upstream: {servers: [\"http://127.0.0.1:$UP1\", \"http://127.0.0.1:$UP2\"," \
    "                         \"http://127.0.0.1:$UP3\"]}" >"$dir/three.yaml"
  measure_pair "$dir/sluice" "$dir/one.yaml" $ONE "$dir/sluice" "$dir/three.yaml" $THREE $UP1
  printf '%-38s %9s %12s\n' "$mode, one server" "$a_rps" "$a_cpu"
  printf '%-38s %9s %12s\n' "$mode, three servers (round_robin)" "$b_rps" "$b_cpu"
  printf 'three/one (%s): req/s %.3f, CPU per request %.3f (%d alternating rounds of %d s)\n' \
    "$mode" "$(echo "$b_rps / $a_rps" | bc -l)" "$(echo "$b_cpu / $a_cpu" | bc -l)" "$rounds" "$secs"
done
