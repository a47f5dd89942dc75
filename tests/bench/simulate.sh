#!/usr/bin/env bash
# `sluice simulate` replay speed: LINES access log lines (default 1,000,000) as the gateway
# writes them (about 500 bytes each; one route, lines 20 µs apart, 5,000 recurring clients and
# one line in four from a new one), replayed against one limit of 100/s per algorithm, the
# report to /dev/null. Lines per second of user CPU time (one core: the replay is one thread),
# the best of ROUNDS (default 3) runs, and the peak RSS, from /usr/bin/time.
#
#   tests/bench/simulate.sh [LINES]
#
# KEEP=1 keeps the log and the configs (the directory is printed on stderr), to profile with:
#   perf record -g build/sluice simulate -c DIR/gcra.yaml DIR/access.log >/dev/null
#   perf report --no-children --sort sym
set -u
cd "$(dirname "$0")/../.."
lines=${1:-${LINES:-1000000}} rounds=${ROUNDS:-3}
[ -x build/sluice ] || { echo "simulate: build build/sluice first (make)" >&2; exit 2; }
dir=$(mktemp -d /tmp/sluice-simulate-bench-XXXXXX)
if [ -n "${KEEP:-}" ]; then echo "simulate: kept in $dir" >&2; else trap 'rm -rf "$dir"' EXIT; fi

/usr/bin/python3 - "$lines" >"$dir/access.log" <<'EOF'
import random, sys
random.seed(1)
start = 1796125247922768135
line = ('{"time":"2026-12-01T11:40:47.923Z","request_id":"08c1e987e9eed1dfdd5e51d2148994ae",'
        '"trace_id":"","route":"api","method":"GET","path":"/api/items","status":200,'
        '"decision":"allowed","upstream_status":200,"upstream_ms":0.585,"duration_ms":0.653,'
        '"bytes":270,"client":"%s","consumer":"","plan":"","dropped_headers":0,'
        '"upstream_error":"","upstream_server":"http://127.0.0.1:9000","limit":"",'
        '"user_agent":"curl/7.88.1","host":"api.test","decided_ns":%d,"keys":{"ip":"%016x"}}\n')
out = sys.stdout
for i in range(int(sys.argv[1])):
    c = random.randrange(5000) if i % 4 else 5000 + i
    out.write(line % ("10.%d.%d.%d" % (c >> 16 & 255, c >> 8 & 255, c & 255), start + i * 20000,
                      c * 2654435761 % (1 << 64)))
EOF

printf '%-24s %12s %14s %10s\n' algorithm "user s" "lines/s" "peak RSS"
for algorithm in token_bucket gcra fixed_window sliding_window_counter; do
    cat >"$dir/$algorithm.yaml" <<EOF
routes:
  - name: api
    match: {path_prefix: /api/}
    upstream: "http://127.0.0.1:9"
    limit: {algorithm: $algorithm, requests: 100, per: 1s}
EOF
    best="" rss=0
    for _ in $(seq "$rounds"); do
        /usr/bin/time -f '%U %M' -o "$dir/time" \
            build/sluice simulate -c "$dir/$algorithm.yaml" "$dir/access.log" >/dev/null ||
            { echo "simulate: $algorithm failed" >&2; exit 1; }
        read -r user kib <"$dir/time"
        if [ -z "$best" ] || awk "BEGIN{exit !($user < $best)}"; then best=$user; fi
        [ "$kib" -gt "$rss" ] && rss=$kib
    done
    awk -v a="$algorithm" -v u="$best" -v n="$lines" -v r="$rss" \
        'BEGIN { printf "%-24s %12.2f %14.0f %7.1f MB\n", a, u, (u > 0 ? n / u : 0), r / 1024 }'
done
