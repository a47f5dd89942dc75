#!/usr/bin/env bash
# Streamed uploads: one client uploading SIZE bytes, then CLIENTS clients uploading EACH bytes
# at once, through nginx (proxy_request_buffering off), sluice in thread_per_connection mode
# and sluice in event mode, side by side in one run, and to the upstream alone (direct).
#
#   tests/bench/uploads.sh [ROUNDS]                                       (3)
#   ROUNDS=3 SIZE=1073741824 CLIENTS=8 EACH=268435456 tests/bench/uploads.sh   (the defaults)
#   FRAMING=chunked (curl -T - from `head -c N /dev/zero`, the default) or length (curl -T of a
#   sparse file: Content-Length); STALL=10 (an upload passing no byte for that many seconds
#   is given up and counted as failed); STRACE=1 (then one EACH-byte upload per proxy under
#   `strace -c -f`: syscalls per MiB)
#
# The upstream is build/test_upstream's /sink: it reads the body as it comes, hashes it with
# SHA-256 (libsodium) and answers "bytes N\nsha256 HEX\n", then closes; each answer is
# checked (200, N bytes, the digest of N zero bytes). nginx: worker_processes auto,
# proxy_request_buffering off, proxy_http_version 1.1, client_max_body_size 0. sluice: one
# route, no limit, access log off, max_body 4GiB, the default workers in event mode. Each
# round runs the single upload against every target, then the concurrent one against every
# target, the order rotating each round. Figures are medians over the rounds (peak RSS: the
# highest). MB/s: curl's speed_upload for the single upload; for the concurrent one the bytes
# of the uploads that succeeded over the wall time from the first start to the last end. CPU
# s/GiB: utime+stime (/proc/PID/stat) of the proxy's processes (nginx's master and workers)
# and, apart, of the upstream, over the test, divided by the GiB the clients sent. Peak RSS:
# VmHWM, reset before each test (`echo 5 > /proc/PID/clear_refs`) and read after it; for
# nginx the sum over its processes. Every target is on 127.0.0.1; every upload ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-${ROUNDS:-3}} size=${SIZE:-1073741824} clients=${CLIENTS:-8} each=${EACH:-268435456}
framing=${FRAMING:-chunked} stall=${STALL:-10}
[ -x build/sluice ] || { echo "uploads: build build/sluice first (make)" >&2; exit 2; }
[ -x build/test_upstream ] || make -s build/test_upstream || exit 2
command -v nginx >/dev/null ||
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null 2>&1 ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null 2>&1; }
for t in nginx curl bc; do
  command -v $t >/dev/null || { echo "uploads: $t is missing" >&2; exit 2; }
done
[ "${STRACE:-0}" = 0 ] || command -v strace >/dev/null || { echo "uploads: strace is missing" >&2; exit 2; }
dir=$(mktemp -d /tmp/sluice-uploads.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; { wait; } 2>/dev/null; pids=(); }
trap 'stop_all; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
cp build/sluice build/test_upstream "$dir/"
chmod 755 "$dir"   # nginx workers run as nobody
rev="$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- gateway config limiter 2>/dev/null || echo '+local changes')"
UP=18490 NGX=18491 THR=18492 EVT=18493

"$dir/test_upstream" 127.0.0.1:$UP >"$dir/upstream.log" 2>&1 & up_pid=$!; pids+=($up_pid)
cat >"$dir/proxy.conf" <<EOF
worker_processes auto; daemon off; pid $dir/px.pid; error_log $dir/px.err warn;
events { worker_connections 1024; }
http { access_log off;
  client_body_temp_path $dir/ngx-body; proxy_temp_path $dir/ngx-proxy;
  server { listen 127.0.0.1:$NGX; client_max_body_size 0;
    location / { proxy_pass http://127.0.0.1:$UP; proxy_http_version 1.1;
      proxy_request_buffering off; } } }
