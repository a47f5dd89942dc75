/* Plans and consumers: what config_load() accepts and refuses, the consumer table's look-ups,
 * and which limiters a reload keeps. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "gateway/core/runtime.h"
#include "gateway/identity/consumers.h"
#include "gateway/modules.h"
#include "gateway/modules/access/access_options.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/limit/limit_sets.h"
#include "gateway/ops/metrics.h"
#include "tests/unit.h"

/* The limit module's sets of a runtime's first route. */
static const struct gw_limit_route *limits_of(const struct gw_runtime *rt)
{
    return gw_runtime_state(rt, 0, &gw_limit_module);
}

#define ROUTE                                                                                      \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n"                                        \
    "    upstream: \"http://127.0.0.1:9000\"\n    key: \"header:X-API-Key\"\n"
#define PLANS                                                                                      \
    "plans:\n  free: {algorithm: fixed_window, requests: 2, per: 1m}\n"                            \
    "  gold:\n    - {name: minute, algorithm: gcra, requests: 100, per: 1m}\n"                     \
    "    - {name: day, algorithm: fixed_window, requests: 5000, per: 1d}\n"
/* printf acme-key | sha256sum; printf bob-key | sha256sum */
#define ACME_SHA256 "afacab3575137afa4e00d9cbcafcb14c9ae25f779d964eb0ea5b2c4eb5dfd163"
#define BOB_SHA256  "9b94dc1a51a38769f135edf04033ad7f2f487b6c25929be7a861cfc1ab10cf98"

static struct config *parse(const char *yaml, char **errors)
{
    return config_parse("plans.yaml", yaml, strlen(yaml), errors);
}

