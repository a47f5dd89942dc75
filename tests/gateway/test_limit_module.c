/* The limit module (gateway/modules/limit/limit.c) on requests built in memory: the route's
 * limits asked for each request in this process, what a denial answers, dry_run and exempt,
 * and the RateLimit fields on every answer of a limited request. Buckets of an hour keep the
 * counts exact while a test runs: one request's worth comes back every 20 minutes at most. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

#define UPSTREAM "    upstream: \"http://127.0.0.1:9000\"\n"

static const char limits_yaml[] =
    "server: {access_log: \"off\"}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api/}\n" UPSTREAM
    "    limit: {algorithm: token_bucket, requests: 3, per: 1h, cost: {POST: 2}}\n"
    "    exempt: [\"192.0.2.0/24\"]\n"
    "  - name: trial\n    match: {path_prefix: /trial/}\n" UPSTREAM
    "    limit: {algorithm: token_bucket, requests: 1, per: 1h}\n    dry_run: true\n"
    "  - name: busy\n    match: {path_prefix: /busy/}\n" UPSTREAM
    "    limit: {algorithm: token_bucket, requests: 1, per: 1h}\n"
    "    on_limit: {status: 503}\n    headers: x-ratelimit\n"
    "  - name: two\n    match: {path_prefix: /two/}\n" UPSTREAM
    "    key: \"header:X-API-Key\"\n    limit:\n"
    "      - {name: per_key, algorithm: token_bucket, requests: 2, per: 1h}\n"
    "      - {name: per_ip, algorithm: token_bucket, requests: 3, per: 1h, key: ip}\n"
    "  - name: open\n    match: {path_prefix: /open/}\n" UPSTREAM;

#define CLIENT "198.51.100.1"
#define EXEMPT "192.0.2.5"

/* The whole number a field of `a` holds, or -1 when it has none. */
static long long field_number(const struct gw_answer *a, const char *name)
{
    const char *value = gw_fields_get(&a->fields, name);
    char *end;
    long long n;

    if (value == NULL)
        return -1;
    n = strtoll(value, &end, 10);
    return *end == '\0' && end != value ? n : -1;
}

/* What an allowed request's answer carries: the upstream's 200 through the answer hooks. */
static void upstream_answer(struct gw_req *rq)
{
    rq->answer.status = 200;
    gw_pipeline_answer(rq);
}

/* Whether `a` has RateLimit `"name";r=remaining;t=...` with t from 1 to `window`. */
static bool ratelimit_is(const struct gw_answer *a, const char *name, unsigned remaining,
                         long long window)
{
    const char *value = gw_fields_get(&a->fields, "RateLimit");
    char want[GW_FIELD_LEN];
    long long t;

    snprintf(want, sizeof want, "\"%s\";r=%u;t=", name, remaining);
    if (value == NULL || strncmp(value, want, strlen(want)) != 0) {
        fprintf(stderr, "\nRateLimit: %s, expected %s...\n", value ? value : "(none)", want);
        return false;
    }
    t = strtoll(value + strlen(want), NULL, 10);
    return t >= 1 && t <= window;
}

