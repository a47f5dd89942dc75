#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "gateway/core/runtime.h"
#include "gateway/modules.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/limit/limit_options.h"
#include "gateway/modules/limit/limit_sets.h"
#include "gateway/ops/metrics.h"
#include "tests/unit.h"

/* The limit module's sets of a runtime's first route. */
static const struct gw_limit_route *limits_of(const struct gw_runtime *rt)
{
    return gw_runtime_state(rt, 0, &gw_limit_module);
}

static char path[64];

/* Writes `yaml` to a temporary file and loads it; `*errors` gets the error text, if any. */
static struct config *load_text(const char *yaml, char **errors)
{
    int fd;
    FILE *f;

    snprintf(path, sizeof path, "/tmp/sluice-test-XXXXXX");
    fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    f = fdopen(fd, "w");
    fputs(yaml, f);
    fclose(f);
    return config_load(path, errors);
}

/* Loading `yaml` fails with an error at `line`:`col` that contains `fragment`. */
static void expect_error(const char *yaml, int line, int col, const char *fragment)
{
    char *errors = NULL, where[96];
    struct config *config = load_text(yaml, &errors);

    CU_ASSERT_PTR_NULL(config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(where, sizeof where, "%s:%d:%d: ", path, line, col);
    if (strstr(errors, where) == NULL || strstr(errors, fragment) == NULL)
        fprintf(stderr, "\nexpected %s...%s in:\n%s", where, fragment, errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, fragment));
    config_free(config);
    free(errors);
    unlink(path);
}

/* Loads `yaml`, which must be valid (else its errors are printed and the test ends); freed
 * with unload(). */
static struct config *load_valid(const char *yaml)
{
    char *errors = NULL;
    struct config *c = load_text(yaml, &errors);

    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    free(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

static void unload(struct config *c)
{
    config_free(c);
    unlink(path);
}

#define ROUTE_HEAD                                                                                 \
    "routes:\n  - name: api\n    match: {path_prefix: /api/}\n"                                    \
    "    upstream: \"http://127.0.0.1:9000\"\n"

static void test_example_loads(void)
{
    char *errors = NULL;
    struct config *c = config_load("config/sluice.yaml", &errors);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->server.listen.host, "127.0.0.1");
    CU_ASSERT_EQUAL(c->server.listen.port, 8080);
    CU_ASSERT_EQUAL(c->server.max_body, 10 << 20);
    CU_ASSERT_EQUAL(c->n_routes, 2);
    CU_ASSERT_STRING_EQUAL(c->routes[0].name, "api");
    CU_ASSERT_STRING_EQUAL(c->routes[0].methods[0], "GET");
    CU_ASSERT_STRING_EQUAL(c->routes[0].methods[1], "POST");
    CU_ASSERT_PTR_NULL(c->routes[0].methods[2]);
    CU_ASSERT_EQUAL(c->routes[0].key_kind, CONFIG_KEY_HEADER);
    CU_ASSERT_STRING_EQUAL(c->routes[0].key_name, "X-API-Key");
    CU_ASSERT_EQUAL_FATAL(c->routes[0].n_limits, 3);
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].name, "burst");
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].params.algorithm, "token_bucket");
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.requests, 10);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.per_ns, 60000000000);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.burst, 5);
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[1].name, "daily");
    CU_ASSERT_EQUAL(c->routes[0].limits[1].params.per_ns, 86400000000000);
    CU_ASSERT_EQUAL(c->routes[0].limits[1].key_kind, CONFIG_KEY_HEADER); /* the route's */
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[1].key_name, "X-API-Key");
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[2].name, "per_address");
    CU_ASSERT_EQUAL(c->routes[0].limits[2].key_kind, CONFIG_KEY_IP); /* its own */
    CU_ASSERT_PTR_NULL(c->routes[0].limits[2].key_name);
    CU_ASSERT_FALSE(c->server.underscores_in_headers);
    CU_ASSERT_STRING_EQUAL(c->routes[1].limits[0].name, "default"); /* named after its route */
    CU_ASSERT_EQUAL_FATAL(c->routes[0].upstream.n_servers, 1);
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream.servers[0].origin,
                           "http://127.0.0.1:9000"); /* ${:-} */
    CU_ASSERT_TRUE(c->server.watch_config);
    CU_ASSERT_STRING_EQUAL(c->server.access_log, "stdout");
    CU_ASSERT_EQUAL_FATAL(c->routes[1].upstream.n_servers, 1);
    CU_ASSERT_STRING_EQUAL(c->routes[1].upstream.servers[0].origin, "http://127.0.0.1:9000");
    CU_ASSERT_EQUAL(
        ((const struct limit_options *)config_route_block(&c->routes[1], &gw_limit_route_options))
            ->exempt.n,
        1);
    CU_ASSERT_EQUAL(c->server.max_header_size, 16384);
    CU_ASSERT_EQUAL(c->server.upstream_idle_timeout_ns, 60000000000);
    CU_ASSERT_EQUAL(c->server.upstream_max_idle, 64);
    CU_ASSERT_PTR_NULL(c->routes[0].proxy); /* commented out */
    config_free(c);
}

/* park_idle_after: 0 turns parking off; 1s is the shortest (errors: in the error test). */
static void test_park_idle_after(void)
{
    struct config *c = load_valid("server: {park_idle_after: 0}\n" ROUTE_HEAD);

    CU_ASSERT_EQUAL(c->server.park_idle_after_ns, 0);
    unload(c);
    c = load_valid("server: {park_idle_after: 1s}\n" ROUTE_HEAD);
    CU_ASSERT_EQUAL(c->server.park_idle_after_ns, 1000000000);
    unload(c);
}

static void test_defaults_and_upstream_parts(void)
{
    char *errors = NULL;
    struct config *c = load_text("routes:\n  - name: r\n    match: {path_prefix: /}\n"
                                 "    upstream: \"https://api.example.com/base/\"\n",
                                 &errors);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->server.listen.host, "127.0.0.1");
    CU_ASSERT_EQUAL(c->server.listen.port, 8080);
    CU_ASSERT_EQUAL(c->server.max_connections, 1024);
    CU_ASSERT_EQUAL(c->server.park_idle_after_ns, 5000000000);
    CU_ASSERT_EQUAL(c->max_clients, 100000);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].upstream.n_servers, 1);
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream.servers[0].origin, "https://api.example.com:443");
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream.servers[0].base_path, "/base");
    CU_ASSERT_EQUAL(c->routes[0].timeout_ns, 30000000000);
    CU_ASSERT_EQUAL(c->routes[0].connect_timeout_ns, 2000000000);
    CU_ASSERT_EQUAL(c->routes[0].key_kind, CONFIG_KEY_IP);
    CU_ASSERT_EQUAL(c->routes[0].ipv6_prefix_len, 64);
    CU_ASSERT_EQUAL(c->routes[0].n_limits, 0);
    CU_ASSERT_TRUE(c->routes[0].tls_verify);
    CU_ASSERT_PTR_NULL(c->routes[0].methods);
    CU_ASSERT_FALSE(c->server.underscores_in_headers);
    unload(c);
}

/* Each limit counts under its own key: the one it names, or else its route's, whichever comes
 * first in the file; also on the single-mapping form. Each is marked once (route_key) when
 * that key is the route's, inherited or named alike; and its algorithm resolved. */
static void test_per_limit_keys(void)
{
    char *errors = NULL;
    struct config *c = load_text(
        ROUTE_HEAD "    limit:\n"
                   "      - {name: per_key, algorithm: token_bucket, requests: 100, per: 1m}\n"
                   "      - {name: per_ip, algorithm: sliding_window_counter, requests: 300, "
                   "per: 1m, key: ip}\n"
                   "      - {name: per_user, algorithm: gcra, requests: 5, per: 1s, "
                   "key: \"query:user\"}\n"
                   "      - {name: per_key_too, algorithm: fixed_window, requests: 9, per: 1s, "
                   "key: \"header:x-api-key\"}\n"
                   "    key: \"header:X-API-Key\"\n"
                   "  - name: one\n    match: {path_prefix: /one/}\n"
                   "    upstream: \"http://127.0.0.1:9000\"\n"
                   "    limit: {algorithm: gcra, requests: 5, per: 1s, key: \"header:X-Token\"}\n"
                   "  - name: plain\n    match: {path_prefix: /plain/}\n"
                   "    upstream: \"http://127.0.0.1:9000\"\n"
                   "    limit: {algorithm: gcra, requests: 5, per: 1s}\n",
        &errors);
    const struct config_route *r;

    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    r = &c->routes[0];
    CU_ASSERT_EQUAL_FATAL(r->n_limits, 4);
    CU_ASSERT_EQUAL(r->limits[0].key_kind, CONFIG_KEY_HEADER); /* key: came after limit: */
    CU_ASSERT_STRING_EQUAL(r->limits[0].key_name, "X-API-Key");
    CU_ASSERT_PTR_NOT_EQUAL(r->limits[0].key_name, r->key_name); /* a copy of its own */
    CU_ASSERT_EQUAL(r->limits[1].key_kind, CONFIG_KEY_IP);
    CU_ASSERT_PTR_NULL(r->limits[1].key_name);
    CU_ASSERT_EQUAL(r->limits[2].key_kind, CONFIG_KEY_QUERY);
    CU_ASSERT_STRING_EQUAL(r->limits[2].key_name, "user");
    CU_ASSERT_EQUAL(r->key_kind, CONFIG_KEY_HEADER); /* the route's own is unchanged */
    CU_ASSERT_TRUE(r->limits[0].route_key);
    CU_ASSERT_FALSE(r->limits[1].route_key);
    CU_ASSERT_FALSE(r->limits[2].route_key);
    CU_ASSERT_TRUE(r->limits[3].route_key); /* header names compare without case */
    CU_ASSERT_EQUAL(r->limits[0].params.algorithm_id, LIMITER_TOKEN_BUCKET);
    CU_ASSERT_EQUAL(r->limits[1].params.algorithm_id, LIMITER_SLIDING_WINDOW_COUNTER);
    CU_ASSERT_EQUAL(r->limits[2].params.algorithm_id, LIMITER_GCRA);
    CU_ASSERT_EQUAL(r->limits[3].params.algorithm_id, LIMITER_FIXED_WINDOW);
    r = &c->routes[1];
    CU_ASSERT_EQUAL_FATAL(r->n_limits, 1);
    CU_ASSERT_STRING_EQUAL(r->limits[0].name, "one");
    CU_ASSERT_EQUAL(r->limits[0].key_kind, CONFIG_KEY_HEADER);
    CU_ASSERT_STRING_EQUAL(r->limits[0].key_name, "X-Token");
    CU_ASSERT_EQUAL(r->key_kind, CONFIG_KEY_IP);
    CU_ASSERT_FALSE(r->limits[0].route_key);
    r = &c->routes[2];
    CU_ASSERT_EQUAL(r->limits[0].key_kind, CONFIG_KEY_IP); /* the route's default */
    CU_ASSERT_PTR_NULL(r->limits[0].key_name);
    CU_ASSERT_TRUE(r->limits[0].route_key);
    unload(c);

    /* A route's key that is refused leaves no half-made key behind for its limits to inherit
     * (a header key without its name once reached strcasecmp() with NULL). */
    expect_error(ROUTE_HEAD "    key: \"header:X-API-ult = requests\"\n"
                            "    limit: {algorithm: gcra, requests: 1, per: 1s}\n",
                 5, 10, "key: expected ip, header:NAME or query:NAME");
    expect_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 1, per: 1s}\n"
                            "    key: \"query:\"\n",
                 6, 10, "key: expected ip, header:NAME or query:NAME");
    /* A limit's key is checked like a route's, and reported where it stands. */
    expect_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 1, per: 1s, key: cookie:x}\n",
                 5, 57, "key: expected ip, header:NAME or query:NAME, not \"cookie:x\"");
    expect_error(ROUTE_HEAD "    limit:\n      - name: a\n        algorithm: gcra\n"
                            "        requests: 1\n        per: 1s\n        key: \"header:\"\n",
                 10, 14, "key: expected ip, header:NAME or query:NAME");
    expect_error(ROUTE_HEAD "    limit:\n      - name: a\n        algorithm: gcra\n"
                            "        requests: 1\n        per: 1s\n        key: [ip]\n",
                 10, 14, "key: expected a single value, found a list");
    expect_error(ROUTE_HEAD
                 "    limit: {algorithm: gcra, requests: 1, per: 1s, key: ip, key: ip}\n",
                 5, 61, "\"key\" appears twice (first at line 5)");
}

/* Header names with '_': a key on one is an error unless server.underscores_in_headers, which
 * may come before or after the routes. */
static void test_underscores_in_headers(void)
{
    static const char *const route_key =
        ROUTE_HEAD "    key: \"header:X_Api_Key\"\n"
                   "    limit: {algorithm: gcra, requests: 1, per: 1s}\n";
    static const char *const limit_key =
        ROUTE_HEAD "    limit:\n      - {name: a, algorithm: gcra, requests: 1, per: 1s, "
                   "key: \"header:X_Api_Key\"}\n";
    char *errors = NULL, yaml[512];
    struct config *c;

    expect_error(route_key, 5, 10,
                 "key: header X_Api_Key has '_', which sluice drops unless "
                 "server.underscores_in_headers: true");
    expect_error(limit_key, 6, 63, "header X_Api_Key has '_'");
    expect_error("server: {underscores_in_headers: false}\n" ROUTE_HEAD
                 "    key: \"header:${SLUICE_TEST_UNSET_HEADER:-A_B}\"\n",
                 6, 10, "header A_B has '_'");
    expect_error("server: {underscores_in_headers: maybe}\n" ROUTE_HEAD, 1, 34,
                 "expected true or false");

    snprintf(yaml, sizeof yaml, "server: {underscores_in_headers: true}\n%s", route_key);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->server.underscores_in_headers);
    CU_ASSERT_STRING_EQUAL(c->routes[0].key_name, "X_Api_Key");
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].key_name, "X_Api_Key");
    unload(c);

    snprintf(yaml, sizeof yaml, "%sserver: {underscores_in_headers: true}\n", limit_key);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].key_name, "X_Api_Key");
    unload(c);

    /* Only headers: a query parameter with '_' is forwarded untouched. */
    c = load_text(ROUTE_HEAD "    key: \"query:api_key\"\n", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    unload(c);
}

/* The runtime built for a reloaded config: a limit keeps its limiter (and every client's
 * state) only while its key is unchanged too. It lives here because the limit's key is config,
 * and the unit runner links the gateway anyway. */
static struct gw_runtime *runtime_for(const char *limits, struct gw_runtime *previous,
                                      struct gw_metrics *metrics, struct gw_backends *backends)
{
    char yaml[1024], err[256] = "";
    struct config *c;
    struct gw_runtime *rt;

