/*
 * Integration harness: starts the real sluice ($SLUICE, default build/sluice) and
 * build/test_upstream on loopback ports
 * they pick themselves (port 0, read back from their "listening on" line), and talks to them
 * with libcurl.
 *
 * Serving modes: every config the harness writes for sluice (start_sluice(),
 * start_sluice_under_valgrind(), rewrite_config()) runs in the mode named by $SLUICE_MODE
 * (thread_per_connection or event) and, with $SLUICE_WORKERS, on that many event loops: the
 * text is formatted, then `mode:` and `workers:` are added to its `server` mapping (see
 * with_serving_mode()), so one suite covers both modes unchanged. A config that names its own
 * mode or workers keeps them.
 */
#ifndef SLUICE_TESTS_HARNESS_H
#define SLUICE_TESTS_HARNESS_H

#include "tests/suites.h"
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct proc {
    pid_t pid;
    unsigned port;
    unsigned admin_port;  /* 0 unless the config sets admin_listen */
    bool under_valgrind;  /* started by start_sluice_under_valgrind() */
    char log_path[80];    /* sluice's stderr */
    char access_path[80]; /* its stdout, where the access log goes by default */
    char config_path[64];
    bool env_mode; /* its configs get $SLUICE_MODE and $SLUICE_WORKERS (set by
                    * start_sluice() and its kin; rewrite_config() follows it) */
};

/* The shared test upstream, started by the suites' init. */
extern struct proc upstream;
int start_upstream(void);
void stop_upstream(void);

/* The binary under test: $SLUICE, or build/sluice. */
const char *sluice_binary(void);

/* $SLUICE_MODE and $SLUICE_WORKERS, or NULL when unset or empty. A value that is not a word
 * of lowercase letters and '_' (the mode) or a number (workers) ends the run (exit 2): it
 * would otherwise be pasted into every config. */
const char *serving_mode(void);
const char *serving_workers(void);

/* `yaml` (a whole config) with `mode: $SLUICE_MODE` and `workers: $SLUICE_WORKERS` added to
 * its `server` mapping, those that are set and that the mapping does not name already. A
 * block `server:` at column 0 gets lines after its last one, at its indentation; a flow
 * `server: {...}`, on one line or several, gets ", mode: ..." before its closing brace; a
 * config without `server` gets the section appended. So an error a test expects at
 * LINE:COL stays there, unless it is below a block server mapping (one or two lines down).
 * A config of another shape (server a scalar or a list, brackets or quotes that do not
 * close, several documents) is returned unchanged, with a note on stderr, so that a
 * deliberately broken config keeps its own error. Returns a copy the caller frees. */
char *with_serving_mode(const char *yaml);

/* Writes `yaml` (a printf format; "%1$u" is the upstream's port) to a file and starts
 * sluice on it, in the serving mode above. 0, or -1 if it did not come up (its log is
 * printed). Asked in the last 30 s of an hour, it waits past the hour first: the fixed
 * windows of an hour that many tests count in all reset there. */
int start_sluice(struct proc *p, const char *yaml, ...);

/* Starts sluice on the file at `path` as it stands, written by the caller (through
 * with_serving_mode(), for the serving mode), maybe reached through symlinks as a Kubernetes
 * ConfigMap mounts it; its logs go beside it, at PATH.log and PATH.access. rewrite_config() is
 * not for it. 0, or -1 as start_sluice(). */
int start_sluice_on(struct proc *p, const char *path);

/* The same as start_sluice(), under valgrind's memcheck: its findings make the exit code 99. */
int start_sluice_under_valgrind(struct proc *p, const char *yaml, ...);

/* As start_sluice(), sluice seeing the file `resolv_conf` as /etc/resolv.conf (in a mount
 * namespace of its own: root and unshare(1) are needed; -1 without them). */
int start_sluice_resolving(struct proc *p, const char *resolv_conf, const char *yaml, ...);

/* The same, for a test that measures sluice's memory: a sanitizer build (sluice_sanitized())
 * is run without ASan's quarantine, which by default keeps up to 256 MiB of freed memory
 * aside, so that what it holds is what sluice holds plus the runtime's own share. */
int start_sluice_measured(struct proc *p, const char *yaml, ...);

/* Replaces the config file the way an editor does (a new file renamed over it) or, with
 * `in_place`, by rewriting it. Same format as start_sluice(); given the serving mode when
 * `p` was started by start_sluice() or its kin (p->env_mode), so that a reload never
 * asks for another mode than the one running. */
void rewrite_config(struct proc *p, bool in_place, const char *yaml, ...);

/* Waits up to `timeout_ms` for the log to hold `text` `count` times or more. */
bool wait_for_log(const struct proc *p, const char *text, int count, int timeout_ms);

/* The value of the /metrics sample that starts with `series` (name and labels), or -1, once
 * no request is in flight (waiting up to 2 s): a request is counted when its answer has been
 * sent, which its client may see first. metric_now() reads it at once. */
double metric(const struct proc *p, const char *series);
double metric_now(const struct proc *p, const char *series);

