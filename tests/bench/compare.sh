#!/usr/bin/env bash
# sluice in both serving modes against nginx (limit_req + proxy_pass) and HAProxy (stick-table
# rate limit), side by side in one run, with wrk.
#
#   tests/bench/compare.sh [ROUNDS] [SECONDS] [CONNECTIONS] [MANY]      (defaults 3 3 32 512)
#   ROUNDS=1 SECONDS=2 make bench          (the same settings from the environment)
#   IDLE=10000 (idle connections; 0 skips that test)  IDLE_GET=0 (idle connections that never
#   send a request)  HAPROXY=0 (leave HAProxy out)
#   SECTIONS="rounds memory idle" (the default: all three; e.g. SECTIONS=idle for that test alone)
#
# Targets: sluice with server.mode thread_per_connection ("thread", the default) and
# server.mode event with the default server.workers (one per core), both running at once on
# their own ports; nginx (worker_processes auto, limit_req, upstream keepalive); HAProxy
# (nbthread 2, a stick-table per path: the proxied path tracks the client address against a
# rate no client reaches, as nginx's limit_req and sluice's token bucket do, the denied path
# tracks X-API-Key and answers 429 past one request). HAProxy is installed with apt-get like
# the rest; if that fails, its column is left out. One upstream (nginx, one worker, a 20-byte
# body) serves every proxy. build/sluice is copied first, so a rebuild during the run changes
# nothing.
#
# After a 1 s warm-up of each proxy, each round runs wrk (1 thread, SECONDS each) against the
# upstream alone, then, for each of proxied and denied (429 from the limiter) at CONNECTIONS
# and at MANY connections, every proxy in turn (the order rotates each round), then both
# sluice modes with their state in Redis (a local redis-server). Figures are medians over the rounds; ratios are what count,
# since absolute numbers drift on a shared machine. CPU µs per request: the utime+stime of the
# proxy's processes (every thread; nginx's master and workers) from /proc/PID/stat, read just
# before and after each wrk run, divided by the requests wrk completed; the upstream's CPU is
# not in it.
#
# Then, per mode: RSS at MANY connections after 100,000 distinct clients, and the RSS growth
# while a 1 GiB response streams through. Then the idle test: fresh sluice processes, each
# with max_connections 10240 and client_timeout 120s, get IDLE idle keep-alive connections
# (tests/bench/idle.py: one GET each, then silent) while wrk measures throughput at
# CONNECTIONS connections; interleaved per round with a wrk run without them. A probe with the
# default max_connections says how many of the IDLE connections each mode then keeps.
# Every target is on 127.0.0.1; every run ends by itself.
set -u
env_seconds=$(printenv SECONDS)   # bash's own SECONDS counts from there; read it first
cd "$(dirname "$0")/../.."
rounds=${1:-${ROUNDS:-3}} secs=${2:-${env_seconds:-3}} conns=${3:-${CONNECTIONS:-32}}
sections=" ${SECTIONS:-rounds memory idle} "
many=${4:-${MANY:-512}} idle_n=${IDLE:-10000} idle_path=$([ "${IDLE_GET:-1}" = 0 ] && echo - || echo /x)
[ -x build/sluice ] || { echo "compare: build build/sluice first (make)" >&2; exit 2; }

install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null 2>&1 ||
  { apt-get update -qq >/dev/null 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null 2>&1; }; }
need() {
  command -v "$1" >/dev/null 2>&1 || install "$2"
  command -v "$1" >/dev/null 2>&1 || { echo "compare: cannot install $2" >&2; exit 2; }
}
need nginx nginx
need wrk wrk
need curl curl
need redis-server redis-server
need python3 python3
have_hap=0
if [ "${HAPROXY:-1}" != 0 ]; then
  command -v haproxy >/dev/null 2>&1 || install haproxy
  command -v haproxy >/dev/null 2>&1 && have_hap=1 ||
    echo "compare: haproxy could not be installed; its column is left out" >&2
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null   # the idle test holds IDLE sockets on each side

