#!/usr/bin/env bash
# Two sluice binaries side by side (A/B), e.g. before and after a change, with wrk and callgrind.
#
#   tests/bench/reader.sh BASE NEW [ROUNDS] [SECONDS] [CONNECTIONS] [REQUESTS]   (3 5 32 2000)
#
# One upstream (nginx, one worker, a 20-byte body) behind both binaries, each with the same
# config: /x proxied (a limit no client reaches, keyed on the address), /deny/x denied
# (fixed_window, 1 per hour, keyed on X-API-Key, the one request spent before measuring),
# access log off. Rounds interleave base and new on each path; each wrk run also reads the
# sluice process's utime+stime from /proc to give CPU µs per request. Then each binary runs
# under callgrind and gets REQUESTS requests on one keep-alive connection per path, counted
# after a warm-up: instructions per request, and the share in the files given by $FILES.
# Every target is on 127.0.0.1; every run ends by itself.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BASE NEW [ROUNDS] [SECONDS] [CONNECTIONS] [REQUESTS]" >&2; exit 2; }
base=$(realpath "$1") new=$(realpath "$2")
rounds=${3:-3} secs=${4:-5} conns=${5:-32} nreq=${6:-2000}
files=${FILES:-gateway/front/head.c gateway/front/wire.c gateway/common/target.c}
for t in nginx wrk curl python3 valgrind callgrind_annotate; do
  command -v $t >/dev/null || { echo "reader: $t is missing" >&2; exit 2; }
done

dir=$(mktemp -d /tmp/sluice-reader.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
UP=18290 PB=18291 PN=18292
cat >"$dir/upstream.conf" <<EOF
worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/up.err warn;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 10000000;
  server { listen 127.0.0.1:$UP; location / { return 200 "hello from upstream\n"; } } }
EOF
conf() {
  cat <<EOF
server: {listen: "127.0.0.1:$1", access_log: "off"}
routes:
  - name: deny
    match: { path_prefix: /deny/ }
    upstream: "http://127.0.0.1:$UP"
    key: "header:X-API-Key"
    limit: { algorithm: fixed_window, requests: 1, per: 1h }
  - name: open
    match: { path_prefix: / }
    upstream: "http://127.0.0.1:$UP"
    key: ip
    limit: { algorithm: token_bucket, requests: 100000000, per: 1s }
EOF
}
conf $PB >"$dir/base.yaml"; conf $PN >"$dir/new.yaml"
ready() {
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done
  echo "reader: nothing answers on $1" >&2; exit 1
}
nginx -c "$dir/upstream.conf" & pids+=($!)
ready $UP

# --- wrk, interleaved ----------------------------------------------------------------------
"$base" -c "$dir/base.yaml" >"$dir/base.log" 2>&1 & bpid=$!; pids+=($bpid)
"$new" -c "$dir/new.yaml" >"$dir/new.log" 2>&1 & npid=$!; pids+=($npid)
ready $PB; ready $PN
for p in $PB $PN; do curl -s -o /dev/null -H 'X-API-Key: k' "http://127.0.0.1:$p/deny/x"; done
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# one run: "rps p99_ms requests non2xx cpu_us_per_request"
run() {
  local pid=$1 port=$2 path=$3 t0 t1 out
  t0=$(ticks "$pid")
  out=$(wrk -t1 -c"$conns" -d"${secs}s" --latency -H 'X-API-Key: k' "http://127.0.0.1:$port$path" 2>&1)
  t1=$(ticks "$pid")
  printf '%s\n' "$out" | awk -v dt=$((t1 - t0)) -v hz="$hz" '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /requests in/ { n=$1 } /Requests\/sec/ { r=$2 } / 99%/ { p99=ms($2) } /Non-2xx/ { x=$5 }
    END { printf "%.0f %.3f %d %d %.2f\n", r, p99, n, x, (n > 0) ? dt / hz * 1e6 / n : 0 }'
}
declare -A R
printf '%-6s %-14s %9s %8s %9s %8s %9s\n' round target req/s p99_ms requests non2xx cpu_us/req
for ((i = 1; i <= rounds; i++)); do
  for t in base_proxied new_proxied base_denied new_denied; do
    case $t in base_*) pid=$bpid port=$PB ;; *) pid=$npid port=$PN ;; esac
    case $t in *proxied) path=/x ;; *) path=/deny/x ;; esac
    line=$(run $pid $port $path); R[$t]+="$line"$'\n'
    printf '%-6s %-14s %9s %8s %9s %8s %9s\n' $i $t $line
  done
