/* limiter_reserve_all(): a request that may wait is admitted at the earliest instant every
 * limit allows it, and its place is taken at once, so those after it queue behind it; the
 * admitted instants keep the bucket's arithmetic exactly; a place given back is the next
 * one's; a limit that cannot keep a place (a window) denies as before. */
#include <stdlib.h>

#include "tests/limiter/helpers.h"

static const char *const buckets[] = {"gcra", "token_bucket"};

/* One request of `l` alone at `now` that may wait up to `max`: its admission instant, or -1
 * when denied. */
static int64_t reserve(struct limiter *l, const char *client, int64_t now, int64_t max)
{
    struct limiter_decision d;
    int64_t at = 0;

    CU_ASSERT_EQUAL_FATAL(limiter_reserve_all(&l, 1, &client, NULL, now, &max, &at, &d), 0);
    if (!d.allowed)
        return -1;
    CU_ASSERT_EQUAL(d.charged_ns, at);
    return at;
}

/* 10 a second, burst 10, waiting up to 1 s; 30 at once: 10 now, then one every 100 ms up to
 * 1 s, then 10 denied. */
static void test_thirty_at_once(void)
{
    for (size_t b = 0; b < 2; b++) {
        struct limiter *l = new_limiter(buckets[b], 10, SEC(1), 0, 0);
        int admitted = 0, denied = 0;

        for (int i = 0; i < 30; i++) {
            int64_t at = reserve(l, "a", T0, SEC(1));

            if (at < 0) {
                denied++;
                continue;
            }
            CU_ASSERT_EQUAL(at, i < 10 ? T0 : T0 + (i - 9) * MS(100));
            admitted++;
        }
        CU_ASSERT_EQUAL(admitted, 20);
        CU_ASSERT_EQUAL(denied, 10);
        limiter_free(l);
    }
}

/* The last place kept, given back (its client left while waiting), is the next request's; an
 * earlier one given back leaves a gap no one takes (giving it to a newcomer would put two
 * requests where the limit has room for one). Nothing waits past max. */
static void test_place_given_back(void)
{
    for (size_t b = 0; b < 2; b++) {
        struct limiter *l = new_limiter(buckets[b], 10, SEC(1), 0, 0);
        int64_t at, last;

        CU_ASSERT_EQUAL(count_allowed(l, "a", T0, 10), 10);
        at = reserve(l, "a", T0, SEC(1));
        CU_ASSERT_EQUAL(at, T0 + MS(100));
        last = reserve(l, "a", T0, SEC(1));
        CU_ASSERT_EQUAL(last, T0 + MS(200));
        CU_ASSERT_EQUAL(limiter_refund(l, "a", 1, last, T0 + MS(50)), 0);
        CU_ASSERT_EQUAL(reserve(l, "a", T0 + MS(50), SEC(1)), T0 + MS(200));
        CU_ASSERT_EQUAL(limiter_refund(l, "a", 1, at, T0 + MS(60)), 0);
        CU_ASSERT_EQUAL(reserve(l, "a", T0 + MS(60), SEC(1)), T0 + MS(300));
        for (int i = 0; i < 7; i++)
            CU_ASSERT_TRUE(reserve(l, "a", T0 + MS(60), SEC(1)) > 0);
        CU_ASSERT_EQUAL(reserve(l, "a", T0 + MS(60), SEC(1)), -1);
        limiter_free(l);
    }
}

/* A charge given back (count:) while places are kept ahead gives nothing the places were
 * counted on: with a burst of 1 at 1 a second, X at 0, A's place at 1 s, X given back at
 * 0.2 s: the next place is still 2 s, so A and it stay a second apart. */
