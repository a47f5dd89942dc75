/* limiter_grant() and limiter_reset(): units given back by hand raise what a client may send
 * by as many, never above a fresh client's allowance; a reset answers as a fresh client; an
 * unknown client is not made room for; concurrency and bad arguments are refused. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/limiter/helpers.h"

#define QUOTA 10

static struct limiter_decision peek(struct limiter *l, const char *client, int64_t now)
{
    struct limiter_decision d;

    CU_ASSERT_EQUAL_FATAL(limiter_peek(l, client, 1, now, &d), 0);
    return d;
}

static void grant(struct limiter *l, const char *client, uint64_t units, int64_t now)
{
    CU_ASSERT_TRUE_FATAL(limiter_grant(l, client, units, now) >= 0);
}

/* Whether two answers are the same in every field, saying which algorithm differs. */
static bool same_answer(const char *algorithm, struct limiter_decision a, struct limiter_decision b)
{
    bool same = a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
                a.reset_ms == b.reset_ms && a.retry_after_ms == b.retry_after_ms &&
                a.charged_ns == b.charged_ns && a.wait_ns == b.wait_ns;

    if (!same)
        fprintf(stderr, "\n%s: remaining %llu/%llu, reset %lld/%lld ms, retry %lld/%lld ms",
                algorithm, (unsigned long long)a.remaining, (unsigned long long)b.remaining,
                (long long)a.reset_ms, (long long)b.reset_ms, (long long)a.retry_after_ms,
                (long long)b.retry_after_ms);
    return same;
}

/* After 6 of 10, a peek says 3 are left after it; each grant of k raises that by k, until
 * the client is fresh again, and no grant, however large, lifts it further. */
static void test_grant_raises_by_its_units(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        const char *algorithm = all_algorithms[i];
        struct limiter *l = new_limiter(algorithm, QUOTA, SEC(60), 0, 0);
        int64_t at = T0 + MS(10);

        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 6), 6);
        CU_ASSERT_EQUAL(peek(l, "a", at).remaining, QUOTA - 6 - 1);
        grant(l, "a", 1, at);
        CU_ASSERT_EQUAL(peek(l, "a", at).remaining, QUOTA - 5 - 1);
        grant(l, "a", 3, at);
        CU_ASSERT_EQUAL(peek(l, "a", at).remaining, QUOTA - 2 - 1);
        grant(l, "a", 5, at); /* 2 were left to give */
        CU_ASSERT_TRUE(same_answer(algorithm, peek(l, "a", at), peek(l, "nobody", at)));
        grant(l, "a", QUOTA, at);
        CU_ASSERT_TRUE(same_answer(algorithm, peek(l, "a", at), peek(l, "nobody", at)));
        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 2 * QUOTA), QUOTA);
        limiter_free(l);
    }
}

/* A client denied for its spent quota passes once granted a unit, and only that one; a grant
 * above the quota is the quota: the client is as fresh, not refused. */
static void test_grant_lets_a_denied_client_pass(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        const char *algorithm = all_algorithms[i];
        struct limiter *l = new_limiter(algorithm, QUOTA, SEC(60), 0, 0);
        int64_t at = T0 + MS(10);
        struct limiter_decision d;

        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 2 * QUOTA), QUOTA);
        CU_ASSERT_FALSE(peek(l, "a", at).allowed);
        grant(l, "a", 1, at);
        d = peek(l, "a", at);
        CU_ASSERT_TRUE(d.allowed);
        CU_ASSERT_EQUAL(d.remaining, 0);
        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 5), 1);
        grant(l, "a", 1000 * QUOTA, at);
        CU_ASSERT_TRUE(same_answer(algorithm, peek(l, "a", at), peek(l, "nobody", at)));
        limiter_free(l);
    }
}

/* A reset answers, from then on, as a fresh client does; a client that spent nothing is
 * unchanged by it; what a log owned is freed (ASan). */
