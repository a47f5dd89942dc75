#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/limiter/helpers.h"

/* Creation fails with `fragment` in the message. */
static void expect_rejected(const char *algorithm, uint64_t requests, int64_t per_ns,
                            uint64_t burst, const char *fragment)
{
    struct limiter_params params = {
        .algorithm = algorithm, .requests = requests, .per_ns = per_ns, .burst = burst};
    char err[LIMITER_ERR_LEN] = "";
    struct limiter *l = limiter_create(&params, err);

    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, fragment));
    limiter_free(l);
}

static void test_bad_parameters(void)
{
    char err[LIMITER_ERR_LEN] = "";

    CU_ASSERT_PTR_NULL(limiter_create(NULL, err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no algorithm"));
    expect_rejected(NULL, 10, SEC(1), 0, "no algorithm");
    expect_rejected("leaky_bucket", 10, SEC(1), 0, "unknown algorithm \"leaky_bucket\"");
    expect_rejected("", 10, SEC(1), 0, "unknown algorithm");
    for (int i = 0; i < 5; i++) {
        expect_rejected(all_algorithms[i], 0, SEC(1), 0, "requests");
        expect_rejected(all_algorithms[i], UINT64_MAX, SEC(1), 0, "requests");
        expect_rejected(all_algorithms[i], 10, 0, 0, "per");
        expect_rejected(all_algorithms[i], 10, -SEC(1), 0, "per");
        expect_rejected(all_algorithms[i], 10, INT64_MAX, 0, "per");
    }
    expect_rejected("fixed_window", 10, SEC(1), 5, "burst applies to token_bucket and gcra");
    expect_rejected("sliding_window_log", 10, SEC(1), 5, "burst");
    expect_rejected("sliding_window_counter", 10, SEC(1), 5, "burst");
    expect_rejected("token_bucket", 10, SEC(1), UINT64_MAX, "burst");
    /* 7 per 366 days with a burst of a billion does not fit the exact arithmetic. */
    expect_rejected("token_bucket", 7, LIMITER_MAX_PER_NS, 1000000000, "burst");
    expect_rejected("gcra", 1, LIMITER_MAX_PER_NS, 1000000000, "burst");
}

static void test_bad_calls(void)
{
    struct limiter *l = new_limiter("gcra", 10, SEC(1), 0, 0);
    struct limiter_decision d;

    errno = 0;
    CU_ASSERT_EQUAL(limiter_decide(l, NULL, T0, &d), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_FALSE(d.allowed);
    CU_ASSERT_EQUAL(limiter_decide(l, "", T0, &d), -1);
    CU_ASSERT_EQUAL(limiter_decide(l, "a", -1, &d), -1);
    CU_ASSERT_EQUAL(limiter_decide(l, "a", INT64_MAX, &d), -1);
    CU_ASSERT_EQUAL(limiter_decide(NULL, "a", T0, &d), -1);
    CU_ASSERT_EQUAL(limiter_decide(l, "a", T0, NULL), -1);
    CU_ASSERT_FALSE(limiter_allow_request(l, NULL));
    CU_ASSERT_FALSE(limiter_allow_request(NULL, "a"));
    limiter_free(l);
    limiter_free(NULL);
}

static void test_names_map_to_algorithms(void)
{
    for (int i = 0; i < 5; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], 10, SEC(1), 0, 0);
        const struct limiter_params *p = limiter_get_params(l);

        CU_ASSERT_STRING_EQUAL(p->algorithm, all_algorithms[i]);
        CU_ASSERT_EQUAL(p->algorithm_id, limiter_algorithm_from_name(all_algorithms[i]));
        CU_ASSERT_EQUAL(p->max_clients, LIMITER_DEFAULT_MAX_CLIENTS);
        limiter_free(l);
    }
}

/* Names to algorithms and back; which are buckets; and a limiter's quota by that. */
static void test_algorithm_names_and_kinds(void)
{
    static const struct {
        const char *name;
        enum limiter_algorithm algorithm;
        bool takes_burst;
    } cases[] = {
        {"token_bucket", LIMITER_TOKEN_BUCKET, true},
        {"gcra", LIMITER_GCRA, true},
        {"fixed_window", LIMITER_FIXED_WINDOW, false},
        {"sliding_window_log", LIMITER_SLIDING_WINDOW_LOG, false},
        {"sliding_window_counter", LIMITER_SLIDING_WINDOW_COUNTER, false},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct limiter *l = new_limiter(cases[i].name, 10, SEC(1), cases[i].takes_burst ? 4 : 0, 0);

        CU_ASSERT_EQUAL(limiter_algorithm_from_name(cases[i].name), cases[i].algorithm);
        CU_ASSERT_STRING_EQUAL(limiter_algorithm_name(cases[i].algorithm), cases[i].name);
        CU_ASSERT_EQUAL(limiter_algorithm_takes_burst(cases[i].algorithm), cases[i].takes_burst);
        CU_ASSERT_EQUAL(limiter_quota(l), cases[i].takes_burst ? 4 : 10);
        limiter_free(l);
    }
    /* Exactly the names limiter_create() takes, nothing near them. */
    CU_ASSERT_EQUAL(limiter_algorithm_from_name("token-bucket"), LIMITER_ALGORITHM_UNKNOWN);
    CU_ASSERT_EQUAL(limiter_algorithm_from_name("GCRA"), LIMITER_ALGORITHM_UNKNOWN);
    CU_ASSERT_EQUAL(limiter_algorithm_from_name("gcra "), LIMITER_ALGORITHM_UNKNOWN);
    CU_ASSERT_EQUAL(limiter_algorithm_from_name(""), LIMITER_ALGORITHM_UNKNOWN);
    CU_ASSERT_EQUAL(limiter_algorithm_from_name(NULL), LIMITER_ALGORITHM_UNKNOWN);
    CU_ASSERT_PTR_NULL(limiter_algorithm_name(LIMITER_ALGORITHM_UNKNOWN));
    CU_ASSERT_PTR_NULL(limiter_algorithm_name((enum limiter_algorithm)99));
    CU_ASSERT_FALSE(limiter_algorithm_takes_burst(LIMITER_ALGORITHM_UNKNOWN));
    CU_ASSERT_FALSE(limiter_algorithm_takes_burst((enum limiter_algorithm)99));
}

/* The classic entry point on the real clock: a quota of 2 per hour. */
static void test_allow_request(void)
{
    for (int i = 0; i < 5; i++) {
        struct limiter *l = new_limiter(all_algorithms[i], 2, SEC(3600), 0, 0);

        CU_ASSERT_TRUE(limiter_allow_request(l, "203.0.113.9"));
        CU_ASSERT_TRUE(limiter_allow_request(l, "203.0.113.9"));
        CU_ASSERT_FALSE(limiter_allow_request(l, "203.0.113.9"));
        CU_ASSERT_TRUE(limiter_allow_request(l, "203.0.113.10"));
        limiter_free(l);
    }
}

static void test_clock(void)
{
    int64_t a = limiter_now_ns(), b = limiter_now_ns();
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    CU_ASSERT_TRUE(b >= a);
    CU_ASSERT_TRUE(llabs(a - ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec)) < SEC(1));
}