dir=$(mktemp -d /tmp/sluice-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null; rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
gw=$dir/sluice
cp build/sluice "$gw"
rev="$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- gateway config limiter 2>/dev/null || echo '+local changes')"

UP=18190 NGX=18191 GW=18192 REDIS=18193 GWE=18194 HAP=18195 IDLE_PORT=18196
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
cat >"$dir/haproxy.cfg" <<EOF
global
  nbthread 2
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option forwardfor
backend by_ip
  stick-table type ip size 200k expire 10s store http_req_rate(1s)
backend by_key
  stick-table type string len 64 size 200k expire 1h store http_req_rate(1h)
backend up
  server up 127.0.0.1:$UP
frontend proxy
  bind 127.0.0.1:$HAP
  acl deny path_beg /deny/
  http-request track-sc0 req.hdr(X-API-Key) table by_key if deny
  http-request deny deny_status 429 if deny { sc_http_req_rate(0) gt 1 }
  http-request track-sc1 src table by_ip if !deny
  http-request deny deny_status 429 if !deny { sc_http_req_rate(1) gt 100000000 }
  default_backend up
EOF
# $1 port, $2 mode, $3 Redis key prefix
gateway_conf() {
  cat <<EOF
server:
  listen: "127.0.0.1:$1"
  access_log: "off"        # as nginx's and HAProxy's
  mode: $2
limiter:
  redis: {address: "127.0.0.1:$REDIS", timeout: 50ms, prefix: "$3"}
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
}
gateway_conf $GW thread_per_connection "bench-thread:" >"$dir/thread.yaml"
gateway_conf $GWE event "bench-event:" >"$dir/event.yaml"
cat >"$dir/keys.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/k/" .. n, {["X-API-Key"] = "client-" .. n})
end
EOF

answers() { for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; return 1; }
redis-server --port $REDIS --bind 127.0.0.1 --save "" --appendonly no >"$dir/redis.log" 2>&1 & pids+=($!)
nginx -c "$dir/upstream.conf" & up_pid=$!; pids+=($up_pid)
nginx -c "$dir/proxy.conf" & ngx_pid=$!; pids+=($ngx_pid)
"$gw" -c "$dir/thread.yaml" >"$dir/thread.log" 2>&1 & thread_pid=$!; pids+=($thread_pid)
"$gw" -c "$dir/event.yaml" >"$dir/event.log" 2>&1 & event_pid=$!; pids+=($event_pid)
proxies="nginx thread event"
if [ $have_hap = 1 ]; then
  haproxy -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 & hap_pid=$!; pids+=($hap_pid)
  proxies="nginx haproxy thread event"
fi
for _ in $(seq 50); do redis-cli -p $REDIS ping >/dev/null 2>&1 && break; sleep 0.1; done
declare -A port=([upstream]=$UP [nginx]=$NGX [haproxy]=$HAP [thread]=$GW [event]=$GWE)
declare -A pid=([upstream]=$up_pid [nginx]=$ngx_pid [haproxy]=${hap_pid:-} [thread]=$thread_pid
  [event]=$event_pid)
for t in upstream $proxies; do
  answers "${port[$t]}" && continue
  case $t in
    thread) echo "compare: sluice (thread_per_connection) did not answer" >&2; tail "$dir/thread.log" >&2; exit 1 ;;
    event) echo "compare: sluice in event mode did not answer; left out. Its log:" >&2
      tail -5 "$dir/event.log" >&2; proxies=${proxies/ event/} ;;
    haproxy) echo "compare: haproxy did not answer; left out" >&2; tail -5 "$dir/haproxy.log" >&2
      proxies=${proxies/ haproxy/}; have_hap=0 ;;
    *) echo "compare: $t did not answer" >&2; exit 1 ;;
  esac
done
modes=$(for m in thread event; do [[ " $proxies " == *" $m "* ]] && printf '%s ' $m; done)
# the processes whose CPU counts: nginx's master and its workers
procs() { if [ "$1" = nginx ] || [ "$1" = upstream ]; then echo "${pid[$1]}" $(pgrep -P "${pid[$1]}"); else echo "${pid[$1]}"; fi; }
declare -A procs
for t in upstream $proxies; do procs[$t]=$(procs $t); done
# spend the single token of the deny routes, so every measured request is denied
for t in $proxies; do curl -s -o /dev/null -H 'X-API-Key: k' "http://127.0.0.1:${port[$t]}/deny/x"; done

