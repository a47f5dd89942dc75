#!/usr/bin/env bash
# make test's runner, once everything is built: each step's whole output goes to
# build/test-logs/STEP.log; the terminal gets one line per step as it ends (with the failures
# and the log's last lines when it fails), then one table, step by step (passed, failed,
# seconds), and last the line "N passed, M failed". Every step runs, whatever the one before
# did; the exit status is 1 when any failed.
#
#   MAKE=make TEST_FUZZ_SECONDS=5 tests/run-tests.sh
set -u
cd "$(dirname "$0")/.."
make_cmd=${MAKE:-make}
fuzz_seconds=${TEST_FUZZ_SECONDS:-5}
mkdir -p build/test-logs

names=() passed=() failed=() took=()

# "PASSED FAILED" as the log of a step says them: CUnit's "tests" row (Total Ran Passed Failed
# Inactive), each integration run's summary, packaging-test's line, or the fuzz targets run.
counts() {
  awk '
    /^ +tests +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+/ { p += $4; f += $5; next }
    /^build\/integration-.*\.log: integration: / {
      for (i = 1; i <= NF; i++) {
        if ($(i + 1) == "passed,") p += $i
        if ($(i + 1) == "failed,") f += $i
      }
      next
    }
    /^packaging-test: [0-9]+ passed, [0-9]+ failed/ { p += $2; f += $4; next }
    /^  FUZZ [a-z_]+ for / || /^  FUZZ-REGRESSIONS / { p++ }
    END { printf "%d %d\n", p, f }' "$1"
}

# step NAME COMMAND...: runs it, its output to its log, and says how it went.
step() {
  local name=$1 log=build/test-logs/$1.log start=$SECONDS status p f
  shift
  "$@" >"$log" 2>&1
  status=$?
  read -r p f < <(counts "$log")
  ((status != 0 && f == 0)) && f=1 # it failed before it could count a failure
  names+=("$name") passed+=("$p") failed+=("$f") took+=($((SECONDS - start)))
  if ((status == 0)); then
    printf '  %-12s ok      %6d passed %4d failed %5ds\n' "$name" "$p" "$f" $((SECONDS - start))
    return
  fi
  printf '  %-12s FAILED  %6d passed %4d failed %5ds   (%s)\n' "$name" "$p" "$f" \
    $((SECONDS - start)) "$log"
  grep -E 'FAILED|^ +[0-9]+\. |SKIPPED|ERROR|error:' "$log" | head -40
  echo "  --- the last lines of $log:"
  tail -30 "$log"
}

step unit build/test_unit
step packaging env MAKE="$make_cmd" tests/packaging-test.sh
step unit-asan env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build/asan/test_unit
step unit-tsan env TSAN_OPTIONS=halt_on_error=1 build/tsan/test_unit concurrency
step integration tests/run-integration.sh
step fuzz "$make_cmd" --no-print-directory fuzz FUZZ_SECONDS="$fuzz_seconds"

total_p=0 total_f=0
printf '\n%-12s %8s %8s %8s\n' step passed failed seconds
for i in "${!names[@]}"; do
  printf '%-12s %8d %8d %8d\n' "${names[$i]}" "${passed[$i]}" "${failed[$i]}" "${took[$i]}"
  total_p=$((total_p + passed[i])) total_f=$((total_f + failed[i]))
done
grep -o 'Test: .*SKIPPED: .*' build/test-logs/integration.log 2>/dev/null | sort | uniq -c |
  sed 's/^ *\([0-9]*\) Test: /skipped in \1 runs: /'
echo "$total_p passed, $total_f failed"
((total_f == 0))
