#include "tests/limiter/helpers.h"

static void test_contract(void)
{
    check_bucket_contract("token_bucket");
}

/* 3 per second does not divide a second into whole nanoseconds; the credit arithmetic still
 * refills exactly three tokens per second. */
static void test_fractional_rate_is_exact(void)
{
    struct limiter *l = new_limiter("token_bucket", 3, SEC(1), 3, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 4), 3);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(1) - 1, 3), 2);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(1), 3), 1);
    limiter_free(l);
}

/* burst defaults to requests; a burst above the rate is allowed. */
static void test_burst_default_and_larger(void)
{
    struct limiter *l = new_limiter("token_bucket", 4, SEC(1), 0, 0);
    struct limiter *big = new_limiter("token_bucket", 1, SEC(1), 50, 0);

    CU_ASSERT_EQUAL(limiter_get_params(l)->burst, 4);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 10), 4);
    CU_ASSERT_EQUAL(count_allowed(big, "a", T0, 100), 50);
    CU_ASSERT_EQUAL(count_allowed(big, "a", T0 + SEC(3), 100), 3);
    limiter_free(l);
    limiter_free(big);
}

/* The full-bucket time is the reset, from any state. */
static void test_reset_is_time_to_full(void)
{
    struct limiter *l = new_limiter("token_bucket", 2, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(decide_at(l, "a", T0).reset_ms, 500);
    CU_ASSERT_EQUAL(decide_at(l, "a", T0 + MS(100)).reset_ms, 900);
    limiter_free(l);
}

void register_token_bucket_tests(void)
{
    CU_pSuite s = add_suite("token_bucket");

    add_test(s, "burst, refill, cap, retry and clocks", test_contract);
    add_test(s, "a rate that does not divide a second is exact", test_fractional_rate_is_exact);
    add_test(s, "burst defaults to requests and may exceed it", test_burst_default_and_larger);
    add_test(s, "reset is the time until the bucket is full", test_reset_is_time_to_full);
}
