/* config/delay.c: a limit's delay: {max, queue}, its defaults and bounds; only buckets keep a
 * waiting request's place, so a delay on another algorithm, or beside one, is refused at its
 * place; plans are checked as routes are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

#define HEAD                                                                                       \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n"

static struct config *parse(const char *limit, char **errors)
{
    char yaml[1024];

    snprintf(yaml, sizeof yaml, HEAD "    limit: %s\n", limit);
    *errors = NULL;
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

static void expect_problem(const char *limit, const char *want)
{
    char yaml[1024];

    snprintf(yaml, sizeof yaml, HEAD "    limit: %s\n", limit);
    expect_config_problem(yaml, want);
}

static void test_delay_read(void)
{
    char *errors;
    struct config *c = parse("{algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s}}", &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(c->routes[0].limits[0].delay.set);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].delay.max_ns, 1000000000);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].delay.queue, CONFIG_DEFAULT_DELAY_QUEUE);
    config_free(c);
    c = parse("[{name: a, algorithm: token_bucket, requests: 10, per: 1s, burst: 2,\n"
              "             delay: {max: 250ms, queue: 7}},\n"
              "           {name: b, algorithm: gcra, requests: 100, per: 1h}]",
              &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].delay.max_ns, 250000000);
    CU_ASSERT_EQUAL(c->routes[0].limits[0].delay.queue, 7);
    CU_ASSERT_FALSE(c->routes[0].limits[1].delay.set);
    config_free(c);
}

static void test_delay_problems(void)
{
    expect_problem("{algorithm: gcra, requests: 10, per: 1s, delay: {queue: 5}}",
                   "delay: expected {max: 1s, queue: 100}, max at least");
    expect_problem("{algorithm: gcra, requests: 10, per: 1s, delay: 1s}",
                   "delay: expected {max: 1s, queue: 100}");
    expect_problem("{algorithm: gcra, requests: 10, per: 1s, delay: {max: 2m}}", "max:");
    expect_problem("{algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s, queue: 0}}",
                   "queue:");
    expect_problem("{algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s, wait: 2}}", "wait");
    expect_problem("{algorithm: fixed_window, requests: 10, per: 1s, delay: {max: 1s}}",
                   "t.yaml:5:68: delay: fixed_window cannot keep a waiting request's place; "
                   "only token_bucket and gcra can");
    expect_problem("{algorithm: concurrency, requests: 10, delay: {max: 1s}}",
                   "delay: concurrency cannot keep a waiting request's place");
    expect_problem("[{name: a, algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s}},\n"
                   "           {name: b, algorithm: sliding_window_log, requests: 5, per: 1m}]",
                   "t.yaml:6:33: limit: sliding_window_log cannot count a request at the instant "
                   "it passes after waiting (limit a has delay:)");
}

/* Beside a delay, every limit counts under one key: a place kept at a limit of another key
 * would hold up that key's other clients. */
static void test_delay_keys(void)
{
    const char *yaml =
        HEAD "    key: \"header:X-API-Key\"\n"
             "    limit:\n"
             "      - {name: a, algorithm: gcra, requests: 5, per: 1s, delay: {max: 1s}}\n"
             "      - {name: b, algorithm: gcra, requests: 50, per: 1s, key: ip}\n";
    char *errors = NULL;
    struct config *c = config_parse("t.yaml", yaml, strlen(yaml), &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "limit: b counts under another key than a, which has "
                                          "delay:"));
    free(errors);
    yaml = HEAD "    key: ip\n"
                "    limit:\n"
                "      - {name: a, algorithm: gcra, requests: 5, per: 1s, delay: {max: 1s}}\n"
                "      - {name: b, algorithm: token_bucket, requests: 50, per: 1s, key: ip}\n";
    errors = NULL;
    c = config_parse("t.yaml", yaml, strlen(yaml), &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL(c);
    config_free(c);
    free(errors);
}

/* A plan's limits are held to the same rule. */
static void test_delay_in_plans(void)
{
    const char *yaml = "plans:\n  gold:\n    - {name: a, algorithm: gcra, requests: 5, per: 1s, "
                       "delay: {max: 1s}}\n"
                       "    - {name: b, algorithm: fixed_window, requests: 50, per: 1m}\n" HEAD
                       "    limit: {algorithm: gcra, requests: 5, per: 1s}\n";
    char *errors = NULL;
    struct config *c = config_parse("t.yaml", yaml, strlen(yaml), &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, "limit: fixed_window cannot count a request"));
    free(errors);
}

void register_delay_config_tests(void)
{
    CU_pSuite s = add_suite("config_delay");

    add_test(s, "delay: max and queue, with its default", test_delay_read);
    add_test(s, "delay: each problem at its place", test_delay_problems);
    add_test(s, "delay: plans held to the same rule", test_delay_in_plans);
    add_test(s, "delay: every limit beside it counts under its key", test_delay_keys);
}