done
median() { sort -g | awk '{a[NR]=$1} END { print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2 }'; }
col() { printf '%s' "${R[$1]}" | awk -v f="$2" 'NF{print $f}' | median; }
range() { printf '%s' "${R[$1]}" | awk -v f="$2" 'NF{v=$f; if(NR==1||v<lo)lo=v; if(NR==1||v>hi)hi=v} END{printf "%s-%s", lo, hi}'; }
# paired ratios new/base per round, so that drift between rounds cancels
paired() {
  paste <(printf '%s' "${R[base_$1]}" | awk -v f=$2 'NF{print $f}') \
        <(printf '%s' "${R[new_$1]}" | awk -v f=$2 'NF{print $f}') |
    awk '{printf "%.3f\n", $2 / $1}' | sort -g | tr '\n' ' '
}
printf '\nmedians (range over rounds)\n%-14s %22s %20s %20s\n' target req/s p99_ms cpu_us/req
for t in base_proxied new_proxied base_denied new_denied; do
  printf '%-14s %22s %20s %20s\n' $t "$(col $t 1) ($(range $t 1))" "$(col $t 2) ($(range $t 2))" \
    "$(col $t 5) ($(range $t 5))"
done
for p in proxied denied; do
  printf 'new/base %-8s req/s %s  p99 %s  cpu/req %s   (per-round req/s ratios: %s)\n' $p \
    "$(awk -v a="$(col new_$p 1)" -v b="$(col base_$p 1)" 'BEGIN{printf "%.3f", a/b}')" \
    "$(awk -v a="$(col new_$p 2)" -v b="$(col base_$p 2)" 'BEGIN{printf "%.3f", a/b}')" \
    "$(awk -v a="$(col new_$p 5)" -v b="$(col base_$p 5)" 'BEGIN{printf "%.3f", a/b}')" \
    "$(paired $p 1)"
done
kill $bpid $npid; wait $bpid $npid 2>/dev/null

# --- callgrind: instructions per request on one keep-alive connection ----------------------
cat >"$dir/drive.py" <<'EOF'
import socket, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-API-Key: k\r\nUser-Agent: reader\r\n"
       "Accept: */*\r\n\r\n" % (path, port)).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
buf, codes = b"", {}
for _ in range(n):
    s.sendall(req)
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d: sys.exit("connection closed")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    code = lines[0].split()[1].decode(); codes[code] = codes.get(code, 0) + 1
    length = next(int(l.split(b":")[1]) for l in lines if l.lower().startswith(b"content-length:"))
    while len(buf) < length:
        buf += s.recv(65536)
    buf = buf[length:]
print(" ".join("%s:%d" % kv for kv in sorted(codes.items())), file=sys.stderr)
EOF
printf '\ncallgrind, %d requests on one connection after 50 of warm-up\n' "$nreq"
printf '%-14s %14s %10s %12s %s\n' target Ir Ir/req reader_Ir/req "reader share, codes"
for bin in base new; do
  for p in proxied denied; do
    case $p in proxied) path=/x ;; *) path=/deny/x ;; esac
    exe=${!bin}; port=$PB
    timeout 300 valgrind --tool=callgrind --trace-children=no \
      --callgrind-out-file="$dir/cg.$bin.$p.%p" "$exe" -c "$dir/base.yaml" >"$dir/cg.$bin.$p.log" 2>&1 &
    tpid=$!
    ready $PB
    vpid=$(pgrep -P $tpid)   # valgrind itself, under timeout
    curl -s -o /dev/null -H 'X-API-Key: k' "http://127.0.0.1:$PB/deny/x"
    timeout 120 python3 "$dir/drive.py" $PB $path 50 2>/dev/null
    callgrind_control -z $vpid >/dev/null 2>&1
    codes=$(timeout 240 python3 "$dir/drive.py" $PB $path "$nreq" 2>&1)
    callgrind_control -d $vpid >/dev/null 2>&1
    kill $vpid; wait $tpid 2>/dev/null
    out=$(ls "$dir"/cg.$bin.$p.*.1 2>/dev/null | head -1)
    [ -n "$out" ] || { echo "reader: no callgrind dump for $bin $p" >&2; continue; }
    callgrind_annotate --inclusive=no --threshold=100 "$out" >"$dir/ann.$bin.$p" 2>/dev/null
    cp "$out" "/tmp/reader-callgrind.$bin.$p.out"
    total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$dir/ann.$bin.$p")
    mine=$(awk -v files="$files" 'BEGIN { n = split(files, f, " ") }
      /^ *[0-9,]+ \( *[0-9.]+%\) +[^ =]+ \[[^]]*\]$/ {   # self cost of one function
        for (i = 1; i <= n; i++) if (index($0, f[i] ":") > 0) { v = $1; gsub(",", "", v); s += v; break } }
      END { print s + 0 }' "$dir/ann.$bin.$p")
    printf '%-14s %14s %10.0f %12.0f %5.2f%%  %s\n' "${bin}_$p" "$total" "$(echo "$total / $nreq" | bc -l)" \
      "$(echo "$mine / $nreq" | bc -l)" "$(echo "100 * $mine / $total" | bc -l)" "$codes"
  done
done
echo "(callgrind dumps kept as /tmp/reader-callgrind.{base,new}.{proxied,denied}.out)"
