# sluice: make | make test | make layering | make run | make bench | make install | make deps |
#         make deps-test
# Everything is built under build/; `make test` and `make run` install missing Debian packages:
# building sluice needs only the compiler and the libraries it links (BUILD_DEBS); the tests'
# tools (TEST_DEBS) are installed by the targets that run tests, never by `make` or `make run`.

CC       ?= cc
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Werror -pthread -fno-strict-aliasing
# Every folder of gateway/modules is a module of the request pipeline (gateway/modules.c).
GATEWAY_DIRS := gateway/common gateway/identity gateway/routing gateway/store gateway/upstream \
                gateway/limits gateway/ops gateway/core $(wildcard gateway/modules/*) gateway/front
# An include names the header's path from the top of the tree ("gateway/common/text.h"): the
# top is the one place "..." includes are looked up, and <...> ones never look there.
CPPFLAGS += -D_GNU_SOURCE -iquote .
ASAN     := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN     := -O1 -fsanitize=thread

# pkg-config names and the Debian packages that provide them: what building sluice needs, then
# what only the tests need (test libraries, clang for the fuzzers, valgrind, the real peers the
# integration suites start, and the checkers of tests/packaging-test.sh).
PKGS       := libmicrohttpd libcurl yaml-0.1 libsodium hiredis gnutls
BUILD_DEBS := gcc libc6-dev pkg-config libmicrohttpd-dev libcurl4-openssl-dev libyaml-dev \
              libsodium-dev libhiredis-dev libgnutls28-dev
TEST_PKGS  := cunit json-c
TEST_DEBS  := libcunit1-dev libjson-c-dev openssl redis-server haproxy clang libclang-rt-14-dev \
              valgrind python3-websockets python3-yaml python3-jsonschema systemd procps \
              groff-base man-db
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Expanded when a recipe runs, after the dependency check has installed what was missing.
LIMITER_LIBS = $(shell pkg-config --libs libsodium)
GATEWAY_LIBS = $(shell pkg-config --libs libmicrohttpd libcurl yaml-0.1 libsodium hiredis gnutls)
TEST_LIBS    = $(shell pkg-config --libs cunit) $(GATEWAY_LIBS)

LIMITER_SRC := $(wildcard limiter/*.c)
CONFIG_SRC  := $(wildcard config/*.c)
GATEWAY_SRC := $(wildcard $(addsuffix /*.c,$(GATEWAY_DIRS))) gateway/modules.c
SLUICE_SRC  := $(LIMITER_SRC) $(CONFIG_SRC) $(GATEWAY_SRC) gateway/main.c
UNIT_SRC    := $(LIMITER_SRC) $(CONFIG_SRC) $(GATEWAY_SRC) \
               $(wildcard tests/limiter/*.c tests/config/*.c tests/gateway/*.c) tests/unit_main.c \
               tests/suites.c
INTEG_SRC   := $(wildcard tests/integration/*.c) tests/suites.c
BENCH_SRC   := $(LIMITER_SRC) tests/bench/limiter_bench.c

# libFuzzer targets (clang), each over the code it names, with ASan and UBSan.
FUZZ_TARGETS := config units keys headers head proxy_header traceparent
FUZZ_SRC     := $(LIMITER_SRC) $(CONFIG_SRC) gateway/identity/keys.c gateway/common/headers.c \
                gateway/routing/routes.c gateway/front/head.c gateway/common/target.c \
                gateway/front/proxy_header.c gateway/common/trace.c \
                gateway/common/random.c gateway/common/text.c \
                $(wildcard gateway/modules/*/*_options.c)
FUZZ_FLAGS   := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60
# per target within make test; make fuzz alone runs FUZZ_SECONDS
TEST_FUZZ_SECONDS ?= 5

# gateway/front/wire.c defines recv(), gnutls_record_recv() and shutdown() for libmicrohttpd
# (and GnuTLS) to call: the binary must export them.
EXPORT_RECV := -Wl,--export-dynamic-symbol=recv -Wl,--export-dynamic-symbol=gnutls_record_recv \
               -Wl,--export-dynamic-symbol=shutdown

