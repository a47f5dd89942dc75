#!/usr/bin/env bash
# sluice against nginx (limit_req + proxy_pass), side by side in one run, with wrk.
#
#   tests/bench/compare.sh [ROUNDS] [SECONDS] [CONNECTIONS]      (defaults 3 5 32)
#
# One upstream (nginx, one worker, a 20-byte body) serves both proxies; the nginx proxy runs
# worker_processes auto with upstream keepalive, as a user would run it. Each round measures,
# in turn, the upstream alone, then each proxy on an allowed path and on a denied path (429
# from the limiter), then each proxy at 512 connections, and sluice with its shared store in
# Redis (a local redis-server) against its memory store. Figures are medians over the rounds;
# ratios are what count, since absolute numbers drift on a shared machine. Then sluice's
# memory: RSS at 512 connections after 100,000 distinct clients, and the RSS growth while a
# 1 GiB response streams through it. Every target is on 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-3} secs=${2:-5} conns=${3:-32}
gw=$PWD/build/sluice
[ -x "$gw" ] || { echo "compare: build build/sluice first (make)" >&2; exit 2; }

need() {
  command -v "$1" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1
  command -v "$1" >/dev/null 2>&1 || { echo "compare: cannot install $2" >&2; exit 2; }
}
need nginx nginx
need wrk wrk
need curl curl
need redis-server redis-server

dir=$(mktemp -d /tmp/sluice-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

UP=18190 NGX=18191 GW=18192 REDIS=18193
truncate -s 1G "$dir/big"
chmod 755 "$dir" && chmod 644 "$dir/big"   # nginx workers run as nobody
cat >"$dir/upstream.conf" <<EOF
worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 10000000; sendfile on;
  server { listen 127.0.0.1:$UP;
    location = /big { root $dir; }
    location / { return 200 "hello from upstream\n"; } } }
EOF
cat >"$dir/proxy.conf" <<EOF
worker_processes auto; daemon off; pid $dir/px.pid; error_log $dir/px.err warn;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 10000000;
  limit_req_zone \$binary_remote_addr zone=open:10m rate=100000000r/s;
  limit_req_zone \$http_x_api_key zone=shut:10m rate=1r/m;
  limit_req_status 429;
  upstream up { server 127.0.0.1:$UP; keepalive 128; }
  server { listen 127.0.0.1:$NGX;
    location /deny/ { limit_req zone=shut; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location / { limit_req zone=open burst=100000000 nodelay; proxy_pass http://up;
      proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; } } }
EOF
cat >"$dir/gateway.yaml" <<EOF
server:
  listen: "127.0.0.1:$GW"
  access_log: "off"        # as nginx's
limiter:
  redis: {address: "127.0.0.1:$REDIS", timeout: 50ms}
routes:
  - name: shared
    match: { path_prefix: /shared/ }
    upstream: "http://127.0.0.1:$UP"
    store: redis
    limit: { algorithm: token_bucket, requests: 100000000, per: 1s }
  - name: deny
    match: { path_prefix: /deny/ }
    upstream: "http://127.0.0.1:$UP"
    key: "header:X-API-Key"
    limit: { algorithm: token_bucket, requests: 1, per: 1h, burst: 1 }
  - name: keyed
    match: { path_prefix: /k/ }
    upstream: "http://127.0.0.1:$UP"
    key: "header:X-API-Key"
    limit: { algorithm: token_bucket, requests: 1000, per: 1s }
  - name: open
    match: { path_prefix: / }
    upstream: "http://127.0.0.1:$UP"
    key: ip
    limit: { algorithm: token_bucket, requests: 100000000, per: 1s }
EOF
cat >"$dir/keys.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/k/" .. n, {["X-API-Key"] = "client-" .. n})
end
EOF
redis-server --port $REDIS --bind 127.0.0.1 --save "" --appendonly no >"$dir/redis.log" 2>&1 & pids+=($!)
nginx -c "$dir/upstream.conf" & pids+=($!)
nginx -c "$dir/proxy.conf" & pids+=($!)
"$gw" -c "$dir/gateway.yaml" >"$dir/gw.log" 2>&1 & gw_pid=$!; pids+=($gw_pid)
for port in $UP $NGX $GW; do
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
done
curl -sf -o /dev/null "http://127.0.0.1:$GW/" || { echo "compare: sluice did not answer" >&2; tail "$dir/gw.log" >&2; exit 1; }
# spend the single token of the deny routes, so every measured request is denied
curl -s -o /dev/null -H 'X-API-Key: k' "http://127.0.0.1:$NGX/deny/x"
curl -s -o /dev/null -H 'X-API-Key: k' "http://127.0.0.1:$GW/deny/x"