EOF
nginx -c "$dir/proxy.conf" & ngx_pid=$!; pids+=($ngx_pid)
for mode in thread_per_connection event; do
  port=$([ $mode = event ] && echo $EVT || echo $THR)
  printf '%s\n' "server: {listen: \"127.0.0.1:$port\", access_log: \"off\", mode: $mode," \
    "         max_body: 4GiB, drain_timeout: 2s}" \
    "routes:" "  - {name: up, match: {path_prefix: /}, upstream: \"http://127.0.0.1:$UP\"}" \
    >"$dir/$mode.yaml"
done
"$dir/sluice" -c "$dir/thread_per_connection.yaml" >"$dir/thread.log" 2>&1 & thr_pid=$!; pids+=($thr_pid)
"$dir/sluice" -c "$dir/event.yaml" >"$dir/event.log" 2>&1 & evt_pid=$!; pids+=($evt_pid)

targets="direct nginx thread event"
declare -A port=([direct]=$UP [nginx]=$NGX [thread]=$THR [event]=$EVT)
declare -A pid=([direct]=$up_pid [nginx]=$ngx_pid [thread]=$thr_pid [event]=$evt_pid)
for t in $targets; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${port[$t]}/bytes?n=1" && break; sleep 0.1; done
  [ "$(printf hello | curl -s -T - "http://127.0.0.1:${port[$t]}/sink" | head -1)" = "bytes 5" ] ||
    { echo "uploads: $t does not pass a body to /sink; the logs:" >&2
      tail -5 "$dir"/*.log "$dir/px.err" >&2; exit 1; }
done
declare -A procs   # the processes whose CPU and memory count: nginx's master and its workers
for t in $targets; do procs[$t]="${pid[$t]} $(pgrep -P "${pid[$t]}" | tr '\n' ' ')"; done

name=uploads
. tests/bench/side_by_side.sh   # hz, ticks, median
ticks_of() { local p s=0; for p in "$@"; do s=$((s + $(ticks "$p" 2>/dev/null || echo 0))); done; echo $s; }
hwm_of() { local p s=0; for p in "$@"; do s=$((s + $(awk '$1 == "VmHWM:" { print $2 }' "/proc/$p/status"))); done; echo $s; }
reset_hwm() { local p; for p in "$@"; do echo 5 >"/proc/$p/clear_refs" 2>/dev/null; done; }
digest() { head -c "$1" /dev/zero | if command -v openssl >/dev/null; then openssl dgst -sha256 -r; else sha256sum; fi | cut -c1-64; }
declare -A sha=([$size]=$(digest "$size") [$each]=$(digest "$each"))
if [ "$framing" = length ]; then truncate -s "$size" "$dir/body-$size"; truncate -s "$each" "$dir/body-$each"; fi

# One upload of $2 bytes to port $1, its answer in $3: "bytes_per_s code bytes_sent ok".
upload() {
  local out w speed code sent
  if [ "$framing" = length ]; then
    w=$(timeout 900 curl -sS -o "$3" -w '%{speed_upload} %{http_code} %{size_upload}' \
      --speed-limit 1 --speed-time "$stall" -H 'Content-Type: application/octet-stream' \
      -T "$dir/body-$2" "http://127.0.0.1:$1/sink" 2>>"$dir/curl.err")
  else
    w=$(head -c "$2" /dev/zero | timeout 900 curl -sS -o "$3" \
      -w '%{speed_upload} %{http_code} %{size_upload}' --speed-limit 1 --speed-time "$stall" \
      -H 'Content-Type: application/octet-stream' -T - "http://127.0.0.1:$1/sink" 2>>"$dir/curl.err")
  fi
  read -r speed code sent <<<"${w:-0 000 0}"
  out=$(tr '\n' ' ' <"$3" 2>/dev/null)
  printf '%s %s %s %d\n' "$speed" "$code" "$sent" \
    "$([ "$code" = 200 ] && [ "$out" = "bytes $2 sha256 ${sha[$2]} " ] && echo 1 || echo 0)"
}
now() { date +%s.%N; }
# One test against target $1: "MB_per_s gw_cpu_s_per_GiB up_cpu_s_per_GiB gw_peak_KiB failed",
# $2 clients of $3 bytes each. The gateway's figures are 0 for direct.
one_test() {
  local t=$1 n=$2 bytes=$3 g0 g1 u0 u1 s0 s1 k lines cpids=()
  [ "$t" = direct ] || reset_hwm ${procs[$t]}
  g0=$(ticks_of ${procs[$t]}) u0=$(ticks "$up_pid") s0=$(now)
  for ((k = 0; k < n; k++)); do
    upload "${port[$t]}" "$bytes" "$dir/answer.$k" >"$dir/result.$k" & cpids+=($!)
  done
  wait "${cpids[@]}"
  g1=$(ticks_of ${procs[$t]}) u1=$(ticks "$up_pid") s1=$(now)
  lines=$(cat "$dir"/result.*); rm -f "$dir"/result.* "$dir"/answer.*
  printf '%s\n' "$lines" | awk -v t="$t" -v n="$n" -v wall="$(echo "$s1 - $s0" | bc)" -v hz="$hz" \
    -v g=$((g1 - g0)) -v u=$((u1 - u0)) -v hwm="$([ "$t" = direct ] && echo 0 || hwm_of ${procs[$t]})" \
    -v bytes="$bytes" '
    { sent += $3; if ($4 == 1) { good += bytes; speed = $1 } else bad++ }
    END { gib = sent / 1073741824
          rate = (n == 1) ? ((bad == 0) ? speed : 0) : good / wall
          printf "%.0f %.2f %.2f %d %d\n", rate / 1e6, (gib > 0 && t != "direct") ? g / hz / gib : 0,
            (gib > 0) ? u / hz / gib : 0, hwm, bad }'
}

mib() { echo $(($1 / 1048576)); }
tests="one many"
declare -A label=([one]="1 x $(mib "$size") MiB" [many]="$clients x $(mib "$each") MiB")
declare -A n_of=([one]=1 [many]=$clients) bytes_of=([one]=$size [many]=$each)
printf 'sluice %s, nginx %s, %s; %s cores, load average %s at start\n' "${rev:-?}" \
  "$(nginx -v 2>&1 | sed 's|.*/||')" "$(curl --version | awk 'NR==1{print $1 " " $2}')" "$(nproc)" \
  "$(cut -d' ' -f1 /proc/loadavg)"
printf 'uploads: %d rounds: one client uploading %s MiB, then %d clients %s MiB each, to each target; bodies %s\n' \
  "$rounds" "$(mib "$size")" "$clients" "$(mib "$each")" \
  "$([ "$framing" = length ] && echo 'with Content-Length (curl -T FILE)' || echo 'chunked (curl -T - from head -c N /dev/zero)')"
declare -A R
for ((i = 0; i < rounds; i++)); do
  set -- $targets; order=()
  for ((k = 0; k < $#; k++)); do j=$(((k + i) % $# + 1)); order+=("${!j}"); done
  for x in $tests; do
    for t in "${order[@]}"; do R[${t}_$x]+="$(one_test "$t" "${n_of[$x]}" "${bytes_of[$x]}")"$'\n'; done
  done
done

col() { printf '%s' "${R[$1]}" | awk -v f="$2" 'NF{print $f}' | median; }
peak() { printf '%s' "${R[$1]}" | awk 'NF && $4 > m { m = $4 } END { printf "%.1f", m / 1024 }'; }
failed() { printf '%s' "${R[$1]}" | awk 'NF { s += $5 } END { print s + 0 }'; }
rounds_of() { printf '%s' "${R[$1]}" | awk 'NF { printf "%s%s", sep, $1; sep = "/" }'; }
names() { case $1 in thread) echo sluice_thread ;; event) echo sluice_event ;; *) echo "$1" ;; esac; }
printf '\n%-14s %-14s %6s %13s %13s %12s %7s  %s\n' test target MB/s gw_cpu_s/GiB up_cpu_s/GiB \
  gw_peak_MiB failed "MB/s per round"
for x in $tests; do
  for t in $targets; do
    if [ "$t" = direct ]; then g=- h=-; else g=$(col ${t}_$x 2) h=$(peak ${t}_$x); fi
    printf '%-14s %-14s %6s %13s %13s %12s %7s  %s\n' "${label[$x]}" "$(names $t)" "$(col ${t}_$x 1)" \
      "$g" "$(col ${t}_$x 3)" "$h" "$(failed ${t}_$x)/$((rounds * n_of[$x]))" "$(rounds_of ${t}_$x)"
  done
done
# The summary: each figure, and in parentheses its ratio over nginx's.
cell() {   # target value nginx's_value: "value (ratio)", or "value" for nginx itself
  if [ "$1" = nginx ]; then printf '%s' "$2"; return; fi
  awk -v a="$2" -v b="$3" 'BEGIN { printf "%s (%.2f)", a, (b > 0) ? a / b : 0 }'
}
printf '\nsummary: value (ratio over nginx); medians of %d rounds, peak RSS the highest\n%-26s' "$rounds" ""
for t in nginx thread event; do printf ' %16s' "$(names $t)"; done; echo
line() {  # label test kind
  local t v n
  printf '%-26s' "$1"
  for t in nginx thread event; do
    case $3 in rss) v=$(peak ${t}_$2) n=$(peak nginx_$2) ;; *) v=$(col ${t}_$2 $3) n=$(col nginx_$2 $3) ;; esac
    printf ' %16s' "$(cell $t "$v" "$n")"
  done; echo
}
for x in $tests; do
  line "MB/s, ${label[$x]}" $x 1
  line "CPU s/GiB, ${label[$x]}" $x 2
  line "peak RSS MiB, ${label[$x]}" $x rss