    snprintf(yaml, sizeof yaml,
             "server: {access_log: \"off\"}\n" ROUTE_HEAD "    key: \"header:X-API-Key\"\n"
             "    limit:\n%s",
             limits);
    c = load_valid(yaml);
    unlink(path);
    CU_ASSERT_EQUAL_FATAL(gw_modules_register(), 0); /* the whole pipeline, as sluice's */
    rt = gw_runtime_build(c, previous, metrics, backends, NULL, err, sizeof err);
    if (rt == NULL)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    return rt;
}

static void test_reload_with_another_key_starts_afresh(void)
{
    static const char *const before =
        "      - {name: a, algorithm: gcra, requests: 5, per: 1s}\n"
        "      - {name: b, algorithm: gcra, requests: 5, per: 1s, key: ip}\n"
        "      - {name: c, algorithm: gcra, requests: 5, per: 1s, key: \"header:X-One\"}\n";
    /* b and c change only their keys (c only the case of its header's name); a inherits the
     * same key, now spelt out. */
    static const char *const after =
        "      - {name: a, algorithm: gcra, requests: 5, per: 1s, key: \"header:X-API-Key\"}\n"
        "      - {name: b, algorithm: gcra, requests: 5, per: 1s, key: \"query:k\"}\n"
        "      - {name: c, algorithm: gcra, requests: 5, per: 1s, key: \"header:x-one\"}\n";
    static const char *const again =
        "      - {name: a, algorithm: gcra, requests: 5, per: 1s, key: ip}\n"
        "      - {name: b, algorithm: gcra, requests: 5, per: 1s, key: \"query:k\"}\n"
        "      - {name: c, algorithm: gcra, requests: 5, per: 1s, key: \"header:X-Two\"}\n";
    struct gw_metrics *metrics = gw_metrics_new();
    struct gw_backends *backends = gw_backends_new();
    struct gw_runtime *first, *second, *third;

    CU_ASSERT_PTR_NOT_NULL_FATAL(metrics);
    CU_ASSERT_PTR_NOT_NULL_FATAL(backends);
    first = runtime_for(before, NULL, metrics, backends);
    second = runtime_for(after, first, metrics, backends);
    CU_ASSERT_PTR_EQUAL(limits_of(second)->own.limits[0], limits_of(first)->own.limits[0]);
    CU_ASSERT_PTR_NOT_EQUAL(limits_of(second)->own.limits[1], limits_of(first)->own.limits[1]);
    CU_ASSERT_PTR_EQUAL(limits_of(second)->own.limits[2], limits_of(first)->own.limits[2]);
    third = runtime_for(again, second, metrics, backends);
    CU_ASSERT_PTR_NOT_EQUAL(limits_of(third)->own.limits[0], limits_of(second)->own.limits[0]);
    CU_ASSERT_PTR_EQUAL(limits_of(third)->own.limits[1], limits_of(second)->own.limits[1]);
    CU_ASSERT_PTR_NOT_EQUAL(limits_of(third)->own.limits[2], limits_of(second)->own.limits[2]);
    gw_runtime_release(first);
    gw_runtime_release(second);
    gw_runtime_release(third);
    gw_backends_free(backends);
    gw_metrics_free(metrics);
}

static void test_errors_are_positioned(void)
{
    expect_error("server:\n  listen: \"127.0.0.1:8080\"\n  colour: blue\n" ROUTE_HEAD, 3, 3,
                 "unknown key \"colour\"");
    expect_error("server:\n  max_connections: lots\n" ROUTE_HEAD, 2, 20,
                 "max_connections: \"lots\" is not a whole number");
    expect_error("server:\n  max_connections: [1]\n" ROUTE_HEAD, 2, 20,
                 "expected a single value, found a list");
    expect_error("server:\n  client_timeout: 10 minutes\n" ROUTE_HEAD, 2, 19, "is not a duration");
    expect_error("server:\n  listen: 8080\n" ROUTE_HEAD, 2, 11, "is not host:port");
    expect_error(ROUTE_HEAD "  - name: api\n    match: {path_prefix: /}\n"
                            "    upstream: \"http://127.0.0.1:9000\"\n",
                 5, 11, "route \"api\" is defined twice");
    expect_error(ROUTE_HEAD "    limit: {algorithm: leaky_bucket, requests: 1, per: 1s}\n", 5, 24,
                 "unknown \"leaky_bucket\"");
    expect_error(ROUTE_HEAD "    limit:\n      algorithm: fixed_window\n      requests: 10\n"
                            "      per: 1m\n      burst: 5\n",
                 9, 14, "burst applies to token_bucket and gcra only");
    expect_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 0, per: 1s}\n", 5, 40,
                 "requests: \"0\" is not a whole number from 1");
    expect_error(ROUTE_HEAD "    limit: {algorithm: gcra, per: 1s}\n", 5, 12,
                 "limit: requests is required");
    expect_error(ROUTE_HEAD "    key: cookie:session\n", 5, 10, "expected ip, header:NAME");
    expect_error(ROUTE_HEAD "    exempt: [\"10.0.0.0/99\"]\n", 5, 14, "is not an address");
    expect_error(ROUTE_HEAD "    dry_run: yes\n", 5, 14, "expected true or false");
    expect_error("routes:\n  - name: a\n    match: {path_prefix: api}\n"
                 "    upstream: \"ftp://x\"\n",
                 3, 26, "path_prefix: must start with /");
    expect_error("routes:\n  - name: a\n    match: {path_prefix: /}\n"
                 "    upstream: \"ftp://x\"\n",
                 4, 15, "scheme must be http or https");
    expect_error("routes:\n  - name: a\n    match: {path_prefix: /}\n", 2, 5,
                 "upstream is required");
    expect_error("routes:\n  - name: a b\n    match: {path_prefix: /}\n"
                 "    upstream: \"http://x:1\"\n",
                 2, 11, "may hold only letters");
    expect_error("server: {}\n", 1, 1, "at least one route is required");
    expect_error("routes: [\n", 2, 1, "YAML syntax");
    expect_error("", 1, 1, "empty");
    expect_error(ROUTE_HEAD "    limit:\n      - {algorithm: gcra, requests: 1, per: 1s}\n", 6, 9,
                 "each limit of a list needs a name");
    expect_error(ROUTE_HEAD "    limit:\n      - {name: a, algorithm: gcra, requests: 1, per: 1s}\n"
                            "      - {name: a, algorithm: gcra, requests: 2, per: 1s}\n",
                 7, 16, "limit \"a\" appears twice");
    expect_error(ROUTE_HEAD "    limit: []\n", 5, 12, "a list of 1 to 8 limits");
    expect_error("server: {client_timeout: 0}\n" ROUTE_HEAD, 1, 26, "out of range (above zero");
    expect_error("server: {drain_timeout: 2d}\n" ROUTE_HEAD, 1, 25, "out of range (at most 1d)");
    expect_error("server:\n  park_idle_after: 500ms\n" ROUTE_HEAD, 2, 20,
                 "park_idle_after: at least 1s, or 0 to never park");
    expect_error("server: {park_idle_after: 2d}\n" ROUTE_HEAD, 1, 27, "out of range (at most 1d)");
    expect_error(ROUTE_HEAD "    timeout: 9999d\n", 5, 14, "out of range");
    expect_error("routes:\n  - name: a\n    match: {path_prefix: /, methods: []}\n"
                 "    upstream: \"http://x:1\"\n",
                 3, 38, "an empty list matches nothing");
    expect_error(
        "routes:\n  - name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
        "    match: {path_prefix: /}\n    upstream: \"http://x:1\"\n",
        2, 11, "64 at most");
    expect_error(ROUTE_HEAD "    timeout: \"${SLUICE_TEST_SURELY_UNSET}\"\n", 5, 14,
                 "${SLUICE_TEST_SURELY_UNSET} is not set and has no default");
    expect_error(ROUTE_HEAD "    timeout: \"${1BAD}\"\n", 5, 14, "expected ${NAME}");
    expect_error(ROUTE_HEAD "    timeout: \"${UNCLOSED\"\n", 5, 14, "expected ${NAME}");
}

static void test_store_settings(void)
{
    char *errors = NULL;
    struct config *c = load_text("limiter:\n  store: redis\n  replicas: 3\n  on_store_error: deny\n"
                                 "  redis: {address: \"10.1.2.3:6380\", password: pw, db: 2, "
                                 "timeout: 20ms, prefix: \"rl:\"}\n" ROUTE_HEAD
                                 "  - name: local\n    match: {path_prefix: /l/}\n"
                                 "    upstream: \"http://127.0.0.1:9\"\n    store: memory\n",
                                 &errors);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->store, CONFIG_STORE_REDIS);
    CU_ASSERT_EQUAL(c->replicas, 3);
    CU_ASSERT_EQUAL(c->on_store_error, CONFIG_ON_STORE_ERROR_DENY);
    CU_ASSERT_STRING_EQUAL(c->redis.address.host, "10.1.2.3");
    CU_ASSERT_EQUAL(c->redis.address.port, 6380);
    CU_ASSERT_STRING_EQUAL(c->redis.password, "pw");
    CU_ASSERT_EQUAL(c->redis.db, 2);
    CU_ASSERT_EQUAL(c->redis.timeout_ns, 20000000);
    CU_ASSERT_STRING_EQUAL(c->redis.prefix, "rl:");
    CU_ASSERT_EQUAL(c->routes[0].store, CONFIG_STORE_REDIS);  /* from limiter.store */
    CU_ASSERT_EQUAL(c->routes[1].store, CONFIG_STORE_MEMORY); /* its own */
    unload(c);

    c = load_text(ROUTE_HEAD, &errors); /* the defaults */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->store, CONFIG_STORE_MEMORY);
    CU_ASSERT_EQUAL(c->on_store_error, CONFIG_ON_STORE_ERROR_LOCAL);
    CU_ASSERT_EQUAL(c->replicas, 1);
    CU_ASSERT_STRING_EQUAL(c->redis.address.host, "127.0.0.1");
    CU_ASSERT_EQUAL(c->redis.address.port, 6379);
    CU_ASSERT_EQUAL(c->redis.timeout_ns, 50000000);
    CU_ASSERT_STRING_EQUAL(c->redis.prefix, "sluice:");
    CU_ASSERT_FALSE(c->replicas_auto);
    CU_ASSERT_EQUAL(c->redis.refusal_cache_ns, 1000000000);
    unload(c);

    c = load_text("limiter: {replicas: auto}\n" ROUTE_HEAD, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->replicas_auto);
    CU_ASSERT_EQUAL(c->replicas, 1); /* until counted */
    unload(c);

    expect_error("limiter: {replicas: autumn}\n" ROUTE_HEAD, 1, 21, "replicas: \"autumn\"");
    expect_error("limiter: {store: disk}\n" ROUTE_HEAD, 1, 18,
                 "store: \"disk\" is not one of memory or redis");
    expect_error("limiter: {on_store_error: panic}\n" ROUTE_HEAD, 1, 27,
                 "on_store_error: \"panic\" is not one of local, allow or deny");
    expect_error("limiter: {replicas: 0}\n" ROUTE_HEAD, 1, 21, "replicas: \"0\"");
    expect_error("limiter: {redis: {timeout: 0}}\n" ROUTE_HEAD, 1, 28, "out of range (above zero");
}

static void test_environment(void)
{
    char *errors = NULL;
    struct config *c;

    setenv("SLUICE_TEST_TIMEOUT", "3s", 1);
    setenv("SLUICE_TEST_EMPTY", "", 1);
    c = load_text(ROUTE_HEAD "    timeout: \"${SLUICE_TEST_TIMEOUT}\"\n"
                             "    connect_timeout: \"${SLUICE_TEST_EMPTY:-250}ms\"\n"
                             "    key: \"header:X-${SLUICE_TEST_UNSET_TOO:-Key}\"\n",
                  &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].timeout_ns, 3000000000);
    CU_ASSERT_EQUAL(c->routes[0].connect_timeout_ns, 250000000); /* empty takes the default */
    CU_ASSERT_STRING_EQUAL(c->routes[0].key_name, "X-Key");
    unload(c);
    unsetenv("SLUICE_TEST_TIMEOUT");
    unsetenv("SLUICE_TEST_EMPTY");
}

static int count_lines(const char *text)
{
    int lines = 0;

    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n') + 1)
        lines++;
    return lines;
}

/* Loads `yaml` and checks that it fails with `lines` error lines, one of them at
 * `line`:`col` holding `fragment`. The line count is what shows that nothing past a bound
 * was walked. */
static void expect_refusal(const char *yaml, int lines, int line, int col, const char *fragment)
{
    char *errors = NULL;
    struct config *c = load_text(yaml, &errors);

    CU_ASSERT_PTR_NULL(c);
    config_free(c);
    CU_ASSERT_EQUAL(count_lines(errors), lines);
    free(errors);
    unlink(path);
    expect_error(yaml, line, col, fragment);
}

/* Every problem is reported, not just the first. */
static void test_all_errors_reported(void)
{
    char *errors = NULL;
    struct config *c = load_text(
        "server:\n  bogus: 1\n  drain_timeout: soon\n" ROUTE_HEAD "    timeout: never\n", &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(count_lines(errors), 3);
    free(errors);
    unlink(path);

    /* One problem, one line: a value's line breaks and controls are shown escaped. */
    expect_refusal("server: {client_timeout: \"1\\n2\\e\"}\n" ROUTE_HEAD, 1, 1, 26,
                   "client_timeout: \"1\\n2\\x1b\" is not a duration");
}

/* The new server settings: defaults, values at and within their bounds, and values beyond. */
static void test_upstream_connection_settings(void)
{
    char *errors = NULL;
    struct config *c = load_text(ROUTE_HEAD, &errors);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.max_header_size, 16384);
    CU_ASSERT_EQUAL(c->server.max_response_header_size, 16384);
    CU_ASSERT_EQUAL(c->server.upstream_idle_timeout_ns, 60000000000);
    CU_ASSERT_EQUAL(c->server.upstream_max_idle, 64);
    unload(c);

    c = load_text("server: {max_header_size: 32KiB, upstream_idle_timeout: 5m, "
                  "upstream_max_idle: 200, max_response_header_size: 64KiB}\n" ROUTE_HEAD,
                  &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.max_header_size, 32768);
    CU_ASSERT_EQUAL(c->server.max_response_header_size, 65536);
    CU_ASSERT_EQUAL(c->server.upstream_idle_timeout_ns, 300000000000);
    CU_ASSERT_EQUAL(c->server.upstream_max_idle, 200);
    unload(c);

    c = load_text("server: {max_header_size: 4KiB, upstream_idle_timeout: 1s, "
                  "upstream_max_idle: 1}\n" ROUTE_HEAD,
                  &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.max_header_size, 4096);
    CU_ASSERT_EQUAL(c->server.upstream_idle_timeout_ns, 1000000000);
    CU_ASSERT_EQUAL(c->server.upstream_max_idle, 1);
    unload(c);

    c = load_text("server: {max_header_size: 1MiB, upstream_idle_timeout: 1h, "
                  "upstream_max_idle: 65536}\n" ROUTE_HEAD,
                  &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.max_header_size, 1048576);
    CU_ASSERT_EQUAL(c->server.upstream_idle_timeout_ns, 3600000000000);
    CU_ASSERT_EQUAL(c->server.upstream_max_idle, 65536);
    unload(c);

    expect_error("server: {max_header_size: 4095}\n" ROUTE_HEAD, 1, 27,
                 "max_header_size: \"4095\" is out of range (from 4KiB to 1MiB)");
    expect_error("server: {max_header_size: 2MiB}\n" ROUTE_HEAD, 1, 27,
                 "max_header_size: \"2MiB\" is out of range (from 4KiB to 1MiB)");
    expect_error("server: {max_header_size: big}\n" ROUTE_HEAD, 1, 27, "is not a size");
    expect_error("server:\n  upstream_idle_timeout: 999ms\n" ROUTE_HEAD, 2, 26,
                 "upstream_idle_timeout: \"999ms\" is out of range (from 1s to 1h)");
    expect_error("server:\n  upstream_idle_timeout: 61m\n" ROUTE_HEAD, 2, 26,
                 "upstream_idle_timeout: \"61m\" is out of range (from 1s to 1h)");
    expect_error("server:\n  upstream_max_idle: 0\n" ROUTE_HEAD, 2, 22,
                 "upstream_max_idle: \"0\" is not a whole number from 1 to 65536");
    expect_error("server:\n  upstream_max_idle: 65537\n" ROUTE_HEAD, 2, 22,
                 "upstream_max_idle: \"65537\" is not a whole number from 1 to 65536");
}

