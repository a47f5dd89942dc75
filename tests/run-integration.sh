#!/usr/bin/env bash
# The integration suites four times, as `make test` runs them: thread_per_connection and event
# mode (2 workers), each against build/sluice and then against the ASan+UBSan build. The two
# modes run side by side: the suites spend most of their time waiting on sockets and timers,
# and each run has its own ports, files and processes. Each run's output is printed whole once
# both have ended, and kept in build/integration-MODE[-asan].log; then each run's summary line:
# how many tests passed, failed and were skipped (a test that cannot check against that binary,
# e.g. valgrind's memcheck over the ASan build, says "SKIPPED: why" and is never counted as
# passed), and each skipped test. Exit status 1 when any run failed (all four run even so), 0
# otherwise.
set -u
cd "$(dirname "$0")/.."
status=0

# $1: "" or "-asan", the binary's suffix in the log names; then the environment for both runs.
side_by_side() {
  local suffix=$1 thread event
  shift
  env "$@" build/test_integration >"build/integration-thread$suffix.log" 2>&1 &
  thread=$!
  env "$@" SLUICE_MODE=event SLUICE_WORKERS=2 build/test_integration \
    >"build/integration-event$suffix.log" 2>&1 &
  event=$!
  wait $thread || { status=1; echo "integration: thread_per_connection$suffix FAILED"; }
  wait $event || { status=1; echo "integration: event$suffix FAILED"; }
  cat "build/integration-thread$suffix.log" "build/integration-event$suffix.log"
}

side_by_side "" SLUICE=build/sluice
side_by_side -asan SLUICE=build/asan/sluice ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1
for log in build/integration-{thread,event}{,-asan}.log; do
  printf '%s: %s\n' "$log" "$(grep -h '^integration: ' "$log" || echo 'no summary (did it end?)')"
  grep -h '^  skipped: ' "$log"
done
exit $status
