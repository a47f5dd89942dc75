#!/usr/bin/env bash
# What a TLS-only Redis costs through a local stunnel (hiredis 0.14, Debian 12's, speaks no
# TLS): proxied requests with their limit in a plain Redis (A) and in a Redis that listens on
# TLS alone, reached through stunnel in client mode on 127.0.0.1 (B), side by side in one run;
# and stunnel's own CPU per request. The README's "Redis over TLS" shows the setup.
#
#   tests/bench/redis_tls.sh [ROUNDS] [SECONDS] [CONNECTIONS]   (5 3 32)
#
# nginx upstream; a limit no client reaches (every request is one EVALSHA); certificates made
# here with openssl. Every target is on 127.0.0.1; every run ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-3} conns=${3:-32}
[ -x build/sluice ] || { echo "redis_tls: build build/sluice first (make)" >&2; exit 2; }
for t in nginx wrk curl bc redis-server stunnel openssl; do
  command -v $t >/dev/null || { echo "redis_tls: $t is missing (stunnel: apt-get install stunnel4)" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/sluice-redis-tls.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
UP=18590 A=18591 B=18592 PLAIN=18593 TLS=18594 TUNNEL=18595

# A CA and Redis's certificate for localhost.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 1 \
  -subj "/CN=sluice bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$dir/redis.key" -out "$dir/redis.csr" \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' >"$dir/ext"
openssl x509 -req -in "$dir/redis.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
  -out "$dir/redis.pem" -days 1 -extfile "$dir/ext" 2>/dev/null

printf '%s\n' "worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;" \
  "events { worker_connections 4096; }" \
  "http { access_log off; keepalive_requests 10000000;" \
  "  server { listen 127.0.0.1:$UP; location / { return 200 \"ok\\n\"; } } }" >"$dir/up.conf"
nginx -c "$dir/up.conf" & pids+=($!)
redis-server --port $PLAIN --bind 127.0.0.1 --save "" >"$dir/plain.log" 2>&1 & pids+=($!)
redis-server --port 0 --tls-port $TLS --bind 127.0.0.1 --save "" --tls-auth-clients no \
  --tls-cert-file "$dir/redis.pem" --tls-key-file "$dir/redis.key" \
  --tls-ca-cert-file "$dir/ca.pem" >"$dir/tls.log" 2>&1 & pids+=($!)
printf '%s\n' "foreground = yes" "pid =" "[redis]" "client = yes" \
  "accept = 127.0.0.1:$TUNNEL" "connect = 127.0.0.1:$TLS" "verifyChain = yes" \
  "CAfile = $dir/ca.pem" "checkHost = localhost" >"$dir/stunnel.conf"
stunnel "$dir/stunnel.conf" >"$dir/stunnel.log" 2>&1 & tunnel=$!
pids+=($tunnel)

# config NAME PORT REDIS_PORT
config() {
  printf '%s\n' "server: {listen: \"127.0.0.1:$2\", access_log: \"off\"}" \
    "limiter: {store: redis, redis: {address: \"127.0.0.1:$3\"}}" "routes:" \
    "  - name: api" "    match: {path_prefix: /}" "    upstream: \"http://127.0.0.1:$UP\"" \
    "    limit: {algorithm: gcra, requests: 100000000, per: 1s}" >"$dir/$1.yaml"
}
config plain $A $PLAIN
config tunnel $B $TUNNEL

name=redis_tls lua=""
. tests/bench/side_by_side.sh
t0=$(ticks $tunnel)
measure_pair build/sluice "$dir/plain.yaml" $A build/sluice "$dir/tunnel.yaml" $B $UP
t1=$(ticks $tunnel)
printf '%-40s %9s %11s %9s %11s %8s %14s\n' "thread_per_connection, $conns conns" "A req/s" \
  "A cpu_us/r" "B req/s" "B cpu_us/r" "B/A r/s" "stunnel us/r"
printf '%-40s %9s %11s %9s %11s %8.3f %14.1f\n' "plain Redis (A) vs TLS via stunnel (B)" \
  "$a_rps" "$a_cpu" "$b_rps" "$b_cpu" "$(echo "$b_rps / $a_rps" | bc -l)" \
  "$(echo "($t1 - $t0) / $hz * 1000000 / ($b_rps * ($secs * $rounds + 1))" | bc -l)"
printf '(medians of %d alternating rounds of %d s; stunnel over every B round and warm-up)\n' \
  "$rounds" "$secs"