/* server.proxy_protocol and proxy_protocol_from: off by default; each version; a list of
 * peers required once on; other values refused where they are. */
static void test_proxy_protocol(void)
{
    static const struct {
        const char *yaml;
        enum config_proxy_protocol mode;
        size_t n_from;
    } accepted[] = {
        {ROUTE_HEAD, CONFIG_PROXY_PROTOCOL_OFF, 0},
        {"server: {proxy_protocol: off}\n" ROUTE_HEAD, CONFIG_PROXY_PROTOCOL_OFF, 0},
        {"server: {proxy_protocol: v1, proxy_protocol_from: [10.0.0.0/8]}\n" ROUTE_HEAD,
         CONFIG_PROXY_PROTOCOL_V1, 1},
        {"server: {proxy_protocol: v2, proxy_protocol_from: [10.0.0.0/8, \"::1\"]}\n" ROUTE_HEAD,
         CONFIG_PROXY_PROTOCOL_V2, 2},
        {"server:\n  proxy_protocol_from: [192.0.2.7]\n  proxy_protocol: any\n" ROUTE_HEAD,
         CONFIG_PROXY_PROTOCOL_ANY, 1},
        {"server: {proxy_protocol_from: [192.0.2.7]}\n" ROUTE_HEAD, CONFIG_PROXY_PROTOCOL_OFF, 1},
    };

    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        struct config *c = load_valid(accepted[i].yaml);
        CU_ASSERT_EQUAL(c->server.proxy_protocol, accepted[i].mode);
        CU_ASSERT_EQUAL(c->server.proxy_protocol_from.n, accepted[i].n_from);
        unload(c);
    }
    expect_error("server:\n  proxy_protocol: v1\n" ROUTE_HEAD, 2, 19,
                 "proxy_protocol: needs server.proxy_protocol_from");
    expect_error("server: {proxy_protocol: any, proxy_protocol_from: []}\n" ROUTE_HEAD, 1, 26,
                 "proxy_protocol: needs server.proxy_protocol_from");
    expect_error("server: {proxy_protocol: v3}\n" ROUTE_HEAD, 1, 26,
                 "proxy_protocol: \"v3\" is not one of off, v1, v2 or any");
    expect_error("server: {proxy_protocol: true}\n" ROUTE_HEAD, 1, 26,
                 "proxy_protocol: \"true\" is not one of off, v1, v2 or any");
    expect_error("server: {proxy_protocol: v1, proxy_protocol_from: [10.0.0.0/33]}\n" ROUTE_HEAD, 1,
                 52, "proxy_protocol_from: \"10.0.0.0/33\" is not an address");
}

/* server.mode and server.workers: the two modes, by default thread_per_connection with a
 * loop per online core; any other mode, and workers outside 1..256, refused where they are. */
static void test_serving_mode(void)
{
    static const struct {
        const char *yaml;
        enum config_mode mode;
        uint32_t workers;
    } accepted[] = {
        {"server: {mode: thread_per_connection}\n" ROUTE_HEAD, CONFIG_MODE_THREAD_PER_CONNECTION,
         0},
        {"server:\n  mode: event\n  workers: 2\n" ROUTE_HEAD, CONFIG_MODE_EVENT, 2},
        {"server: {mode: event, workers: 1}\n" ROUTE_HEAD, CONFIG_MODE_EVENT, 1},
        {"server: {mode: event, workers: 256}\n" ROUTE_HEAD, CONFIG_MODE_EVENT, 256},
        {"server: {workers: 3}\n" ROUTE_HEAD, CONFIG_MODE_THREAD_PER_CONNECTION, 3},
    };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char *errors = NULL;
    struct config *c = load_text(ROUTE_HEAD, &errors);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.mode, CONFIG_MODE_THREAD_PER_CONNECTION);
    CU_ASSERT_TRUE(c->server.workers >= 1 && c->server.workers <= 256);
    if (cores >= 1 && cores <= 256)
        CU_ASSERT_EQUAL(c->server.workers, (uint32_t)cores);
    unload(c);

    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        c = load_valid(accepted[i].yaml);
        CU_ASSERT_EQUAL(c->server.mode, accepted[i].mode);
        if (accepted[i].workers != 0)
            CU_ASSERT_EQUAL(c->server.workers, accepted[i].workers);
        unload(c);
    }

    expect_error("server: {mode: fast}\n" ROUTE_HEAD, 1, 16,
                 "mode: \"fast\" is not one of thread_per_connection or event");
    expect_error("server:\n  listen: \"127.0.0.1:8080\"\n  mode: Event\n" ROUTE_HEAD, 3, 9,
                 "mode: \"Event\" is not one of thread_per_connection or event");
    expect_error("server:\n  mode: thread-per-connection\n" ROUTE_HEAD, 2, 9,
                 "mode: \"thread-per-connection\" is not one of");
    expect_error("server: {mode: [event]}\n" ROUTE_HEAD, 1, 16,
                 "expected a single value, found a list");
    expect_error("server: {mode: event, workers: 0}\n" ROUTE_HEAD, 1, 32,
                 "workers: \"0\" is not a whole number from 1 to 256");
    expect_error("server:\n  mode: event\n  workers: 257\n" ROUTE_HEAD, 3, 12,
                 "workers: \"257\" is not a whole number from 1 to 256");
    expect_error("server: {workers: -1}\n" ROUTE_HEAD, 1, 19,
                 "workers: \"-1\" is not a whole number from 1 to 256");
    expect_error("server: {workers: many}\n" ROUTE_HEAD, 1, 19,
                 "workers: \"many\" is not a whole number from 1 to 256");
}

/* The route's proxy `value` loads as `want` (NULL: no proxy). */
static void expect_proxy(const char *value, const char *want)
{
    char yaml[512];
    struct config *c;

    snprintf(yaml, sizeof yaml, ROUTE_HEAD "%s%s\n", value ? "    proxy: " : "",
             value ? value : "");
    c = load_valid(yaml);
    if (want == NULL) {
        CU_ASSERT_PTR_NULL(c->routes[0].proxy);
    } else {
        CU_ASSERT_STRING_EQUAL(c->routes[0].proxy, want);
    }
    unload(c);
}

static void test_route_proxy(void)
{
    expect_proxy(NULL, NULL); /* absent: no proxy, whatever the environment says */
    expect_proxy("\"http://proxy.internal:3128\"", "http://proxy.internal:3128");
    expect_proxy("\"https://proxy.internal:8443/\"", "https://proxy.internal:8443");
    expect_proxy("\"socks5://[::1]:1080\"", "socks5://[::1]:1080");
    expect_proxy("\"SOCKS5://10.0.0.1:1080\"", "socks5://10.0.0.1:1080");
    expect_proxy("\"\"", NULL);
    expect_proxy("\"${SLUICE_TEST_UNSET_PROXY:-}\"", NULL);

    expect_error(ROUTE_HEAD "    proxy: \"ftp://proxy:21\"\n", 5, 12,
                 "proxy: scheme must be http, https or socks5, not \"ftp\"");
    expect_error(ROUTE_HEAD "    proxy: \"socks5h://proxy:1080\"\n", 5, 12,
                 "scheme must be http, https or socks5");
    expect_error(ROUTE_HEAD "    proxy: \"http://proxy.internal\"\n", 5, 12,
                 "proxy: \"http://proxy.internal\" needs a port (like "
                 "http://proxy.internal:3128)");
    expect_error(ROUTE_HEAD "    proxy: \"socks5://proxy:0\"\n", 5, 12, "needs a port");
    expect_error(ROUTE_HEAD "    proxy: \"http://user:secret@proxy:3128\"\n", 5, 12,
                 "proxy: only scheme, host and port are allowed");
    expect_error(ROUTE_HEAD "    proxy: \"http://proxy:3128/path\"\n", 5, 12,
                 "only scheme, host and port are allowed");
    expect_error(ROUTE_HEAD "    proxy: \"http://proxy:3128?x=1\"\n", 5, 12,
                 "only scheme, host and port are allowed");
    expect_error(ROUTE_HEAD "    proxy: \"proxy:3128\"\n", 5, 12,
                 "proxy: \"proxy:3128\" is not a URL like http://proxy.internal:3128");
    expect_error(ROUTE_HEAD "    proxy: \"http:/proxy:3128\"\n", 5, 12, "is not a URL like");
    expect_error(ROUTE_HEAD "    proxy: \"http://proxy:99999\"\n", 5, 12, "is not a URL like");
    expect_error(ROUTE_HEAD "    proxy: [\"http://proxy:3128\"]\n", 5, 12,
                 "proxy: expected a single value, found a list");
}

/* --- the parser's bounds (see config.h) ---------------------------------------------------- */

/* A growing text, for the large files below; the caller frees it. */
struct text {
    FILE *out;
    char *data;
    size_t len;
};

static void text_start(struct text *t)
{
    t->data = NULL;
    t->out = open_memstream(&t->data, &t->len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->out);
}

static char *text_end(struct text *t)
{
    fclose(t->out);
    return t->data;
}

/* 40,000 keys took 28 s when each was compared with all before it. Now the mapping is refused
 * at key 4097 before the tree is walked at all: one error, and no "unknown key" per key. */
static void test_many_keys_refused_at_the_bound(void)
{
    struct text t;
    char *yaml;

    text_start(&t);
    fputs("server:\n", t.out);
    for (int i = 0; i < 40000; i++)
        fprintf(t.out, "  k%05d: 1\n", i);
    fputs(ROUTE_HEAD, t.out);
    yaml = text_end(&t);
    expect_refusal(yaml, 1, 4098, 3, "a mapping may hold at most 4096 keys; this is key 4097");
    free(yaml);

    text_start(&t);
    fputs(ROUTE_HEAD "    exempt:\n", t.out);
    for (int i = 0; i < 5000; i++)
        fprintf(t.out, "      - \"10.%d.%d.0/24\"\n", i / 256, i % 256);
    yaml = text_end(&t);
    expect_refusal(yaml, 1, 4102, 9, "a list may hold at most 4096 items; this is item 4097");
    free(yaml);
}

/* Repeated keys are found by sorting: 4096 copies of one key, the most a mapping may hold,
 * each reported against the first; only the first CONFIG_MAX_ERRORS problems are listed. */
