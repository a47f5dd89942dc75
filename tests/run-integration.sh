#!/usr/bin/env bash
# The integration suites four times, as `make test` runs them: thread_per_connection and event
# mode (2 workers), each against build/sluice and against the ASan+UBSan build. The four runs go
# side by side: the suites spend most of their time waiting on sockets and timers (a run uses
# about a third of a core), and each run has its own ports, files and processes. Each run's
# output is printed whole once all have ended, and kept in build/integration-MODE[-asan].log;
# then each run's summary line: how many tests passed, failed and were skipped (a test that
# cannot check against that binary, e.g. valgrind's memcheck over the ASan build, says
# "SKIPPED: why" and is never counted as passed), and each skipped test. Exit status 1 when any
# run failed (all four run even so), 0 otherwise.
set -u
cd "$(dirname "$0")/.."
status=0
declare -A pids

# $1: the run's name in its log's name; then the environment it runs in.
start_run() {
  local name=$1
  shift
  env "$@" build/test_integration >"build/integration-$name.log" 2>&1 &
  pids[$name]=$!
}

asan=(SLUICE=build/asan/sluice ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1)
start_run thread SLUICE=build/sluice
start_run event SLUICE=build/sluice SLUICE_MODE=event SLUICE_WORKERS=2
start_run thread-asan "${asan[@]}"
start_run event-asan "${asan[@]}" SLUICE_MODE=event SLUICE_WORKERS=2
for name in thread event thread-asan event-asan; do
  wait "${pids[$name]}" || { status=1; echo "integration: $name FAILED"; }
done
for name in thread event thread-asan event-asan; do
  cat "build/integration-$name.log"
done
for name in thread event thread-asan event-asan; do
  log=build/integration-$name.log
  printf '%s: %s\n' "$log" "$(grep -h '^integration: ' "$log" || echo 'no summary (did it end?)')"
  grep -h '^  skipped: ' "$log"
done
exit $status