/* SIGTERM, then waits up to `wait_ms` (three times as long for a sanitizer build); returns the
 * exit status, or -1 (then it is killed).
 * Its config, log and access log are removed, unless $SLUICE_IT_KEEP is set (not empty). */
int stop_sluice(struct proc *p, int wait_ms);

/* The first line of `p`'s access log for a request whose path is `path` (its "path" field),
 * waited for up to 2 s: lines are written after the answer, by another thread. NULL when
 * none came; the caller frees it. */
char *access_log_line(const struct proc *p, const char *path);

/* Waits up to 3 s for `p`'s access log to hold `want` lines (its writer thread writes on its
 * own time); how many it holds. */
int wait_for_access_lines(const struct proc *p, int want);

/* The whole of a file (sluice's log, its access log); the caller frees it. */
char *read_file(const char *path);
char *read_log(const struct proc *p);

/* How often `needle` occurs in `text` (NULL: none), and in `p`'s log so far. */
int occurrences(const char *text, const char *needle);
int log_count(const struct proc *p, const char *needle);

struct reply {
    long status;
    char *head; /* the response head, lines as received */
    char *body;
    size_t body_len;
    double seconds;
};

/* One request to 127.0.0.1:`port`. `headers` is NULL-terminated (or NULL); `body` may be
 * NULL. 0, or -1 on a transport error (status then 0). */
int http(unsigned port, const char *method, const char *target, const char *const *headers,
         const char *body, struct reply *out);
void reply_free(struct reply *r);

/* GET `target` with "X-API-Key: `api_key`" (none when NULL); the status, or 0. */
long get_status(unsigned port, const char *target, const char *api_key);

/* `n` (at most 256) requests for `target` at once, each on a connection of its own, spread
 * over `ports`, with `api_key` as get_status(); returns how many got 200, and in `*other` how
 * many got neither 200 nor 429. */
int race_requests(const unsigned *ports, int n_ports, int n, const char *target,
                  const char *api_key, int *other);

/* Runs sluice with `args` (a shell fragment) and waits; its exit code (-1 when killed), and
 * what it wrote to stdout and stderr in `out`. */
int run_sluice(const char *args, char *out, size_t cap);

/* Runs `command` (a shell command line) and waits, the same way: its exit code (-1 when
 * killed), and its stdout and stderr in `out` (cut to `cap` - 1 bytes). */
int run_command(const char *command, char *out, size_t cap);

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"), or -1. */
long proc_kib(pid_t pid, const char *field);

/* The process's thread count (Threads: in /proc/PID/status), or -1. */
long proc_threads(pid_t pid);

/* GET `target`, counting the body's bytes without keeping them; the status, or 0. */
long http_count(unsigned port, const char *target, unsigned long long *bytes);

/* A raw connection to 127.0.0.1:`port`; -1 when refused. */
int raw_connect(unsigned port);

/* Sends `len` bytes of `request` on a new connection and reads the answer until the server
 * closes, `cap` bytes, or `timeout_ms`; the status of the answer's first line, 0 when none
 * came. */
int raw_exchange(unsigned port, const char *request, size_t len, char *answer, size_t cap,
                 int timeout_ms);

/* The value of header `name` in `r` (a static copy), or NULL. */
const char *header(const struct reply *r, const char *name);

/* Counters of the test upstream: requests (but these looks) and connections since it
 * started. */
void upstream_stats(unsigned long *requests, unsigned long *connections);

/* The requests that reached the test upstream since `*mark`, which moves up to now (start it
 * at 0 and call once to begin). */
unsigned long upstream_reached(unsigned long *mark);

/* The most /slow requests the test upstream had in flight at once since the last call (which
 * starts afresh); ULONG_MAX when it could not be asked. */
unsigned long upstream_peak(void);

/* A CUnit assertion whose message names the case (`label`), so that a failure says which one
 * and what was seen (a printf format), at the caller's file and line. */
