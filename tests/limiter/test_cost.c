/* Requests that cost more than one unit (limiter_decide_all_cost()), for every algorithm: a
 * cost of k is k requests at one instant, charged all or none, and retry_after says when k
 * units are free. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/limiter/helpers.h"

static struct limiter_decision decide_cost(struct limiter *l, const char *id, uint64_t cost,
                                           int64_t now_ns)
{
    struct limiter_decision d;

    CU_ASSERT_EQUAL_FATAL(limiter_decide_all_cost(&l, 1, &id, &cost, now_ns, &d), 0);
    return d;
}

/* One request of cost k leaves the client where k requests of cost 1 at the same instant do,
 * whatever came before: compared on two limiters fed the same mixed stream. */
static void test_cost_is_k_requests(void)
{
    for (int a = 0; a < 5; a++) {
        const char *algorithm = all_algorithms[a];
        bool bucket = a < 2;
        struct limiter *weighted = new_limiter(algorithm, 20, SEC(10), bucket ? 12 : 0, 16);
        struct limiter *single = new_limiter(algorithm, 20, SEC(10), bucket ? 12 : 0, 16);
        unsigned seed = 7 + (unsigned)a, mismatches = 0;
        int64_t now = T0;

        for (int step = 0; step < 400; step++) {
            uint64_t cost = 1 + rand_r(&seed) % 5;
            struct limiter_decision w = decide_cost(weighted, "c", cost, now), s = {0};
            unsigned allowed = 0;

            /* The k singles at the same instant, stopping at the first denied. */
            for (uint64_t k = 0; k < cost; k++) {
                s = decide_at(single, "c", now);
                if (!s.allowed)
                    break;
                allowed++;
            }
            if (w.allowed) {
                mismatches += allowed != cost || s.remaining != w.remaining;
            } else {
                /* Some single was denied; the ones before it were charged, so the weighted
                 * limiter takes as many, as one cost, to stay in step. */
                mismatches += allowed == cost;
                if (allowed > 0 && !decide_cost(weighted, "c", allowed, now).allowed)
                    mismatches++;
            }
            now += MS(rand_r(&seed) % 900);
        }
        if (mismatches != 0)
            fprintf(stderr, "\n%s: %u mismatches\n", algorithm, mismatches);
        CU_ASSERT_EQUAL(mismatches, 0);
        limiter_free(weighted);
        limiter_free(single);
    }
}

/* retry_after for a cost of k: denied a moment before it, allowed at it. */
static void test_retry_after_for_cost(void)
{
    for (int a = 0; a < 5; a++) {
        const char *algorithm = all_algorithms[a];
        struct limiter *l = new_limiter(algorithm, 10, SEC(10), a < 2 ? 10 : 0, 16);
        unsigned seed = 11 + (unsigned)a, wrong = 0;
        int64_t now = T0;

        for (int step = 0; step < 300; step++) {
            uint64_t cost = 1 + rand_r(&seed) % 10;
            struct limiter_decision d = decide_cost(l, "c", cost, now);

            if (!d.allowed) {
                int64_t at = now + MS(d.retry_after_ms);
                wrong += d.retry_after_ms <= 0;
                /* 1 ms early: still denied (retry_after rounds up to whole ms). */
                if (d.retry_after_ms > 1) {
                    struct limiter_decision early;
                    uint64_t one = cost;
                    const char *id = "c";

                    CU_ASSERT_EQUAL(
                        limiter_decide_all_cost(&l, 1, &id, &one, at - MS(1) - 1, &early), 0);
                    wrong += early.allowed; /* charged if allowed: then the check fails */
                    if (early.allowed)
                        break;
                }
                now = at;
                d = decide_cost(l, "c", cost, now);
                wrong += !d.allowed;
            }
            now += MS(rand_r(&seed) % 400);
        }
        if (wrong != 0)
            fprintf(stderr, "\n%s: %u wrong retry_after\n", algorithm, wrong);
        CU_ASSERT_EQUAL(wrong, 0);
        limiter_free(l);
    }
}

/* All or none: a cost one limit cannot take charges no other. Costs beyond the quota, or 0,
 * are refused as bad calls. */
static void test_cost_all_or_none_and_bounds(void)
{
    struct limiter *small = new_limiter("fixed_window", 5, SEC(60), 0, 16);
    struct limiter *large = new_limiter("token_bucket", 100, SEC(60), 100, 16);
    struct limiter *both[] = {small, large};
    const char *ids[] = {"a", "a"};
    uint64_t costs[] = {4, 4}, zero = 0, over = 6;
    struct limiter_decision out[2];

    CU_ASSERT_EQUAL(limiter_decide_all_cost(both, 2, ids, costs, T0, out), 0);
    CU_ASSERT_TRUE(out[0].allowed && out[1].allowed);
    CU_ASSERT_EQUAL(out[0].remaining, 1);
    CU_ASSERT_EQUAL(out[1].remaining, 96);
    CU_ASSERT_EQUAL(limiter_decide_all_cost(both, 2, ids, costs, T0, out), 0);
    CU_ASSERT_FALSE(out[0].allowed);                          /* 1 left of 5 */
    CU_ASSERT_EQUAL(decide_at(large, "a", T0).remaining, 95); /* the bucket was not charged */
    CU_ASSERT_EQUAL(limiter_decide_all_cost(&small, 1, ids, &zero, T0, out), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_FALSE(out[0].allowed);
    CU_ASSERT_EQUAL(limiter_decide_all_cost(&small, 1, ids, &over, T0, out), -1);
    CU_ASSERT_EQUAL(limiter_quota(small), 5);
    CU_ASSERT_EQUAL(limiter_quota(large), 100);
    limiter_free(small);
    limiter_free(large);
}

void register_cost_tests(void)
{
    CU_pSuite s = add_suite("limiter_cost");

    add_test(s, "a cost of k is k requests at once", test_cost_is_k_requests);
    add_test(s, "retry_after for a cost", test_retry_after_for_cost);
    add_test(s, "all or none; costs out of bounds", test_cost_all_or_none_and_bounds);
}