static void test_allowed_then_denied(void)
{
    struct fixture fx;
    struct gw_req *rq;
    long long retry_after;

    fixture_start(&fx, limits_yaml);
    for (unsigned i = 0; i < 3; i++) {
        rq = fixture_request(&fx, CLIENT, "GET", "/api/items", NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        CU_ASSERT_EQUAL(rq->refusal, 0);
        CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
        upstream_answer(rq);
        CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "RateLimit-Policy"),
                                  "\"api\";q=3;w=3600"));
        CU_ASSERT_TRUE(ratelimit_is(&rq->answer, "api", 2 - i, 3600));
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "Retry-After"));
        CU_ASSERT_EQUAL(rq->answer.status, 200);
        gw_req_free(rq);
    }
    rq = fixture_request(&fx, CLIENT, "GET", "/api/items", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, 429);
    CU_ASSERT_EQUAL(rq->decision, GW_DENIED);
    CU_ASSERT_TRUE(fixture_is(rq->refusal_detail, GW_DENIED_DETAIL));
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_EQUAL(rq->answer.status, 429);
    CU_ASSERT_FALSE(rq->answer.close); /* a denied client may ask again on its connection */
    CU_ASSERT_TRUE(
        fixture_is(gw_fields_get(&rq->answer.fields, "Content-Type"), "application/problem+json"));
    CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "X-Request-Id"), rq->request_id));
    CU_ASSERT_TRUE(ratelimit_is(&rq->answer, "api", 0, 3600));
    /* A request's worth comes back in 3600 / 3 s. */
    retry_after = field_number(&rq->answer, "Retry-After");
    CU_ASSERT_TRUE(retry_after >= 1190 && retry_after <= 1200);
    CU_ASSERT_PTR_NOT_NULL(strstr(rq->answer.body, "rate limit exceeded"));
    gw_req_free(rq);
    /* Another client has its own bucket. */
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, "198.51.100.2", "GET", "/api/items", NULL), NULL), 0);
    CU_ASSERT_EQUAL(fx.waits, 0);
    fixture_stop(&fx);
}

/* cost: {POST: 2}: a POST takes two of the three, anything else one. */
static void test_cost_of_method(void)
{
    struct fixture fx;

    fixture_start(&fx, limits_yaml);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "POST", "/api/items", NULL), NULL),
                    0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "POST", "/api/items", NULL), NULL),
                    429);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/api/items", NULL), NULL), 0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/api/items", NULL), NULL),
                    429);
    fixture_stop(&fx);
}

static void test_dry_run(void)
{
    struct fixture fx;
    struct gw_req *rq;
    enum gw_decision decision;

    fixture_start(&fx, limits_yaml);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/trial/x", NULL), &decision),
                    0);
    CU_ASSERT_EQUAL(decision, GW_ALLOWED);
    /* Over its limit: logged as it would have been denied, and forwarded all the same. */
    for (int i = 0; i < 2; i++) {
        rq = fixture_request(&fx, CLIENT, "GET", "/trial/x", NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        CU_ASSERT_EQUAL(rq->refusal, 0);
        CU_ASSERT_EQUAL(rq->decision, GW_DRY_RUN_DENIED);
        upstream_answer(rq);
        CU_ASSERT_EQUAL(rq->answer.status, 200);
        CU_ASSERT_TRUE(ratelimit_is(&rq->answer, "trial", 0, 3600));
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "Retry-After"));
        gw_req_free(rq);
    }
    fixture_stop(&fx);
}

static void test_exempt(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, limits_yaml);
    for (int i = 0; i < 5; i++) {
        rq = fixture_request(&fx, EXEMPT, "POST", "/api/items", NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        CU_ASSERT_EQUAL(rq->refusal, 0);
        CU_ASSERT_EQUAL(rq->decision, GW_EXEMPT);
        upstream_answer(rq);
        /* Counted by no limit, so no figures to report; the upstream's own go through. */
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit"));
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit-Policy"));
        CU_ASSERT_FALSE(gw_pipeline_owns_field(rq, "RateLimit"));
        gw_req_free(rq);
    }
    /* Exempt as the client its keys see: behind no trusted proxy, X-Forwarded-For is no way
     * into the exemption. */
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/api/items",
                                                     "X-Forwarded-For", EXEMPT, NULL),
                                     NULL),
                        0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/api/items",
                                                 "X-Forwarded-For", EXEMPT, NULL),
                                 NULL),
                    429);
    fixture_stop(&fx);
}