#define check_case(ok, label, ...) check_case_at(__FILE__, __LINE__, (ok), (label), __VA_ARGS__)
void check_case_at(const char *file, int line, bool ok, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Header `name` of `r` is `want` (expect_header) or holds `part` (expect_header_has): a
 * CUnit assertion at the caller's line that names the header and what came, and fails,
 * rather than crashing, when the header is missing. */
#define expect_header(r, name, want)                                                               \
    expect_header_at(__FILE__, __LINE__, (r), (name), (want), false)
#define expect_header_has(r, name, part)                                                           \
    expect_header_at(__FILE__, __LINE__, (r), (name), (part), true)
void expect_header_at(const char *file, int line, const struct reply *r, const char *name,
                      const char *text, bool part);

/* Header `name` of `r` as a whole number of decimal digits (Retry-After, Content-Length), or
 * -1 when it is missing or is not one. */
long header_number(const struct reply *r, const char *name);

/* For a test that cannot check what it is for, here: prints "SKIPPED: `why`" in place of
 * "passed" and records the running test as skipped, counted apart from those that passed
 * (main.c). The test then returns without asserting. A reason the test could remove (a slow
 * machine, a path spelled another way) is not one: make the test check instead. */
void skip_test(const char *why);

/* Why `test` was skipped (skip_test()), or NULL when it was not. */
const char *skip_reason(CU_pTest test);

/* Whether the binary under test carries a sanitizer that owns its memory and threads (ASan,
 * TSan or MSan, statically or as a shared runtime): its file names the runtime's entry point.
 * Read from the file itself, so any spelling of its path ($SLUICE) gives the same answer. */
bool sluice_sanitized(void);

void sleep_ms(int ms);

/* CLOCK_MONOTONIC in seconds. */
double seconds_now(void);

/* A loopback port that was free a moment ago. */
unsigned free_port(void);
/* The path of a scratch file `name` of this test process's, /tmp/sluice-it-PID-NAME, into
 * `out`: runs side by side (make test runs two) never share one. Returns `out`. */
const char *scratch_path(char *out, size_t cap, const char *name);
/* A self-signed certificate for 127.0.0.1 (RSA, a day) made with openssl: its key and
 * certificate at scratch paths NAME-key.pem and NAME-cert.pem, given back in `key` and
 * `cert` (64 bytes each); the caller removes them. 0, or -1 when openssl failed. */
int make_self_signed(const char *name, char key[64], char cert[64]);

/* HAProxy (/usr/sbin/haproxy, in the foreground) on `config`, a whole haproxy.cfg text, once
 * each of the `n` loopback `ports` its frontends bind accepts connections; its pid, or -1.
 * stop_haproxy() ends it and removes its config. */
struct haproxy {
    pid_t pid;
    char config_path[64];
};
int start_haproxy(struct haproxy *h, const char *config, const unsigned *ports, size_t n);
void stop_haproxy(struct haproxy *h);

/* A TLS client of the listener on 127.0.0.1:`port` (GnuTLS): the socket connected and the
 * handshake done, with server name `sni` (NULL: none) and no certificate check (the server's
 * reading is under test, not its certificate), within `timeout_ms`. 0, or -1 (what was made so
 * far is in `c`); tls_client_close() frees it either way. */
struct tls_client {
    int fd;
    gnutls_session_t session;
    gnutls_certificate_credentials_t creds;
};
int tls_client_open(struct tls_client *c, unsigned port, const char *sni, int timeout_ms);
void tls_client_close(struct tls_client *c);

/* A real redis-server without persistence, on a free loopback port, or on r->port again
 * when it was started before; 0, or -1. */
struct redis {
    pid_t pid;
    unsigned port;
    const char *password; /* requirepass, or NULL */
};
int start_redis(struct redis *r);
void stop_redis(struct redis *r);

/* The Redis of a suite that needs one (add_suite_with(NAME, redis_suite_init,
 * redis_suite_clean)): started before its tests, stopped after them. */
extern struct redis suite_redis;
int redis_suite_init(void);
int redis_suite_clean(void);

/* Runs redis-cli against `r` with `args` (a shell fragment) in the background. */
void redis_cli(const struct redis *r, const char *args);

/* The same, waiting for it: 0 when it succeeded. */
int redis_cli_wait(const struct redis *r, const char *args);

/* The line of redis-cli's answer to `args` that starts with `field:` (an INFO field, say), as
 * a number; -1 when there is none. */
long redis_number(const struct redis *r, const char *args, const char *field);

/* The WebSocket echo server of ws_peer.py (Debian's python3-websockets) on a port it picks
 * (p->port); with `cert` and `key`, speaking TLS. 0, or -1 (it did not start). Stopped (killed)
 * by stop_ws_server(). */
int start_ws_server(struct proc *p, const char *cert, const char *key);
void stop_ws_server(struct proc *p);

void register_proxy_tests(void);
void register_deploy_tests(void);
void register_limits_tests(void);
void register_cli_tests(void);
void register_docs_tests(void);
void register_upstreams_tests(void);
void register_shared_upstreams_tests(void);
void register_count_tests(void);
void register_concurrency_it_tests(void);
void register_shared_limits_tests(void);
void register_refusals_it_tests(void);
void register_delay_tests(void);
void register_reload_tests(void);
void register_observe_tests(void);
void register_store_tests(void);
void register_store_faults_tests(void);
void register_hostile_tests(void);
void register_valgrind_tests(void);
void register_edge_tests(void);
void register_pressure_tests(void);
void register_upstream_edge_tests(void);
void register_modes_tests(void);
void register_consumers_tests(void);
void register_answers_tests(void);
void register_costs_tests(void);
void register_backends_tests(void);
void register_streams_tests(void);
void register_tunnels_tests(void);
void register_proxy_protocol_tests(void);
void register_park_tests(void);
void register_simulate_tests(void);
void register_trace_tests(void);
void register_logs_tests(void);
void register_tls_tests(void);
void register_tls_tunnels_tests(void);
void register_quota_tests(void);
void register_quota_cli_tests(void);
void register_quota_faults_tests(void);
void register_admin_api_tests(void);
void register_replicas_tests(void);
void register_sentinel_tests(void);

#endif