static void test_repeated_keys(void)
{
    struct text t;
    char *yaml, *errors = NULL, where[128];
    struct config *c;

    expect_error("server:\n  listen: \"127.0.0.1:1\"\n  max_body: 1\n"
                 "  listen: \"127.0.0.1:2\"\n  listen: \"127.0.0.1:3\"\n" ROUTE_HEAD,
                 5, 3, "server: \"listen\" appears twice (first at line 2)");
    expect_error("server:\n  listen: \"127.0.0.1:1\"\n  max_body: 1\n"
                 "  listen: \"127.0.0.1:2\"\n" ROUTE_HEAD,
                 4, 3, "server: \"listen\" appears twice (first at line 2)");

    text_start(&t);
    fputs("server:\n", t.out);
    for (int i = 0; i < 4096; i++)
        fputs("  max_body: 1\n", t.out);
    fputs(ROUTE_HEAD, t.out);
    yaml = text_end(&t);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(count_lines(errors), 101);
    snprintf(where, sizeof where, "%s:3:3: server: \"max_body\" appears twice (first at line 2)\n",
             path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    snprintf(where, sizeof where, "%s:103:3: 3995 more problems from here on are not listed\n",
             path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    free(errors);
    free(yaml);
    unlink(path);
}

/* Aliases are refused wherever they stand, each at its position, and nothing is walked: the
 * nine-by-nine "billion laughs" would otherwise be 9^8 copies of one list. */
static void test_aliases_refused(void)
{
    struct text t;
    char *yaml;

    text_start(&t);
    fputs("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n", t.out);
    for (char name = 'b'; name <= 'i'; name++) {
        fprintf(t.out, "%c: &%c [", name, name);
        for (int i = 0; i < 9; i++)
            fprintf(t.out, "%s*%c", i ? ", " : "", name - 1);
        fputs("]\n", t.out);
    }
    fputs(ROUTE_HEAD, t.out);
    yaml = text_end(&t);
    expect_refusal(yaml, 8 * 9, 2, 8, "*a: aliases are not supported; write the value out in full");
    expect_error(yaml, 9, 36, "*h: aliases are not supported");
    free(yaml);

    /* libyaml registers an anchor before its list's items: this list holds itself. */
    expect_refusal("routes: &r [*r]\n", 1, 1, 13, "*r: aliases are not supported");
    /* The one use that would look natural, a limit shared by two routes. */
    expect_refusal(ROUTE_HEAD "    limit: &std {algorithm: gcra, requests: 5, per: 1s}\n"
                              "  - name: b\n    match: {path_prefix: /b/}\n"
                              "    upstream: \"http://127.0.0.1:9000\"\n    limit: *std\n",
                   1, 9, 12, "*std: aliases are not supported");
}

/* Nesting past CONFIG_MAX_DEPTH ends the reading at once: 1 MiB of '[' would keep libyaml's
 * scanner busy for many minutes (its cost grows with the square of the depth). */
static void test_deep_nesting_refused(void)
{
    struct text t;
    char *yaml;

    text_start(&t);
    fputs("routes: ", t.out);
    for (int i = 8; i < CONFIG_MAX_FILE; i++)
        fputc('[', t.out);
    yaml = text_end(&t);
    CU_ASSERT_EQUAL(strlen(yaml), CONFIG_MAX_FILE);
    /* The top-level mapping is level 1, so the 32nd '[' opens level 33. */
    expect_refusal(yaml, 1, 1, 40, "mappings and lists may be nested at most 32 deep");
    free(yaml);

    text_start(&t);
    for (int i = 0; i < 40; i++)
        fprintf(t.out, "%*sk%d:\n", i, "", i);
    yaml = text_end(&t);
    expect_refusal(yaml, 1, 33, 33, "nested at most 32 deep");
    free(yaml);

    /* 32 is allowed; the walk then finds the key unknown. */
    text_start(&t);
    for (int i = 0; i < 32; i++)
        fprintf(t.out, "%*sk%d:%s\n", i, "", i, i == 31 ? " x" : "");
    yaml = text_end(&t);
    expect_refusal(yaml, 2, 1, 1, "unknown key \"k0\"");
    free(yaml);
}

/* Up to CONFIG_MAX_FILE bytes are read; one more is refused where it falls, by config_load()
 * and by config_parse() alike. */
static void test_file_size_bound(void)
{
    size_t head = strlen(ROUTE_HEAD);
    char *yaml = malloc(CONFIG_MAX_FILE + 2), *errors = NULL, where[96];
    struct config *c;

    CU_ASSERT_PTR_NOT_NULL_FATAL(yaml);
    memcpy(yaml, ROUTE_HEAD, head);
    yaml[head] = '#'; /* a comment to the end */
    memset(yaml + head + 1, 'x', CONFIG_MAX_FILE - head - 1);
    yaml[CONFIG_MAX_FILE] = '\0';
    c = load_text(yaml, &errors);
    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    CU_ASSERT_PTR_NOT_NULL(c); /* exactly CONFIG_MAX_FILE bytes */
    unload(c);

    yaml[CONFIG_MAX_FILE] = '\n';
    yaml[CONFIG_MAX_FILE + 1] = '\0';
    expect_refusal(yaml, 1, 5, (int)(CONFIG_MAX_FILE - head + 1),
                   "the file goes on past 1MiB, the most sluice reads");

    c = config_parse("big.yaml", yaml, CONFIG_MAX_FILE + 1, &errors);
    CU_ASSERT_PTR_NULL(c);
    snprintf(where, sizeof where, "big.yaml:5:%zu: the file goes on past 1MiB",
             CONFIG_MAX_FILE - head + 1);
    CU_ASSERT_PTR_NOT_NULL(errors != NULL ? strstr(errors, where) : NULL);
    free(errors);
    free(yaml);
}

static char *routes_text(int n)
{
    struct text t;

    text_start(&t);
    fputs("routes:\n", t.out);
    for (int i = 0; i < n; i++)
        fprintf(t.out, "  - {name: r%d, match: {path_prefix: /r%d/}, upstream: \"http://x:1\"}\n",
                i, i);
    return text_end(&t);
}

/* At most CONFIG_MAX_ROUTES routes; those within the bound are still read for their own
 * problems. */
static void test_route_count_bound(void)
{
    char *yaml = routes_text(CONFIG_MAX_ROUTES), *errors = NULL;
    struct config *c = load_text(yaml, &errors);

    CU_ASSERT_PTR_NOT_NULL(c);
    if (c != NULL) {
        CU_ASSERT_EQUAL(c->n_routes, CONFIG_MAX_ROUTES);
    }
    config_free(c);
    free(yaml);
    unlink(path);

    yaml = routes_text(CONFIG_MAX_ROUTES + 1);
    expect_refusal(yaml, 1, 1026, 5, "routes: at most 1024 routes are allowed; this is route 1025");
    yaml[strstr(yaml, "name: r1,") - yaml + 7] = '0'; /* r1 becomes r0 again */
    expect_refusal(yaml, 2, 3, 12, "name: route \"r0\" is defined twice");
    free(yaml);
}

static void test_limit_count_bound(void)
{
    struct text t;
    char *yaml;

    text_start(&t);
    fputs(ROUTE_HEAD "    limit:\n", t.out);
    for (int i = 0; i <= LIMITER_MAX_PER_REQUEST; i++)
        fprintf(t.out, "      - {name: l%d, algorithm: gcra, requests: 1, per: 1s}\n", i);
    yaml = text_end(&t);
    expect_refusal(yaml, 1, 6, 7, "limit: a list of 1 to 8 limits is expected");
    free(yaml);
}

/* Keys and values of at most CONFIG_MAX_SCALAR bytes, also once ${VAR} is replaced; no NUL. */
static void test_scalar_bounds(void)
{
    char long_value[CONFIG_MAX_SCALAR / 2 + 2], yaml[CONFIG_MAX_SCALAR + 256];

    memset(long_value, 'a', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    snprintf(yaml, sizeof yaml, ROUTE_HEAD "    name: %s%s\n", long_value, long_value);
    expect_refusal(yaml, 1, 5, 11, "a key or value may hold at most 4096 bytes");

    setenv("SLUICE_TEST_LONG", long_value, 1);
    expect_error(ROUTE_HEAD "    proxy: \"${SLUICE_TEST_LONG}${SLUICE_TEST_LONG}\"\n", 5, 12,
                 "the value is longer than 4096 bytes once its ${...} are replaced");
    unsetenv("SLUICE_TEST_LONG");

    /* "server\0x" would otherwise be read as server. */
    expect_refusal("\"server\\0x\": {}\n" ROUTE_HEAD, 1, 1, 1,
                   "a key or value may not hold a NUL character");
}

/* --- upstreams: servers, balance, health, retries and the forwarded head (issue 15) -------- */

#define ROUTE_START "routes:\n  - name: api\n    match: {path_prefix: /api/}\n"
/* Lines 4 and 5: an upstream mapping, open for more keys at six spaces. */
#define UPSTREAM_START ROUTE_START "    upstream:\n      servers: [\"http://127.0.0.1:9000\"]\n"

/* Loading `yaml` fails with one problem alone, at `line`:`col`, its message starting with
 * `message`. */
static void expect_one_error(const char *yaml, int line, int col, const char *message)
{
    char *errors = NULL, want[512];
    struct config *c = load_text(yaml, &errors);
    bool found;

    CU_ASSERT_PTR_NULL(c);
    unload(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(want, sizeof want, "%s:%d:%d: %s", path, line, col, message);
    found = strncmp(errors, want, strlen(want)) == 0 && count_lines(errors) == 1;
    if (!found)
        fprintf(stderr, "\nexpected only %s... in:\n%s", want, errors);
    CU_ASSERT_TRUE(found);
    free(errors);
}

static void expect_server(const struct config_server *s, const char *url, const char *origin,
                          const char *base_path, const char *authority, uint32_t weight)
{
    CU_ASSERT_STRING_EQUAL(s->url, url);
    CU_ASSERT_STRING_EQUAL(s->origin, origin);
    CU_ASSERT_STRING_EQUAL(s->base_path, base_path);
    CU_ASSERT_STRING_EQUAL(s->authority, authority);
    CU_ASSERT_EQUAL(s->weight, weight);
}

/* What a route without any of the new keys gets; `r`'s upstream is the mapping or URL. */
static void expect_upstream_defaults(const struct config_route *r)
{
    CU_ASSERT_EQUAL(r->upstream.balance, CONFIG_BALANCE_ROUND_ROBIN);
    CU_ASSERT_EQUAL(r->upstream.passive.max_fails, 3);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_window_ns, 10000000000);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_timeout_ns, 10000000000);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_on,
                    CONFIG_FAIL_CONNECT | CONFIG_FAIL_TIMEOUT | CONFIG_FAIL_RESET);
    CU_ASSERT_FALSE(r->upstream.health_check.enabled);
    CU_ASSERT_PTR_NULL(r->upstream.health_check.path);
    CU_ASSERT_PTR_NULL(r->upstream.health_check.expect_status);
    CU_ASSERT_EQUAL(r->retries.attempts, 1);
    CU_ASSERT_EQUAL(r->retries.on, 0);
    CU_ASSERT_EQUAL(r->retries.budget_percent, 20);
    CU_ASSERT_FALSE(r->forwarding.strip_prefix);
    CU_ASSERT_EQUAL(r->forwarding.host_mode, CONFIG_HOST_PRESERVE);
    CU_ASSERT_PTR_NULL(r->forwarding.host_name);
    CU_ASSERT_EQUAL(r->forwarding.n_set_headers, 0);
    CU_ASSERT_EQUAL(r->forwarding.n_remove_headers, 0);
}

static void test_upstream_url_is_one_server(void)
{
    struct config *c = load_valid(ROUTE_HEAD);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].upstream.n_servers, 1);
    expect_server(&c->routes[0].upstream.servers[0], "http://127.0.0.1:9000",
                  "http://127.0.0.1:9000", "", "127.0.0.1:9000", 1);
    expect_upstream_defaults(&c->routes[0]);
    CU_ASSERT_TRUE(c->server.ready_needs_upstreams);
    unload(c);

    c = load_valid(ROUTE_START "    upstream: \"https://API.Example.com/base//\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    expect_server(&c->routes[0].upstream.servers[0], "https://api.example.com:443/base",
                  "https://api.example.com:443", "/base", "api.example.com", 1);
    unload(c);

    /* The mapping with servers alone has the same defaults. */
    c = load_valid(UPSTREAM_START);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].upstream.n_servers, 1);
    expect_server(&c->routes[0].upstream.servers[0], "http://127.0.0.1:9000",
                  "http://127.0.0.1:9000", "", "127.0.0.1:9000", 1);
    expect_upstream_defaults(&c->routes[0]);
    unload(c);
}

/* Each server's parts; the port goes into the authority only when it is not the scheme's. */
static void test_upstream_servers(void)
{
    struct config *c = load_valid(
        ROUTE_START "    upstream:\n"
                    "      servers:\n"
                    "        - \"http://10.0.0.1:80/v1/\"\n"
                    "        - {url: \"HTTPS://API.example.com\", weight: 5}\n"
                    "        - {url: \"https://api.example.com:8443/\", weight: 1000}\n"
                    "        - url: \"http://[::1]:8080\"\n"
                    "          weight: 1\n"
                    "        - \"https://[2001:DB8::1]:443/x\"\n"
                    "        - \"http://a.example:443\"\n"
                    "        - \"https://a.example:80\"\n"
                    "      balance: least_request\n"
                    "      max_fails: 0\n"
                    "      fail_window: 1s\n"
                    "      fail_timeout: 1h\n"
                    "      fail_on: [connect_failure, 502, \"503\", timeout, reset, 504]\n");
    const struct config_route *r;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    r = &c->routes[0];
    CU_ASSERT_EQUAL_FATAL(r->upstream.n_servers, 7);
    expect_server(&r->upstream.servers[0], "http://10.0.0.1:80/v1", "http://10.0.0.1:80", "/v1",
                  "10.0.0.1", 1);
    expect_server(&r->upstream.servers[1], "https://api.example.com:443",
                  "https://api.example.com:443", "", "api.example.com", 5);
    expect_server(&r->upstream.servers[2], "https://api.example.com:8443",
                  "https://api.example.com:8443", "", "api.example.com:8443", 1000);
    expect_server(&r->upstream.servers[3], "http://[::1]:8080", "http://[::1]:8080", "",
                  "[::1]:8080", 1);
    expect_server(&r->upstream.servers[4], "https://[2001:db8::1]:443/x",
                  "https://[2001:db8::1]:443", "/x", "[2001:db8::1]", 1);
    expect_server(&r->upstream.servers[5], "http://a.example:443", "http://a.example:443", "",
                  "a.example:443", 1);
    expect_server(&r->upstream.servers[6], "https://a.example:80", "https://a.example:80", "",
                  "a.example:80", 1);
    CU_ASSERT_EQUAL(r->upstream.balance, CONFIG_BALANCE_LEAST_REQUEST);
    CU_ASSERT_EQUAL(r->upstream.passive.max_fails, 0);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_window_ns, 1000000000);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_timeout_ns, 3600000000000);
    CU_ASSERT_EQUAL(r->upstream.passive.fail_on, CONFIG_FAIL_CONNECT | CONFIG_FAIL_TIMEOUT |
                                                     CONFIG_FAIL_RESET | CONFIG_FAIL_502 |
                                                     CONFIG_FAIL_503 | CONFIG_FAIL_504);
    unload(c);

    /* Another base path on the same origin is another server. */
    c = load_valid(ROUTE_START "    upstream:\n      servers: [\"http://a/v1\", \"http://a/v2\", "
                               "\"http://a\"]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].upstream.n_servers, 3);
    unload(c);

    c = load_valid(UPSTREAM_START "      balance: random_two\n      max_fails: 1000\n"
                                  "      fail_on: []\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].upstream.balance, CONFIG_BALANCE_RANDOM_TWO);
    CU_ASSERT_EQUAL(c->routes[0].upstream.passive.max_fails, 1000);
    CU_ASSERT_EQUAL(c->routes[0].upstream.passive.fail_on, 0); /* nothing counts against a server */
    unload(c);

    c = load_valid(UPSTREAM_START "      balance: round_robin\n      fail_on: [503]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].upstream.balance, CONFIG_BALANCE_ROUND_ROBIN);
    CU_ASSERT_EQUAL(c->routes[0].upstream.passive.fail_on, CONFIG_FAIL_503);
    unload(c);
}

static char *servers_text(int n)
{
    struct text t;

    text_start(&t);
    fputs(ROUTE_START "    upstream:\n      servers:\n", t.out);
    for (int i = 0; i < n; i++)
        fprintf(t.out, "        - \"http://10.0.%d.%d:8080\"\n", i / 256, i % 256);
    return text_end(&t);
}

static void test_upstream_server_count_bound(void)
{
    char *yaml = servers_text(CONFIG_MAX_SERVERS);
    struct config *c = load_valid(yaml);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].upstream.n_servers, CONFIG_MAX_SERVERS);
    unload(c);
    free(yaml);

    yaml = servers_text(CONFIG_MAX_SERVERS + 1);
    expect_one_error(yaml, 70, 11, "servers: at most 64 servers are allowed; this is server 65");
    free(yaml);

    expect_one_error(ROUTE_START "    upstream:\n      servers: []\n", 5, 16,
                     "servers: at least one server is required");
    expect_one_error(ROUTE_START "    upstream: {servers: \"http://a:1\"}\n", 4, 25,
                     "servers: expected a list of URLs or {url, weight}, found a scalar");
}

