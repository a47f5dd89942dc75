#include "tests/limiter/helpers.h"

/* Against the fixed window's spike: 100 at the end of a minute leave 99.998 weighted 1 ms into
 * the next, so one request passes, not 100. */
static void test_defends_the_boundary(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", 100, SEC(60), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(60) - MS(1), 200), 100);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(60) + MS(1), 200), 1);
    limiter_free(l);
}

/* Halfway through the next window the previous count weighs half. */
static void test_weighting(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", 10, SEC(1), 0, 0);
    struct limiter_decision d;

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 20), 10);
    d = decide_at(l, "a", T0 + MS(1500));
    CU_ASSERT_TRUE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 4);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(1500), 20), 4);
    /* 5 + 10 * (1 - 0.5) = 10 is not below 10: denied until elapsed passes 500 ms. */
    d = decide_at(l, "a", T0 + MS(1500));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 1);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + MS(1501)).allowed);
    /* 6 in this window: the previous one must fade to 4 weighted, past 600 ms. */
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(1600)).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + MS(1600) + 1).allowed);
    limiter_free(l);
}

/* More than one full window idle forgets the previous count. */
static void test_forgets_after_idle_window(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", 10, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(900), 20), 10);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(2100), 20), 10);
    CU_ASSERT_EQUAL(decide_at(l, "a", T0 + MS(2100)).reset_ms, 1900);
    limiter_free(l);
}

/* A full current window waits for the next one, where the count fades from its start. */
static void test_retry_into_next_window(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", 4, SEC(1), 0, 0);
    struct limiter_decision d;

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(200), 4), 4);
    d = decide_at(l, "a", T0 + MS(200));
    CU_ASSERT_FALSE(d.allowed);
    /* At T0+1s the estimate is exactly 4; one nanosecond later it is below. */
    CU_ASSERT_EQUAL(d.retry_after_ms, 801);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1)).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(1) + 1).allowed);
    limiter_free(l);
}

static void test_clock_still_and_backwards(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", 5, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "still", T0, 1000), 5);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + MS(2500), 5), 5);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + MS(500), 5), 0);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + MS(2999), 5), 0);
    limiter_free(l);
}

void register_sliding_window_counter_tests(void)
{
    CU_pSuite s = add_suite("sliding_window_counter");

    add_test(s, "one request across a boundary, not the limit", test_defends_the_boundary);
    add_test(s, "the previous window weighs what is left of it", test_weighting);
    add_test(s, "a window idle for a full window is forgotten", test_forgets_after_idle_window);
    add_test(s, "retry into the next window is exact", test_retry_into_next_window);
    add_test(s, "a clock standing still or stepped back", test_clock_still_and_backwards);
}
