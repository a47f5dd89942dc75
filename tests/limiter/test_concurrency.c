/* limiter/concurrency.c: at most `requests` in flight per client, a slot back when its request
 * ends (limiter_refund()), no clock, held clients never reclaimed as idle. */
#include <errno.h>
#include <string.h>

#include "tests/limiter/helpers.h"

static void test_slots_taken_and_given_back(void)
{
    struct limiter *l = new_limiter("concurrency", 3, 0, 0, 0);
    struct limiter_decision d;

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 10), 3);
    d = decide_at(l, "a", T0 + SEC(3600)); /* time gives nothing back */
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 0);
    CU_ASSERT_EQUAL(d.retry_after_ms, 1000);
    CU_ASSERT_EQUAL(count_allowed(l, "b", T0, 10), 3); /* per client */
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 1, T0, T0 + MS(1)), 0);
    d = decide_at(l, "a", T0 + MS(2));
    CU_ASSERT_TRUE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 0);
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 3, T0, T0 + MS(3)), 0);
    d = decide_at(l, "a", T0 + MS(4));
    CU_ASSERT_TRUE(d.allowed);
    CU_ASSERT_EQUAL(d.remaining, 2);
    /* More given back than held leaves a fresh client, no more. */
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 3, T0, T0 + MS(5)), 0);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(6), 10), 3);
    limiter_free(l);
}

/* Costs take that many slots, all or none with other limits as any charge. */
static void test_costs_and_several_limits(void)
{
    struct limiter *cap = new_limiter("concurrency", 4, 0, 0, 0);
    struct limiter *rate = new_limiter("fixed_window", 100, SEC(1), 0, 0);
    struct limiter *both[] = {cap, rate};
    const char *ids[] = {"a", "a"};
    uint64_t costs[] = {3, 1};
    struct limiter_decision d[2];

    CU_ASSERT_EQUAL(limiter_decide_all_cost(both, 2, ids, costs, T0, d), 0);
    CU_ASSERT_TRUE(d[0].allowed && d[1].allowed);
    CU_ASSERT_EQUAL(limiter_decide_all_cost(both, 2, ids, costs, T0, d), 0);
    CU_ASSERT_FALSE(d[0].allowed);
    d[1] = decide_at(rate, "a", T0); /* the denial charged the window nothing */
    CU_ASSERT_EQUAL(d[1].remaining, 98);
    limiter_free(cap);
    limiter_free(rate);
}

/* A full table reclaims clients holding nothing, never one holding a slot. */
static void test_held_clients_not_reclaimed(void)
{
    struct limiter *l = new_limiter("concurrency", 1, 0, 0, 2);
    struct limiter_stats stats;

    CU_ASSERT_TRUE(decide_at(l, "holder", T0).allowed);
    CU_ASSERT_TRUE(decide_at(l, "passer", T0).allowed);
    CU_ASSERT_EQUAL(limiter_refund(l, "passer", 1, T0, T0), 0);
    CU_ASSERT_TRUE(decide_at(l, "newcomer", T0 + MS(1)).allowed); /* takes passer's place */
    limiter_get_stats(l, &stats);
    CU_ASSERT_EQUAL(stats.evictions, 0);
    CU_ASSERT_FALSE(decide_at(l, "holder", T0 + MS(2)).allowed);
    limiter_free(l);
}

static void test_concurrency_parameters(void)
{
    struct limiter_params with_per = {.algorithm = "concurrency", .requests = 5, .per_ns = SEC(1)};
    struct limiter_params with_burst = {.algorithm = "concurrency", .requests = 5, .burst = 2};
    char err[LIMITER_ERR_LEN] = "";

    CU_ASSERT_PTR_NULL(limiter_create(&with_per, err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "per does not apply to concurrency"));
    CU_ASSERT_PTR_NULL(limiter_create(&with_burst, err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "burst applies to token_bucket and gcra only"));
    CU_ASSERT_EQUAL(limiter_algorithm_from_name("concurrency"), LIMITER_CONCURRENCY);
    CU_ASSERT_FALSE(limiter_algorithm_takes_burst(LIMITER_CONCURRENCY));
}

void register_concurrency_tests(void)
{
    CU_pSuite s = add_suite("limiter_concurrency");

    add_test(s, "slots taken, and given back by a refund, not by time",
             test_slots_taken_and_given_back);
    add_test(s, "costs and several limits", test_costs_and_several_limits);
    add_test(s, "clients holding slots are not reclaimed", test_held_clients_not_reclaimed);
    add_test(s, "parameters: no per, no burst", test_concurrency_parameters);
}