static void test_upstream_errors(void)
{
    expect_one_error(ROUTE_START "    upstream:\n      servers:\n"
                                 "        - \"http://a:80/x/\"\n"
                                 "        - {url: \"HTTP://A/x\", weight: 2}\n",
                     7, 17, "servers: http://a:80/x appears twice (first at line 6)");
    expect_one_error(ROUTE_START "    upstream:\n      servers:\n"
                                 "        - {url: \"http://a:8080\"}\n"
                                 "        - \"http://b\"\n"
                                 "        - \"http://a:8080/\"\n",
                     8, 11, "servers: http://a:8080 appears twice (first at line 6)");
    expect_one_error(ROUTE_START "    upstream: {balance: random_two}\n", 4, 15,
                     "upstream: servers is required");
    expect_one_error(ROUTE_START "    upstream: [\"http://a:1\"]\n", 4, 15,
                     "upstream: expected a URL or a mapping with servers:, found a list");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [\"ftp://a\"]\n", 5, 17,
                     "servers: scheme must be http or https, not \"ftp\"");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [\"a b\"]\n", 5, 17,
                     "servers: \"a b\" is not a URL like http://127.0.0.1:9000");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [{url: \"http://a/?q=1\"}]\n", 5,
                     23, "url: only scheme, host, port and a base path are allowed");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [\"http://u:p@a/\"]\n", 5, 17,
                     "servers: only scheme, host, port and a base path are allowed");
    expect_one_error(ROUTE_START "    upstream: \"http://a/#top\"\n", 4, 15,
                     "upstream: only scheme, host, port and a base path are allowed");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [{weight: 2}]\n", 5, 17,
                     "servers: each server needs a url");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [[\"http://a\"]]\n", 5, 17,
                     "servers: expected a URL or {url, weight}, found a list");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [{url: \"http://a\", wieght: 2}]\n",
                     5, 35, "servers: unknown key \"wieght\"");
    expect_one_error(ROUTE_START "    upstream:\n      servers: [{url: \"http://a\", weight: 0}]\n",
                     5, 43, "weight: \"0\" is not a whole number from 1 to 1000");
    expect_one_error(ROUTE_START "    upstream:\n      servers:\n        - url: \"http://a\"\n"
                                 "          weight: 1001\n",
                     7, 19, "weight: \"1001\" is not a whole number from 1 to 1000");
    expect_one_error(UPSTREAM_START "      balance: fastest\n", 6, 16,
                     "balance: \"fastest\" is not one of round_robin, least_request or random_two");
    expect_one_error(UPSTREAM_START "      max_fails: 1001\n", 6, 18,
                     "max_fails: \"1001\" is not a whole number from 0 to 1000");
    expect_one_error(UPSTREAM_START "      fail_window: 999ms\n", 6, 20,
                     "fail_window: \"999ms\" is out of range (from 1s to 1h)");
    expect_one_error(UPSTREAM_START "      fail_timeout: 61m\n", 6, 21,
                     "fail_timeout: \"61m\" is out of range (from 1s to 1h)");
    expect_one_error(UPSTREAM_START "      fail_on: [reset, 500]\n", 6, 24,
                     "fail_on: \"500\" is not one of connect_failure, timeout, reset, 502, 503 or "
                     "504");
    expect_one_error(UPSTREAM_START "      fail_on: [reset, reset]\n", 6, 24,
                     "fail_on: reset appears twice");
    expect_one_error(UPSTREAM_START "      fail_on: reset\n", 6, 16,
                     "fail_on: expected a list such as [connect_failure, reset, 503], found a "
                     "scalar");
    expect_one_error(UPSTREAM_START "      server: x\n", 6, 7, "upstream: unknown key \"server\"");
}

static void test_health_check(void)
{
    struct config *c = load_valid(UPSTREAM_START "      health_check: {path: /healthz}\n");
    const struct config_route *r;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    r = &c->routes[0];
    CU_ASSERT_TRUE(r->upstream.health_check.enabled);
    CU_ASSERT_STRING_EQUAL(r->upstream.health_check.path, "/healthz");
    CU_ASSERT_EQUAL(r->upstream.health_check.interval_ns, 5000000000);
    CU_ASSERT_EQUAL(r->upstream.health_check.timeout_ns, 2000000000);
    CU_ASSERT_EQUAL(r->upstream.health_check.healthy, 2);
    CU_ASSERT_EQUAL(r->upstream.health_check.unhealthy, 3);
    CU_ASSERT_EQUAL_FATAL(r->upstream.health_check.n_expect_status, 1);
    CU_ASSERT_EQUAL(r->upstream.health_check.expect_status[0], 200);
    unload(c);

    c = load_valid(UPSTREAM_START "      health_check:\n"
                                  "        path: \"/health?deep=1\"\n"
                                  "        interval: 100ms\n"
                                  "        timeout: 100ms\n"
                                  "        healthy: 1\n"
                                  "        unhealthy: 100\n"
                                  "        expect_status: [200, 204, \"599\", 100]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    r = &c->routes[0];
    CU_ASSERT_STRING_EQUAL(r->upstream.health_check.path, "/health?deep=1");
    CU_ASSERT_EQUAL(r->upstream.health_check.interval_ns, 100000000);
    CU_ASSERT_EQUAL(r->upstream.health_check.timeout_ns,
                    100000000); /* equal to the interval: allowed */
    CU_ASSERT_EQUAL(r->upstream.health_check.healthy, 1);
    CU_ASSERT_EQUAL(r->upstream.health_check.unhealthy, 100);
    CU_ASSERT_EQUAL_FATAL(r->upstream.health_check.n_expect_status, 4);
    CU_ASSERT_EQUAL(r->upstream.health_check.expect_status[0], 200);
    CU_ASSERT_EQUAL(r->upstream.health_check.expect_status[1], 204);
    CU_ASSERT_EQUAL(r->upstream.health_check.expect_status[2], 599);
    CU_ASSERT_EQUAL(r->upstream.health_check.expect_status[3], 100);
    unload(c);

    c = load_valid(UPSTREAM_START "      health_check: {path: /h, interval: 1h, timeout: 10ms}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].upstream.health_check.interval_ns, 3600000000000);
    CU_ASSERT_EQUAL(c->routes[0].upstream.health_check.timeout_ns, 10000000);
    unload(c);
}

static void test_health_check_errors(void)
{
    /* The timeout longer than the interval: at the timeout, or at the interval when the
     * timeout is the default 2s. */
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n        interval: 1s\n"
                                    "        timeout: 1500ms\n",
                     9, 18, "health_check: timeout (1500ms) is longer than interval (1s)");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n        interval: 1s\n",
                     8, 19, "health_check: timeout (2s) is longer than interval (1s)");
    expect_one_error(UPSTREAM_START "      health_check: {interval: 10s}\n", 6, 21,
                     "health_check: path is required");
    expect_one_error(UPSTREAM_START "      health_check: /healthz\n", 6, 21,
                     "health_check: expected a mapping of keys, found a scalar");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: healthz\n", 7, 15,
                     "path: \"healthz\" is not a path like /healthz");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: \"/a b\"\n", 7, 15,
                     "path: \"/a b\" is not a path like /healthz");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: \"/a#b\"\n", 7, 15,
                     "path: \"/a#b\" is not a path like /healthz");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: \"/a\\r\\nX: y\"\n", 7, 15,
                     "path: \"/a\\x0d\\nX: y\" is not a path like /healthz");
    expect_one_error(UPSTREAM_START
                     "      health_check:\n        path: /h\n        interval: 99ms\n",
                     8, 19, "interval: \"99ms\" is out of range (from 100ms to 1h)");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n        timeout: 9ms\n",
                     8, 18, "timeout: \"9ms\" is out of range (from 10ms to 1h)");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n        healthy: 0\n",
                     8, 18, "healthy: \"0\" is not a whole number from 1 to 100");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        unhealthy: 101\n",
                     8, 20, "unhealthy: \"101\" is not a whole number from 1 to 100");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: []\n",
                     8, 24, "expect_status: expected a list of 1 to 32 status codes");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: 200\n",
                     8, 24, "expect_status: expected a list of 1 to 32 status codes");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: [200, 99]\n",
                     8, 30, "expect_status: \"99\" is not a status code from 100 to 599");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: [600]\n",
                     8, 25, "expect_status: \"600\" is not a status code from 100 to 599");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: [200, 204, 200]\n",
                     8, 35, "expect_status: 200 appears twice");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n"
                                    "        expect_status: [200, 201, 202, 203, 204, 205, 206, "
                                    "207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, "
                                    "219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, "
                                    "231, 232]\n",
                     8, 24, "expect_status: expected a list of 1 to 32 status codes");
    expect_one_error(UPSTREAM_START "      health_check:\n        path: /h\n        port: 8081\n",
                     8, 9, "health_check: unknown key \"port\"");
}

static void test_retries(void)
{
    struct config *c = load_valid(ROUTE_HEAD "    retries: {}\n");

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].retries.attempts, 2);
    CU_ASSERT_EQUAL(c->routes[0].retries.on, CONFIG_FAIL_CONNECT | CONFIG_FAIL_RESET);
    CU_ASSERT_EQUAL(c->routes[0].retries.budget_percent, 20);
    unload(c);

    c = load_valid(ROUTE_HEAD "    retries:\n      attempts: 10\n      on: [timeout, 503, 502]\n"
                              "      budget: 20%\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].retries.attempts, 10);
    CU_ASSERT_EQUAL(c->routes[0].retries.on,
                    CONFIG_FAIL_TIMEOUT | CONFIG_FAIL_502 | CONFIG_FAIL_503);
    CU_ASSERT_EQUAL(c->routes[0].retries.budget_percent, 20);
    unload(c);

    c = load_valid(ROUTE_HEAD "    retries: {attempts: 1, on: [], budget: 0}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].retries.attempts, 1);
    CU_ASSERT_EQUAL(c->routes[0].retries.on, 0);
    CU_ASSERT_EQUAL(c->routes[0].retries.budget_percent, 0);
    unload(c);

    c = load_valid(ROUTE_HEAD "    retries: {budget: \"100%\", on: [connect_failure, 504]}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].retries.attempts, 2);
    CU_ASSERT_EQUAL(c->routes[0].retries.on, CONFIG_FAIL_CONNECT | CONFIG_FAIL_504);
    CU_ASSERT_EQUAL(c->routes[0].retries.budget_percent, 100);
    unload(c);

    c = load_valid(ROUTE_HEAD "    retries: {budget: 100}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].retries.budget_percent, 100);
    unload(c);

    expect_one_error(ROUTE_HEAD "    retries: {attempts: 0}\n", 5, 25,
                     "attempts: \"0\" is not a whole number from 1 to 10");
    expect_one_error(ROUTE_HEAD "    retries: {attempts: 11}\n", 5, 25,
                     "attempts: \"11\" is not a whole number from 1 to 10");
    expect_one_error(ROUTE_HEAD "    retries: {budget: 101%}\n", 5, 23,
                     "budget: \"101%\" is not a percentage from 0 to 100 (like 20%)");
    expect_one_error(ROUTE_HEAD "    retries: {budget: 20.5%}\n", 5, 23,
                     "budget: \"20.5%\" is not a percentage");
    expect_one_error(ROUTE_HEAD "    retries: {budget: \"%\"}\n", 5, 23,
                     "budget: \"%\" is not a percentage");
    expect_one_error(ROUTE_HEAD "    retries: {budget: \"20%%\"}\n", 5, 23,
                     "budget: \"20%%\" is not a percentage");
    expect_one_error(ROUTE_HEAD "    retries: {budget: -1}\n", 5, 23,
                     "budget: \"-1\" is not a percentage");
    expect_one_error(ROUTE_HEAD "    retries:\n      on: [connect_failure, 500]\n", 6, 29,
                     "on: \"500\" is not one of connect_failure, timeout, reset, 502, 503 or 504");
    expect_one_error(ROUTE_HEAD "    retries:\n      on: timeout\n", 6, 11,
                     "on: expected a list such as");
    expect_one_error(ROUTE_HEAD "    retries:\n      tries: 3\n", 6, 7,
                     "retries: unknown key \"tries\"");
    expect_one_error(ROUTE_HEAD "    retries: 3\n", 5, 14,
                     "retries: expected a mapping of keys, found a scalar");
}

static void test_strip_prefix_and_readiness(void)
{
    struct config *c = load_valid("server: {ready_needs_upstreams: false}\n" ROUTE_HEAD
                                  "    strip_prefix: true\n");

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->routes[0].forwarding.strip_prefix);
    CU_ASSERT_FALSE(c->server.ready_needs_upstreams);
    unload(c);

    c = load_valid("server: {ready_needs_upstreams: true}\n" ROUTE_HEAD
                   "    strip_prefix: false\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_FALSE(c->routes[0].forwarding.strip_prefix);
    CU_ASSERT_TRUE(c->server.ready_needs_upstreams);
    unload(c);

    expect_one_error(ROUTE_HEAD "    strip_prefix: yes\n", 5, 19,
                     "strip_prefix: expected true or false, not \"yes\"");
    expect_one_error("server: {ready_needs_upstreams: 0}\n" ROUTE_HEAD, 1, 33,
                     "ready_needs_upstreams: expected true or false, not \"0\"");
}

/* The route's host: loads as `mode` and `name` (NULL: none). */
static void expect_host(const char *value, enum config_host_mode mode, const char *name)
{
    char yaml[1024];
    struct config *c;

    snprintf(yaml, sizeof yaml, ROUTE_HEAD "    host: %s\n", value);
    c = load_valid(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].forwarding.host_mode, mode);
    if (name == NULL) {
        CU_ASSERT_PTR_NULL(c->routes[0].forwarding.host_name);
    } else {
        CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.host_name, name);
    }
    unload(c);
}

static void test_route_host(void)
{
    char yaml[1024], name[300];
    struct config *c;

    expect_host("preserve", CONFIG_HOST_PRESERVE, NULL);
    expect_host("upstream", CONFIG_HOST_UPSTREAM, NULL);
    expect_host("API.Example.com", CONFIG_HOST_NAME, "api.example.com");
    expect_host("\"api.example.com:8443\"", CONFIG_HOST_NAME, "api.example.com:8443");
    expect_host("10.0.0.1", CONFIG_HOST_NAME, "10.0.0.1");
    expect_host("\"[2001:DB8::1]:65535\"", CONFIG_HOST_NAME, "[2001:db8::1]:65535");
    expect_host("\"[::1]\"", CONFIG_HOST_NAME, "[::1]");
    expect_host("localhost", CONFIG_HOST_NAME, "localhost");

    /* match.host chooses requests; the route's host: what the upstream is told. */
    c = load_valid("routes:\n  - name: api\n    match: {path_prefix: /, host: In.Example}\n"
                   "    upstream: \"https://10.0.0.1\"\n    host: upstream\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->routes[0].host, "in.example");
    CU_ASSERT_EQUAL(c->routes[0].forwarding.host_mode, CONFIG_HOST_UPSTREAM);
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream.servers[0].authority, "10.0.0.1");
    unload(c);

    memset(name, 'a', 255);
    name[255] = '\0';
    snprintf(yaml, sizeof yaml, ROUTE_HEAD "    host: %s\n", name);
    c = load_valid(yaml);
    CU_ASSERT_PTR_NOT_NULL(c);
    unload(c);
    snprintf(yaml, sizeof yaml, ROUTE_HEAD "    host: %sa\n", name);
    expect_one_error(yaml, 5, 11, "host: \"aaaa");

    expect_one_error(ROUTE_HEAD "    host: \"api example\"\n", 5, 11,
                     "host: \"api example\" is not preserve, upstream or a host name");
    expect_one_error(ROUTE_HEAD "    host: \"a_b.example\"\n", 5, 11,
                     "host: \"a_b.example\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"a/b\"\n", 5, 11, "host: \"a/b\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"a:0\"\n", 5, 11, "host: \"a:0\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"a:65536\"\n", 5, 11, "host: \"a:65536\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"a:\"\n", 5, 11, "host: \"a:\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"a:1:2\"\n", 5, 11, "host: \"a:1:2\" is not");
    expect_one_error(ROUTE_HEAD "    host: \":80\"\n", 5, 11, "host: \":80\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"[zz]\"\n", 5, 11, "host: \"[zz]\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"[::1]x\"\n", 5, 11, "host: \"[::1]x\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"::1\"\n", 5, 11, "host: \"::1\" is not");
    expect_one_error(ROUTE_HEAD "    host: \"\"\n", 5, 11, "host: \"\" is not");
    expect_one_error(ROUTE_HEAD "    host: [upstream]\n", 5, 11,
                     "host: expected a single value, found a list");
}

static void test_set_headers(void)
{
    struct config *c;
    const struct config_route *r;

    setenv("SLUICE_TEST_SET", "abc", 1);
    c = load_valid(ROUTE_HEAD "    set_headers:\n"
                              "      X-Client: \"${request.client_addr}\"\n"
                              "      X-Consumer: \"${request.consumer} via ${SLUICE_TEST_SET}\"\n"
                              "      X-Request-Id: \"${request.id}\"\n"
                              "      X-Env: \"${SLUICE_TEST_UNSET_SET:-d}-${request.consumer}\"\n"
                              "      x-plain: \"a value; with = signs\"\n"
                              "      X-Empty: \"\"\n");
    unsetenv("SLUICE_TEST_SET");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    r = &c->routes[0];
    CU_ASSERT_EQUAL_FATAL(r->forwarding.n_set_headers, 6);
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[0].name, "X-Client");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[0].value, "${request.client_addr}");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[1].name, "X-Consumer");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[1].value, "${request.consumer} via abc");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[2].value, "${request.id}");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[3].value, "d-${request.consumer}");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[4].name, "x-plain"); /* as written */
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[4].value, "a value; with = signs");
    CU_ASSERT_STRING_EQUAL(r->forwarding.set_headers[5].value, "");
    unload(c);

    c = load_valid(ROUTE_HEAD "    set_headers: {}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].forwarding.n_set_headers, 0);
    unload(c);
}

