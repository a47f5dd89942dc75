#include <stdlib.h>

#include "tests/limiter/helpers.h"

/* At most `requests` in any trailing `per`, to the nanosecond. */
static void test_exact_window(void)
{
    struct limiter *l = new_limiter("sliding_window_log", 3, SEC(1), 0, 0);
    struct limiter_decision d;

    CU_ASSERT_TRUE(decide_at(l, "a", T0).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + MS(300)).allowed);
    d = decide_at(l, "a", T0 + MS(600));
    CU_ASSERT_TRUE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 0);
    CU_ASSERT_EQUAL(d.reset_ms, 1000);
    d = decide_at(l, "a", T0 + MS(900));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 100);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1) - 1).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(1)).allowed);
    d = decide_at(l, "a", T0 + MS(1200));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 100);
    limiter_free(l);
}

/* Against a brute-force model: a request is allowed iff fewer than `requests` allowed ones lie
 * in (t - per, t]. Random gaps make the ring grow, wrap and drain. */
static void test_matches_brute_force(void)
{
    enum { N = 3000, REQUESTS = 10 };
    static int64_t allowed_at[N];
    struct limiter *l = new_limiter("sliding_window_log", REQUESTS, MS(100), 0, 0);
    unsigned n_allowed = 0;
    int64_t now = T0;

    srand(11);
    for (int i = 0; i < N; i++) {
        unsigned in_window = 0;

        for (unsigned j = 0; j < n_allowed; j++)
            in_window += allowed_at[j] > now - MS(100);
        CU_ASSERT_EQUAL_FATAL(decide_at(l, "a", now).allowed, in_window < REQUESTS);
        if (in_window < REQUESTS)
            allowed_at[n_allowed++] = now;
        now += rand() % 3 == 0 ? MS(rand() % 60) : MS(1) * (rand() % 4);
    }
    CU_ASSERT_TRUE(n_allowed > 500);
    limiter_free(l);
}

static void test_clock_still_and_backwards(void)
{
    struct limiter *l = new_limiter("sliding_window_log", 5, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "still", T0, 1000), 5);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + SEC(5), 3), 3);
    /* Two more at a clock 4 s back are stamped at the latest time, not the earlier one. */
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + SEC(1), 5), 2);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + SEC(6) - 1, 5), 0);
    CU_ASSERT_EQUAL(count_allowed(l, "back", T0 + SEC(6), 10), 5);
    limiter_free(l);
}

void register_sliding_window_log_tests(void)
{
    CU_pSuite s = add_suite("sliding_window_log");

    add_test(s, "exact over the trailing window", test_exact_window);
    add_test(s, "matches a brute-force count", test_matches_brute_force);
    add_test(s, "a clock standing still or stepped back", test_clock_still_and_backwards);
}
