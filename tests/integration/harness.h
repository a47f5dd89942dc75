/*
 * Integration harness: starts the real sluice ($SLUICE, default build/sluice) and
 * build/test_upstream on loopback ports
 * they pick themselves (port 0, read back from their "listening on" line), and talks to them
 * with libcurl.
 */
#ifndef SLUICE_TESTS_HARNESS_H
#define SLUICE_TESTS_HARNESS_H

#include "../suites.h"
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
};

/* The shared test upstream, started by the suites' init. */
extern struct proc upstream;
int start_upstream(void);
void stop_upstream(void);

/* The binary under test: $SLUICE, or build/sluice. */
const char *sluice_binary(void);

/* Writes `yaml` (a printf format; "%1$u" is the upstream's port) to a file and starts
 * sluice on it. 0, or -1 if it did not come up (its log is printed). */
int start_sluice(struct proc *p, const char *yaml, ...);

/* The same, under valgrind's memcheck: its findings make the exit code 99. */
int start_sluice_under_valgrind(struct proc *p, const char *yaml, ...);

/* Replaces the config file the way an editor does (a new file renamed over it) or, with
 * `in_place`, by rewriting it. Same format as start_sluice(). */
void rewrite_config(struct proc *p, bool in_place, const char *yaml, ...);

/* Waits up to `timeout_ms` for the log to hold `text` `count` times or more. */
bool wait_for_log(const struct proc *p, const char *text, int count, int timeout_ms);

/* The value of the /metrics sample that starts with `series` (name and labels), or -1. */
double metric(const struct proc *p, const char *series);

/* SIGTERM, then waits up to `wait_ms`; returns the exit status, or -1 (then it is killed). */
int stop_sluice(struct proc *p, int wait_ms);

/* The whole of a file (sluice's log, its access log); the caller frees it. */
char *read_file(const char *path);
char *read_log(const struct proc *p);

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

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"), or -1. */
long proc_kib(pid_t pid, const char *field);

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

/* A CUnit assertion whose message names the case (`label`), so that a failure says which one
 * and what was seen (a printf format). */
void check_case(bool ok, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void sleep_ms(int ms);

/* CLOCK_MONOTONIC in seconds. */
double seconds_now(void);

/* A loopback port that was free a moment ago. */
unsigned free_port(void);

/* A real redis-server without persistence, on a free loopback port, or on r->port again
 * when it was started before; 0, or -1. */
struct redis {
    pid_t pid;
    unsigned port;
    const char *password; /* requirepass, or NULL */
};
int start_redis(struct redis *r);
void stop_redis(struct redis *r);

/* Runs redis-cli against `r` with `args` (a shell fragment) in the background. */
void redis_cli(const struct redis *r, const char *args);

void register_proxy_tests(void);
void register_limits_tests(void);
void register_cli_tests(void);
void register_upstreams_tests(void);
void register_reload_tests(void);
void register_observe_tests(void);
void register_store_tests(void);
void register_hostile_tests(void);
void register_valgrind_tests(void);
void register_edge_tests(void);
void register_pressure_tests(void);
void register_upstream_edge_tests(void);

#endif