/* tracing.sample: 0 by default, a number from 0 to 1, each problem at its place. */
static void test_tracing(void)
{
    static const struct {
        const char *yaml;
        double sample;
    } accepted[] = {
        {ROUTE_HEAD, 0},
        {"tracing: {sample: 0.01}\n" ROUTE_HEAD, 0.01},
        {"tracing:\n  sample: 1\n" ROUTE_HEAD, 1},
        {"tracing: {sample: 0}\n" ROUTE_HEAD, 0},
        {"tracing: {sample: 1e-3}\n" ROUTE_HEAD, 0.001},
        {"tracing: {sample: \"${SLUICE_TEST_UNSET_SAMPLE:-0.5}\"}\n" ROUTE_HEAD, 0.5},
        {"tracing: {}\n" ROUTE_HEAD, 0},
    };

    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        struct config *c = load_valid(accepted[i].yaml);
        CU_ASSERT_DOUBLE_EQUAL(c->tracing.sample, accepted[i].sample, 1e-12);
        unload(c);
    }
    expect_one_error("tracing: {sample: 1.5}\n" ROUTE_HEAD, 1, 19,
                     "sample: \"1.5\" is not a number from 0 to 1 (like 0.01)");
    expect_one_error("tracing:\n  sample: -0.1\n" ROUTE_HEAD, 2, 11,
                     "sample: \"-0.1\" is not a number from 0 to 1");
    expect_one_error("tracing: {sample: 1%}\n" ROUTE_HEAD, 1, 19, "sample: \"1%\" is not");
    expect_one_error("tracing: {sample: nan}\n" ROUTE_HEAD, 1, 19, "sample: \"nan\" is not");
    expect_one_error("tracing: {sample: inf}\n" ROUTE_HEAD, 1, 19, "sample: \"inf\" is not");
    expect_one_error("tracing: {sample: 0x1p-1}\n" ROUTE_HEAD, 1, 19, "sample: \"0x1p-1\" is not");
    expect_one_error("tracing: {sample: \"\"}\n" ROUTE_HEAD, 1, 19, "sample: \"\" is not");
    expect_one_error("tracing: {sample: 0.5.1}\n" ROUTE_HEAD, 1, 19, "sample: \"0.5.1\" is not");
    expect_one_error("tracing: {sample: [0.5]}\n" ROUTE_HEAD, 1, 19,
                     "sample: expected a single value");
    expect_one_error("tracing: {rate: 0.5}\n" ROUTE_HEAD, 1, 11, "tracing: unknown key");
    expect_one_error("tracing: 0.5\n" ROUTE_HEAD, 1, 10, "tracing: expected a mapping");
}

static void test_set_headers_errors(void)
{
    static const char *const reserved[] = {
        "Keep-Alive", "Upgrade", "TE", "Trailer", "Proxy-Connection", "Expect", "x-forwarded-for"};
    char value[1100], yaml[1400], *many;
    struct config *c;
    struct text t;

    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-User: \"${request.user}\"\n", 6, 15,
                     "set_headers: ${request.user} is not one of ${request.client_addr}, "
                     "${request.consumer} or ${request.id}");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-Id: \"${request.id}-${request.}\"\n", 6,
                     13, "set_headers: ${request.} is not one of");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-Id: \"${request.id\"\n", 6, 13,
                     "\"${request.id\": expected ${NAME} or ${NAME:-default}");
    /* ${request.NAME} elsewhere is left as it is, for the value's own checks to refuse. */
    expect_one_error(ROUTE_HEAD "    timeout: \"${request.id}\"\n", 5, 14,
                     "timeout: \"${request.id}\" is not a duration");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      Host: api.example\n", 6, 7,
                     "set_headers: Host cannot be set: the route's host: says what it is");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      content-length: 5\n", 6, 7,
                     "set_headers: content-length cannot be set: the gateway frames the body");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      Transfer-Encoding: chunked\n", 6, 7,
                     "set_headers: Transfer-Encoding cannot be set: the gateway frames");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      Connection: close\n", 6, 7,
                     "set_headers: Connection cannot be set: it is hop-by-hop");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-Forwarded-For: 1.2.3.4\n", 6, 7,
                     "set_headers: X-Forwarded-For cannot be set: the gateway sets it");
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        char message[128];

        snprintf(yaml, sizeof yaml, ROUTE_HEAD "    set_headers:\n      %s: x\n", reserved[i]);
        snprintf(message, sizeof message, "set_headers: %s cannot be set: ", reserved[i]);
        expect_one_error(yaml, 6, 7, message);
    }
    expect_one_error(ROUTE_HEAD "    set_headers:\n      \"X A\": x\n", 6, 7,
                     "set_headers: \"X A\" is not a header field name");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      \"X:A\": x\n", 6, 7,
                     "set_headers: \"X:A\" is not a header field name");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-A: 1\n      X-B: 2\n      x-a: 3\n", 8,
                     7, "set_headers: x-a appears twice (first at line 6)");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-A: \"a\\r\\nX-Evil: 1\"\n", 6, 12,
                     "set_headers: the value of X-A must be one line of at most 1024 bytes");
    expect_one_error(ROUTE_HEAD "    set_headers:\n      X-A: [1]\n", 6, 12,
                     "set_headers: expected a single value, found a list");
    expect_one_error(ROUTE_HEAD "    set_headers: [X-A]\n", 5, 18,
                     "set_headers: expected a mapping of field names to values, found a list");

    /* 1024 bytes once ${VAR} is replaced, and not one more. */
    memset(value, 'v', 1024);
    value[1024] = '\0';
    setenv("SLUICE_TEST_LONG_VALUE", value, 1);
    snprintf(yaml, sizeof yaml,
             ROUTE_HEAD "    set_headers:\n      X-A: \"${SLUICE_TEST_LONG_VALUE}\"\n");
    c = load_valid(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(strlen(c->routes[0].forwarding.set_headers[0].value), 1024);
    unload(c);
    snprintf(yaml, sizeof yaml,
             ROUTE_HEAD "    set_headers:\n      X-A: \"${SLUICE_TEST_LONG_VALUE}v\"\n");
    expect_one_error(yaml, 6, 12, "set_headers: the value of X-A must be one line of at most");
    unsetenv("SLUICE_TEST_LONG_VALUE");

    text_start(&t);
    fputs(ROUTE_HEAD "    set_headers:\n", t.out);
    for (int i = 0; i <= 64; i++)
        fprintf(t.out, "      X-H%d: v\n", i);
    many = text_end(&t);
    expect_one_error(many, 70, 7, "set_headers: at most 64 fields; this is field 65");
    free(many);
}

static void test_remove_headers(void)
{
    struct config *c = load_valid(ROUTE_HEAD "    remove_headers: [X-Debug, cookie, Connection, "
                                             "X-Forwarded-For]\n");
    struct text t;
    char *many;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].forwarding.n_remove_headers, 4);
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.remove_headers[0], "X-Debug");
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.remove_headers[1], "cookie"); /* as given */
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.remove_headers[2], "Connection");
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.remove_headers[3], "X-Forwarded-For");
    unload(c);

    expect_one_error(ROUTE_HEAD "    remove_headers: [X-A, host]\n", 5, 27,
                     "remove_headers: host cannot be removed: the route's host: says what it is");
    expect_one_error(ROUTE_HEAD "    remove_headers: [Content-Length]\n", 5, 22,
                     "remove_headers: Content-Length cannot be removed: the gateway frames");
    expect_one_error(ROUTE_HEAD "    remove_headers: [TRANSFER-ENCODING]\n", 5, 22,
                     "remove_headers: TRANSFER-ENCODING cannot be removed");
    expect_one_error(ROUTE_HEAD "    remove_headers: []\n", 5, 21,
                     "remove_headers: an empty list removes nothing");
    expect_one_error(ROUTE_HEAD "    remove_headers: X-A\n", 5, 21,
                     "remove_headers: expected a list of field names, found a scalar");
    expect_one_error(ROUTE_HEAD "    remove_headers: [\"X A\"]\n", 5, 22,
                     "remove_headers: \"X A\" is not a header field name");
    expect_one_error(ROUTE_HEAD "    remove_headers: [X-A, x-a]\n", 5, 27,
                     "remove_headers: x-a appears twice");

    text_start(&t);
    fputs(ROUTE_HEAD "    remove_headers:\n", t.out);
    for (int i = 0; i <= 64; i++)
        fprintf(t.out, "      - X-H%d\n", i);
    many = text_end(&t);
    expect_one_error(many, 70, 9, "remove_headers: at most 64 fields; this is field 65");
    free(many);
}

static void test_upgrades(void)
{
    struct config *c = load_valid(ROUTE_HEAD);

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].forwarding.n_upgrades, 1); /* the default */
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.upgrades[0], "websocket");
    CU_ASSERT_EQUAL(c->routes[0].forwarding.tunnel_idle_timeout_ns, 3600 * 1000000000LL);
    unload(c);
    c = load_valid(ROUTE_HEAD "    upgrades: [WebSocket, my-proto.v2]\n"
                              "    tunnel_idle_timeout: 90s\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->routes[0].forwarding.n_upgrades, 2);
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.upgrades[0], "websocket"); /* in lower case */
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.upgrades[1], "my-proto.v2");
    CU_ASSERT_EQUAL(c->routes[0].forwarding.tunnel_idle_timeout_ns, 90 * 1000000000LL);
    unload(c);
    c = load_valid(ROUTE_HEAD "    upgrades: []\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].forwarding.n_upgrades, 0);
    unload(c);

    expect_one_error(ROUTE_HEAD "    upgrades: [websocket, H2C]\n", 5, 27,
                     "upgrades: h2c is refused: it would carry HTTP/2 requests past the limiter");
    expect_one_error(ROUTE_HEAD "    upgrades: [\"web socket\"]\n", 5, 16,
                     "upgrades: \"web socket\" is not a protocol name");
    expect_one_error(ROUTE_HEAD "    upgrades: [websocket, WEBSOCKET]\n", 5, 27,
                     "upgrades: WEBSOCKET appears twice");
    expect_one_error(ROUTE_HEAD "    upgrades: websocket\n", 5, 15,
                     "upgrades: expected a list of protocol names, found a scalar");
    expect_one_error(ROUTE_HEAD "    upgrades: [a, b, c, d, e, f, g, h, i]\n", 5, 40,
                     "upgrades: at most 8 protocols; this is protocol 9");
    expect_one_error(ROUTE_HEAD "    tunnel_idle_timeout: 500ms\n", 5, 26, "tunnel_idle_timeout");
}

static void test_missing_file(void)
{
    char *errors = NULL;

    CU_ASSERT_PTR_NULL(config_load("/nonexistent/sluice.yaml", &errors));
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "/nonexistent/sluice.yaml: cannot read"));
    free(errors);
}

/* log: {format, level}: every value, the defaults (text, info), and each problem where it is. */
static void test_log_settings(void)
{
    static const struct {
        const char *yaml;
        enum config_log_format format;
        enum config_log_level level;
    } accepted[] = {
        {"log: {format: text}\n" ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_INFO},
        {"log: {format: json}\n" ROUTE_HEAD, CONFIG_LOG_JSON, CONFIG_LOG_INFO},
        {"log: {level: debug}\n" ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_DEBUG},
        {"log: {level: info}\n" ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_INFO},
        {"log:\n  level: warn\n  format: json\n" ROUTE_HEAD, CONFIG_LOG_JSON, CONFIG_LOG_WARN},
        {"log: {level: error}\n" ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_ERROR},
        {"log: {}\n" ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_INFO},
        {ROUTE_HEAD, CONFIG_LOG_TEXT, CONFIG_LOG_INFO},
    };

    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        struct config *c = load_valid(accepted[i].yaml);
        CU_ASSERT_EQUAL(c->log.format, accepted[i].format);
        CU_ASSERT_EQUAL(c->log.level, accepted[i].level);
        unload(c);
    }
    expect_error("log: {format: yaml}\n" ROUTE_HEAD, 1, 15,
                 "format: \"yaml\" is not one of text or json");
    expect_error("log:\n  format: JSON\n" ROUTE_HEAD, 2, 11,
                 "format: \"JSON\" is not one of text or json");
    expect_error("log: {level: warning}\n" ROUTE_HEAD, 1, 14,
                 "level: \"warning\" is not one of debug, info, warn or error");
    expect_error("log: {level: [warn]}\n" ROUTE_HEAD, 1, 14,
                 "expected a single value, found a list");
    expect_error("log: {colour: true}\n" ROUTE_HEAD, 1, 7, "log: unknown key \"colour\"");
    expect_error("log: json\n" ROUTE_HEAD, 1, 6, "log: expected a mapping of keys, found a scalar");
}

/* server.access_log: a string as before, or {path, client}; client address (default), hash
 * or none; each problem where it is. */
