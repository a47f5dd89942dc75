#!/usr/bin/env bash
# `make test` runs this after building build/sluice: the man pages render without a warning,
# `sluice --help` and sluice(1) name the same options and exit codes, `make install` and
# `make uninstall` under a DESTDIR put and remove exactly their files (a changed config
# stays), and the installed systemd unit passes `systemd-analyze verify`, runs `sluice --check`
# before a start and a reload (run here on a good and a broken config), and names a user that
# its sysusers.d file makes; and make test's runner sums its steps into one table and a last
# line "N passed, M failed". A few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
SLUICE=${SLUICE:-build/sluice}

passed=0
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }
pass() { printf '== %s\n' "$*"; passed=$((passed + 1)); }

dest=$(mktemp -d /tmp/sluice-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
# the files under $dest, one a line
installed() { (cd "$dest" && find . -type f | sed 's|^\./||' | sort); }

# --- the man pages ---------------------------------------------------------------------------
for page in docs/man/sluice.1 docs/man/sluice.yaml.5; do
  warnings=$(groff -man -ww -z -Tutf8 "$page" 2>&1) || fail "groff failed on $page"
  [ -z "$warnings" ] || fail "$page: $warnings"
  # the NAME and SYNOPSIS sections, as man and whatis read them
  grep -q '^\.SH NAME$' "$page" && grep -q '^\.SH SYNOPSIS$' "$page" ||
    fail "$page: no NAME or SYNOPSIS"
done
version=$("$SLUICE" --version)
for page in docs/man/sluice.1 docs/man/sluice.yaml.5; do
  grep -q "^\.TH .* \"$version\" " "$page" || fail "$page is not for $version"
done
pass "man pages render without warnings, for $version"

# --- --help and sluice(1) agree --------------------------------------------------------------
help=$("$SLUICE" --help) || fail "--help exits $?"
help_options=$(grep -o -- '--[a-z]*' <<<"$help" | sort -u)
man_options=$(grep -o -- '\\-\\-[a-z]*' docs/man/sluice.1 | sed 's/\\//g' | sort -u)
[ "$help_options" = "$man_options" ] ||
  fail "options differ: --help: $(echo $help_options); sluice(1): $(echo $man_options)"
help_codes=$(sed -n '/^Exit codes:/,$p' <<<"$help" | grep -oE '^  [0-9]+ ' | tr -d ' ' | sort)
man_codes=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' docs/man/sluice.1 | grep -oE '^\.B [0-9]+$' |
  cut -c4- | sort)
[ -n "$help_codes" ] && [ "$help_codes" = "$man_codes" ] ||
  fail "exit codes differ: --help: $(echo $help_codes); sluice(1): $(echo $man_codes)"
"$SLUICE" >/dev/null 2>&1 && fail "no arguments accepted"
[ "$("$SLUICE" >/dev/null 2>&1; echo $?)" = 2 ] || fail "wrong usage does not exit 2"
pass "--help and sluice(1) list the same options ($(echo $help_options)) and exit codes"

# --- make install ----------------------------------------------------------------------------
files="etc/sluice/sluice.yaml usr/local/bin/sluice usr/local/lib/systemd/system/sluice.service
usr/local/lib/sysusers.d/sluice.conf usr/local/share/doc/sluice/sluice.yaml usr/local/share/man/man1/sluice.1
usr/local/share/man/man5/sluice.yaml.5"
$MAKE -s --no-print-directory install DESTDIR="$dest" >/dev/null
[ "$(installed)" = "$(tr -s ' \n' '\n' <<<"$files" | sort)" ] ||
  fail "make install put: $(installed)"
[ "$(stat -c %a "$dest/usr/local/bin/sluice")" = 755 ] || fail "the binary is not 755"
[ "$(stat -c %a "$dest/etc/sluice/sluice.yaml")" = 640 ] || fail "the config is not 640"
"$dest/usr/local/bin/sluice" --version | grep -q '^sluice ' ||
  fail "the installed binary does not run"
"$dest/usr/local/bin/sluice" --check -c "$dest/etc/sluice/sluice.yaml" >/dev/null 2>&1 ||
  fail "the installed config does not pass --check"
grep -qx 'ExecStart=/usr/local/bin/sluice -c /etc/sluice/sluice.yaml' \
  "$dest/usr/local/lib/systemd/system/sluice.service" || fail "the unit's ExecStart"
