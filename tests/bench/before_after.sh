#!/usr/bin/env bash
# What a change costs on the request path: two builds of sluice (BEFORE, AFTER) side by side in
# one run, on the proxied path (a route with a limit no client reaches, forwarded to the test
# upstream) and on the denied path (a route whose limit every request has spent), in each
# serving mode. Prints each build's req/s and CPU µs per request, and AFTER/BEFORE.
#
#   tests/bench/before_after.sh BEFORE AFTER [ROUNDS] [SECONDS] [CONNECTIONS]   (7 3 32)
#
# BEFORE and AFTER are sluice binaries, e.g. one built from the commit before a change
# (`git worktree add /tmp/before REV && make -C /tmp/before build/sluice`) and build/sluice.
# The upstream is build/test_upstream (make builds it). Access log off. Every target is on
# 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 BEFORE AFTER [ROUNDS] [SECONDS] [CONNECTIONS]" >&2; exit 2; }
before=$1 after=$2 rounds=${3:-7} secs=${4:-3} conns=${5:-32}
for t in wrk curl bc; do
  command -v $t >/dev/null || { echo "before_after: $t is missing" >&2; exit 2; }
done
[ -x build/test_upstream ] || { echo "before_after: build build/test_upstream first (make)" >&2; exit 2; }
dir=$(mktemp -d /tmp/sluice-before-after.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }
trap 'stop_all; rm -rf "$dir"' EXIT
cp "$before" "$dir/before"
cp "$after" "$dir/after"
UP=18480 A=18481 B=18482

build/test_upstream "127.0.0.1:$UP" >"$dir/up.log" 2>&1 & pids+=($!)

name=before_after lua=""
. tests/bench/side_by_side.sh
# $1: port, $2: mode, $3: the path's limit.
config() {
  printf '%s\n' "server: {listen: \"127.0.0.1:$1\", access_log: \"off\", mode: $2}" \
    "routes:" "  - name: api" "    match: {path_prefix: /}" \
    "    upstream: \"http://127.0.0.1:$UP\"" "    limit: $3"
}
printf '\n%-34s %9s %12s\n' "path, mode ($conns conns)" req/s cpu_us/req
for path in proxied denied; do
  if [ $path = proxied ]; then
    limit='{algorithm: gcra, requests: 1000000000, per: 1s}'
  else
    limit='{algorithm: gcra, requests: 1, per: 1h}'
  fi
  for mode in event thread_per_connection; do
    config $A $mode "$limit" >"$dir/a.yaml"
    config $B $mode "$limit" >"$dir/b.yaml"
    measure_pair "$dir/before" "$dir/a.yaml" $A "$dir/after" "$dir/b.yaml" $B $UP
    printf '%-34s %9s %12s\n' "$path, $mode, before" "$a_rps" "$a_cpu"
    printf '%-34s %9s %12s\n' "$path, $mode, after" "$b_rps" "$b_cpu"
    printf 'after/before (%s, %s): req/s %.3f, CPU per request %.3f (%d alternating rounds of %d s)\n' \
      "$path" "$mode" "$(echo "$b_rps / $a_rps" | bc -l)" "$(echo "$b_cpu / $a_cpu" | bc -l)" \
      "$rounds" "$secs"
  done
done