static void test_access_log_settings(void)
{
    static const struct {
        const char *yaml;
        const char *path;
        enum config_access_client client;
    } accepted[] = {
        {ROUTE_HEAD, "stdout", CONFIG_ACCESS_CLIENT_ADDRESS},
        {"server: {access_log: \"off\"}\n" ROUTE_HEAD, "off", CONFIG_ACCESS_CLIENT_ADDRESS},
        {"server: {access_log: /var/log/sluice.json}\n" ROUTE_HEAD, "/var/log/sluice.json",
         CONFIG_ACCESS_CLIENT_ADDRESS},
        {"server: {access_log: {path: stdout}}\n" ROUTE_HEAD, "stdout",
         CONFIG_ACCESS_CLIENT_ADDRESS},
        {"server: {access_log: {path: /tmp/a.json, client: address}}\n" ROUTE_HEAD, "/tmp/a.json",
         CONFIG_ACCESS_CLIENT_ADDRESS},
        {"server:\n  access_log:\n    client: hash\n    path: \"off\"\n" ROUTE_HEAD, "off",
         CONFIG_ACCESS_CLIENT_HASH},
        {"server: {access_log: {client: none}}\n" ROUTE_HEAD, "stdout", CONFIG_ACCESS_CLIENT_NONE},
    };

    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        struct config *c = load_valid(accepted[i].yaml);
        CU_ASSERT_STRING_EQUAL(c->server.access_log, accepted[i].path);
        CU_ASSERT_EQUAL(c->server.access_log_client, accepted[i].client);
        unload(c);
    }
    expect_error("server: {access_log: {client: ip}}\n" ROUTE_HEAD, 1, 31,
                 "client: \"ip\" is not one of address, hash or none");
    expect_error("server:\n  access_log:\n    path: stdout\n    client: [hash]\n" ROUTE_HEAD, 4, 13,
                 "client: expected a single value, found a list");
    expect_error("server: {access_log: {path: stdout, format: json}}\n" ROUTE_HEAD, 1, 37,
                 "access_log: unknown key \"format\"");
    expect_error("server: {access_log: {path: [stdout]}}\n" ROUTE_HEAD, 1, 29,
                 "path: expected a single value, found a list");
    expect_error("server: {access_log: [stdout]}\n" ROUTE_HEAD, 1, 22,
                 "access_log: expected a single value, found a list");
}

/* Two self-signed certificates with their keys (a.test and b.test) and a file of garbage, in
 * a new directory under /tmp (the loader's config files are written there too, so that the
 * config names them by a relative path); its name in `dir`. */
static void make_certificates(char dir[64])
{
    char command[1024];

    snprintf(dir, 64, "/tmp/sluice-unit-tls-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(command, sizeof command,
             "cd %s && for n in a b; do openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -keyout $n.key -out $n.pem -days 1 "
             "-subj /CN=$n.test -addext subjectAltName=DNS:$n.test 2>/dev/null || exit 1; done; "
             "echo garbage > garbage.pem",
             dir);
    CU_ASSERT_EQUAL_FATAL(system(command), 0);
}

static void remove_certificates(const char *dir)
{
    char command[128];

    snprintf(command, sizeof command, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(command), 0);
}

static void test_tls(void)
{
    char dir[64], yaml[2048], *errors = NULL;
    const char *name;
    struct config *c;

    make_certificates(dir);
    name = dir + strlen("/tmp/");
    /* Off by default. */
    c = load_text(ROUTE_HEAD, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_FALSE(c->server.tls.on);
    CU_ASSERT_EQUAL(c->server.tls.n_certs, 0);
    CU_ASSERT_PTR_NULL(c->server.tls.priorities);
    unload(c);
    /* cert and key, relative to the config's directory; the defaults. */
    snprintf(yaml, sizeof yaml, "server:\n  tls: {cert: %s/a.pem, key: %s/a.key}\n" ROUTE_HEAD,
             name, name);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->server.tls.on);
    CU_ASSERT_EQUAL_FATAL(c->server.tls.n_certs, 1);
    CU_ASSERT_TRUE(strncmp(c->server.tls.certs[0].cert, dir, strlen(dir)) == 0);
    CU_ASSERT_STRING_EQUAL(c->server.tls.certs[0].key + strlen(dir), "/a.key");
    CU_ASSERT_EQUAL(c->server.tls.min_version, CONFIG_TLS_1_2);
    CU_ASSERT_PTR_NULL(c->server.tls.ciphers);
    CU_ASSERT_STRING_EQUAL(c->server.tls.priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2");
    unload(c);
    /* Both forms: cert/key first, then the list; min_version 1.3; ciphers as the base. */
    snprintf(yaml, sizeof yaml,
             "server:\n  tls:\n    cert: %1$s/a.pem\n    key: %1$s/a.key\n"
             "    min_version: \"1.3\"\n    ciphers: \"SECURE256\"\n"
             "    certificates:\n      - {cert: %1$s/b.pem, key: %1$s/b.key}\n"
             "      - {cert: %1$s/a.pem, key: %1$s/a.key}\n" ROUTE_HEAD,
             dir);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->server.tls.n_certs, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(c->server.tls.certs[0].cert, "/a.pem"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c->server.tls.certs[1].cert, "/b.pem"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c->server.tls.certs[2].key, "/a.key"));
    CU_ASSERT_EQUAL(c->server.tls.min_version, CONFIG_TLS_1_3);
    CU_ASSERT_STRING_EQUAL(c->server.tls.ciphers, "SECURE256");
    CU_ASSERT_STRING_EQUAL(c->server.tls.priorities, "SECURE256:-VERS-ALL:+VERS-TLS1.3");
    unload(c);
    /* The list alone. */
    snprintf(yaml, sizeof yaml,
             "server:\n  tls: {certificates: [{cert: %1$s/b.pem, key: %1$s/b.key}]}\n" ROUTE_HEAD,
             dir);
    c = load_text(yaml, &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->server.tls.n_certs, 1);
    unload(c);
    remove_certificates(dir);
}

static void test_tls_errors(void)
{
    static const struct {
        const char *tls; /* the value of server.tls, "%1$s" the directory */
        const char *at;  /* where in it the error points ("%1$s" the directory) */
        const char *fragment;
    } cases[] = {
        {"{cert: %1$s/a.pem, key: %1$s/a.key, min_version: \"1.1\"}", "\"1.1\"",
         "min_version: \"1.1\" is not one of 1.2 or 1.3"},
        {"{cert: %1$s/a.pem, key: %1$s/a.key, min_version: \"1.0\"}", "\"1.0\"", "is not one of"},
        {"{cert: %1$s/a.pem, key: %1$s/a.key, colour: red}", "colour",
         "tls: unknown key \"colour\""},
        {"{cert: %1$s/a.pem}", "{", "tls: cert and key go together"},
        {"{key: %1$s/a.key}", "{", "tls: cert and key go together"},
        {"{min_version: \"1.2\"}", "{", "tls: needs cert and key, or certificates"},
        {"on", "on", "tls: expected a mapping"},
        {"{certificates: []}", "[]", "certificates: expected a list of {cert, key}"},
        {"{certificates: [{cert: %1$s/a.pem}]}", "{cert: %1$s/a.pem}",
         "certificates: each needs cert and key"},
        {"{certificates: [%1$s/a.pem]}", "%1$s/a.pem", "certificates: expected a mapping"},
        {"{cert: %1$s/a.pem, key: %1$s/a.key, ciphers: \"\"}", "\"\"", "ciphers: empty"},
        {"{cert: %1$s/a.pem, key: %1$s/a.key, ciphers: \"NORMAL:+BOGUS\"}", "\"NORMAL:+BOGUS\"",
         "ciphers: \"NORMAL:+BOGUS\" is not a GnuTLS priority string (the trouble starts at "
         "\"+BOGUS\")"},
        {"{cert: %1$s/none.pem, key: %1$s/a.key}", "%1$s/none.pem", "cert: cannot read"},
        {"{cert: /dev/zero, key: %1$s/a.key}", "/dev/zero",
         "cert: /dev/zero is not a regular file"},
        {"{cert: %1$s/a.pem, key: %1$s}", "%1$s}", "key: %1$s is not a regular file"},
        {"{cert: %1$s/garbage.pem, key: %1$s/a.key}", "%1$s/garbage.pem",
         "holds no PEM certificate chain"},
        {"{cert: %1$s/a.pem, key: %1$s/garbage.pem}", "%1$s/garbage.pem",
         "holds no PEM private key"},
        {"{cert: %1$s/a.pem, key: %1$s/b.key}", "%1$s/b.key", "b.key does not go with"},
        {"{cert: \"\", key: %1$s/a.key}", "\"\"", "cert: empty"},
    };
    char dir[64];

    make_certificates(dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tls[512], at[128], yaml[1024], fragment[256];

        snprintf(tls, sizeof tls, cases[i].tls, dir);
        snprintf(at, sizeof at, cases[i].at, dir);
        snprintf(fragment, sizeof fragment, cases[i].fragment, dir);
        snprintf(yaml, sizeof yaml, "server:\n  tls: %s\n" ROUTE_HEAD, tls);
        /* "  tls: " is 7 columns */
        expect_error(yaml, 2, 8 + (int)(strstr(tls, at) - tls), fragment);
    }
    remove_certificates(dir);
}

/* --- what --check tells a newcomer ------------------------------------------------------ */

#define MATCH_ROUTE(methods)                                                                       \
    "routes:\n  - name: a\n    match: {path_prefix: /, methods: " methods "}\n"                    \
    "    upstream: \"http://x:1\"\n"

static void test_methods_checked(void)
{
    struct config *c;

    expect_one_error(MATCH_ROUTE("[GET, GETT]"), 3, 44,
                     "methods: \"GETT\" is not an HTTP method (expected GET, HEAD, POST, PUT, "
                     "DELETE, CONNECT, OPTIONS, TRACE or PATCH)");
    expect_one_error(MATCH_ROUTE("[PURGE]"), 3, 39, "methods: \"PURGE\" is not an HTTP method");
    /* A cost names a method as the request line does. */
    expect_one_error(
        ROUTE_HEAD "    limit: {algorithm: gcra, requests: 5, per: 1s, cost: {GETT: 2}}\n", 5, 59,
        "cost: \"GETT\" is not default or a method in capitals (GET, HEAD, POST, "
        "PUT, DELETE, CONNECT, OPTIONS, TRACE or PATCH)");
    expect_one_error(ROUTE_HEAD
                     "    limit: {algorithm: gcra, requests: 5, per: 1s, cost: {post: 2}}\n",
                     5, 59, "cost: \"post\" is not default or a method in capitals");
    c = load_valid(ROUTE_HEAD
                   "    limit: {algorithm: gcra, requests: 5, per: 1s, cost: {PATCH: 2}}\n");
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].costs[0].method, "PATCH");
    unload(c);
    c = load_valid(MATCH_ROUTE("[get, Patch, OPTIONS, DELETE, PUT, HEAD, TRACE, CONNECT, POST]"));
    CU_ASSERT_STRING_EQUAL(c->routes[0].methods[0], "GET");
    CU_ASSERT_STRING_EQUAL(c->routes[0].methods[1], "PATCH");
    CU_ASSERT_STRING_EQUAL(c->routes[0].methods[8], "POST");
    CU_ASSERT_PTR_NULL(c->routes[0].methods[9]);
    unload(c);
}

static void test_limit_keys_named(void)
{
    expect_one_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 5, per: 0s}\n", 5, 48,
                     "per must be at least 1ms");
    expect_one_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 5, per: 500us}\n", 5, 48,
                     "per: \"500us\" is not a duration");
    expect_one_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 5, per: 367d}\n", 5, 48,
                     "per must be at most 366d");
    expect_one_error(ROUTE_HEAD "    limit: {algorithm: gcra, requests: 5}\n", 5, 12,
                     "limit: per is required");
    expect_one_error(ROUTE_HEAD "    limit: {requests: 5, per: 1s}\n", 5, 12,
                     "limit: algorithm is required");
    expect_one_error(ROUTE_HEAD "    limit: {per: 1s}\n", 5, 12,
                     "limit: algorithm and requests are required");
    expect_one_error(ROUTE_HEAD "    limit: {name: x}\n", 5, 12,
                     "limit: algorithm, requests and per are required");
}

static void test_max_body_bounded(void)
{
    struct config *c;

    expect_one_error("server: {max_body: 65GiB}\n" ROUTE_HEAD, 1, 20,
                     "max_body: \"65GiB\" is out of range (at most 64GiB)");
    expect_one_error("server: {max_body: 100000000000}\n" ROUTE_HEAD, 1, 20,
                     "max_body: \"100000000000\" is out of range");
    c = load_valid("server: {max_body: 64GiB}\n" ROUTE_HEAD);
    CU_ASSERT_EQUAL(c->server.max_body, 64ULL << 30);
    unload(c);
    c = load_valid("server: {max_body: 0}\n" ROUTE_HEAD);
    CU_ASSERT_EQUAL(c->server.max_body, 0);
    unload(c);
}

static void test_did_you_mean(void)
{
    expect_one_error("server: {max_bdy: 1MiB}\n" ROUTE_HEAD, 1, 10,
                     "server: unknown key \"max_bdy\"; did you mean max_body?");
    expect_one_error("server: {Listen: \"127.0.0.1:1\"}\n" ROUTE_HEAD, 1, 10,
                     "server: unknown key \"Listen\"; did you mean listen?");
    expect_one_error("server: {MAX_BODY: 1MiB}\n" ROUTE_HEAD, 1, 10,
                     "server: unknown key \"MAX_BODY\"; did you mean max_body?");
    expect_one_error(ROUTE_HEAD "    limit: {algoritm: gcra, requests: 5, per: 1s}\n", 5, 13,
                     "limit: unknown key \"algoritm\"; did you mean algorithm?");
    expect_one_error(ROUTE_HEAD "    mtach: {path_prefix: /}\n", 5, 5,
                     "route: unknown key \"mtach\"; did you mean match?");
    /* Nothing near: no guess. */
    expect_one_error("server:\n  colour: blue\n" ROUTE_HEAD, 2, 3,
                     "server: unknown key \"colour\"\n");
    /* Two keys equally near (deny and key): no guess either. */
    expect_one_error(ROUTE_HEAD "    dey: ip\n", 5, 5, "route: unknown key \"dey\"\n");
}

static void test_merge_keys_refused(void)
{
    struct config *c;

    /* The usual way to share route settings in YAML, refused at the <<, alias and all. */
    expect_one_error("routes:\n  - &base\n    name: a\n    match: {path_prefix: /a/}\n"
                     "    upstream: \"http://x:1\"\n  - <<: *base\n    name: b\n",
                     6, 5,
                     "<<: merge keys are not supported; give routes the same limits with "
                     "plans:");
    expect_one_error(ROUTE_HEAD "    <<: {timeout: 5s}\n", 5, 5,
                     "<<: merge keys are not supported");
    /* "<<" quoted is an ordinary (unknown) key; a value << is no merge key. */
    expect_one_error(ROUTE_HEAD "    \"<<\": 1\n", 5, 5, "route: unknown key \"<<\"");
    c = load_valid(ROUTE_HEAD "    set_headers: {X-Arrows: <<}\n");
    CU_ASSERT_STRING_EQUAL(c->routes[0].forwarding.set_headers[0].value, "<<");
    unload(c);
}

