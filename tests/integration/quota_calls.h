/* What the suites of the quota endpoints share (test_quota.c, test_quota_cli.c,
 * test_quota_faults.c): the admin token, the routes (one per algorithm, and "pair"), and calls
 * to the admin listener with a look at the JSON they answer. */
#ifndef SLUICE_TESTS_INTEGRATION_QUOTA_CALLS_H
#define SLUICE_TESTS_INTEGRATION_QUOTA_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include "tests/integration/harness.h"

#define TOKEN       "sluice-admin-token-0123456789abcdef"
#define OTHER_TOKEN "another-admin-token-fedcba9876543210"
#define AUTH        "Authorization: Bearer " TOKEN
#define OPERATOR    "X-Sluice-Operator: it-operator"
#define QUOTA       5 /* each algorithm's route allows 5 an hour */

/* The algorithms that count in time; each has a route of its name at /NAME/ (ROUTES). */
static const char *const algorithms[] = {"token_bucket", "gcra", "fixed_window",
                                         "sliding_window_log", "sliding_window_counter"};

/* A route called `algo` at /algo/, keyed by the API key, with one limit "hourly" of 5 (a
 * bucket's burst is its quota: nothing comes back within a test, one refills in 12 min). */
#define ROUTE(algo, rest)                                                                          \
    "  - name: " algo "\n    match: {path_prefix: /" algo "/}\n"                                   \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"                     \
    "    limit: {name: hourly, algorithm: " algo ", requests: 5" rest "}\n"

/* The routes of every gateway here but the consumers': one per algorithm (ROUTE), and "pair"
 * with two limits under the API key and one under the address. */
// clang-format off
#define ROUTES                                                                                     \
    "routes:\n"                                                                                    \
    ROUTE("token_bucket", ", per: 1h, burst: 5")                                                   \
    ROUTE("gcra", ", per: 1h")                                                                     \
    ROUTE("fixed_window", ", per: 1h")                                                             \
    ROUTE("sliding_window_log", ", per: 1h")                                                       \
    ROUTE("sliding_window_counter", ", per: 1h")                                                   \
    ROUTE("concurrency", "")                                                                       \
    "  - name: pair\n    match: {path_prefix: /pair/}\n"                                           \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n    limit:\n"         \
    "      - {name: first, algorithm: fixed_window, requests: 5, per: 1h}\n"                       \
    "      - {name: second, algorithm: sliding_window_log, requests: 5, per: 1h}\n"                \
    "      - {name: by_ip, algorithm: fixed_window, requests: 10, per: 1h, key: ip}\n"
// clang-format on

/* One gateway with every route above in memory: %1$u the upstream, %2$u the admin port (0:
 * any; the CLI needs one it can read). */
extern const char quota_memory_config[];

/* `method` `target` on `gw`'s admin listener with the header lines `headers` (NULL-terminated,
 * or NULL); the status, the reply in `r` (the caller frees it). */
long admin_call(const struct proc *gw, const char *method, const char *target,
                const char *const *headers, struct reply *r);

/* The same with the admin token, as operator "it-operator". */
long as_operator(const struct proc *gw, const char *method, const char *target, struct reply *r);

/* Field `field` of the limit called `limit` of the /quota answer `json`, or of the answer
 * itself when `limit` is NULL, as JSON text ("3", "true", "\"gcra\"", "null", "[\"a\"]") into
 * `out`; false when the answer does not parse or has no such limit or field. */
bool json_at(const char *json, const char *limit, const char *field, char *out, size_t cap);

/* That field as a number; -1 when it is missing or not one. */
long long limit_number(const char *json, const char *limit, const char *field);

/* Whether field `field` (of `limit`, or of the answer) is the JSON text `want`. */
bool json_is(const char *json, const char *limit, const char *field, const char *want);

/* What `gw` shows of limit `limit` of API key `key` on `route`: its remaining, -1 when the
 * look failed. */
long long remaining(const struct proc *gw, const char *route, const char *key, const char *limit);

/* `n` GETs of `path` with API key `key`, turn about over `ports`; how many got 200. */
int send_requests(const unsigned *ports, int n_ports, const char *path, const char *key, int n);

/* Exactly `n` GETs of `path` with API key `key` pass on `port`, and the next is refused. */
void expect_passes(unsigned port, const char *path, const char *key, int n, const char *label);

#endif
