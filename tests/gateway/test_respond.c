#include <stdlib.h>
#include <string.h>

#include "../unit.h"
#include "respond.h"

static void test_fields(void)
{
    struct limiter_params p = {"gcra", 100, 60 * (int64_t)1000000000, 0, 0};
    struct limiter_decision d = {false, 100, 0, 16001, 1500};
    char field[GW_FIELD_LEN];

    gw_format_policy(field, "api", &p);
    CU_ASSERT_STRING_EQUAL(field, "\"api\";q=100;w=60");
    gw_format_ratelimit(field, "api", &d);
    CU_ASSERT_STRING_EQUAL(field, "\"api\";r=0;t=17");
    p.per_ns = 250000000; /* a sub-second window still says w=1 */
    gw_format_policy(field, "fast", &p);
    CU_ASSERT_STRING_EQUAL(field, "\"fast\";q=100;w=1");
}

static void test_retry_after_rounds_up(void)
{
    CU_ASSERT_EQUAL(gw_retry_after_seconds(0), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1000), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1001), 2);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(59999), 60);
}

static void test_problem_json(void)
{
    char *body = gw_problem_json(429, "slow \"down\"\n", "api");

    CU_ASSERT_STRING_EQUAL(body, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\","
                                 "\"status\":429,\"detail\":\"slow \\\"down\\\"\\u000a\","
                                 "\"route\":\"api\"}\n");
    free(body);
    body = gw_problem_json(404, "no route", NULL);
    CU_ASSERT_PTR_NULL(strstr(body, "route\":"));
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"title\":\"Not Found\",\"status\":404"));
    free(body);
}

void register_respond_tests(void)
{
    CU_pSuite s = add_suite("gateway_respond");

    add_test(s, "RateLimit-Policy and RateLimit", test_fields);
    add_test(s, "Retry-After rounds up, never 0", test_retry_after_rounds_up);
    add_test(s, "problem+json bodies", test_problem_json);
}