static struct config *parse_ok(const char *yaml)
{
    char *errors = NULL;
    struct config *c = parse(yaml, &errors);

    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    free(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

/* Parsing `yaml` fails with an error at `line`:`col` that contains `fragment`. */
static void expect_error(const char *yaml, int line, int col, const char *fragment)
{
    char *errors = NULL, where[64];
    struct config *c = parse(yaml, &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(where, sizeof where, "plans.yaml:%d:%d: ", line, col);
    if (strstr(errors, where) == NULL || strstr(errors, fragment) == NULL)
        fprintf(stderr, "\nexpected %s...%s in:\n%s", where, fragment, errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, fragment));
    config_free(c);
    free(errors);
}

static void test_plans_resolve_per_route(void)
{
    struct config *c =
        parse_ok(PLANS "consumers:\n"
                       "  - {name: acme, key: acme-key, plan: gold}\n" ROUTE "    plan: free\n"
                       "    plans:\n"
                       "      gold: {algorithm: token_bucket, requests: 7, per: 1s}\n"
                       "  - name: ip\n    match: {path_prefix: /ip/}\n"
                       "    upstream: \"http://127.0.0.1:9000\"\n"
                       "    plan: gold\n");
    const struct config_route *api = &c->routes[0], *ip = &c->routes[1];

    CU_ASSERT_EQUAL(c->n_plans, 2);
    /* plan: free copies the plan's one limit, named after the plan, with the route's key. */
    CU_ASSERT_EQUAL(api->n_limits, 1);
    CU_ASSERT_STRING_EQUAL(api->limits[0].name, "free");
    CU_ASSERT_EQUAL(api->limits[0].params.requests, 2);
    CU_ASSERT_EQUAL(api->limits[0].key_kind, CONFIG_KEY_HEADER);
    CU_ASSERT_STRING_EQUAL(api->limits[0].key_name, "X-API-Key");
    CU_ASSERT_TRUE(api->limits[0].route_key); /* counts under the consumer's name */
    /* The route's own gold; the top-level free. */
    CU_ASSERT_STRING_EQUAL(api->plans[1].name, "gold");
    CU_ASSERT_EQUAL(api->plans[1].n_limits, 1);
    CU_ASSERT_STRING_EQUAL(api->plans[1].limits[0].params.algorithm, "token_bucket");
    CU_ASSERT_EQUAL(api->plans[1].limits[0].params.requests, 7);
    CU_ASSERT_EQUAL(api->plans[0].limits[0].params.requests, 2);
    CU_ASSERT_TRUE(api->plans[1].limits[0].route_key);
    CU_ASSERT_TRUE(api->plans[0].limits[0].route_key);
    CU_ASSERT_TRUE(api->identifies_consumers);
    CU_ASSERT_EQUAL(api->unknown_key, CONFIG_UNKNOWN_KEY_REJECT); /* consumers: reject */
    CU_ASSERT_EQUAL(api->anonymous_plan, -1);
    /* A route keyed by address has no consumers; its gold is the top-level two limits. */
    CU_ASSERT_FALSE(ip->identifies_consumers);
    CU_ASSERT_EQUAL(ip->n_limits, 2);
    CU_ASSERT_STRING_EQUAL(ip->limits[1].name, "day");
    CU_ASSERT_EQUAL(ip->limits[1].key_kind, CONFIG_KEY_IP);
    config_free(c);
}

static void test_anonymous_plan_and_unknown_key(void)
{
    struct config *c =
        parse_ok(PLANS "  anonymous: {algorithm: fixed_window, requests: 1, per: 1m}\n"
                       "consumers:\n  - {name: acme, key: acme-key, plan: gold}\n" ROUTE
                       "    unknown_key: anonymous\n    plan: free\n");

    CU_ASSERT_EQUAL(c->routes[0].unknown_key, CONFIG_UNKNOWN_KEY_ANONYMOUS);
    CU_ASSERT_EQUAL(c->routes[0].anonymous_plan, 2);
    config_free(c);
    /* Without consumers a key counts by its value, as before plans. */
    c = parse_ok(PLANS ROUTE "    plan: gold\n");
    CU_ASSERT_FALSE(c->routes[0].identifies_consumers);
    CU_ASSERT_EQUAL(c->routes[0].unknown_key, CONFIG_UNKNOWN_KEY_ANONYMOUS);
    config_free(c);
}

/* Only digests are kept: the clear key's, or the one given. */
static void test_consumer_keys(void)
{
    struct config *c = parse_ok(PLANS "consumers:\n"
                                      "  - {name: acme, key: acme-key, plan: gold}\n"
                                      "  - {name: bob, key: \"sha256:" BOB_SHA256
                                      "\", plan: free}\n" ROUTE "    plan: free\n");
    unsigned char acme[32], bob[32];
    size_t len;

    CU_ASSERT_EQUAL(c->n_consumers, 2);
    CU_ASSERT_STRING_EQUAL(c->consumers[0].plan, "gold");
    sodium_hex2bin(acme, sizeof acme, ACME_SHA256, 64, NULL, &len, NULL);
    sodium_hex2bin(bob, sizeof bob, BOB_SHA256, 64, NULL, &len, NULL);
    CU_ASSERT_EQUAL(memcmp(c->consumers[0].key_sha256, acme, 32), 0);
    CU_ASSERT_EQUAL(memcmp(c->consumers[1].key_sha256, bob, 32), 0);
    config_free(c);
    /* A key and its own digest are one key. */
    expect_error(PLANS "consumers:\n  - {name: acme, key: acme-key, plan: gold}\n"
                       "  - {name: bob, key: \"sha256:" ACME_SHA256 "\", plan: free}\n" ROUTE,
                 8, 22, "key: consumer \"bob\" has the same key as consumer \"acme\"");
}

static void test_problems_are_positioned(void)
{
    expect_error(PLANS "consumers:\n  - {name: acme, key: k, plan: silver}\n" ROUTE
                       "    plan: free\n",
                 7, 32, "plan: \"silver\" is not one of the top-level plans");
    expect_error(PLANS ROUTE "    plan: platinum\n", 11, 11,
                 "plan: \"platinum\" is not one of the top-level plans");
    expect_error(PLANS ROUTE "    plan: free\n    limit: {algorithm: gcra, requests: 1, per: 1s}\n",
                 11, 11, "plan: a route takes plan: or limit:, not both");
    expect_error(PLANS ROUTE "    plans: {silver: {algorithm: gcra, requests: 1, per: 1s}}\n", 11,
                 12, "plans: \"silver\" is not one of the top-level plans");
    expect_error(PLANS "consumers:\n  - {name: a, key: same, plan: gold}\n"
                       "  - {name: b, key: same, plan: gold}\n" ROUTE,
                 8, 20, "key: consumer \"b\" has the same key as consumer \"a\"");
    expect_error(PLANS "consumers:\n  - {name: a, key: one, plan: gold}\n"
                       "  - {name: a, key: two, plan: gold}\n" ROUTE,
                 8, 12, "name: consumer \"a\" is defined twice");
    expect_error(PLANS "consumers:\n  - {name: a, key: \"sha256:abc\", plan: gold}\n" ROUTE, 7, 20,
                 "key: sha256: must be followed by 64 hex digits");
    expect_error(PLANS "consumers:\n  - {name: a, key: \"\", plan: gold}\n" ROUTE, 7, 20,
                 "key: empty");
    expect_error(PLANS "consumers:\n  - {name: a, plan: gold}\n" ROUTE, 7, 5,
                 "consumer: name, key and plan are all required");
    expect_error(PLANS "consumers:\n  - {name: \"a b\", key: k, plan: gold}\n" ROUTE, 7, 12,
                 "name: \"a b\" may hold only letters");
    expect_error(PLANS ROUTE "    unknown_key: reject\n", 11, 18, "unknown_key: needs consumers:");
    expect_error(PLANS ROUTE "    unknown_key: maybe\n", 11, 18,
                 "unknown_key: \"maybe\" is not one of anonymous or reject");
    expect_error("plans:\n  free: {algorithm: gcra, requests: 1, per: 1s}\n"
                 "  free: {algorithm: gcra, requests: 2, per: 1s}\n" ROUTE,
                 3, 3, "plans: \"free\" appears twice");
    expect_error("plans:\n  \"no way\": {algorithm: gcra, requests: 1, per: 1s}\n" ROUTE, 2, 3,
                 "plans: a plan's name may hold only");
    expect_error("plans:\n  free: {algorithm: nope, requests: 1, per: 1s}\n" ROUTE, 2, 21,
                 "algorithm: unknown \"nope\"");
    expect_error("server: {consumer_header: \"X Consumer\"}\n" ROUTE, 1, 27,
                 "consumer_header: \"X Consumer\" is not a header field name");
    expect_error("server: {consumer_header: X-Forwarded-For}\n" ROUTE, 1, 27,
                 "consumer_header: X-Forwarded-For is a field the gateway sets or drops itself");
    expect_error("server: {consumer_header: Proxy-Authorization}\n" ROUTE, 1, 27,
                 "is a field the gateway sets or drops itself");
    expect_error("server: {consumer_header: x-api-key}\n" PLANS
                 "consumers:\n  - {name: a, key: k, plan: free}\n" ROUTE "    plan: free\n",
                 13, 10, "key: header X-API-Key is server.consumer_header");
}

static void test_table_finds_keys(void)
{
    struct config *c =
        parse_ok(PLANS "consumers:\n"
                       "  - {name: acme, key: acme-key, plan: gold}\n"
                       "  - {name: bob, key: \"sha256:" BOB_SHA256 "\", plan: free}\n"
                       "  - {name: carol, key: carol-key, plan: free}\n" ROUTE "    plan: free\n");
    struct gw_consumers *table = gw_consumers_build(c);
    const struct gw_consumer *found;

    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    found = gw_consumers_find(table, "carol-key", 9);
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_STRING_EQUAL(found->name, "carol");
    CU_ASSERT_EQUAL(found->plan, 0);
    CU_ASSERT_PTR_NULL(gw_consumers_find(table, "carol-ke", 8));
    CU_ASSERT_PTR_NULL(gw_consumers_find(table, "carol-keyy", 10));
    CU_ASSERT_PTR_NULL(gw_consumers_find(table, "Carol-key", 9));
    CU_ASSERT_PTR_NULL(gw_consumers_find(table, "", 0));
    found = gw_consumers_find(table, "bob-key", 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_STRING_EQUAL(found->name, "bob");
    found = gw_consumers_find(table, "acme-key", 8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_EQUAL(found->plan, 1);
    CU_ASSERT_PTR_NULL(gw_consumers_find(table, BOB_SHA256, 64)); /* the digest is no key */
    gw_consumers_free(table);
    config_free(c);
}

/* By name (sluice simulate): each consumer with the plan its key finds, no other name. */
static void test_by_name(void)
{
    struct config *c =
        parse_ok(PLANS "consumers:\n"
                       "  - {name: carol, key: carol-key, plan: free}\n"
                       "  - {name: acme, key: acme-key, plan: gold}\n"
                       "  - {name: bob, key: bob-key, plan: free}\n" ROUTE "    plan: free\n");
    struct gw_consumer *sorted = gw_consumers_by_name(c);
    const struct gw_consumer *found;

    CU_ASSERT_PTR_NOT_NULL_FATAL(sorted);
    found = gw_consumers_named(sorted, c->n_consumers, "acme");
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_STRING_EQUAL(found->name, "acme");
    CU_ASSERT_EQUAL(found->plan, 1);
    found = gw_consumers_named(sorted, c->n_consumers, "carol");
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_EQUAL(found->plan, 0);
    CU_ASSERT_PTR_NOT_NULL(gw_consumers_named(sorted, c->n_consumers, "bob"));
    CU_ASSERT_PTR_NULL(gw_consumers_named(sorted, c->n_consumers, "acm"));
    CU_ASSERT_PTR_NULL(gw_consumers_named(sorted, c->n_consumers, "Acme"));
    CU_ASSERT_PTR_NULL(gw_consumers_named(sorted, c->n_consumers, "carol-key"));
    CU_ASSERT_PTR_NULL(gw_consumers_named(sorted, c->n_consumers, ""));
    free(sorted);
    config_free(c);
}

/* 100,000 consumers: every key found, no other. */
static void test_table_many(void)
{
    enum { N = 100000 };
    struct config c = {0};
    struct config_plan plan = {.name = "free"};
    static char names[N][16];
    struct gw_consumers *table;
    char key[32];
    unsigned found = 0, strangers = 0;

    c.plans = &plan;
    c.n_plans = 1;
    c.consumers = calloc(N, sizeof *c.consumers);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.consumers);
    c.n_consumers = N;
    for (unsigned i = 0; i < N; i++) {
        int len = snprintf(key, sizeof key, "key-%u", i);

        snprintf(names[i], sizeof names[i], "c%u", i);
        c.consumers[i].name = names[i];
        c.consumers[i].plan = "free";
        crypto_hash_sha256(c.consumers[i].key_sha256, (const unsigned char *)key, (size_t)len);
    }
    table = gw_consumers_build(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    for (unsigned i = 0; i < N; i++) {
        int len = snprintf(key, sizeof key, "key-%u", i);
        const struct gw_consumer *f = gw_consumers_find(table, key, (size_t)len);

        found += f != NULL && strcmp(f->name, names[i]) == 0;
        len = snprintf(key, sizeof key, "stranger-%u", i);
        strangers += gw_consumers_find(table, key, (size_t)len) != NULL;
    }
    CU_ASSERT_EQUAL(found, N);
    CU_ASSERT_EQUAL(strangers, 0);
    gw_consumers_free(table);
    free(c.consumers);
}

static struct gw_runtime *runtime_of(const char *yaml, struct gw_runtime *previous,
                                     struct gw_metrics *metrics)
{
    static struct gw_backends *backends; /* the upstream servers' state, kept as a server does */
    char err[256] = "";
    struct gw_runtime *rt;

    if (backends == NULL)
        backends = gw_backends_new();
    CU_ASSERT_EQUAL_FATAL(gw_modules_register(), 0); /* the whole pipeline, as sluice's */
    rt = gw_runtime_build(parse_ok(yaml), previous, metrics, backends, NULL, err, sizeof err);

    if (rt == NULL)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    return rt;
}

/* A reload keeps a plan's limiters (and so each consumer's state in them) when the plan's
 * limits are unchanged on that route, and starts a changed one afresh. */
static void test_reload_keeps_unchanged_plans(void)
{
    static const char before[] =
        "server: {access_log: \"off\"}\n" PLANS
        "consumers:\n  - {name: acme, key: acme-key, plan: gold}\n" ROUTE "    plan: free\n";
    static const char after[] =
        "server: {access_log: \"off\"}\n"
        "plans:\n  free: {algorithm: fixed_window, requests: 3, per: 1m}\n"
        "  gold:\n    - {name: minute, algorithm: gcra, requests: 100, per: 1m}\n"
        "    - {name: day, algorithm: fixed_window, requests: 5000, per: 1d}\n"
        "consumers:\n  - {name: acme, key: acme-key, plan: gold}\n"
        "  - {name: bob, key: bob-key, plan: free}\n" ROUTE "    plan: free\n";
    struct gw_metrics *metrics = gw_metrics_new();
    struct gw_runtime *first, *second;

    CU_ASSERT_PTR_NOT_NULL_FATAL(metrics);
    first = runtime_of(before, NULL, metrics);
    second = runtime_of(after, first, metrics);
    CU_ASSERT_PTR_NOT_NULL_FATAL(limits_of(second)->plans);
    CU_ASSERT_EQUAL(limits_of(second)->plans[1].n_limits, 2);
    CU_ASSERT_PTR_EQUAL(limits_of(second)->plans[1].limits[0],
                        limits_of(first)->plans[1].limits[0]);
    CU_ASSERT_PTR_EQUAL(limits_of(second)->plans[1].limits[1],
                        limits_of(first)->plans[1].limits[1]);
    CU_ASSERT_PTR_NOT_EQUAL(limits_of(second)->plans[0].limits[0],
                            limits_of(first)->plans[0].limits[0]);
    /* The route's own limits (plan: free) and its free plan count apart. */
    CU_ASSERT_PTR_NOT_EQUAL(limits_of(second)->own.limits[0],
                            limits_of(second)->plans[0].limits[0]);
    CU_ASSERT_STRING_EQUAL(limits_of(second)->plans[1].policy,
                           "\"minute\";q=100;w=60, \"day\";q=5000;w=86400");
    gw_runtime_release(first);
    gw_runtime_release(second);
    gw_metrics_free(metrics);
}

/* Writes `text` to a new file in `dir` named `name`; its path into `path`. */
static void write_file(const char *dir, const char *name, const char *text, char path[256])
{
    FILE *f;

    snprintf(path, 256, "%s/%s", dir, name);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* consumers_file: read after the config's own consumers, relative to the config's directory,
 * its problems reported at its own lines. */
static void test_consumers_file(void)
{
    char dir[] = "/tmp/sluice-consumers-XXXXXX", main_path[256], file_path[256], *errors = NULL,
         where[600];
    struct config *c;

    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    write_file(dir, "people.yaml",
               "consumers:\n  - {name: bob, key: bob-key, plan: free}\n"
               "  - name: carol\n    key: \"sha256:" ACME_SHA256 "\"\n    plan: gold\n",
               file_path);
    write_file(dir, "sluice.yaml",
               PLANS "consumers:\n  - {name: dave, key: dave-key, plan: gold}\n"
                     "consumers_file: people.yaml\n" ROUTE "    plan: free\n",
               main_path);
    c = config_load(main_path, &errors);
    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->consumers_file, file_path);
    CU_ASSERT_EQUAL(c->n_consumers, 3);
    CU_ASSERT_STRING_EQUAL(c->consumers[0].name, "dave");
    CU_ASSERT_STRING_EQUAL(c->consumers[2].name, "carol");
    CU_ASSERT_STRING_EQUAL(c->consumers[2].plan, "gold");
    config_free(c);

    /* Its problems at its lines; one in both files is the file's. */
    write_file(dir, "people.yaml",
               "consumers:\n  - {name: bob, key: bob-key, plan: free}\n"
               "  - {name: dave, key: other, plan: silver}\n"
               "  - {name: erin, key: bob-key, plan: free, colour: red}\n",
               file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(where, sizeof where, "%s:4:44: consumer: unknown key \"colour\"\n", file_path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    free(errors);
    /* A key near a known one is named, as in the config itself. */
    write_file(dir, "people.yaml", "consumers:\n  - {name: erin, key: erin-key, plna: free}\n",
               file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(where, sizeof where, "%s:2:33: consumer: unknown key \"plna\"; did you mean plan?",
             file_path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    free(errors);
    write_file(dir, "people.yaml",
               "consumers:\n  - {name: bob, key: bob-key, plan: free}\n"
               "  - {name: dave, key: other, plan: silver}\n"
               "  - {name: erin, key: bob-key, plan: free}\n",
               file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    snprintf(where, sizeof where, "%s:3:12: name: consumer \"dave\" is defined twice", file_path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    snprintf(where, sizeof where, "%s:4:23: key: consumer \"erin\" has the same key as", file_path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    snprintf(where, sizeof where, "%s:3:36: plan: \"silver\" is not one of the top-level plans",
             file_path);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, where));
    free(errors);
    /* Only consumers: and its list; no aliases; the file must exist. */
    write_file(dir, "people.yaml", "consumers:\n  - &a {name: bob, key: k, plan: free}\n  - *a\n",
               file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "aliases (*name) are not allowed"));
    free(errors);
    write_file(dir, "people.yaml", "consumers: []\nplans: {}\n", file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "consumers_file: holds consumers: and nothing else"));
    free(errors);
    unlink(file_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "consumers_file: cannot read "));
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "No such file"));
    free(errors);
    /* Not a regular file: refused, never waited on. */
    if (mkfifo(file_path, 0600) == 0) {
        c = config_load(main_path, &errors);
        CU_ASSERT_PTR_NULL(c);
        CU_ASSERT_PTR_NOT_NULL(strstr(errors, "is not a regular file"));
        free(errors);
        unlink(file_path);
    }
    unlink(main_path);
    rmdir(dir);
}

/* deny:, headers: and on_limit: */
static void test_answer_settings(void)
{
    char dir[] = "/tmp/sluice-on-limit-XXXXXX", main_path[256], body_path[256], *errors = NULL;
    struct config *c = parse_ok("server: {deny: [\"10.0.0.0/8\"], headers: x-ratelimit}\n" ROUTE
                                "    deny: [\"192.0.2.0/24\", \"2001:db8::/32\"]\n"
                                "    headers: both\n"
                                "  - name: other\n    match: {path_prefix: /o/}\n"
                                "    upstream: \"http://127.0.0.1:9000\"\n");

    CU_ASSERT_EQUAL(
        ((const struct access_options *)config_server_block(c, &gw_access_server_options))->deny.n,
        1);
    CU_ASSERT_EQUAL(
        ((const struct access_options *)config_route_block(&c->routes[0], &gw_access_route_options))
            ->deny.n,
        2);
    CU_ASSERT_EQUAL(c->routes[0].headers, CONFIG_HEADERS_BOTH);
    CU_ASSERT_EQUAL(c->routes[1].headers, CONFIG_HEADERS_X_RATELIMIT); /* the server's */
    CU_ASSERT_EQUAL(c->routes[1].on_limit.status, 429);
    CU_ASSERT_PTR_NULL(c->routes[1].on_limit.body);
    config_free(c);
    expect_error(ROUTE "    headers: github\n", 6, 14,
                 "headers: \"github\" is not one of ietf, x-ratelimit, both or none");
    expect_error(ROUTE "    deny: [\"10.0.0.0/33\"]\n", 6, 12, "deny");
    expect_error(ROUTE "    on_limit: {status: 500}\n", 6, 24, "status: \"500\" is not 429 or 503");
    expect_error(ROUTE "    on_limit: {content_type: text/plain}\n", 6, 15,
                 "on_limit: body_file and content_type go together");

    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    write_file(dir, "busy.json", "{\"busy\":true}", body_path);
    write_file(dir, "sluice.yaml",
               ROUTE "    on_limit: {status: 503, body_file: busy.json, content_type: "
                     "application/json}\n",
               main_path);
    c = config_load(main_path, &errors);
    if (c == NULL)
        fprintf(stderr, "\n%s", errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].on_limit.status, 503);
    CU_ASSERT_EQUAL(c->routes[0].on_limit.body_len, 13);
    CU_ASSERT_EQUAL(memcmp(c->routes[0].on_limit.body, "{\"busy\":true}", 13), 0);
    CU_ASSERT_STRING_EQUAL(c->routes[0].on_limit.content_type, "application/json");
    config_free(c);
    unlink(body_path);
    c = config_load(main_path, &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "body_file: cannot read"));
    free(errors);
    unlink(main_path);
    rmdir(dir);
}

void register_consumers_unit_tests(void)
{
    CU_pSuite s = add_suite("consumers");

    add_test(s, "plans resolve per route", test_plans_resolve_per_route);
    add_test(s, "the anonymous plan; unknown_key", test_anonymous_plan_and_unknown_key);
    add_test(s, "consumers' keys, clear or sha256:", test_consumer_keys);
    add_test(s, "problems are positioned", test_problems_are_positioned);
    add_test(s, "the table finds each key and no other", test_table_finds_keys);
    add_test(s, "consumers by name", test_by_name);
    add_test(s, "100,000 consumers", test_table_many);
    add_test(s, "a reload keeps unchanged plans", test_reload_keeps_unchanged_plans);
    add_test(s, "consumers_file", test_consumers_file);
    add_test(s, "deny, headers and on_limit", test_answer_settings);
}
