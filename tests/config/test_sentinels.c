/* config/limits.c: limiter.redis.sentinels (1 to CONFIG_MAX_SENTINELS "host:port") and master,
 * which go together and replace address, and sentinel_password, which needs sentinels; each
 * problem refused at its place (the line and column of the key's value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

/* The redis mapping's lines start on line 4, each indented by four spaces. */
#define LIMITER "limiter:\n  store: redis\n  redis:\n"
#define ROUTES                                                                                     \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n"  \
    "    limit: {algorithm: fixed_window, requests: 10, per: 1m}\n"

static struct config *parse(const char *redis, char **errors)
{
    char yaml[2048];

    snprintf(yaml, sizeof yaml, LIMITER "%s" ROUTES, redis);
    *errors = NULL;
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

static void expect_problem(const char *redis, const char *want)
{
    char yaml[2048];

    snprintf(yaml, sizeof yaml, LIMITER "%s" ROUTES, redis);
    expect_config_problem(yaml, want);
}

static void test_sentinels_read(void)
{
    char *errors;
    struct config *c = parse("    sentinels: [\"127.0.0.1:26379\", \"sentinel-b:26380\",\n"
                             "                \"[::1]:26381\"]\n"
                             "    master: mymaster\n    sentinel_password: s3cret\n"
                             "    timeout: 200ms\n",
                             &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->redis.n_sentinels, 3);
    CU_ASSERT_STRING_EQUAL(c->redis.sentinels[0].host, "127.0.0.1");
    CU_ASSERT_EQUAL(c->redis.sentinels[0].port, 26379);
    CU_ASSERT_STRING_EQUAL(c->redis.sentinels[1].host, "sentinel-b");
    CU_ASSERT_EQUAL(c->redis.sentinels[1].port, 26380);
    CU_ASSERT_STRING_EQUAL(c->redis.sentinels[2].host, "::1");
    CU_ASSERT_EQUAL(c->redis.sentinels[2].port, 26381);
    CU_ASSERT_STRING_EQUAL(c->redis.master, "mymaster");
    CU_ASSERT_STRING_EQUAL(c->redis.sentinel_password, "s3cret");
    CU_ASSERT_EQUAL(c->redis.timeout_ns, 200000000);
    config_free(c);
}

/* One sentinel is a list too, and without sentinel_password there is none; exactly
 * CONFIG_MAX_SENTINELS are taken. */
static void test_sentinels_bounds_read(void)
{
    char *errors;
    struct config *c = parse("    sentinels: [\"10.0.0.5:26379\"]\n    master: m\n", &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->redis.n_sentinels, 1);
    CU_ASSERT_PTR_NULL(c->redis.sentinel_password);
    config_free(c);
    c = parse("    sentinels: [\"a:1\", \"b:2\", \"c:3\", \"d:4\", \"e:5\", \"f:6\", \"g:7\", "
              "\"h:8\"]\n    master: m\n",
              &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->redis.n_sentinels, CONFIG_MAX_SENTINELS);
    CU_ASSERT_STRING_EQUAL(c->redis.sentinels[7].host, "h");
    CU_ASSERT_EQUAL(c->redis.sentinels[7].port, 8);
    config_free(c);
}

/* What goes together, and what does not. */
static void test_sentinels_pairing_problems(void)
{
    expect_problem("    sentinels: [\"127.0.0.1:26379\"]\n",
                   "t.yaml:4:16: sentinels: sentinels and master go together (the sentinels' "
                   "name for the master)");
    expect_problem("    master: mymaster\n",
                   "t.yaml:4:13: master: sentinels and master go together (the sentinels' name "
                   "for the master)");
    expect_problem("    address: \"127.0.0.1:6379\"\n    sentinels: [\"127.0.0.1:26379\"]\n"
                   "    master: mymaster\n",
                   "t.yaml:5:16: sentinels: give the sentinels or one Redis's address, not both");
    expect_problem("    address: \"127.0.0.1:6379\"\n    sentinel_password: s3cret\n",
                   "t.yaml:5:24: sentinel_password: there are no sentinels to give it to");
    expect_problem("    sentinel_password: s3cret\n",
                   "t.yaml:4:24: sentinel_password: there are no sentinels to give it to");
}

/* The list itself: its shape, its length and each item. */
static void test_sentinels_list_problems(void)
{
    expect_problem("    sentinels: []\n    master: m\n",
                   "t.yaml:4:16: sentinels: expected a list of 1 to 8 \"host:port\"");
    expect_problem("    sentinels: [\"a:1\", \"b:2\", \"c:3\", \"d:4\", \"e:5\", \"f:6\", \"g:7\", "
                   "\"h:8\", \"i:9\"]\n    master: m\n",
                   "t.yaml:4:16: sentinels: expected a list of 1 to 8 \"host:port\"");
    expect_problem("    sentinels: {a: \"127.0.0.1:26379\"}\n    master: m\n",
                   "t.yaml:4:16: sentinels: expected a list of 1 to 8 \"host:port\"");
    expect_problem("    sentinels: \"127.0.0.1:26379\"\n    master: m\n",
                   "t.yaml:4:16: sentinels: expected a list of 1 to 8 \"host:port\"");
    expect_problem("    sentinels: [\"127.0.0.1:26379\", sentinel-b]\n    master: m\n",
                   "t.yaml:4:36: sentinels: \"sentinel-b\" is not host:port");
    expect_problem("    sentinels: [\"127.0.0.1:26379\", \"127.0.0.1:0\"]\n    master: m\n",
                   "t.yaml:4:36: sentinels: \"127.0.0.1:0\" is not host:port");
    expect_problem("    sentinels: [\"127.0.0.1:99999\"]\n    master: m\n",
                   "t.yaml:4:17: sentinels: \"127.0.0.1:99999\" is not host:port");
}

void register_sentinels_config_tests(void)
{
    CU_pSuite s = add_suite("config_sentinels");

    add_test(s, "sentinels: hosts, ports, master and password read", test_sentinels_read);
    add_test(s, "sentinels: one, and the most there may be", test_sentinels_bounds_read);
    add_test(s, "sentinels: with master, instead of address; sentinel_password needs them",
             test_sentinels_pairing_problems);
    add_test(s, "sentinels: an empty list, too many, a mapping, an item not host:port",
             test_sentinels_list_problems);
}