MANWIDTH=80 MANPATH="$dest/usr/local/share/man" man sluice.yaml 2>&1 | grep -q 'SLUICE.YAML(5)' ||
  fail "man does not find the installed sluice.yaml(5)"
pass "make install DESTDIR=... puts the binary, the man pages, the unit and the config"

# --- the unit --------------------------------------------------------------------------------
# verify needs the Exec lines' binary to exist: a copy of the unit naming the installed one, with
# the installed man pages on MANPATH for its Documentation= lines.
unit="$dest/unit/sluice.service"
mkdir -p "$dest/unit"
sed "s|^\(Exec[A-Za-z]*=\)/usr/local|\1$dest/usr/local|" \
  "$dest/usr/local/lib/systemd/system/sluice.service" >"$unit"
grep -q "^ExecStart=$dest/usr/local/bin/sluice " "$unit" || fail "no ExecStart to rewrite"
out=$(MANPATH="$dest/usr/local/share/man" systemd-analyze verify "$unit" 2>&1) ||
  fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
for line in Type=exec KillSignal=SIGTERM User=sluice Group=sluice UMask=0027 \
    ProtectSystem=strict ProtectHome=yes PrivateTmp=yes NoNewPrivileges=yes \
    CapabilityBoundingSet=CAP_NET_BIND_SERVICE AmbientCapabilities=CAP_NET_BIND_SERVICE \
    LimitNOFILE=65536; do
  grep -qxF "$line" "$unit" || fail "the unit lacks $line"