static void test_reset_makes_a_fresh_client(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        const char *algorithm = all_algorithms[i];
        struct limiter *l = new_limiter(algorithm, QUOTA, SEC(60), 0, 0);
        int64_t at = T0 + SEC(1); /* before a bucket's next token, 6 s after */

        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + MS(10), 2 * QUOTA), QUOTA);
        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 3), 0);
        CU_ASSERT_EQUAL(limiter_reset(l, "a", at), 1); /* it had spent its quota */
        CU_ASSERT_TRUE(same_answer(algorithm, peek(l, "a", at), peek(l, "nobody", at)));
        CU_ASSERT_EQUAL(count_allowed(l, "a", at, 2 * QUOTA), QUOTA);
        CU_ASSERT_EQUAL(limiter_reset(l, "a", at + MS(1)), 1);
        CU_ASSERT_EQUAL(limiter_reset(l, "a", at + MS(1)), 0); /* fresh already */
        CU_ASSERT_EQUAL(limiter_grant(l, "a", 1, at + MS(1)), 0);
        CU_ASSERT_TRUE(
            same_answer(algorithm, peek(l, "a", at + MS(1)), peek(l, "nobody", at + MS(1))));
        limiter_free(l);
    }
}

/* A client the table does not hold is fresh already: neither call makes room for it. */
static void test_unknown_client_is_not_added(void)
{
    for (size_t i = 0; i < sizeof all_algorithms / sizeof all_algorithms[0]; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], QUOTA, SEC(60), 0, 0);
        struct limiter_stats stats;

        decide_at(l, "known", T0);
        CU_ASSERT_EQUAL(limiter_grant(l, "nobody", 3, T0), 0);
        CU_ASSERT_EQUAL(limiter_reset(l, "nobody", T0), 0);
        limiter_get_stats(l, &stats);
        CU_ASSERT_EQUAL(stats.clients, 1);
        CU_ASSERT_EQUAL(count_allowed(l, "nobody", T0, 2 * QUOTA), QUOTA);
        limiter_free(l);
    }
}

/* sliding_window_counter: units beyond the current window's count lower the previous one's
 * by as much as it weighs now. 8 in one window, then 1 halfway through the next: the 8 weigh
 * 4, so 10 - 1 - 4 = 5 are left, 4 after the peeked request. A grant of 3 takes the 1, and 2
 * more off the estimate: 4 of the previous window's count, which weigh 2 now. */
static void test_counter_grant_reaches_the_previous_window(void)
{
    struct limiter *l = new_limiter("sliding_window_counter", QUOTA, SEC(60), 0, 0);
    int64_t halfway = T0 + SEC(60) + SEC(30);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 8), 8);
    CU_ASSERT_EQUAL(count_allowed(l, "a", halfway, 1), 1);
    CU_ASSERT_EQUAL(peek(l, "a", halfway).remaining, 4);
    grant(l, "a", 3, halfway);
    CU_ASSERT_EQUAL(peek(l, "a", halfway).remaining, 7);
    /* So 8 more pass: had the rest come off the previous count one for one (6 left, weighing
     * 3), 7 would. */
    CU_ASSERT_EQUAL(count_allowed(l, "a", halfway, QUOTA), 8);
    limiter_free(l);
}

/* sliding_window_log: the newest times leave, so the client gets back the units that would
 * have come back last. 3 at T0 and 2 at T0 + 10 s, 2 granted: once the 3 have left the window,
 * the log is empty. Had the oldest left instead, 2 would still be in it. */
static void test_log_grant_takes_the_newest(void)
{
    struct limiter *l = new_limiter("sliding_window_log", 5, SEC(60), 0, 0);
    int64_t later = T0 + SEC(60) + MS(1);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 3), 3);
    CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(10), 2), 2);
    grant(l, "a", 2, T0 + SEC(20));
    CU_ASSERT_EQUAL(peek(l, "a", T0 + SEC(20)).remaining, 1);
    CU_ASSERT_EQUAL(peek(l, "a", later).remaining, 4);
    CU_ASSERT_EQUAL(peek(l, "a", later).reset_ms, 0);
    limiter_free(l);
}

