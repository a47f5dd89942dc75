#!/usr/bin/env bash
# What a parked connection costs when its client comes back (event mode, park.h): CPU per
# request of 2,000 keep-alive connections each sending one request per round, rounds 0.6 s
# apart (never parked, with park_idle_after 1s) and 1.6 s apart (parked before every request),
# alternating, 5 rounds of each. CPU is sluice's utime + stime from /proc/PID/stat over the
# requests of a round (the parking itself, between rounds, is not counted).
#
#   tests/bench/park.sh [ROUNDS] [CONNECTIONS]   (5 2000)
#
# sluice (event mode, 2 workers, access log off) in front of build/test_upstream; every target
# is on 127.0.0.1; the run ends by itself.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-5} conns=${2:-2000}
[ -x build/sluice ] && [ -x build/test_upstream ] ||
  { echo "park: build build/sluice and build/test_upstream first (make)" >&2; exit 2; }
dir=$(mktemp -d /tmp/sluice-park.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }
trap 'stop_all; rm -rf "$dir"' EXIT
UP=18396 GW=18397
ulimit -n "$(ulimit -Hn)" 2>/dev/null
build/test_upstream 127.0.0.1:$UP >"$dir/up.log" 2>&1 & pids+=($!)
printf '%s\n' "server: {listen: \"127.0.0.1:$GW\", access_log: \"off\", mode: event, workers: 2," \
  "         park_idle_after: 1s, max_connections: $((conns + 64))}" \
  "routes:" "  - {name: all, match: {path_prefix: /}, upstream: \"http://127.0.0.1:$UP\"}" \
  >"$dir/sluice.yaml"
build/sluice -c "$dir/sluice.yaml" >"$dir/sluice.log" 2>&1 & gw=$!; pids+=($gw)
for _ in $(seq 50); do grep -q "listening on" "$dir/sluice.log" && break; sleep 0.1; done
timeout 300 python3 - "$gw" "$GW" "$conns" "$rounds" <<'EOF'
import os, socket, sys, time
pid, port, conns, rounds = (int(a) for a in sys.argv[1:])

def cpu():
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def request(s):
    s.sendall(b"GET /status/200 HTTP/1.1\r\nHost: bench\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
              if l.lower().startswith(b"content-length:")][0]
    while len(body) < length:
        body += s.recv(4096)

socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
for s in socks:
    request(s)
spent = {0.6: [], 1.6: []}
for _ in range(rounds):
    for gap in (0.6, 1.6):
        time.sleep(gap)
        before = cpu()
        for s in socks:
            request(s)
        spent[gap].append((cpu() - before) / conns * 1e6)
kept, parked = sorted(spent[0.6])[rounds // 2], sorted(spent[1.6])[rounds // 2]
print("park: %d connections, one request each per round, median of %d rounds" % (conns, rounds))
print("  never parked (0.6 s apart)      %6.1f cpu_us/req" % kept)
print("  parked before each (1.6 s apart) %5.1f cpu_us/req  (+%.1f for coming back)"
      % (parked, parked - kept))
EOF