static void test_directory_named(void)
{
    char dir[] = "/tmp/sluice-test-dir-XXXXXX", want[128], *errors = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    CU_ASSERT_PTR_NULL(config_load(dir, &errors));
    snprintf(want, sizeof want, "%s: is a directory; name the config file in it (such as %s/", dir,
             dir);
    CU_ASSERT_PTR_NOT_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL(errors != NULL ? strstr(errors, want) : NULL);
    free(errors);
    rmdir(dir);
}

/* Two routes, `first` and `second` (each "path_prefix: ..., more" inside match: {}, then any
 * route keys), loaded: their warnings, or NULL; the caller frees them. */
static char *route_pair_warnings(const char *first, const char *second)
{
    char yaml[1024], *warnings;
    struct config *c;

    snprintf(yaml, sizeof yaml,
             "routes:\n  - name: a\n    match: {%s}\n    upstream: \"http://x:1\"\n"
             "  - name: b\n    match: {%s}\n    upstream: \"http://x:1\"\n",
             first, second);
    c = load_valid(yaml);
    warnings = c->warnings != NULL ? strdup(c->warnings) : NULL;
    unload(c);
    return warnings;
}

static void expect_shadowed(const char *first, const char *second, const char *how)
{
    char *warnings = route_pair_warnings(first, second), want[512];

    snprintf(want, sizeof want,
             "%s:6:12: warning: route \"b\" can never match: route \"a\" (line 3) comes first "
             "with the same path_prefix %s\n",
             path, how);
    if (warnings == NULL || strcmp(warnings, want) != 0)
        fprintf(stderr, "\nexpected %s for {%s} then {%s}, got %s", want, first, second,
                warnings != NULL ? warnings : "none\n");
    CU_ASSERT_PTR_NOT_NULL(warnings);
    CU_ASSERT_STRING_EQUAL(warnings != NULL ? warnings : "", want);
    free(warnings);
}

static void expect_not_shadowed(const char *first, const char *second)
{
    char *warnings = route_pair_warnings(first, second);

    if (warnings != NULL)
        fprintf(stderr, "\nexpected no warning for {%s} then {%s}, got %s", first, second,
                warnings);
    CU_ASSERT_PTR_NULL(warnings);
    free(warnings);
}

static void test_shadowed_routes_warned(void)
{
    expect_shadowed("path_prefix: /api/", "path_prefix: /api/, methods: [GET]",
                    "/api/, any method and any host");
    expect_shadowed("path_prefix: /api/, methods: [GET, POST]",
                    "path_prefix: /api/, methods: [post]",
                    "/api/, every method of this one and any host");
    /* HEAD is matched as GET is (routes.c). */
    expect_shadowed("path_prefix: /api/, methods: [GET]", "path_prefix: /api/, methods: [HEAD]",
                    "/api/, every method of this one and any host");
    expect_shadowed("path_prefix: /, host: api.example.com",
                    "path_prefix: /, host: API.example.com, methods: [PUT]",
                    "/, any method and the same host");
    expect_shadowed("path_prefix: /api/", "path_prefix: /api/, host: api.example.com",
                    "/api/, any method and any host");
    /* Each takes requests the other does not. */
    expect_not_shadowed("path_prefix: /api/, methods: [GET]", "path_prefix: /api/");
    expect_not_shadowed("path_prefix: /api/, methods: [GET]",
                        "path_prefix: /api/, methods: [GET, POST]");
    expect_not_shadowed("path_prefix: /api/, methods: [HEAD]",
                        "path_prefix: /api/, methods: [GET]");
    expect_not_shadowed("path_prefix: /api/, host: a.example",
                        "path_prefix: /api/, host: b.example");
    expect_not_shadowed("path_prefix: /api/, host: a.example", "path_prefix: /api/");
    /* The longest prefix wins, wherever it stands. */
    expect_not_shadowed("path_prefix: /", "path_prefix: /api/");
    expect_not_shadowed("path_prefix: /api/", "path_prefix: /api");
}

/* A strip_prefix route takes whole segments only: /api does not take /apix from a later /api. */
static void test_strip_prefix_shadowing(void)
{
    struct config *c;

    c = load_valid("routes:\n  - name: a\n    match: {path_prefix: /api}\n    strip_prefix: true\n"
                   "    upstream: \"http://x:1\"\n"
                   "  - name: b\n    match: {path_prefix: /api}\n    upstream: \"http://x:1\"\n");
    CU_ASSERT_PTR_NULL(c->warnings);
    unload(c);
    c = load_valid("routes:\n  - name: a\n    match: {path_prefix: /api/}\n    strip_prefix: true\n"
                   "    upstream: \"http://x:1\"\n"
                   "  - name: b\n    match: {path_prefix: /api/}\n    upstream: \"http://x:1\"\n");
    CU_ASSERT_PTR_NOT_NULL(c->warnings);
    CU_ASSERT_PTR_NOT_NULL(c->warnings != NULL ? strstr(c->warnings, ":7:12: warning: route \"b\"")
                                               : NULL);
    unload(c);
}

static void test_log_memory_budget(void)
{
    struct config *c;

    /* 1000 x 8 B x 100,000 = 762.9 MiB, over the default 256MiB. */
    expect_one_error(ROUTE_HEAD "    limit: {algorithm: sliding_window_log, requests: 1000, "
                                "per: 1m}\n",
                     5, 54,
                     "limit: sliding_window_log keeps 8 bytes per request for each client: 1000 "
                     "requests x 8 B x 100000 clients (limiter.max_clients) is 762.9 MiB at worst, "
                     "over limiter.max_memory (256MiB); use sliding_window_counter");
    /* The same in a plan, and judged by a limiter: section that comes after it. */
    expect_one_error(
        "plans:\n  gold: {algorithm: sliding_window_log, requests: 100, per: 1m}\n" ROUTE_HEAD
        "    plan: gold\nlimiter: {max_clients: 1000000}\n",
        2, 51,
        "limit: sliding_window_log keeps 8 bytes per request for each "
        "client: 100 requests x 8 B x 1000000 clients");
    /* 335 x 8 x 100,000 = 255.6 MiB fits; so does more with a larger budget or fewer clients. */
    c = load_valid(ROUTE_HEAD
                   "    limit: {algorithm: sliding_window_log, requests: 335, per: 1m}\n");
    CU_ASSERT_EQUAL(c->max_memory, 256ULL << 20);
    unload(c);
    c = load_valid("limiter: {max_memory: 1GiB}\n" ROUTE_HEAD
                   "    limit: {algorithm: sliding_window_log, requests: 1000, per: 1m}\n");
    CU_ASSERT_EQUAL(c->max_memory, 1ULL << 30);
    unload(c);
    c = load_valid("limiter: {max_clients: 1000}\n" ROUTE_HEAD
                   "    limit: {algorithm: sliding_window_log, requests: 30000, per: 1m}\n");
    unload(c);
    /* Other algorithms keep a fixed state a client. */
    c = load_valid(ROUTE_HEAD "    limit: {algorithm: sliding_window_counter, requests: 1000000, "
                              "per: 1m}\n");
    unload(c);
    expect_one_error("limiter: {max_memory: 512KiB}\n" ROUTE_HEAD, 1, 23,
                     "max_memory: \"512KiB\" is out of range (from 1MiB to 1024GiB)");
}

/* Whether `text` names `key` as documentation does: "key:" as YAML writes it, or `key` (or
 * `section.key`) as prose does, not inside a longer name. */
static bool mentions(const char *text, const char *key)
{
    size_t len = strlen(key);

    for (const char *p = strstr(text, key); p != NULL; p = strstr(p + 1, key)) {
        bool starts = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');

        if (starts && (p[len] == ':' || p[len] == '`'))
            return true;
    }
    return false;
}

struct documented {
    char *example, *readme;
    unsigned keys, missing;
};

static void expect_documented(const char *section, const char *key, void *cls)
{
    struct documented *d = cls;

    d->keys++;
    if (!mentions(d->example, key)) {
        fprintf(stderr, "\nconfig/sluice.yaml does not show %s%s%s", section,
                section[0] != '\0' ? "." : "", key);
        d->missing++;
    }
    if (!mentions(d->readme, key)) {
        fprintf(stderr, "\nREADME.md does not document %s%s%s", section,
                section[0] != '\0' ? "." : "", key);
        d->missing++;
    }
}

/* Every key the loader's tables know is shown in the example config and documented in the
 * README, so that neither can fall behind the code. */
static void test_every_key_documented(void)
{
    struct documented d = {0};
    size_t len;
    char why[128];

    CU_ASSERT_EQUAL_FATAL(config_read_file("config/sluice.yaml", 1 << 20, &d.example, &len, why),
                          0);
    CU_ASSERT_EQUAL_FATAL(config_read_file("README.md", 1 << 20, &d.readme, &len, why), 0);
    config_known_keys(expect_documented, &d);
    CU_ASSERT(d.keys > 100);
    CU_ASSERT_EQUAL(d.missing, 0);
    CU_ASSERT_FALSE(mentions("max_bodyx: 1", "max_body"));
    CU_ASSERT_FALSE(mentions("server.max_body_size: 1", "max_body"));
    CU_ASSERT_TRUE(mentions("`server.max_body`", "max_body"));
    free(d.example);
    free(d.readme);
}

/* The container's config drains within the time docker and podman give a container to stop
 * (10 s unless told) and within compose.yaml's stop_grace_period, as its comment says: past
 * it, requests in flight are cut by SIGKILL. */
static void test_container_drain_below_stop_timeout(void)
{
    char *compose = NULL, why[128], *errors = NULL, value[16];
    const char *grace;
    struct config *c = config_load("docker/etc/sluice.yaml", &errors);
    int64_t grace_ns = 0;
    size_t len;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT(c->server.drain_timeout_ns < 10 * 1000000000LL);
    CU_ASSERT_EQUAL_FATAL(config_read_file("docker/compose.yaml", 1 << 20, &compose, &len, why), 0);
    grace = strstr(compose, "stop_grace_period: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(grace);
    grace += strlen("stop_grace_period: ");
    snprintf(value, sizeof value, "%.*s", (int)strcspn(grace, " \n#"), grace);
    CU_ASSERT_EQUAL(config_parse_duration(value, &grace_ns), 0);
    CU_ASSERT(c->server.drain_timeout_ns < grace_ns);
    free(compose);
    config_free(c);
}

void register_load_tests(void)
{
    CU_pSuite s = add_suite("config_load");

    add_test(s, "the shipped example loads", test_example_loads);
    add_test(s, "defaults, and the upstream's parts", test_defaults_and_upstream_parts);
    add_test(s, "park_idle_after: 0 or at least 1s", test_park_idle_after);
    add_test(s, "each problem is FILE:LINE:COL", test_errors_are_positioned);
    add_test(s, "every problem is reported", test_all_errors_reported);
    add_test(s, "${VAR} and ${VAR:-default}", test_environment);
    add_test(s, "the shared store's settings", test_store_settings);
    add_test(s, "each limit's own key, or its route's", test_per_limit_keys);
    add_test(s, "header keys with '_' and underscores_in_headers", test_underscores_in_headers);
    add_test(s, "a reload that changes a limit's key starts it afresh",
             test_reload_with_another_key_starts_afresh);
    add_test(s, "a missing file is an error", test_missing_file);
    add_test(s, "max_header_size, upstream_idle_timeout, upstream_max_idle",
             test_upstream_connection_settings);
    add_test(s, "server.mode and server.workers", test_serving_mode);
    add_test(s, "server.proxy_protocol", test_proxy_protocol);
    add_test(s, "log: format and level", test_log_settings);
    add_test(s, "server.access_log: a path, or {path, client}", test_access_log_settings);
    add_test(s, "a route's forward proxy", test_route_proxy);
    add_test(s, "40,000 keys are refused at the bound, unwalked",
             test_many_keys_refused_at_the_bound);
    add_test(s, "repeated keys, found by sorting; the list of problems is capped",
             test_repeated_keys);
    add_test(s, "aliases are refused (billion laughs, cycles)", test_aliases_refused);
    add_test(s, "deep nesting is refused where it starts", test_deep_nesting_refused);
    add_test(s, "a file over 1 MiB is refused", test_file_size_bound);
    add_test(s, "at most 1024 routes", test_route_count_bound);
    add_test(s, "at most 8 limits a route", test_limit_count_bound);
    add_test(s, "long values and NUL are refused", test_scalar_bounds);

    s = add_suite("config_upstream");
    add_test(s, "upstream: a URL is one server, with the defaults",
             test_upstream_url_is_one_server);
    add_test(s, "upstream.servers: each server's parts; balance and passive health",
             test_upstream_servers);
    add_test(s, "at most 64 servers, at least one", test_upstream_server_count_bound);
    add_test(s, "upstream problems, each at its place", test_upstream_errors);
    add_test(s, "health_check and its defaults", test_health_check);
    add_test(s, "health_check problems", test_health_check_errors);
    add_test(s, "retries: attempts, on, budget", test_retries);
    add_test(s, "strip_prefix and server.ready_needs_upstreams", test_strip_prefix_and_readiness);
    add_test(s, "the route's host: preserve, upstream or a name", test_route_host);
    add_test(s, "set_headers keeps ${request.*} and expands ${VAR}", test_set_headers);
    add_test(s, "set_headers problems: names, values, ${request.*}", test_set_headers_errors);
    add_test(s, "remove_headers", test_remove_headers);
    add_test(s, "upgrades and tunnel_idle_timeout", test_upgrades);
    add_test(s, "tracing.sample", test_tracing);
    add_test(s, "server.tls: certificates, versions, ciphers", test_tls);
    add_test(s, "server.tls problems, each at its line", test_tls_errors);

    s = add_suite("config_check");
    add_test(s, "methods: RFC 9110's and PATCH, others listed", test_methods_checked);
    add_test(s, "a limit's missing keys by name; per at least 1ms", test_limit_keys_named);
    add_test(s, "max_body at most 64GiB", test_max_body_bounded);
    add_test(s, "an unknown key near a known one: did you mean", test_did_you_mean);
    add_test(s, "YAML merge keys are refused, saying what to use", test_merge_keys_refused);
    add_test(s, "-c DIR: is a directory", test_directory_named);
    add_test(s, "a route an earlier one shadows is warned of, naming both lines",
             test_shadowed_routes_warned);
    add_test(s, "a strip_prefix route shadows by whole segments", test_strip_prefix_shadowing);
    add_test(s, "sliding_window_log's worst case within limiter.max_memory",
             test_log_memory_budget);
    add_test(s, "every key is in config/sluice.yaml and README.md", test_every_key_documented);
    add_test(s, "the container's drain_timeout is below its stop timeouts",
             test_container_drain_below_stop_timeout);
}