/* token_bucket: granted tokens go back in on top of the refill, no further than full. 10 per
 * minute, 10 spent: 6 s later one has come back; a grant of 2 makes 3. */
static void test_bucket_grant_adds_to_the_refill(void)
{
    for (size_t i = 0; i < 2; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], QUOTA, SEC(60), 0, 0);

        CU_ASSERT_EQUAL(count_allowed(l, "a", T0, QUOTA), QUOTA);
        CU_ASSERT_EQUAL(peek(l, "a", T0 + SEC(6)).remaining, 0);
        grant(l, "a", 2, T0 + SEC(6));
        CU_ASSERT_EQUAL(peek(l, "a", T0 + SEC(6)).remaining, 2);
        CU_ASSERT_EQUAL(count_allowed(l, "a", T0 + SEC(6), QUOTA), 3);
        limiter_free(l);
    }
}

/* Concurrency: units come back only as requests end, so both calls are refused, and the
 * requests in flight keep their units. */
static void test_concurrency_is_refused(void)
{
    struct limiter *l = new_limiter("concurrency", 2, 0, 0, 0);

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 3), 2);
    errno = 0;
    CU_ASSERT_EQUAL(limiter_grant(l, "a", 1, T0), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    errno = 0;
    CU_ASSERT_EQUAL(limiter_reset(l, "a", T0), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_FALSE(peek(l, "a", T0).allowed);
    limiter_free(l);
}

/* Bad arguments: EINVAL, and the client's state untouched. */
static void test_bad_arguments(void)
{
    struct limiter *l = new_limiter("gcra", QUOTA, SEC(60), 0, 0);
    struct {
        struct limiter *limiter;
        const char *client;
        uint64_t units;
        int64_t now;
    } bad[] = {
        {NULL, "a", 1, T0}, {l, NULL, 1, T0}, {l, "", 1, T0},
        {l, "a", 0, T0},    {l, "a", 1, -1},  {l, "a", 1, LIMITER_MAX_NOW_NS + 1},
    };

    CU_ASSERT_EQUAL(count_allowed(l, "a", T0, QUOTA), QUOTA);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CU_ASSERT_EQUAL(limiter_grant(bad[i].limiter, bad[i].client, bad[i].units, bad[i].now), -1);
        CU_ASSERT_EQUAL(errno, EINVAL);
        if (bad[i].units == 0)
            continue; /* a reset takes no units */
        errno = 0;
        CU_ASSERT_EQUAL(limiter_reset(bad[i].limiter, bad[i].client, bad[i].now), -1);
        CU_ASSERT_EQUAL(errno, EINVAL);
    }
    CU_ASSERT_FALSE(peek(l, "a", T0).allowed);
    limiter_free(l);
}

void register_grant_tests(void)
{
    CU_pSuite s = add_suite("limiter_grant");

    add_test(s, "a grant raises what is left by its units", test_grant_raises_by_its_units);
    add_test(s, "a grant lets a denied client pass", test_grant_lets_a_denied_client_pass);
    add_test(s, "a reset makes a fresh client", test_reset_makes_a_fresh_client);
    add_test(s, "an unknown client is not added", test_unknown_client_is_not_added);
    add_test(s, "sliding_window_counter reaches the previous window",
             test_counter_grant_reaches_the_previous_window);
    add_test(s, "sliding_window_log takes the newest", test_log_grant_takes_the_newest);
    add_test(s, "a bucket's grant adds to its refill", test_bucket_grant_adds_to_the_refill);
    add_test(s, "concurrency is refused", test_concurrency_is_refused);
    add_test(s, "bad arguments", test_bad_arguments);
}