/* For every algorithm, on random traffic: whenever a request is denied with retry_after_ms = r,
 * the same history followed by a request r ms later is allowed, and r - 1 ms later is not. */
static void test_retry_after_is_exact(void)
{
    enum { STEPS = 150 };
    int64_t times[STEPS];

    srand(3);
    for (int a = 0; a < 5; a++) {
        const char *alg = all_algorithms[a];
        struct limiter *l = new_limiter(alg, 5, MS(700), 0, 0);
        int64_t now = T0 + MS(rand() % 1000);

        for (int i = 0; i < STEPS; i++) {
            struct limiter_decision d;
            struct limiter *replay;

            times[i] = now;
            d = decide_at(l, "c", now);
            now += MS(rand() % 90);
            if (d.allowed)
                continue;
            CU_ASSERT_TRUE_FATAL(d.retry_after_ms > 0);
            replay = new_limiter(alg, 5, MS(700), 0, 0);
            for (int j = 0; j < i; j++)
                decide_at(replay, "c", times[j]);
            CU_ASSERT_FALSE(decide_at(replay, "c", times[i] + MS(d.retry_after_ms - 1)).allowed);
            CU_ASSERT_TRUE(decide_at(replay, "c", times[i] + MS(d.retry_after_ms)).allowed);
            limiter_free(replay);
        }
        limiter_free(l);
    }
}