/* on_limit: {status: 503} and headers: x-ratelimit. */
static void test_on_limit_status(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, limits_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/busy/x", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    upstream_answer(rq);
    CU_ASSERT_EQUAL(field_number(&rq->answer, "X-RateLimit-Limit"), 1);
    CU_ASSERT_EQUAL(field_number(&rq->answer, "X-RateLimit-Remaining"), 0);
    CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit"));
    CU_ASSERT_TRUE(gw_pipeline_owns_field(rq, "x-ratelimit-remaining"));
    CU_ASSERT_FALSE(gw_pipeline_owns_field(rq, "RateLimit"));
    gw_req_free(rq);
    rq = fixture_request(&fx, CLIENT, "GET", "/busy/x", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, 503);
    CU_ASSERT_EQUAL(rq->decision, GW_DENIED);
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_EQUAL(rq->answer.status, 503);
    CU_ASSERT_FALSE(rq->answer.close); /* a denial, not a request sluice would not read */
    CU_ASSERT_TRUE(field_number(&rq->answer, "Retry-After") >= 3590);
    CU_ASSERT_EQUAL(field_number(&rq->answer, "X-RateLimit-Limit"), 1);
    CU_ASSERT_EQUAL(field_number(&rq->answer, "X-RateLimit-Remaining"), 0);
    CU_ASSERT_TRUE(field_number(&rq->answer, "X-RateLimit-Reset") >= 3590);
    CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit-Policy"));
    gw_req_free(rq);
    fixture_stop(&fx);
}

/* The route's key for one limit, the address for the other; the one that binds is named. */
static void test_each_limit_its_key(void)
{
    static const char *const keys[] = {"k1", "k1", "k2", "k3"};
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, limits_yaml);
    for (int i = 0; i < 3; i++) {
        rq = fixture_request(&fx, CLIENT, "GET", "/two/x", "X-API-Key", keys[i], NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        upstream_answer(rq);
        CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "RateLimit-Policy"),
                                  "\"per_key\";q=2;w=3600, \"per_ip\";q=3;w=3600"));
        gw_req_free(rq);
    }
    /* k3 is fresh, the address is not. */
    rq = fixture_request(&fx, CLIENT, "GET", "/two/x", "X-API-Key", keys[3], NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, 429);
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_TRUE(ratelimit_is(&rq->answer, "per_ip", 0, 3600));
    gw_req_free(rq);
    /* k1 is spent wherever it comes from. */
    rq = fixture_request(&fx, "203.0.113.1", "GET", "/two/x", "X-API-Key", "k1", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_TRUE(ratelimit_is(&rq->answer, "per_key", 0, 3600));
    gw_req_free(rq);
    fixture_stop(&fx);
}

/* No limits, or no address to count by: nothing decided, nothing reported. */
static void test_nothing_to_count(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, limits_yaml);
    for (int i = 0; i < 5; i++) {
        rq = i % 2 == 0 ? fixture_request(&fx, CLIENT, "GET", "/open/x", NULL)
                        : fixture_request(&fx, NULL, "GET", "/api/items", NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
        upstream_answer(rq);
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit"));
        CU_ASSERT_FALSE(gw_pipeline_owns_field(rq, "RateLimit"));
        CU_ASSERT_TRUE(
            fixture_is(gw_fields_get(&rq->answer.fields, "X-Request-Id"), rq->request_id));
        gw_req_free(rq);
    }
    fixture_stop(&fx);
}

void register_limit_module_tests(void)
{
    CU_pSuite s = add_suite_with("gateway_limit_module", fixture_register_pipeline, NULL);

    add_test(s, "allowed while the quota lasts, then 429 with Retry-After",
             test_allowed_then_denied);
    add_test(s, "a method's cost", test_cost_of_method);
    add_test(s, "dry_run: dry_run_denied, never refused", test_dry_run);
    add_test(s, "exempt: counted by no limit", test_exempt);
    add_test(s, "on_limit's status and headers: x-ratelimit", test_on_limit_status);
    add_test(s, "each limit counts under its own key", test_each_limit_its_key);
    add_test(s, "no limits, or no IP peer: nothing counted", test_nothing_to_count);
}
