#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit.h"
#include "config.h"

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

#define ROUTE_HEAD "routes:\n  - name: api\n    match: {path_prefix: /api/}\n" \
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
    CU_ASSERT_EQUAL_FATAL(c->routes[0].n_limits, 2);
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].name, "burst");
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[0].params.algorithm, "token_bucket");
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.requests, 10);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.per_ns, 60000000000);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.burst, 5);
    CU_ASSERT_STRING_EQUAL(c->routes[0].limits[1].name, "daily");
    CU_ASSERT_EQUAL(c->routes[0].limits[1].params.per_ns, 86400000000000);
    CU_ASSERT_STRING_EQUAL(c->routes[1].limits[0].name, "default"); /* named after its route */
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream, "http://127.0.0.1:9000"); /* ${..:-default} */
    CU_ASSERT_TRUE(c->server.watch_config);
    CU_ASSERT_STRING_EQUAL(c->server.access_log, "stdout");
    CU_ASSERT_STRING_EQUAL(c->routes[1].upstream, "http://127.0.0.1:9000");
    CU_ASSERT_EQUAL(c->routes[1].exempt.n, 1);
    config_free(c);
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
    CU_ASSERT_EQUAL(c->max_clients, 100000);
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream, "https://api.example.com:443");
    CU_ASSERT_STRING_EQUAL(c->routes[0].upstream_base_path, "/base");
    CU_ASSERT_EQUAL(c->routes[0].timeout_ns, 30000000000);
    CU_ASSERT_EQUAL(c->routes[0].connect_timeout_ns, 2000000000);
    CU_ASSERT_EQUAL(c->routes[0].key_kind, CONFIG_KEY_IP);
    CU_ASSERT_EQUAL(c->routes[0].ipv6_prefix_len, 64);
    CU_ASSERT_EQUAL(c->routes[0].n_limits, 0);
    CU_ASSERT_TRUE(c->routes[0].tls_verify);
    CU_ASSERT_PTR_NULL(c->routes[0].methods);
    config_free(c);
    unlink(path);
}

static void test_errors_are_positioned(void)
{
    expect_error("server:\n  listen: \"127.0.0.1:8080\"\n  colour: blue\n" ROUTE_HEAD, 3, 3,
                 "unknown key \"colour\"");
    expect_error("server:\n  max_connections: lots\n" ROUTE_HEAD, 2, 20,
                 "max_connections: \"lots\" is not a whole number");
    expect_error("server:\n  max_connections: [1]\n" ROUTE_HEAD, 2, 20,
                 "expected a single value, found a list");
    expect_error("server:\n  client_timeout: 10 minutes\n" ROUTE_HEAD, 2, 19,
                 "is not a duration");
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
                 "algorithm, requests and per are all required");
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
    expect_error("server: {drain_timeout: 2d}\n" ROUTE_HEAD, 1, 25, "out of range (at most a day)");
    expect_error(ROUTE_HEAD "    timeout: 9999d\n", 5, 14, "out of range");
    expect_error("routes:\n  - name: a\n    match: {path_prefix: /, methods: []}\n"
                 "    upstream: \"http://x:1\"\n",
                 3, 38, "an empty list matches nothing");
    expect_error("routes:\n  - name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
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
    CU_ASSERT_EQUAL(c->routes[0].store, CONFIG_STORE_REDIS); /* from limiter.store */
    CU_ASSERT_EQUAL(c->routes[1].store, CONFIG_STORE_MEMORY); /* its own */
    config_free(c);
    unlink(path);

    c = load_text(ROUTE_HEAD, &errors); /* the defaults */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->store, CONFIG_STORE_MEMORY);
    CU_ASSERT_EQUAL(c->on_store_error, CONFIG_ON_STORE_ERROR_LOCAL);
    CU_ASSERT_EQUAL(c->replicas, 1);
    CU_ASSERT_STRING_EQUAL(c->redis.address.host, "127.0.0.1");
    CU_ASSERT_EQUAL(c->redis.address.port, 6379);
    CU_ASSERT_EQUAL(c->redis.timeout_ns, 5000000);
    CU_ASSERT_STRING_EQUAL(c->redis.prefix, "sluice:");
    config_free(c);
    unlink(path);

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
    config_free(c);
    unlink(path);
    unsetenv("SLUICE_TEST_TIMEOUT");
    unsetenv("SLUICE_TEST_EMPTY");
}

/* Every problem is reported, not just the first. */
static void test_all_errors_reported(void)
{
    char *errors = NULL;
    struct config *c = load_text("server:\n  bogus: 1\n  drain_timeout: soon\n" ROUTE_HEAD
                                 "    timeout: never\n",
                                 &errors);
    int lines = 0;

    CU_ASSERT_PTR_NULL(c);
    for (char *p = errors; p != NULL && *p != '\0'; p = strchr(p, '\n') + 1)
        lines++;
    CU_ASSERT_EQUAL(lines, 3);
    free(errors);
    unlink(path);
}

static void test_missing_file(void)
{
    char *errors = NULL;

    CU_ASSERT_PTR_NULL(config_load("/nonexistent/sluice.yaml", &errors));
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "/nonexistent/sluice.yaml: cannot read"));
    free(errors);
}

void register_load_tests(void)
{
    CU_pSuite s = add_suite("config_load");

    add_test(s, "the shipped example loads", test_example_loads);
    add_test(s, "defaults, and the upstream's parts", test_defaults_and_upstream_parts);
    add_test(s, "each problem is FILE:LINE:COL", test_errors_are_positioned);
    add_test(s, "every problem is reported", test_all_errors_reported);
    add_test(s, "${VAR} and ${VAR:-default}", test_environment);
    add_test(s, "the shared store's settings", test_store_settings);
    add_test(s, "a missing file is an error", test_missing_file);
}
