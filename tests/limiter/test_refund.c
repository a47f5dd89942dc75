/* limiter_refund(): a charge given back is as if never made, for every algorithm; never more
 * than a fresh client's allowance; nothing back for a charge time has already given back; an
 * unknown client is not made room for. */
#include <errno.h>

#include "tests/limiter/helpers.h"

/* Charges one request at `at`, which must be allowed. */
static void charge(struct limiter *l, const char *client, int64_t at)
{
    CU_ASSERT_TRUE_FATAL(decide_at(l, client, at).allowed);
}

static void refund(struct limiter *l, const char *client, uint64_t cost, int64_t charged,
                   int64_t now)
{
    CU_ASSERT_EQUAL(limiter_refund(l, client, cost, charged, now), 0);
}

/* The quota spent at once, one given back: exactly one more passes, as it would have had that
 * one never been charged; the remaining count says so first. */
static void test_refund_gives_one_back(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], 5, SEC(60), 0, 0);
        struct limiter_decision d;

        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(10), 10), 5);
        refund(l, "a", 1, T0 + MS(10), T0 + MS(10));
        d = decide_at(l, "a", T0 + MS(10));
        if (!d.allowed)
            fprintf(stderr, "\n%s: the refunded unit did not come back", all_algorithms[i]);
        CU_ASSERT_TRUE(d.allowed);
        CU_ASSERT_EQUAL(d.remaining, 0);
        CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(10)).allowed);
        /* Two back: two more pass, not three. */
        refund(l, "a", 2, T0 + MS(10), T0 + MS(10));
        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(10), 10), 2);
        limiter_free(l);
    }
}

/* Refunds never lift a client above a fresh one: a client that spent nothing, refunded, still
 * has exactly its quota; so has one refunded more than it was charged. */
static void test_refund_never_above_fresh(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], 5, SEC(60), 0, 0);

        charge(l, "a", T0 + MS(10));
        refund(l, "a", 1, T0 + MS(10), T0 + MS(20));
        refund(l, "a", 3, T0 + MS(10), T0 + MS(20)); /* more than was charged */
        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(20), 10), 5);
        limiter_free(l);
    }
}

/* A client the table does not hold: nothing to give back, and no state is made for it. */
static void test_refund_of_unknown_client(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], 5, SEC(60), 0, 0);
        struct limiter_stats stats;

        refund(l, "nobody", 1, T0, T0);
        limiter_get_stats(l, &stats);
        CU_ASSERT_EQUAL(stats.clients, 0);
        CU_ASSERT_EQUAL(count_allowed(l, "nobody", T0, 10), 5);
        limiter_free(l);
    }
}

/* The windows: a charge counted in a window that has passed gives nothing back in the next
 * one; in sliding_window_counter, one in the previous window gives back its fading weight. */
static void test_refund_in_its_own_window(void)
{
    struct limiter *fixed = new_limiter("fixed_window", 3, SEC(1), 0, 0);
    struct limiter *counter = new_limiter("sliding_window_counter", 4, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(fixed, "a", T0 + MS(900), 5), 3);
    CU_ASSERT_EQUAL(count_allowed(fixed, "a", T0 + SEC(1), 5), 3);
    refund(fixed, "a", 1, T0 + MS(900), T0 + SEC(1) + MS(1)); /* last window's: nothing */
    CU_ASSERT_FALSE(decide_at(fixed, "a", T0 + SEC(1) + MS(1)).allowed);
    refund(fixed, "a", 1, T0 + SEC(1), T0 + SEC(1) + MS(2)); /* this window's: one back */
    CU_ASSERT_EQUAL(count_allowed(fixed, "a", T0 + SEC(1) + MS(2), 5), 1);

    /* 4 in the first window; halfway through the next they weigh 2, and 2 more would pass
     * (estimates 2 and 3 are below 4, 4 is not). One of the 4 given back, they weigh 1.5:
     * 3 pass (1.5, 2.5, 3.5). */
    CU_ASSERT_EQUAL(count_allowed(counter, "a", T0 + MS(100), 10), 4);
    refund(counter, "a", 1, T0 + MS(100), T0 + SEC(1) + MS(500));
    CU_ASSERT_EQUAL(count_allowed(counter, "a", T0 + SEC(1) + MS(500), 10), 3);
    limiter_free(fixed);
    limiter_free(counter);
}

/* sliding_window_log takes out the charge's own time, so what stays leaves when it would
 * have: three at 0, 100 and 200 ms of a 3-per-second log; the 100 ms one given back; a fourth
 * passes at 300 ms and the log is full until the 0 ms one leaves at 1 s. */