hz=$(getconf CLK_TCK)
printf 'sluice %s (event mode: %s workers, the default), nginx %s, %s, wrk %s; %s cores, load average %s at start\n' \
  "${rev:-?}" "$(nproc)" "$(nginx -v 2>&1 | sed 's|.*/||')" \
  "$([ $have_hap = 1 ] && haproxy -v | awk 'NR==1{print "HAProxy " $3}' || echo 'no HAProxy')" \
  "$(wrk -v 2>&1 | awk 'NR==1{print $2}')" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
for t in $proxies; do   # warm-up: upstream connections, handle pools, page faults
  wrk -t1 -c"$many" -d1s "http://127.0.0.1:${port[$t]}/x" >/dev/null 2>&1
done
ticks() { local p s=0; for p in "$@"; do
    s=$((s + $(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done; echo $s; }
# one wrk run against target $1 with $2 connections, URL path $3, more wrk arguments after:
# prints "rps p50_ms p99_ms socket_errors non_2xx requests cpu_us_per_request"
run() {
  local t=$1 c=$2 path=$3 t0 t1 out; shift 3
  t0=$(ticks ${procs[$t]})
  out=$(timeout $((secs + 30)) wrk -t1 -c"$c" -d"${secs}s" --latency "$@" "http://127.0.0.1:${port[$t]}$path" 2>&1)
  t1=$(ticks ${procs[$t]})
  printf '%s\n' "$out" | awk -v dt=$((t1 - t0)) -v hz="$hz" '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /requests in/ { n=$1 } /Requests\/sec/ { r=$2 } / 50%/ { p50=ms($2) } / 99%/ { p99=ms($2) }
    /Socket errors/ { gsub(",", ""); e=$4+$6+$8+$10 } /Non-2xx/ { x=$5 }
    END { printf "%.0f %.3f %.3f %d %d %d %.1f\n", r, p50, p99, e, x, n, (n > 0) ? dt / hz * 1e6 / n : 0 }'
}
median() { sort -g | awk '{a[NR]=$1} END { if (NR == 0) print "-"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2 }'; }

declare -A R
if [[ $sections == *" rounds "* ]]; then
rows=(upstream)
for s in proxied_$conns denied_$conns proxied_$many denied_$many; do
  for t in $proxies; do rows+=("${t}_$s"); done
done
for m in $modes; do rows+=("${m}_redis_$conns"); done
total_runs=$(( ${#rows[@]} * rounds ))
printf 'compare: %d rounds of %d wrk runs, %d s each (about %d s), then memory and idle tests\n' \
  "$rounds" "${#rows[@]}" "$secs" "$((total_runs * (secs + 1)))" >&2
for ((i = 0; i < rounds; i++)); do
  R[upstream]+="$(run upstream "$conns" /x)"$'\n'
  # rotate the order of the proxies each round
  set -- $proxies; order=()
  for ((k = 0; k < $#; k++)); do j=$(( (k + i) % $# + 1 )); order+=("${!j}"); done
  for c in "$conns" "$many"; do
    for t in "${order[@]}"; do R[${t}_proxied_$c]+="$(run "$t" "$c" /x)"$'\n'; done
    for t in "${order[@]}"; do R[${t}_denied_$c]+="$(run "$t" "$c" /deny/x -H 'X-API-Key: k')"$'\n'; done
  done
  for m in $modes; do R[${m}_redis_$conns]+="$(run "$m" "$conns" /shared/x)"$'\n'; done
done

col() { printf '%s' "${R[$1]:-}" | awk -v f="$2" 'NF{print $f}' | median; }
printf '\n%-22s %9s %8s %8s %7s %9s %9s\n' target req/s p50_ms p99_ms errors non-2xx cpu_us/req
for t in "${rows[@]}"; do
  printf '%-22s %9s %8s %8s %7s %9s %9s\n' "$t" "$(col $t 1)" "$(col $t 2)" "$(col $t 3)" \
    "$(col $t 4)" "$(col $t 5)" "$(col $t 7)"
done
# a proxied run must have no non-2xx, a denied run no 2xx (but one: nginx's slowest rate, 1r/m,
# lets a request a minute through); and no socket errors anywhere
bad=$(for t in "${rows[@]}"; do printf '%s' "${R[$t]}" | awk -v t="$t" 'NF {
  if ($4 > 0) print t ": " $4 " socket errors";
  if (t ~ /denied/ && $5 < $6 - 1) print t ": " $6 - $5 " answers not denied";
  if (t !~ /denied/ && $5 > 0) print t ": " $5 " non-2xx answers" }'; done | sort -u)
[ -n "$bad" ] && printf '%s\n' "$bad" | sed 's/^/check: /'

# The summary: each figure, and in parentheses its ratio over nginx's.
names() { case $1 in haproxy) echo HAProxy ;; thread) echo sluice_thread ;; event) echo sluice_event ;; *) echo "$1" ;; esac; }
cell() {   # target row column: "value (ratio)" or "value" for nginx itself
  local v n; v=$(col "${1}_$2" "$3"); n=$(col "nginx_$2" "$3")
  if [ "$1" = nginx ] || [ "$v" = - ]; then printf '%s' "$v"
  else awk -v a="$v" -v b="$n" 'BEGIN { printf "%s (%.2f)", a, (b > 0) ? a / b : 0 }'; fi
}
printf '\nsummary: value (ratio over nginx); %s rounds, %s s per run\n%-26s' "$rounds" "$secs" ""
for t in $proxies; do printf ' %17s' "$(names $t)"; done; echo
line() {  # label row column
  printf '%-26s' "$1"; for t in $proxies; do printf ' %17s' "$(cell $t "$2" "$3")"; done; echo
}
line "req/s proxied, $conns conns" proxied_$conns 1
line "req/s proxied, $many conns" proxied_$many 1
line "req/s denied, $conns conns" denied_$conns 1
line "req/s denied, $many conns" denied_$many 1
line "p99 ms proxied, $many conns" proxied_$many 3
line "p99 ms denied, $many conns" denied_$many 3
line "CPU us/req proxied, $conns" proxied_$conns 7
line "CPU us/req proxied, $many" proxied_$many 7
line "CPU us/req denied, $conns" denied_$conns 7
line "CPU us/req denied, $many" denied_$many 7
printf '(CPU: utime+stime of all the proxy'"'"'s threads and processes over the wrk run / requests; upstream alone: %s us/req)\n' \
  "$(col upstream 7)"
for m in $modes; do
  printf 'sluice %-6s Redis store/memory store, proxied req/s at %s conns: %s\n' "$m" "$conns" \
    "$(awk -v a="$(col ${m}_redis_$conns 1)" -v b="$(col ${m}_proxied_$conns 1)" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')"
done
[ $have_hap = 1 ] && echo "(HAProxy $(haproxy -v | awk 'NR==1{print $3}'), nbthread 2: stick-table http_req_rate tracking on both paths, the proxied one never reaching its limit)"
fi

# Memory, per mode: 100,000 distinct clients first, then MANY connections; the highest RSS
# sampled. Then a 1 GiB response streamed through.
status() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
[[ $sections == *" memory "* ]] && echo
for m in $modes; do
  [[ $sections == *" memory "* ]] || break
  p=${pid[$m]}
  wrk -t2 -c32 -d"$((secs * 2))s" -s "$dir/keys.lua" "http://127.0.0.1:${port[$m]}/" >/dev/null 2>&1
  peak=0
  timeout $((secs + 30)) wrk -t2 -c"$many" -d"${secs}s" "http://127.0.0.1:${port[$m]}/x" >/dev/null 2>&1 &
  wrk_pid=$!
  while kill -0 "$wrk_pid" 2>/dev/null; do
    r=$(status $p VmRSS); [ "${r:-0}" -gt "$peak" ] && peak=$r; sleep 0.1
  done
  wait "$wrk_pid" 2>/dev/null
  before=$(status $p VmRSS) big_peak=$before
  timeout 120 curl -s -o /dev/null -w '%{size_download} %{time_total}' "http://127.0.0.1:${port[$m]}/big" >"$dir/big.size" &
  curl_pid=$!
  while kill -0 "$curl_pid" 2>/dev/null; do
    r=$(status $p VmRSS); [ "${r:-0}" -gt "$big_peak" ] && big_peak=$r; sleep 0.05
  done
  wait "$curl_pid" 2>/dev/null
  read -r size took <"$dir/big.size"
  printf 'sluice %-6s RSS: %d MiB at %d connections after 100,000+ distinct clients; +%d KiB while %s bytes streamed through (%.1f s)\n' \
    "$m" "$((peak / 1024))" "$many" "$((big_peak - before))" "${size:-0}" "${took:-0}"
done

[ "$idle_n" -gt 0 ] 2>/dev/null && [[ $sections == *" idle "* ]] || exit 0
# --- idle connections ------------------------------------------------------------------
# Fresh processes, only the open route. $1 mode, $2 max_connections line (or nothing).
idle_conf() {
  cat <<EOF
server:
  listen: "127.0.0.1:$IDLE_PORT"
  access_log: "off"
  mode: $1
$2routes:
  - name: open
    match: { path_prefix: / }
    upstream: "http://127.0.0.1:$UP"
    key: ip
    limit: { algorithm: token_bucket, requests: 100000000, per: 1s }
EOF
}
start_idle_gw() {   # $1 mode, $2 extra server lines; sets gpid
  idle_conf "$1" "$2" >"$dir/idle-$1.yaml"
  "$gw" -c "$dir/idle-$1.yaml" >>"$dir/idle-$1.log" 2>&1 & gpid=$!; pids+=($gpid)
  procs[idle]=$gpid port[idle]=$IDLE_PORT
  answers $IDLE_PORT || { echo "compare: sluice $1 did not answer for the idle test" >&2; return 1; }
  wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$IDLE_PORT/x" >/dev/null 2>&1   # warm-up
}
stop_idle_gw() { kill "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$IDLE_PORT/" || break; sleep 0.1; done; }
# opens IDLE connections; sets ipid and fills $dir/idle.out; 0 once they are all tried
open_idle() {
  : >"$dir/idle.out"
  timeout 300 python3 tests/bench/idle.py $IDLE_PORT "$idle_n" "$idle_path" 240 >"$dir/idle.out" 2>"$dir/idle.err" &
  ipid=$!; pids+=($ipid)
  for _ in $(seq 700); do grep -q '^opened' "$dir/idle.out" && return 0
    kill -0 $ipid 2>/dev/null || break; sleep 0.1; done
  echo "compare: the idle client did not report" >&2; cat "$dir/idle.err" >&2; return 1
}
close_idle() { kill -TERM "$ipid" 2>/dev/null; wait "$ipid" 2>/dev/null; }
# "held opened failed codes errors" from idle.out
idle_result() { awk '/^opened/ { o=$2; f=$3; c=$4; e=$5 } /^held/ { h=$2; s=$4 }
  END { printf "%s %s %s %s %s\n", h, o, f, c, e }' "$dir/idle.out"; }

# stop the main instances: the idle test's processes are fresh, and the machine has 2 cores
for m in thread event; do kill "${pid[$m]}" 2>/dev/null; wait "${pid[$m]}" 2>/dev/null; done
printf '\nidle connections: %d keep-alive connections, %s, held open against a fresh sluice\n' "$idle_n" \
  "$([ "$idle_path" = - ] && echo 'never sending a request' || echo 'each after one GET')"
printf 'probe with the default max_connections (no wrk):\n'
for m in $modes; do
  mode=$([ $m = thread ] && echo thread_per_connection || echo event)
  start_idle_gw $mode "" || continue
  if open_idle; then
    sleep 1
    rss=$(status $gpid VmRSS) thr=$(status $gpid Threads)
    close_idle
    read -r held opened failed codes errors <<<"$(idle_result)"
    printf '  sluice %-6s kept %5s of %d (%s opened, %s refused or failed: %s %s); RSS %d MiB, %s threads\n' \
      "$m" "${held:-0}" "$idle_n" "${opened:-0}" "${failed:-0}" "$codes" "$errors" "$(( ${rss:-0} / 1024 ))" "$thr"
  fi
  stop_idle_gw
done

maxc=$((idle_n + 240))
declare -A I
printf 'measured with max_connections %d and client_timeout 120s; wrk at %d connections on /x, %d s, %d rounds\n' \
  "$maxc" "$conns" "$secs" "$rounds"
for m in $modes; do
  mode=$([ $m = thread ] && echo thread_per_connection || echo event)
  start_idle_gw $mode "  max_connections: $maxc"$'\n'"  client_timeout: 120s"$'\n' || continue
  sleep 0.5
  I[${m}_rss0]=$(status $gpid VmRSS) I[${m}_thr0]=$(status $gpid Threads)
  I[${m}_peak]=0 I[${m}_thrpeak]=0
  for ((i = 0; i < rounds; i++)); do
    I[${m}_without]+="$(run idle "$conns" /x)"$'\n'
    open_idle || break
    sleep 6   # idle means idle: event mode parks a connection park_idle_after (5s) after its answer
    I[${m}_after_open]=$(status $gpid VmRSS)
    run idle "$conns" /x >"$dir/with.out" &
    rpid=$!
    while kill -0 $rpid 2>/dev/null; do
      r=$(status $gpid VmRSS) n=$(status $gpid Threads)
      [ "${r:-0}" -gt "${I[${m}_peak]}" ] && I[${m}_peak]=$r
      [ "${n:-0}" -gt "${I[${m}_thrpeak]}" ] && I[${m}_thrpeak]=$n
      sleep 0.2
    done
    wait $rpid
    I[${m}_with]+="$(cat "$dir/with.out")"$'\n'
    close_idle
    I[${m}_held]+="$(idle_result)"$'\n'
    # let the server see the closes (thread mode: 10,000 threads to end)
    for _ in $(seq 50); do [ "$(status $gpid Threads)" -le "$(( ${I[${m}_thr0]} + 8 ))" ] && break; sleep 0.2; done
  done
  I[${m}_rss_end]=$(status $gpid VmRSS)
  stop_idle_gw
done
icol() { printf '%s' "${I[$1]:-}" | awk -v f="$2" 'NF{print $f}' | median; }
printf '%-14s %6s %8s %11s %8s %7s %13s %10s %12s %11s %8s\n' mode held RSS0_MiB RSSidle_MiB KiB/idle \
  threads "req/s without" "req/s with" with/without p99_without p99_with
for m in $modes; do
  [ -n "${I[${m}_with]:-}" ] || continue
  wo=$(icol ${m}_without 1) wi=$(icol ${m}_with 1)
  h=$(icol ${m}_held 1)
  printf '%-14s %6s %8d %11d %8s %7s %13s %10s %12s %11s %8s\n' "sluice_$m" "$h" \
    "$(( ${I[${m}_rss0]:-0} / 1024 ))" "$(( ${I[${m}_peak]:-0} / 1024 ))" \
    "$(awk -v a="${I[${m}_peak]:-0}" -v b="${I[${m}_rss0]:-0}" -v h="$h" 'BEGIN { printf "%.1f", (h > 0) ? (a - b) / h : 0 }')" \
    "${I[${m}_thrpeak]}" "$wo" "$wi" \
    "$(awk -v a="$wi" -v b="$wo" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')" \
    "$(icol ${m}_without 3)" "$(icol ${m}_with 3)"
done
printf '(held: connections still open when the idle client stopped, median over rounds; RSS0 before the first\n'
printf ' round; RSSidle and threads the highest sampled while the idle connections and wrk were running;\n'
printf ' KiB/idle: (RSSidle - RSS0) / held)\n'
if [ -n "${I[event_with]:-}" ]; then
  wo=$(icol event_without 1) wi=$(icol event_with 1)
  awk -v rss="${I[event_peak]}" -v a="$wi" -v b="$wo" -v h="$(icol event_held 1)" -v n="$idle_n" 'BEGIN {
    loss = (b > 0) ? 100 * (1 - a / b) : 100
    printf "event mode against the targets: RSS %.0f MiB (< 128: %s), throughput loss %.1f%% (< 10%%: %s), %d of %d held (%s)\n",
      rss / 1024, (rss < 128 * 1024) ? "met" : "NOT met", loss, (loss < 10) ? "met" : "NOT met", h, n,
      (h == n) ? "all" : "NOT all" }'
fi
