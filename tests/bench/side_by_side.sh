# Two sluice processes measured side by side with wrk: sourced by tests/bench/consumers.sh,
# tests/bench/servers.sh and tests/bench/before_after.sh. The caller sets `name` (its prefix
# for messages), `secs`, `conns`, `rounds` and `lua` (a wrk script, or "" for a plain GET),
# then calls
#   side_by_side PORT_A PID_A PORT_B PID_B
# which warms both up and runs `rounds` alternating rounds (A first in even rounds, B first in
# odd ones), leaving "req/s cpu_us_per_request" medians in a_rps a_cpu b_rps b_cpu; or
#   measure_pair BINARY_A CONFIG_A PORT_A BINARY_B CONFIG_B PORT_B [PORT...]
# which starts both (their logs beside their configs), waits until they and the other PORTs
# (their upstreams) answer, measures them so, and stops them. CPU per
# request is the process's user + system time over the run (/proc/PID/stat) divided by the
# requests wrk counted. Every run is bounded by `secs`.

hz=$(getconf CLK_TCK)
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# "rps cpu_us_per_request" for one wrk run against port $1 (process $2).
one_run() {
  local t0 t1 out
  t0=$(ticks "$2")
  out=$(timeout $((secs + 30)) wrk -t1 -c"$conns" -d"${secs}s" ${lua:+-s "$lua"} \
    "http://127.0.0.1:$1/" 2>&1)
  t1=$(ticks "$2")
  printf '%s\n' "$out" | awk -v dt=$((t1 - t0)) -v hz="$hz" -v name="$name" '
    /requests in/ { n=$1 } /Requests\/sec/ { r=$2 } /Non-2xx/ { bad=$5 }
    END { if (bad > 0) print name ": " bad " answers not 2xx" > "/dev/stderr"
          printf "%.0f %.1f\n", r, (n > 0) ? dt / hz * 1e6 / n : 0 }'
}

median() { sort -g | awk '{a[NR]=$1} END { print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2 }'; }
field_median() { local f=$1; shift; printf '%s\n' "$@" | awk -v f="$f" '{print $f}' | median; }

side_by_side() {
  local a=() b=() i
  for port in "$1" "$3"; do
    wrk -t1 -c"$conns" -d1s ${lua:+-s "$lua"} "http://127.0.0.1:$port/" >/dev/null
  done
  for ((i = 0; i < rounds; i++)); do
    if ((i % 2 == 0)); then
      a+=("$(one_run "$1" "$2")"); b+=("$(one_run "$3" "$4")")
    else
      b+=("$(one_run "$3" "$4")"); a+=("$(one_run "$1" "$2")")
    fi
  done
  a_rps=$(field_median 1 "${a[@]}"); a_cpu=$(field_median 2 "${a[@]}")
  b_rps=$(field_median 1 "${b[@]}"); b_cpu=$(field_median 2 "${b[@]}")
}

# Until each of the ports answers an HTTP request (10 s at most each).
wait_up() {
  local port
  for port in "$@"; do
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  done
}

measure_pair() {
  local a_pid b_pid
  "$1" -c "$2" >"$2.log" 2>&1 & a_pid=$!
  "$4" -c "$5" >"$5.log" 2>&1 & b_pid=$!
  pids+=("$a_pid" "$b_pid") # for the caller's trap, if it keeps them
  wait_up "${@:7}" "$3" "$6"
  side_by_side "$3" $a_pid "$6" $b_pid
  kill $a_pid $b_pid; wait $a_pid $b_pid 2>/dev/null
}