static void test_refund_in_the_log(void)
{
    struct limiter *l = new_limiter("sliding_window_log", 3, SEC(1), 0, 0);
    struct limiter_decision d;

    charge(l, "a", T0);
    charge(l, "a", T0 + MS(100));
    charge(l, "a", T0 + MS(200));
    refund(l, "a", 1, T0 + MS(100), T0 + MS(250));
    charge(l, "a", T0 + MS(300));
    d = decide_at(l, "a", T0 + MS(999));
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(d.retry_after_ms, 1);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(1)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1)).allowed); /* 200 ms and 300 ms remain */
    /* A charge that has left the window gives nothing back, not another request's time. */
    refund(l, "a", 1, T0, T0 + SEC(1) + MS(1));
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1) + MS(1)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1) + MS(199)).allowed);
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(1) + MS(200)).allowed);
    limiter_free(l);
}

/* The buckets: tokens given back later come back less the refill since their charge, which
 * may already have made up for them. A bucket of 5 at 5 per second, emptied at 0, refilled
 * by 2 at 400 ms; 3 given back then bring 1: 3 pass. A fresh client's answer refunded after
 * a while leaves it full. And the case that makes the deduction needed: 1 per second, burst
 * 2; a charge at 0 refilled by 9.9 s, when the client spends its burst; given back at 10 s,
 * it must not let a third through (without that charge, none would pass). */
static void test_refund_in_the_buckets(void)
{
    static const char *const buckets[] = {"token_bucket", "gcra"};

    for (size_t i = 0; i < 2; i++) {
        struct limiter *l = new_limiter(buckets[i], 5, SEC(1), 0, 0);
        struct limiter *slow = new_limiter(buckets[i], 1, SEC(1), 2, 0);

        CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 10), 5);
        refund(l, "a", 3, T0, T0 + MS(400));
        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(400), 10), 3);
        charge(l, "b", T0);
        refund(l, "b", 1, T0, T0 + MS(150));
        CU_ASSERT_EQUAL(count_allowed(l, "b", T0 + MS(150), 10), 5);

        charge(slow, "a", T0);
        CU_ASSERT_EQUAL(count_allowed(slow, "a", T0 + MS(9900), 10), 2);
        refund(slow, "a", 1, T0, T0 + SEC(10));
        CU_ASSERT_FALSE(decide_at(slow, "a", T0 + SEC(10)).allowed);
        limiter_free(l);
        limiter_free(slow);
    }
}

/* A charge is refunded at the instant the decision says it was counted (charged_ns), which a
 * clock that went back moves later: in the log, the stamp it was given; in a window, the
 * window that counted it. Refunded so, it comes back; by the clock's own reading, it would
 * not. */
static void test_refund_at_the_charge_instant(void)
{
    static const char *const names[] = {"sliding_window_log", "fixed_window",
                                        "sliding_window_counter"};

    for (size_t i = 0; i < 3; i++) {
        struct limiter *l = new_limiter(names[i], 2, SEC(1), 0, 0);
        struct limiter_decision late, early;

        late = decide_at(l, "a", T0 + SEC(1) + MS(200));
        early = decide_at(l, "a", T0 + MS(900)); /* the clock went back a window */
        CU_ASSERT_TRUE(late.allowed && early.allowed);
        CU_ASSERT(early.charged_ns >= T0 + SEC(1));
        CU_ASSERT_EQUAL(late.charged_ns, T0 + SEC(1) + MS(200));
        CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(1) + MS(300)).allowed);
        refund(l, "a", 1, early.charged_ns, T0 + SEC(1) + MS(300));
        CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(1) + MS(300)).allowed);
        limiter_free(l);
    }
}

static void test_refund_arguments(void)
{
    struct limiter *l = new_limiter("gcra", 5, SEC(1), 0, 0);

    errno = 0;
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 0, T0, T0), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 6, T0, T0), -1); /* above the quota */
    CU_ASSERT_EQUAL(limiter_refund(l, "", 1, T0, T0), -1);
    CU_ASSERT_EQUAL(limiter_refund(l, NULL, 1, T0, T0), -1);
    CU_ASSERT_EQUAL(limiter_refund(l, "a", 1, -1, T0), -1);
    CU_ASSERT_EQUAL(limiter_refund(NULL, "a", 1, T0, T0), -1);
    limiter_free(l);
}

void register_refund_tests(void)
{
    CU_pSuite s = add_suite("limiter_refund");

    add_test(s, "a refund gives back exactly what it names", test_refund_gives_one_back);
    add_test(s, "a refund never lifts a client above a fresh one", test_refund_never_above_fresh);
    add_test(s, "an unknown client is given nothing and not added", test_refund_of_unknown_client);
    add_test(s, "windows: a refund goes to the window that counted it",
             test_refund_in_its_own_window);
    add_test(s, "the log: the charge's own time leaves", test_refund_in_the_log);
    add_test(s, "the buckets: given back no further than full", test_refund_in_the_buckets);
    add_test(s, "refunded at the instant the charge was counted",
             test_refund_at_the_charge_instant);
    add_test(s, "bad arguments are refused", test_refund_arguments);
}