# one wrk run: prints "rps p50_ms p99_ms socket_errors non_2xx"
run() {
  local c=$1; shift
  wrk -t1 -c"$c" -d"${secs}s" --latency "$@" 2>&1 | awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /Requests\/sec/ { r=$2 } / 50%/ { p50=ms($2) } / 99%/ { p99=ms($2) }
    /Socket errors/ { gsub(",", ""); e=$4+$6+$8+$10 } /Non-2xx/ { n=$5 }
    END { printf "%.0f %.3f %.3f %d %d\n", r, p50, p99, e, n }'
}
median() { sort -n | awk '{a[NR]=$1} END { print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2 }'; }

declare -A R
for ((i = 1; i <= rounds; i++)); do
  R[upstream]+="$(run "$conns" "http://127.0.0.1:$UP/x")"$'\n'
  R[nginx_proxied]+="$(run "$conns" "http://127.0.0.1:$NGX/x")"$'\n'
  R[sluice_proxied]+="$(run "$conns" "http://127.0.0.1:$GW/x")"$'\n'
  R[nginx_denied]+="$(run "$conns" -H 'X-API-Key: k' "http://127.0.0.1:$NGX/deny/x")"$'\n'
  R[sluice_denied]+="$(run "$conns" -H 'X-API-Key: k' "http://127.0.0.1:$GW/deny/x")"$'\n'
  R[nginx_512]+="$(run 512 "http://127.0.0.1:$NGX/x")"$'\n'
  R[sluice_512]+="$(run 512 "http://127.0.0.1:$GW/x")"$'\n'
  R[sluice_redis]+="$(run "$conns" "http://127.0.0.1:$GW/shared/x")"$'\n'
done

col() { printf '%s' "${R[$1]}" | awk -v f="$2" 'NF{print $f}' | median; }
printf '\n%-16s %10s %9s %9s %8s %9s\n' target req/s p50_ms p99_ms errors non-2xx
for t in upstream nginx_proxied sluice_proxied nginx_denied sluice_denied nginx_512 sluice_512 \
    sluice_redis; do
  printf '%-16s %10s %9s %9s %8s %9s\n' "$t" "$(col $t 1)" "$(col $t 2)" "$(col $t 3)" "$(col $t 4)" "$(col $t 5)"
done
ratio() { awk -v a="$(col "$1" "$3")" -v b="$(col "$2" "$3")" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
printf '\nsluice/nginx  proxied req/s %s   p99 %s   denied req/s %s   512 connections req/s %s\n' \
  "$(ratio sluice_proxied nginx_proxied 1)" "$(ratio sluice_proxied nginx_proxied 3)" \
  "$(ratio sluice_denied nginx_denied 1)" "$(ratio sluice_512 nginx_512 1)"
printf 'sluice, Redis store/memory store  proxied req/s %s\n' "$(ratio sluice_redis sluice_proxied 1)"

# Memory: 100,000 distinct clients first, then 512 connections; the highest RSS sampled.
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$gw_pid/status"; }
wrk -t2 -c32 -d"$((secs * 2))s" -s "$dir/keys.lua" "http://127.0.0.1:$GW/" >/dev/null 2>&1
peak=0
wrk -t2 -c512 -d"${secs}s" "http://127.0.0.1:$GW/x" >/dev/null 2>&1 &
wrk_pid=$!
while kill -0 "$wrk_pid" 2>/dev/null; do
  r=$(rss_kib); [ "${r:-0}" -gt "$peak" ] && peak=$r; sleep 0.1
done
before=$(rss_kib) big_peak=$before
curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$GW/big" >"$dir/big.size" &
curl_pid=$!
while kill -0 "$curl_pid" 2>/dev/null; do
  r=$(rss_kib); [ "${r:-0}" -gt "$big_peak" ] && big_peak=$r; sleep 0.05
done
printf 'sluice RSS: %d MiB at 512 connections after 100,000+ distinct clients; +%d KiB while %s bytes streamed through\n' \
  "$((peak / 1024))" "$((big_peak - before))" "$(cat "$dir/big.size")"
