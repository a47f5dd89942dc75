#!/usr/bin/env bash
# What consumers cost: how long a config with N consumers (consumers_file) takes to load, and
# what a proxied request costs on a route that looks each key up among them, against the same
# route counting keys by their value (no consumers), side by side in one run.
#
#   tests/bench/consumers.sh [CONSUMERS] [ROUNDS] [SECONDS] [CONNECTIONS]   (100000 3 3 32)
#
# One upstream (nginx, one worker, a 20-byte body). Two sluice processes from the same binary,
# both event mode with the default workers and the access log off: "plain" keys its route by
# X-API-Key with one limit no client reaches; "consumers" does the same through a plan with N
# consumers from a consumers_file (half the keys clear, half given as sha256:). wrk sends a
# different known key with each request, rotating through 10,000 of them. Load time: `sluice
# --check` on the consumers config, the median of 3 runs (reading and hashing every key
# included). Every target is on 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
n=${1:-100000} rounds=${2:-3} secs=${3:-3} conns=${4:-32}
[ -x build/sluice ] || { echo "consumers: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk python3 curl bc; do
  command -v $t >/dev/null || { echo "consumers: $t is missing" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-consumers.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
cp build/sluice "$dir/sluice"
UP=18290 PLAIN=18291 CONS=18292

python3 - "$n" "$dir" <<'PY'
import hashlib, sys
n, d = int(sys.argv[1]), sys.argv[2]
with open(d + "/consumers.yaml", "w") as f:
    f.write("consumers:\n")
    for i in range(n):
        key = "key-%d" % i
        if i % 2:
            key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
        f.write('  - {name: c%d, key: "%s", plan: open}\n' % (i, key))
PY
printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; keepalive_requests 10000000;" \
  "  server { listen 127.0.0.1:$UP; location / { return 200 \"hello from upstream\\n\"; } } }" \
  >"$dir/upstream.conf"
route="    match: {path_prefix: /}
    upstream: \"http://127.0.0.1:$UP\"
    key: \"header:X-API-Key\""
printf '%s\n' "server: {listen: \"127.0.0.1:$PLAIN\", access_log: \"off\", mode: event}" \
  "routes:" "  - name: plain" "$route" \
  "    limit: {algorithm: token_bucket, requests: 100000000, per: 1s}" >"$dir/plain.yaml"
printf '%s\n' "server: {listen: \"127.0.0.1:$CONS\", access_log: \"off\", mode: event}" \
  "plans:" "  open: {algorithm: token_bucket, requests: 100000000, per: 1s}" \
  "consumers_file: consumers.yaml" "routes:" "  - name: consumers" "$route" \
  "    plan: open" >"$dir/with-consumers.yaml"
printf '%s\n' "local n = 0" "request = function()" "  n = n + 1" \
  "  return wrk.format(\"GET\", \"/k/\" .. n, {[\"X-API-Key\"] = \"key-\" .. (n % 10000)})" \
  "end" >"$dir/keys.lua"

loads=()
for _ in 1 2 3; do
  t0=$(date +%s.%N)
  "$dir/sluice" --check -c "$dir/with-consumers.yaml" >/dev/null || exit 1
  t1=$(date +%s.%N)
  loads+=("$(echo "$t1 - $t0" | bc)")
done
load=$(printf '%s\n' "${loads[@]}" | sort -g | sed -n 2p)

nginx -c "$dir/upstream.conf" & pids+=($!)
"$dir/sluice" -c "$dir/plain.yaml" >"$dir/plain.log" 2>&1 & plain_pid=$!; pids+=($plain_pid)
"$dir/sluice" -c "$dir/with-consumers.yaml" >"$dir/cons.log" 2>&1 & cons_pid=$!; pids+=($cons_pid)
for port in $UP $PLAIN $CONS; do
  for _ in $(seq 100); do
    curl -s -o /dev/null -H 'X-API-Key: key-1' "http://127.0.0.1:$port/" && break; sleep 0.1
  done
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-API-Key: key-1' "http://127.0.0.1:$CONS/")" = 200 ] ||
  { echo "consumers: a known key was not let through" >&2; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-API-Key: nobody' "http://127.0.0.1:$CONS/")" = 401 ] ||
  { echo "consumers: an unknown key was not refused" >&2; exit 1; }
rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$cons_pid/status)
rss_plain=$(awk '/VmRSS/{print int($2/1024)}' /proc/$plain_pid/status)

name=consumers lua="$dir/keys.lua"
. tests/bench/side_by_side.sh
side_by_side $PLAIN $plain_pid $CONS $cons_pid
p_rps=$a_rps p_cpu=$a_cpu c_rps=$b_rps c_cpu=$b_cpu
printf '\nconsumers: %d in consumers_file; sluice --check loads it in %.2f s (median of 3)\n' "$n" "$load"
printf 'RSS: %d MiB with them, %d MiB without\n' "$rss" "$rss_plain"
printf '%-32s %9s %12s\n' "route (event mode, $conns conns)" req/s cpu_us/req
printf '%-32s %9s %12s\n' "keys counted by value" "$p_rps" "$p_cpu"
printf '%-32s %9s %12s\n' "keys looked up among $n" "$c_rps" "$c_cpu"
printf 'consumers/plain: req/s %.3f, CPU per request %.3f (%d alternating rounds of %d s)\n' \
  "$(echo "$c_rps / $p_rps" | bc -l)" "$(echo "$c_cpu / $p_cpu" | bc -l)" "$rounds" "$secs"