/* A burst limit and a daily limit together: a request passes only when both allow, and one
 * denied by either charges neither. */
static void test_several_limits_charge_together(void)
{
    struct limiter *burst = new_limiter("token_bucket", 3, SEC(1), 0, 0);
    struct limiter *daily = new_limiter("fixed_window", 5, SEC(86400), 0, 0);
    struct limiter *both[] = {burst, daily};
    const char *const k[] = {"k", "k"};
    struct limiter_decision d[2];
    unsigned allowed = 0;

    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(limiter_decide_all(both, 2, k, T0, d), 0);
        allowed += d[0].allowed && d[1].allowed;
    }
    CU_ASSERT_EQUAL(allowed, 3);
    CU_ASSERT_FALSE(d[0].allowed); /* the burst limit binds... */
    CU_ASSERT_TRUE(d[1].allowed);  /* ...and the daily one was not charged: */
    CU_ASSERT_EQUAL(d[1].remaining, 1);
    CU_ASSERT_EQUAL(d[0].retry_after_ms, 334);

    /* A second later the bucket is full again, but only 2 remain for the day. */
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(limiter_decide_all(both, 2, k, T0 + SEC(1), d), 0);
    CU_ASSERT_FALSE(d[1].allowed);
    CU_ASSERT_TRUE(d[0].allowed);
    /* The request the day refused left the bucket alone: it holds 1 token, not 0. */
    CU_ASSERT_TRUE(decide_at(burst, "k", T0 + SEC(1)).allowed);
    CU_ASSERT_FALSE(decide_at(burst, "k", T0 + SEC(1)).allowed);

    CU_ASSERT_EQUAL(limiter_decide_all((struct limiter *[]){burst, burst}, 2, k, T0, d), -1);
    CU_ASSERT_EQUAL(limiter_decide_all(both, 0, k, T0, d), -1);
    limiter_free(burst);
    limiter_free(daily);
}

/* Each limit counts under its own client id: per API key and per address on one request. A
 * client rotating keys from one address is held by the address limit; a key spent under one
 * limit does not spend the address's quota with a denied request. */
static void test_each_limit_its_own_client(void)
{
    struct limiter *per_key = new_limiter("token_bucket", 2, SEC(3600), 0, 0);
    struct limiter *per_ip = new_limiter("fixed_window", 3, SEC(3600), 0, 0);
    struct limiter *both[] = {per_key, per_ip};
    struct limiter_decision d[2];
    unsigned allowed = 0;
    char key[32];

    /* Key "a" twice: both charged, the address has 1 left. */
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(limiter_decide_all(both, 2, (const char *[]){"header:a", "ip:1"}, T0, d),
                        0);
        CU_ASSERT_TRUE(d[0].allowed && d[1].allowed);
    }
    CU_ASSERT_EQUAL(d[1].remaining, 1);
    /* Key "a" a third time: the key's limit denies, so the address is not charged. */
    CU_ASSERT_EQUAL(limiter_decide_all(both, 2, (const char *[]){"header:a", "ip:1"}, T0, d), 0);
    CU_ASSERT_FALSE(d[0].allowed);
    CU_ASSERT_TRUE(d[1].allowed);
    CU_ASSERT_EQUAL(decide_at(per_ip, "ip:2", T0).remaining, 2); /* other addresses untouched */
    /* Fresh keys from the same address: one more passes, then the address limit binds and the
     * fresh keys it refuses are not charged either. */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "header:rotated-%d", i);
        CU_ASSERT_EQUAL(limiter_decide_all(both, 2, (const char *[]){key, "ip:1"}, T0, d), 0);
        allowed += d[0].allowed && d[1].allowed;
    }
    CU_ASSERT_EQUAL(allowed, 1);
    CU_ASSERT_FALSE(d[1].allowed);
    CU_ASSERT_TRUE(d[0].allowed);
    CU_ASSERT_EQUAL(d[0].remaining, 1); /* as if charged: the state itself was left alone */
    CU_ASSERT_EQUAL(count_allowed(per_key, "header:rotated-4", T0, 5), 2);
    /* The same keys the other way round: the order of the limits does not matter. */
    CU_ASSERT_EQUAL(limiter_decide_all((struct limiter *[]){per_ip, per_key}, 2,
                                       (const char *[]){"ip:3", "header:b"}, T0, d),
                    0);
    CU_ASSERT_TRUE(d[0].allowed && d[1].allowed);
    CU_ASSERT_EQUAL(d[0].remaining, 2);
    CU_ASSERT_EQUAL(d[1].remaining, 1);

    /* Every id must be there. */
    errno = 0;
    CU_ASSERT_EQUAL(limiter_decide_all(both, 2, NULL, T0, d), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_FALSE(d[0].allowed || d[1].allowed);
    CU_ASSERT_EQUAL(limiter_decide_all(both, 2, (const char *[]){"header:a", NULL}, T0, d), -1);
    CU_ASSERT_EQUAL(limiter_decide_all(both, 2, (const char *[]){"", "ip:1"}, T0, d), -1);
    limiter_free(per_key);
    limiter_free(per_ip);
}