done
printf '(direct, the upstream alone: %s MB/s for %s, %s MB/s for %s; the sink spends %s and %s CPU s/GiB)\n' \
  "$(col direct_one 1)" "${label[one]}" "$(col direct_many 1)" "${label[many]}" \
  "$(col direct_one 3)" "$(col direct_many 3)"
bad=$(for x in $tests; do for t in $targets; do f=$(failed ${t}_$x)
  [ "$f" -gt 0 ] && echo "check: $(names $t), ${label[$x]}: $f of $((rounds * n_of[$x])) uploads failed (no 200 with the right byte count and digest, or no byte for ${stall} s)"; done; done)
[ -n "$bad" ] && printf '%s\n' "$bad" && sort "$dir/curl.err" | uniq -c | sed 's/^ */  curl: /' | head -5

if [ "${STRACE:-0}" != 0 ]; then
  printf '\nsyscalls per MiB (strace -c -f, one %s MiB upload each; strace slows the proxy, so only the counts mean anything)\n' "$(mib "$each")"
  for t in nginx thread event; do
    strace -c -f -o "$dir/strace.$t" $(printf -- '-p %s ' ${procs[$t]}) 2>/dev/null & st=$!
    sleep 1
    r=$(upload "${port[$t]}" "$each" "$dir/answer.s")
    kill -INT $st; wait $st 2>/dev/null
    top=$(awk -v mib="$(mib "$each")" '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "%.1f %s\n", $4 / mib, $NF }' \
      "$dir/strace.$t" | sort -gr | head -6 | awk '{ printf " %s %s", $2, $1 }')
    printf '%-14s %7.1f in all%s:%s\n' "$(names $t)" \
      "$(awk -v mib="$(mib "$each")" '$NF == "total" { printf "%.1f", $4 / mib }' "$dir/strace.$t")" \
      "$(echo "$r" | awk '$4 != 1 { print " (the upload FAILED)" }')" "$top"
  done
fi

printf 'uploads: %d s in all\n' "$SECONDS"
# A gateway that cannot stop (requests stuck in it) says so in its log.
for t in thread event; do
  kill "${pid[$t]}" 2>/dev/null; { wait "${pid[$t]}"; rc=$?; } 2>/dev/null
  [ "$rc" = 0 ] || printf 'check: %s exited %d on SIGTERM: %s\n' "$(names $t)" "$rc" \
    "$(grep -E 'warn|error|Fatal' "$dir/$t.log" | tail -2 | tr '\n' ' ')"
done