static void test_refund_behind_places(void)
{
    for (size_t b = 0; b < 2; b++) {
        struct limiter *l = new_limiter(buckets[b], 1, SEC(1), 1, 0);

        CU_ASSERT_TRUE(decide_at(l, "a", T0).allowed);
        CU_ASSERT_EQUAL(reserve(l, "a", T0, SEC(5)), T0 + SEC(1));
        CU_ASSERT_EQUAL(limiter_refund(l, "a", 1, T0, T0 + MS(200)), 0);
        CU_ASSERT_EQUAL(reserve(l, "a", T0 + MS(200), SEC(5)), T0 + SEC(2));
        limiter_free(l);
    }
}

/* Arrivals at random instants, each waiting up to 700 ms: whatever they are, no stretch of
 * the admitted instants holds more than the bucket allows (burst + rate * its length), and
 * none was admitted before it arrived or later than it would wait. */
static void test_admitted_instants_keep_the_arithmetic(void)
{
    enum { N = 400, BURST = 5 };

    for (size_t b = 0; b < 2; b++) {
        struct limiter *l = new_limiter(buckets[b], 20, SEC(1), BURST, 0); /* 50 ms apart */
        int64_t admitted[N], now = T0;
        int n = 0, bad = 0;

        srand(7);
        for (int i = 0; i < N; i++) {
            int64_t at;

            now += MS(rand() % 60);
            at = reserve(l, "a", now, MS(700));
            if (at < 0)
                continue;
            bad += at < now || at > now + MS(700);
            admitted[n++] = at;
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                int64_t span = admitted[j] - admitted[i];

                bad += admitted[j] < admitted[i] || (j - i + 1) > BURST + span / MS(50);
            }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_TRUE(n > N / 2); /* most waited rather than being denied */
        limiter_free(l);
    }
}

/* Two limits: one may wait, the other may not. The request waits for the first and is charged
 * by both at its turn; when the second denies, it is denied at once and charged nowhere. A
 * window cannot keep a place: denied as without waiting. */
static void test_several_limits_and_windows(void)
{
    struct limiter *ls[2] = {new_limiter("gcra", 10, SEC(1), 0, 0),
                             new_limiter("gcra", 11, SEC(100), 0, 0)};
    const char *ids[2] = {"a", "a"};
    int64_t max[2] = {SEC(1), 0}, at = 0;
    struct limiter_decision d[2];
    struct limiter *w = new_limiter("fixed_window", 10, SEC(1), 0, 0);

    CU_ASSERT_EQUAL(count_allowed(ls[0], "a", T0, 10), 10);
    CU_ASSERT_EQUAL(limiter_reserve_all(ls, 2, ids, NULL, T0, max, &at, d), 0);
    CU_ASSERT_TRUE(d[0].allowed && d[1].allowed);
    CU_ASSERT_EQUAL(at, T0 + MS(100));
    CU_ASSERT_EQUAL(d[1].charged_ns, T0 + MS(100));
    CU_ASSERT_EQUAL(count_allowed(ls[1], "a", T0 + MS(100), 20), 10); /* 1 of 11 was taken */
    CU_ASSERT_EQUAL(limiter_reserve_all(ls, 2, ids, NULL, T0 + MS(100), max, &at, d), 0);
    CU_ASSERT_FALSE(d[1].allowed);
    CU_ASSERT_EQUAL(at, T0 + MS(100));
    CU_ASSERT_EQUAL(count_allowed(w, "a", T0, 10), 10);
    CU_ASSERT_EQUAL(reserve(w, "a", T0, SEC(5)), -1);
    limiter_free(ls[0]);
    limiter_free(ls[1]);
    limiter_free(w);
}

void register_reserve_tests(void)
{
    CU_pSuite s = add_suite("limiter_reserve");

    add_test(s, "30 at once: 10 now, 10 spaced, 10 denied", test_thirty_at_once);
    add_test(s, "the last place given back is the next one's", test_place_given_back);
    add_test(s, "a charge given back behind kept places gives no place", test_refund_behind_places);
    add_test(s, "admitted instants keep the bucket's arithmetic",
             test_admitted_instants_keep_the_arithmetic);
    add_test(s, "several limits wait together; windows do not", test_several_limits_and_windows);
}