enum { THREADS = 8, ATTEMPTS_PER_THREAD = 2000, IP_QUOTA = 3000 };

struct rotating {
    struct limiter *per_key, *per_ip;
    int thread;
    unsigned allowed;
};

/* Every request with a fresh key from one address, half the threads naming the limits in the
 * other order. */
static void *rotate_keys(void *arg)
{
    struct rotating *r = arg;
    struct limiter_decision d[2];
    char key[32];

    for (int i = 0; i < ATTEMPTS_PER_THREAD; i++) {
        int rc;

        snprintf(key, sizeof key, "header:t%d-%d", r->thread, i);
        if (r->thread % 2 == 0)
            rc = limiter_decide_all((struct limiter *[]){r->per_key, r->per_ip}, 2,
                                    (const char *[]){key, "ip:1"}, T0, d);
        else
            rc = limiter_decide_all((struct limiter *[]){r->per_ip, r->per_key}, 2,
                                    (const char *[]){"ip:1", key}, T0, d);
        if (rc == 0 && d[0].allowed && d[1].allowed)
            r->allowed++;
    }
    return NULL;
}

/* 8 threads rotating keys through a small per-key table (it evicts while the address's slot
 * is held by others) and one hot address slot, in both orders: no deadlock, and exactly the
 * address's quota passes, charged exactly once each. */
static void test_own_clients_many_threads(void)
{
    struct limiter *per_key = new_limiter("gcra", 5, SEC(3600), 0, 64);
    struct limiter *per_ip = new_limiter("sliding_window_counter", IP_QUOTA, SEC(3600), 0, 0);
    struct rotating r[THREADS];
    pthread_t threads[THREADS];
    unsigned total = 0;

    for (int t = 0; t < THREADS; t++) {
        r[t] = (struct rotating){per_key, per_ip, t, 0};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, rotate_keys, &r[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        total += r[t].allowed;
    }
    CU_ASSERT_EQUAL(total, IP_QUOTA);
    CU_ASSERT_EQUAL(count_allowed(per_ip, "ip:1", T0, 10), 0);
    limiter_free(per_key);
    limiter_free(per_ip);
}

void register_limiter_tests(void)
{
    CU_pSuite s = add_suite("limiter");
    CU_pSuite c = add_suite("limiter_concurrency");

    add_test(s, "bad parameters are refused with a reason", test_bad_parameters);
    add_test(s, "bad calls fail cleanly and deny", test_bad_calls);
    add_test(s, "algorithm names map to constructors", test_names_map_to_algorithms);
    add_test(s, "algorithm names, ids, and which take a burst", test_algorithm_names_and_kinds);
    add_test(s, "allow_request on the real clock", test_allow_request);
    add_test(s, "the production clock is wall time", test_clock);
    add_test(s, "retry_after is exact for every algorithm", test_retry_after_is_exact);
    add_test(s, "several limits: all allow, or none is charged",
             test_several_limits_charge_together);
    add_test(s, "several limits, each under its own client id", test_each_limit_its_own_client);
    add_test(c, "8 threads rotating keys past an address limit", test_own_clients_many_threads);
}