done
grep -q '^DynamicUser=' "$unit" && fail "the unit still makes up a user"
# A reload checks the file first, then signals; a start checks it before it runs.
reloads=$(sed -n 's/^ExecReload=//p' "$unit")
[ "$reloads" = "$dest/usr/local/bin/sluice --check -c /etc/sluice/sluice.yaml
/bin/kill -HUP \$MAINPID" ] || fail "ExecReload is not --check, then SIGHUP: $reloads"
check=$(sed -n 's/^ExecStartPre=//p' "$unit")
[ "$check" = "$dest/usr/local/bin/sluice --check -c /etc/sluice/sluice.yaml" ] ||
  fail "ExecStartPre is not sluice --check: $check"
# That command, on the installed config and on a broken one: 0 with "OK", 1 with the problem
# at its FILE:LINE:COL, which is what systemctl status and the journal then show.
${check%/etc/sluice/sluice.yaml}"$dest/etc/sluice/sluice.yaml" | grep -q ': OK, [0-9]* routes$' ||
  fail "the unit's check refuses the installed config"
printf 'routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: backend\n' \
  >"$dest/broken.yaml"
set +e
out=$(${check%/etc/sluice/sluice.yaml}"$dest/broken.yaml" 2>&1)
code=$?
set -e
[ "$code" = 1 ] && grep -q "^$dest/broken.yaml:4:15: upstream: \"backend\" is not one of" <<<"$out" ||
  fail "the unit's check on a broken config: exit $code: $out"
rm "$dest/broken.yaml"
# SIGTERM drains for server.drain_timeout (10 s by default): systemd must wait longer.
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$unit")
[ -n "$stop" ] && [ "$stop" -gt 10 ] || fail "TimeoutStopSec is not above the 10 s drain_timeout"
rm -rf "$dest/unit"
# The sysusers.d file makes the user the unit runs as (in a root of its own).
users=$(mktemp -d /tmp/sluice-users.XXXXXX)
mkdir "$users/etc"
systemd-sysusers --root="$users" "$dest/usr/local/lib/sysusers.d/sluice.conf" >/dev/null ||
  fail "systemd-sysusers refuses sluice.conf"
grep -q '^sluice:x:[0-9]*:[0-9]*:sluice HTTP gateway:' "$users/etc/passwd" &&
  grep -q '^sluice:x:' "$users/etc/group" || fail "systemd-sysusers made no user and group sluice"
rm -rf "$users"
pass "systemd-analyze verify accepts the unit; it checks the config first; sysusers.d makes its user"

# --- a changed config survives install and uninstall -----------------------------------------
echo "# changed" >>"$dest/etc/sluice/sluice.yaml"
$MAKE -s --no-print-directory install DESTDIR="$dest" >/dev/null
tail -1 "$dest/etc/sluice/sluice.yaml" | grep -qx '# changed' ||
  fail "install replaced a changed config"
$MAKE -s --no-print-directory uninstall DESTDIR="$dest" >/dev/null
[ "$(installed)" = etc/sluice/sluice.yaml ] ||
  fail "after uninstall, with a changed config: $(installed)"
rm "$dest/etc/sluice/sluice.yaml"
pass "install keeps a changed config; uninstall removes all but it"

# --- PREFIX ----------------------------------------------------------------------------------
$MAKE -s --no-print-directory install DESTDIR="$dest" PREFIX=/opt/sluice >/dev/null
[ -x "$dest/opt/sluice/bin/sluice" ] || fail "PREFIX=/opt/sluice: no opt/sluice/bin/sluice"
grep -qx 'ExecStart=/opt/sluice/bin/sluice -c /etc/sluice/sluice.yaml' \
  "$dest/opt/sluice/lib/systemd/system/sluice.service" ||
  fail "PREFIX=/opt/sluice: the unit's ExecStart"
grep -q '/opt/sluice/share/doc/sluice/sluice.yaml' "$dest/opt/sluice/share/man/man1/sluice.1" ||
  fail "PREFIX=/opt/sluice: sluice(1)'s FILES"
$MAKE -s --no-print-directory uninstall DESTDIR="$dest" PREFIX=/opt/sluice >/dev/null
[ -z "$(installed)" ] || fail "uninstall left: $(installed)"
[ ! -e "$dest/etc/sluice" ] && [ ! -e "$dest/opt/sluice/share/doc/sluice" ] ||
  fail "uninstall left its directories"
pass "PREFIX=/opt/sluice installs there; uninstall removes every file"

# --- make test's summary ---------------------------------------------------------------------
# tests/run-tests.sh in a tree of its own, whose steps print what the real ones print: its
# table adds each step's figures up, a failed step is shown with its failures, and the last
# line is "N passed, M failed", with exit status 1.
tree=$(mktemp -d /tmp/sluice-runner.XXXXXX)
mkdir -p "$tree/tests" "$tree/build/asan" "$tree/build/tsan"
cp tests/run-tests.sh "$tree/tests/"
unit_summary() { # PASSED FAILED EXIT
  printf '#!/bin/sh\n'
  printf 'echo "Run Summary:    Type  Total    Ran Passed Failed Inactive"\n'
  printf 'echo "               tests %6d %6d %6d %6d        0"\n' $(($1 + $2)) $(($1 + $2)) "$1" "$2"
  [ "$2" = 0 ] || printf 'echo "    1. tests/x.c:7  - CU_ASSERT(planted)"\n'
  printf 'exit %d\n' "$3"
}
unit_summary 9 1 1 >"$tree/build/test_unit"
unit_summary 10 0 0 >"$tree/build/asan/test_unit"
unit_summary 3 0 0 >"$tree/build/tsan/test_unit"
printf '#!/bin/sh\necho "packaging-test: 6 passed, 0 failed"\n' >"$tree/tests/packaging-test.sh"
printf '#!/bin/sh\nfor run in thread event; do echo "build/integration-$run.log: integration: 5 %s"; done\n' \
  'tests run: 5 passed, 0 failed, 0 skipped; 9 asserts, 0 failed' >"$tree/tests/run-integration.sh"
printf '#!/bin/sh\necho "  FUZZ config for 5 s"\necho "  FUZZ keys for 5 s"\n' >"$tree/make"
chmod +x "$tree/build/test_unit" "$tree/build/asan/test_unit" "$tree/build/tsan/test_unit" \
  "$tree/tests/packaging-test.sh" "$tree/tests/run-integration.sh" "$tree/make"
set +e
out=$(MAKE="$tree/make" "$tree/tests/run-tests.sh" 2>&1)
code=$?
set -e
rm -rf "$tree"
[ "$code" = 1 ] || fail "run-tests.sh exited $code with a failed step"
[ "$(tail -1 <<<"$out")" = "40 passed, 1 failed" ] ||
  fail "run-tests.sh's last line: $(tail -1 <<<"$out")"
grep -qE '^  unit +FAILED +9 passed +1 failed' <<<"$out" &&
  grep -qF 'CU_ASSERT(planted)' <<<"$out" &&
  grep -qE '^integration +10 +0 ' <<<"$out" && grep -qE '^fuzz +2 +0 ' <<<"$out" ||
  fail "run-tests.sh's steps and table: $out"
pass "make test's runner adds up its steps and ends on \"N passed, M failed\""

echo "packaging-test: $passed passed, 0 failed"
