#include <stdlib.h>

#include "tests/limiter/helpers.h"

static void test_contract(void)
{
    check_bucket_contract("gcra");
}

/* The emission interval is rounded up to whole nanoseconds: 3 per second is one request per
 * 333,333,334 ns, never faster than asked. */
static void test_interval_rounds_up(void)
{
    struct limiter *l = new_limiter("gcra", 3, SEC(1), 1, 0);

    CU_ASSERT_TRUE(decide_at(l, "a", T0).allowed);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + 333333333).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + 333333334).allowed);
    limiter_free(l);
}

/* The same sequence through token_bucket and gcra gives the same answers when the rate is a
 * whole number of nanoseconds per request. */
static void test_agrees_with_token_bucket(void)
{
    struct limiter *tb = new_limiter("token_bucket", 20, SEC(1), 7, 0);
    struct limiter *g = new_limiter("gcra", 20, SEC(1), 7, 0);
    int64_t now = T0;

    srand(7);
    for (int i = 0; i < 2000; i++) {
        struct limiter_decision a = decide_at(tb, "k", now);
        struct limiter_decision b = decide_at(g, "k", now);

        CU_ASSERT_EQUAL(a.allowed, b.allowed);
        CU_ASSERT_EQUAL(a.remaining, b.remaining);
        CU_ASSERT_EQUAL(a.retry_after_ms, b.retry_after_ms);
        CU_ASSERT_EQUAL(a.reset_ms, b.reset_ms);
        now += MS(rand() % 120);
    }
    limiter_free(tb);
    limiter_free(g);
}

void register_gcra_tests(void)
{
    CU_pSuite s = add_suite("gcra");

    add_test(s, "burst, refill, cap, retry and clocks", test_contract);
    add_test(s, "the emission interval rounds up", test_interval_rounds_up);
    add_test(s, "agrees with token_bucket on a random sequence", test_agrees_with_token_bucket);
}
