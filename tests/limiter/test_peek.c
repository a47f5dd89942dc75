/* limiter_peek(): the answer a request would get, with nothing charged and no room made for a
 * client the table does not hold, for every algorithm. */
#include "tests/limiter/helpers.h"

static const char *const peeked[] = {"token_bucket",           "gcra",
                                     "fixed_window",           "sliding_window_log",
                                     "sliding_window_counter", "concurrency"};

static struct limiter_decision peek(struct limiter *l, const char *client, int64_t now)
{
    struct limiter_decision d;

    CU_ASSERT_EQUAL_FATAL(limiter_peek(l, client, 1, now, &d), 0);
    return d;
}

/* An unknown client answers as a fresh one and is not added; peeks charge nothing, however
 * many; once the quota is spent, a peek says what the next request would get. */
static void test_peek_charges_nothing(void)
{
    for (size_t i = 0; i < sizeof peeked / sizeof peeked[0]; i++) {
        bool in_flight = i == 5;
        struct limiter *l = new_limiter(peeked[i], 5, in_flight ? 0 : SEC(60), 0, 0);
        struct limiter_stats stats;
        struct limiter_decision d = peek(l, "a", T0);
        struct limiter_decision next;

        CU_ASSERT_TRUE(d.allowed);
        CU_ASSERT_EQUAL(d.remaining, 4);
        limiter_get_stats(l, &stats);
        CU_ASSERT_EQUAL(stats.clients, 0);
        for (int k = 0; k < 20; k++)
            peek(l, "a", T0 + MS(1));
        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(2), 10), 5);
        d = peek(l, "a", T0 + MS(3));
        next = decide_at(l, "a", T0 + MS(3));
        if (d.allowed != next.allowed || d.retry_after_ms != next.retry_after_ms)
            fprintf(stderr, "\n%s: the peek and the decision differ", peeked[i]);
        CU_ASSERT_FALSE(d.allowed);
        CU_ASSERT_EQUAL(d.retry_after_ms, next.retry_after_ms);
        CU_ASSERT_EQUAL(d.remaining, 0);
        limiter_free(l);
    }
}

void register_peek_tests(void)
{
    CU_pSuite s = add_suite("limiter_peek");

    add_test(s, "a peek charges nothing and makes no room", test_peek_charges_nothing);
}
