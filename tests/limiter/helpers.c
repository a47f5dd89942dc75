#include <stdio.h>
#include <stdlib.h>

#include "tests/limiter/helpers.h"

const char *const all_algorithms[5] = {"token_bucket", "gcra", "fixed_window", "sliding_window_log",
                                       "sliding_window_counter"};

struct limiter *new_limiter(const char *algorithm, uint64_t requests, int64_t per_ns,
                            uint64_t burst, uint32_t max_clients)
{
    struct limiter_params params = {.algorithm = algorithm,
                                    .requests = requests,
                                    .per_ns = per_ns,
                                    .burst = burst,
                                    .max_clients = max_clients};
    char err[LIMITER_ERR_LEN] = "";
    struct limiter *limiter = limiter_create(&params, err);

    if (limiter == NULL)
        fprintf(stderr, "limiter_create(%s): %s\n", algorithm, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(limiter);
    return limiter;
}

struct limiter_decision decide_at(struct limiter *limiter, const char *client_id, int64_t now_ns)
{
    struct limiter_decision decision;

    CU_ASSERT_EQUAL_FATAL(limiter_decide(limiter, client_id, now_ns, &decision), 0);
    return decision;
}

unsigned count_allowed(struct limiter *limiter, const char *client_id, int64_t now_ns, unsigned n)
{
    unsigned allowed = 0;

    for (unsigned i = 0; i < n; i++)
        allowed += decide_at(limiter, client_id, now_ns).allowed;
    return allowed;
}

/* 10 per second, burst 5: a token every 100 ms. */
void check_bucket_contract(const char *algorithm)
{
    struct limiter *l = new_limiter(algorithm, 10, SEC(1), 5, 0);
    struct limiter_decision d;

    /* Starts full: the burst passes at once, with remaining counting down. */
    for (uint64_t i = 0; i < 5; i++) {
        d = decide_at(l, "a", T0);
        CU_ASSERT_TRUE(d.allowed);
        CU_ASSERT_EQUAL(d.remaining, 4 - i);
        CU_ASSERT_EQUAL(d.reset_ms, 100 * ((int64_t)i + 1));
        CU_ASSERT_EQUAL(d.limit, 10);
    }
    d = decide_at(l, "a", T0);
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 100);
    CU_ASSERT_EQUAL(d.remaining, 0);

    /* The retry time is exact: 1 ms early is still denied, on time passes. */
    d = decide_at(l, "a", T0 + MS(99));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 1);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + MS(100)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(100)).allowed);

    /* Continuous refill: 250 ms bring 2.5 tokens, so 2 pass and the third waits 50 ms. */
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(350), 3), 2);
    d = decide_at(l, "a", T0 + MS(350));
    CU_ASSERT_EQUAL(d.retry_after_ms, 50);

    /* Refill stops at the burst. */
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(60), 20), 5);

    /* A clock standing still gives nothing more. */
    CU_ASSERT_EQUAL(count_allowed(l, "b", T0, 1000), 5);

    /* A clock stepped back gives no extra quota, and the quota comes back on the original
     * schedule once the clock catches up. */
    CU_ASSERT_EQUAL(count_allowed(l, "c", T0 + SEC(20), 5), 5);
    CU_ASSERT_EQUAL(count_allowed(l, "c", T0 + SEC(10), 5), 0);
    CU_ASSERT_EQUAL(count_allowed(l, "c", T0 + SEC(20), 5), 0);
    CU_ASSERT_EQUAL(count_allowed(l, "c", T0 + SEC(20) + MS(100), 5), 1);
    /* Tokens left when the clock steps back are not there yet (the refill between has not
     * come), and the time in between does not refill them a second time. */
    CU_ASSERT_EQUAL(count_allowed(l, "d", T0 + SEC(20), 3), 3);
    CU_ASSERT_TRUE(
        count_allowed(l, "d", T0 + SEC(10), 5) + count_allowed(l, "d", T0 + SEC(20), 5) <= 2);

    limiter_free(l);
}