objs = $(patsubst %.c,$(1)/%.o,$(2))

.PHONY: all test test-topologies layering run bench deps deps-test install uninstall clean format container-test \
        fuzz fuzz-regressions
.SECONDARY:
# `make` builds the gateway and the demo upstream (`make run`'s); the tests' binaries are built
# by `make test`, which installs their tools.
all: build/sluice build/test_upstream

# Each stamp is made once the check passes, installing what is missing first; a change to the
# lists above (this Makefile) checks again.
build/.deps-ok: Makefile
	@(command -v $(CC) && pkg-config --exists $(PKGS)) >/dev/null 2>&1 || \
		$(MAKE) --no-print-directory deps
	@mkdir -p build && touch $@
build/.deps-test-ok: Makefile | build/.deps-ok
	@(pkg-config --exists $(TEST_PKGS) && command -v openssl && command -v redis-server && \
		test -x /usr/sbin/haproxy && command -v clang && command -v valgrind && \
		command -v systemd-analyze && test -x /bin/kill && command -v groff && command -v man && \
		/usr/bin/python3 -c 'import websockets, yaml, jsonschema') >/dev/null 2>&1 || \
		$(MAKE) --no-print-directory deps-test
	@mkdir -p build && touch $@

# deps: what building sluice needs (no recommended extras: a build needs none);
# deps-test: that and what the tests need.
deps:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		$(BUILD_DEBS)
deps-test:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(BUILD_DEBS) $(TEST_DEBS)

build/obj/%.o: %.c | build/.deps-ok
	@mkdir -p $(@D)
	@echo "  CC  $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
build/asan/%.o: %.c | build/.deps-ok
	@mkdir -p $(@D)
	@echo "  CC  $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN) -MMD -MP -c $< -o $@
build/fuzz/%.o: %.c | build/.deps-test-ok
	@mkdir -p $(@D)
	@echo "  CC  $@"
	@clang $(CPPFLAGS) -std=c11 -Wall -Wextra -Werror -pthread $(FUZZ_FLAGS) \
		-fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
build/tsan/%.o: %.c | build/.deps-ok
	@mkdir -p $(@D)
	@echo "  CC  $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(TSAN) -MMD -MP -c $< -o $@

# The test suites' sources need the test libraries (CUnit, json-c).
TEST_SRC := $(filter tests/%,$(UNIT_SRC) $(INTEG_SRC))
$(foreach dir,build/obj build/asan build/tsan,$(call objs,$(dir),$(TEST_SRC))): \
	| build/.deps-test-ok

