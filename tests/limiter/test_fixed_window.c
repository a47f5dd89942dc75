#include "tests/limiter/helpers.h"

/* Windows fall on multiples of `per` since the epoch, whenever the client starts. */
static void test_windows_are_aligned(void)
{
    struct limiter *l = new_limiter("fixed_window", 3, SEC(1), 0, 0);
    struct limiter_decision d;

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(500), 3), 3);
    d = decide_at(l, "a", T0 + MS(500));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 500);
    CU_ASSERT_EQUAL(d.reset_ms, 500);
    CU_ASSERT_EQUAL(d.remaining, 0);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(999)).allowed);
    d = decide_at(l, "a", T0 + SEC(1));
    CU_ASSERT_TRUE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 2);
    CU_ASSERT_EQUAL(d.reset_ms, 1000);
    limiter_free(l);
}

/* The algorithm's known weakness, kept visible: the limit at the end of one window and again
 * at the start of the next, twice the limit within 1 ms. */
static void test_boundary_spike(void)
{
    struct limiter *l = new_limiter("fixed_window", 100, SEC(60), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(60) - MS(1), 200), 100);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(60), 200), 100);
    limiter_free(l);
}

static void test_clock_still_and_backwards(void)
{
    struct limiter *l = new_limiter("fixed_window", 5, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "still", T0, 1000), 5);
    /* Filled in window [T0+2s, T0+3s); a clock back in an earlier window counts in the
     * latest one, so no second quota, and the wait runs to the latest window's end. */
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + MS(2500), 5), 5);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + MS(1500), 5), 0);
    CU_ASSERT_EQUAL(decide_at(l, "back", T0 + MS(1500)).retry_after_ms, 1500);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + SEC(3), 10), 5);
    limiter_free(l);
}

void register_fixed_window_tests(void)
{
    CU_pSuite s = add_suite("fixed_window");

    add_test(s, "windows are aligned to the epoch", test_windows_are_aligned);
    add_test(s, "twice the limit across a boundary", test_boundary_spike);
    add_test(s, "a clock standing still or stepped back", test_clock_still_and_backwards);
}
