/* config/count.c: a limit's count:, statuses or except, by status or class; each problem at
 * its place; kept with the Redis store, as algorithm: concurrency is (and its own keys). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

#define ROUTE                                                                                      \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n"  \
    "    limit: {algorithm: gcra, requests: 5, per: 1m, count: %s}\n"

static struct config *parse_count(const char *count, char **errors)
{
    char yaml[512];

    snprintf(yaml, sizeof yaml, ROUTE, count);
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

static void test_statuses_and_except(void)
{
    char *errors = NULL;
    struct config *c = parse_count("{statuses: [401, 403, \"5xx\"]}", &errors);
    const struct config_count *count;

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    count = &c->routes[0].limits[0].count;
    CU_ASSERT_TRUE(count->set);
    CU_ASSERT_TRUE(config_count_holds(count, 401));
    CU_ASSERT_TRUE(config_count_holds(count, 403));
    CU_ASSERT_TRUE(config_count_holds(count, 500));
    CU_ASSERT_TRUE(config_count_holds(count, 599));
    CU_ASSERT_FALSE(config_count_holds(count, 200));
    CU_ASSERT_FALSE(config_count_holds(count, 402));
    CU_ASSERT_FALSE(config_count_holds(count, 499));
    CU_ASSERT_TRUE(config_count_holds(count, 0)); /* no answer: the charge is kept */
    config_free(c);

    c = parse_count("{except: [\"5xx\", 404]}", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    count = &c->routes[0].limits[0].count;
    CU_ASSERT_TRUE(config_count_holds(count, 200));
    CU_ASSERT_TRUE(config_count_holds(count, 401));
    CU_ASSERT_TRUE(config_count_holds(count, 100));
    CU_ASSERT_FALSE(config_count_holds(count, 404));
    CU_ASSERT_FALSE(config_count_holds(count, 502));
    config_free(c);

    /* Without count:, every answer counts. */
    c = parse_count("{except: [\"1xx\"]}", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_FALSE(config_count_holds(&c->routes[0].limits[0].count, 101));
    c->routes[0].limits[0].count.set = false;
    CU_ASSERT_TRUE(config_count_holds(&c->routes[0].limits[0].count, 101));
    config_free(c);
}

static void expect_problem(const char *count, const char *want)
{
    char yaml[512];

    snprintf(yaml, sizeof yaml, ROUTE, count);
    expect_config_problem(yaml, want);
}

static void test_count_problems(void)
{
    expect_problem("{statuses: [401], except: [500]}", "t.yaml:5:59: count: expected");
    expect_problem("{status: [401]}", "count: expected statuses: or except:");
    expect_problem("{statuses: []}", "statuses: expected a list of statuses or classes");
    expect_problem("{statuses: 401}", "statuses: expected a list");
    expect_problem("[401]", "count: expected {statuses: [401, 403]} or {except: [\"5xx\"]}");
    expect_problem("{statuses: [600]}", "t.yaml:5:71: statuses: \"600\" is not a status");
    expect_problem("{statuses: [99]}", "statuses: \"99\" is not a status");
    expect_problem("{except: [\"6xx\"]}", "except: \"6xx\" is not a status");
    expect_problem("{except: [\"4XX\"]}", "except: \"4XX\" is not a status");
    expect_problem("{except: [\"40x\"]}", "except: \"40x\" is not a status");
    expect_problem("{except: [\"+401\"]}", "except: \"+401\" is not a status");
}

/* The shared store keeps count: too (it gives charges back); and limiter.redis.lease, the
 * life of a concurrency slot there, is read within its bounds. */
static void test_count_with_redis(void)
{
    char *errors = NULL;
    const char *yaml = "limiter: {store: redis, redis: {lease: 3s}}\n" ROUTE;
    char text[512];
    struct config *c;

    snprintf(text, sizeof text, yaml, "{statuses: [401]}");
    c = config_parse("t.yaml", text, strlen(text), &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->routes[0].limits[0].count.set);
    CU_ASSERT_EQUAL(c->redis.lease_ns, 3 * (int64_t)1000000000);
    config_free(c);
    snprintf(text, sizeof text, "limiter: {store: redis, redis: {lease: 500ms}}\n" ROUTE,
             "{statuses: [401]}");
    c = config_parse("t.yaml", text, strlen(text), &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "t.yaml:1:40: lease:"));
    free(errors);
}

/* concurrency takes no per (and no count:, its slot coming back whatever the answer); the
 * Redis store keeps it. */
static void test_concurrency_keys(void)
{
    static const char head[] = "routes:\n  - name: api\n    match: {path_prefix: /}\n"
                               "    upstream: \"http://127.0.0.1:9\"\n";
    static const struct {
        const char *limit, *want;
    } cases[] = {
        {"{algorithm: concurrency, requests: 5, per: 1s}",
         "t.yaml:5:55: per: concurrency counts requests in flight, not over time"},
        {"{algorithm: concurrency, requests: 5, count: {statuses: [401]}}",
         "t.yaml:5:57: count: a concurrency slot is given back when its request ends"},
        {"{algorithm: concurrency}", "t.yaml:5:12: limit: requests is required"},
        {"{algorithm: concurrency, requests: 5, burst: 2}",
         "limit: burst applies to token_bucket and gcra only, not concurrency"},
    };
    char yaml[512], *errors = NULL;
    struct config *c;

    snprintf(yaml, sizeof yaml, "%s    limit: {algorithm: concurrency, requests: 5}\n", head);
    c = config_parse("t.yaml", yaml, strlen(yaml), &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.algorithm_id, LIMITER_CONCURRENCY);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].params.per_ns, 0);
    config_free(c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(yaml, sizeof yaml, "%s    limit: %s\n", head, cases[i].limit);
        c = config_parse("t.yaml", yaml, strlen(yaml), &errors);
        CU_ASSERT_PTR_NULL(c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
        if (strstr(errors, cases[i].want) == NULL)
            fprintf(stderr, "\nexpected %s in:\n%s", cases[i].want, errors);
        CU_ASSERT_PTR_NOT_NULL(strstr(errors, cases[i].want));
        free(errors);
    }
    snprintf(yaml, sizeof yaml,
             "limiter: {store: redis}\n%s    limit: {algorithm: concurrency, "
             "requests: 5}\n",
             head);
    c = config_parse("t.yaml", yaml, strlen(yaml), &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->store, CONFIG_STORE_REDIS);
    config_free(c);
}

void register_count_config_tests(void)
{
    CU_pSuite s = add_suite("config_count");

    add_test(s, "count: statuses and except, by status and class", test_statuses_and_except);
    add_test(s, "count: each problem at its place", test_count_problems);
    add_test(s, "count: kept with the Redis store, and its lease", test_count_with_redis);
    add_test(s, "concurrency: no per, no count:; kept with Redis", test_concurrency_keys);
}