build/sluice: $(call objs,build/obj,$(SLUICE_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $^ $(GATEWAY_LIBS) $(EXPORT_RECV) -o $@
build/asan/sluice: $(call objs,build/asan,$(SLUICE_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(ASAN) $^ $(GATEWAY_LIBS) $(EXPORT_RECV) -o $@
build/test_upstream: $(call objs,build/obj,tests/upstream/upstream.c)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $^ $(shell pkg-config --libs libsodium) -o $@
build/test_unit: $(call objs,build/obj,$(UNIT_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $^ $(TEST_LIBS) $(EXPORT_RECV) -o $@
build/asan/test_unit: $(call objs,build/asan,$(UNIT_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(ASAN) $^ $(TEST_LIBS) $(EXPORT_RECV) -o $@
build/tsan/test_unit: $(call objs,build/tsan,$(UNIT_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(TSAN) $^ $(TEST_LIBS) $(EXPORT_RECV) -o $@
build/test_integration: $(call objs,build/obj,$(INTEG_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $^ $(TEST_LIBS) $(shell pkg-config --libs json-c) -o $@
build/fuzz/fuzz_%: build/fuzz/tests/fuzz/fuzz_%.o $(call objs,build/fuzz,$(FUZZ_SRC))
	@echo "  LD  $@"
	@clang $(FUZZ_FLAGS) -fsanitize=fuzzer $^ $(GATEWAY_LIBS) -o $@
build/limiter_bench: $(call objs,build/obj,$(BENCH_SRC))
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $^ $(LIMITER_LIBS) -o $@

# First (it needs nothing built), that no include runs upward or across the layers and each
# library is named only in its own folders (tests/layering-check.sh states the rule). Then the
# unit suites plain; the man pages, --help, make install/uninstall and the systemd unit
# (tests/packaging-test.sh); the unit suites under ASan+UBSan, and the concurrency suites under
# TSan; then the integration suites against build/sluice (one of them under valgrind's
# memcheck), and again against an ASan+UBSan build of it, in thread_per_connection and again in
# event mode (the harness adds server.mode to each config: tests/integration/harness.h); then
# each fuzz target briefly, and its regressions. Any sanitizer or memcheck report fails its run
# (the integration suites check that sluice exits 0). tests/run-tests.sh runs them, each
# step's output in build/test-logs/, and ends on a table and "N passed, M failed".
test: layering build/.deps-test-ok build/test_unit build/asan/test_unit build/tsan/test_unit \
      build/sluice build/asan/sluice \
      build/test_upstream build/test_integration $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS))
	@MAKE="$(MAKE)" TEST_FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) tests/run-tests.sh

# The integration suites of Redis's topologies (Sentinel: a master, a replica and three
# sentinels on loopback), in both serving modes; slow to set up, so apart from `make test`.
test-topologies: build/.deps-test-ok build/sluice build/test_upstream build/test_integration
	SLUICE_IT_TOPOLOGIES=1 build/test_integration sentinel
	SLUICE_IT_TOPOLOGIES=1 SLUICE_MODE=event SLUICE_WORKERS=2 build/test_integration sentinel

layering:
	tests/layering-check.sh

# A demo upstream and the gateway in front of it, with config/sluice.yaml.
run: build/sluice build/test_upstream
	tests/run-demo.sh

# Each fuzz target for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/), keeping what
# it learns in build/fuzz/corpus/. A crash stops the run and is saved as build/fuzz/crash-*.
fuzz: $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS)) fuzz-regressions
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p build/fuzz/corpus/$$t; \
		echo "  FUZZ $$t for $(FUZZ_SECONDS) s"; \
		build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 \
			-artifact_prefix=build/fuzz/ -print_final_stats=1 \
			build/fuzz/corpus/$$t tests/fuzz/corpus/$$t 2>build/fuzz/$$t.log || \
			{ tail -40 build/fuzz/$$t.log; exit 1; }; \
		grep -E 'stat::number_of_executed_units' build/fuzz/$$t.log; \
	done

# Every input that once crashed or slowed a target (tests/fuzz/regressions/TARGET/), run once
# within the limits make fuzz sets. Each target has a folder; one with nothing kept holds only
# a README.md that says so, and the run says so too. A target without either fails the run.
fuzz-regressions: $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
		dir=tests/fuzz/regressions/$$t; \
		set -- $$(find $$dir -type f ! -name README.md 2>/dev/null | sort); \
		if [ $$# -eq 0 ] && [ -f $$dir/README.md ]; then \
			echo "  FUZZ-REGRESSIONS $$t: none kept, no input has crashed or slowed it ($$dir/README.md)"; \
			continue; \
		fi; \
		[ $$# -gt 0 ] || { echo "fuzz-regressions: $$dir has no inputs and no README.md saying why"; exit 1; }; \
		echo "  FUZZ-REGRESSIONS $$t: $$# input(s)"; \
		build/fuzz/fuzz_$$t -timeout=10 -rss_limit_mb=1024 "$$@" >build/fuzz/$$t-regressions.log 2>&1 || \
			{ tail -40 build/fuzz/$$t-regressions.log; exit 1; }; \
	done

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, the man pages sluice(1) and
# sluice.yaml(5), the example config (as documentation, and as $(SYSCONFDIR)/sluice/sluice.yaml
# unless that file exists, mode 640) and the systemd unit with its sysusers.d file, with
# /usr/local and /etc in the unit and the man pages replaced by PREFIX and SYSCONFDIR. Without
# DESTDIR it also creates the user sluice (systemd-sysusers) and gives its group the config.
# make uninstall removes the files, and the config only while it is unchanged (the user
# stays, as packages leave theirs). Both are checked by tests/packaging-test.sh.
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
BINDIR     := $(PREFIX)/bin
MANDIR     := $(PREFIX)/share/man
DOCDIR     := $(PREFIX)/share/doc/sluice
UNITDIR    := $(PREFIX)/lib/systemd/system
USERSDIR   := $(PREFIX)/lib/sysusers.d
CONFFILE   := $(SYSCONFDIR)/sluice/sluice.yaml
PATHS_SED  := sed -e 's|/usr/local|$(PREFIX)|g' -e 's|/etc/sluice|$(SYSCONFDIR)/sluice|g'

install: build/sluice
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(USERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/sluice
	install -m 755 build/sluice $(DESTDIR)$(BINDIR)/sluice
	$(PATHS_SED) docs/man/sluice.1 >$(DESTDIR)$(MANDIR)/man1/sluice.1
	$(PATHS_SED) docs/man/sluice.yaml.5 >$(DESTDIR)$(MANDIR)/man5/sluice.yaml.5
	$(PATHS_SED) packaging/sluice.service >$(DESTDIR)$(UNITDIR)/sluice.service
	chmod 644 $(DESTDIR)$(MANDIR)/man1/sluice.1 $(DESTDIR)$(MANDIR)/man5/sluice.yaml.5 \
		$(DESTDIR)$(UNITDIR)/sluice.service
	install -m 644 packaging/sluice.sysusers $(DESTDIR)$(USERSDIR)/sluice.conf
	install -m 644 config/sluice.yaml $(DESTDIR)$(DOCDIR)/sluice.yaml
	if [ -z "$(DESTDIR)" ]; then \
		if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(USERSDIR)/sluice.conf; \
		else echo "make install: no systemd-sysusers: create the user sluice, and give its" \
			"group $(CONFFILE), before starting sluice.service" >&2; fi; fi
	test -e $(DESTDIR)$(CONFFILE) || { install -m 640 config/sluice.yaml $(DESTDIR)$(CONFFILE) && \
		if [ -z "$(DESTDIR)" ] && getent group sluice >/dev/null; then \
		chgrp sluice $(CONFFILE); fi; }

uninstall:
	if cmp -s $(DESTDIR)$(DOCDIR)/sluice.yaml $(DESTDIR)$(CONFFILE); then \
		rm -f $(DESTDIR)$(CONFFILE); rmdir $(DESTDIR)$(SYSCONFDIR)/sluice 2>/dev/null || :; \
	fi
	rm -f $(DESTDIR)$(BINDIR)/sluice $(DESTDIR)$(MANDIR)/man1/sluice.1 \
		$(DESTDIR)$(MANDIR)/man5/sluice.yaml.5 $(DESTDIR)$(UNITDIR)/sluice.service \
		$(DESTDIR)$(USERSDIR)/sluice.conf $(DESTDIR)$(DOCDIR)/sluice.yaml
	rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || :

# The container image, built and checked with podman (see tests/container-test.sh).
container-test:
	tests/container-test.sh

# The limiter on its own, then sluice against nginx side by side (tests/bench/compare.sh).
bench: build/limiter_bench build/sluice build/test_upstream
	build/limiter_bench
	tests/bench/compare.sh
	tests/bench/consumers.sh
	tests/bench/limits.sh
	tests/bench/refusals.sh
	tests/bench/redis_tls.sh
	tests/bench/servers.sh
	tests/bench/uploads.sh
	tests/bench/simulate.sh
	tests/bench/park.sh

format:
	clang-format -i $(sort $(SLUICE_SRC) $(UNIT_SRC) $(INTEG_SRC) $(BENCH_SRC) \
		$(wildcard */*.h gateway/*/*.h tests/*/*.h) tests/upstream/upstream.c)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
