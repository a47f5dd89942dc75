#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/limiter/helpers.h"

static struct limiter_stats stats_of(const struct limiter *l)
{
    struct limiter_stats s;

    limiter_get_stats(l, &s);
    return s;
}

/* Clients whose buckets have refilled equal fresh ones: making room costs nothing. */
static void test_idle_states_are_reclaimed_first(void)
{
    struct limiter *l = new_limiter("token_bucket", 1, SEC(1), 0, 4);
    const char *ids[] = {"a", "b", "c", "d"};
    struct limiter_stats s;

    for (int i = 0; i < 4; i++)
        CU_ASSERT_TRUE(decide_at(l, ids[i], T0).allowed);
    CU_ASSERT_EQUAL(stats_of(l).clients, 4);
    /* "a" is spent again just before; the others have been full for a while. */
    CU_ASSERT_TRUE(decide_at(l, "a", T0 + SEC(2)).allowed);
    CU_ASSERT_TRUE(decide_at(l, "e", T0 + SEC(2)).allowed);
    s = stats_of(l);
    CU_ASSERT_EQUAL(s.evictions, 0);
    CU_ASSERT_EQUAL(s.reclaimed, 3);
    CU_ASSERT_EQUAL(s.clients, 2);
    /* "a" kept its state: still limited. */
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + SEC(2)).allowed);
    limiter_free(l);
}

/* With nothing idle, the least recently used client is evicted and counted. */
static void test_lru_eviction(void)
{
    struct limiter *l = new_limiter("fixed_window", 1, SEC(3600), 0, 4);
    const char *ids[] = {"a", "b", "c", "d"};
    struct limiter_stats s;

    for (int i = 0; i < 4; i++)
        CU_ASSERT_TRUE(decide_at(l, ids[i], T0 + MS(i)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(10)).allowed); /* "b" is now the oldest */
    CU_ASSERT_TRUE(decide_at(l, "e", T0 + MS(11)).allowed);
    s = stats_of(l);
    CU_ASSERT_EQUAL(s.evictions, 1);
    CU_ASSERT_EQUAL(s.reclaimed, 0);
    CU_ASSERT_EQUAL(s.clients, 4);
    CU_ASSERT_FALSE(decide_at(l, "a", T0 + MS(12)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "c", T0 + MS(12)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "d", T0 + MS(12)).allowed);
    CU_ASSERT_FALSE(decide_at(l, "e", T0 + MS(12)).allowed);
    CU_ASSERT_TRUE(decide_at(l, "b", T0 + MS(13)).allowed); /* forgotten, so fresh */
    limiter_free(l);
}

/* Many more clients than room, in one shard and in several: never more than max_clients. */
static void test_bounded(void)
{
    const uint32_t sizes[] = {100, 5000};

    for (int k = 0; k < 2; k++) {
        for (int a = 0; a < 5; a++) {
            struct limiter *l = new_limiter(all_algorithms[a], 3, SEC(3600), 0, sizes[k]);
            struct limiter_stats s;
            char id[32];

            for (unsigned i = 0; i < 4 * sizes[k]; i++) {
                snprintf(id, sizeof id, "client-%u", i);
                CU_ASSERT_TRUE(decide_at(l, id, T0 + i).allowed);
            }
            s = stats_of(l);
            CU_ASSERT_TRUE(s.clients <= sizes[k]);
            CU_ASSERT_TRUE(s.clients >= sizes[k] * 9 / 10);
            CU_ASSERT_EQUAL(s.clients + s.evictions, 4 * sizes[k]);
            limiter_free(l);
        }
    }
}

enum { THREADS = 8, QUOTA = 1000, ATTEMPTS_PER_THREAD = 600 };

struct hammer {
    struct limiter *limiter;
    const char *client_id;
    unsigned allowed;
};

static void *hammer_one_client(void *arg)
{
    struct hammer *h = arg;
    struct limiter_decision d;

    for (int i = 0; i < ATTEMPTS_PER_THREAD; i++)
        if (limiter_decide(h->limiter, h->client_id, T0, &d) == 0 && d.allowed)
            h->allowed++;
    return NULL;
}

/* 8 threads on one fresh client, no refill: exactly the quota passes, for every algorithm. */
static void test_one_client_many_threads(void)
{
    for (int a = 0; a < 5; a++) {
        struct limiter *l = new_limiter(all_algorithms[a], QUOTA, SEC(3600), 0, 0);
        struct hammer h[THREADS];
        pthread_t threads[THREADS];
        unsigned total = 0;

        for (int t = 0; t < THREADS; t++) {
            h[t] = (struct hammer){l, "hot-key", 0};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, hammer_one_client, &h[t]), 0);
        }
        for (int t = 0; t < THREADS; t++) {
            pthread_join(threads[t], NULL);
            total += h[t].allowed;
        }
        CU_ASSERT_EQUAL(total, QUOTA);
        limiter_free(l);
    }
}

struct pair_hammer {
    struct limiter *limits[2];
    unsigned allowed;
};

/* The client id for each of the two limits: the same client in both. */
static const char *const hot_key_twice[] = {"hot-key", "hot-key"};

static void *hammer_two_limits(void *arg)
{
    struct pair_hammer *h = arg;
    struct limiter_decision d[2];

    for (int i = 0; i < ATTEMPTS_PER_THREAD; i++)
        if (limiter_decide_all(h->limits, 2, hot_key_twice, T0, d) == 0 && d[0].allowed &&
            d[1].allowed)
            h->allowed++;
    return NULL;
}

/* Two limits on 8 threads: exactly the tighter quota passes, and the looser limit is charged
 * exactly that much, never for requests the tighter one refused. */
static void test_two_limits_many_threads(void)
{
    for (int a = 0; a < 5; a++) {
        struct limiter *tight = new_limiter(all_algorithms[a], QUOTA / 4, SEC(3600), 0, 0);
        struct limiter *loose = new_limiter(all_algorithms[(a + 1) % 5], QUOTA, SEC(3600), 0, 0);
        struct pair_hammer h[THREADS];
        pthread_t threads[THREADS];
        unsigned total = 0;

        for (int t = 0; t < THREADS; t++) {
            h[t] = (struct pair_hammer){{tight, loose}, 0};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, hammer_two_limits, &h[t]), 0);
        }
        for (int t = 0; t < THREADS; t++) {
            pthread_join(threads[t], NULL);
            total += h[t].allowed;
        }
        CU_ASSERT_EQUAL(total, QUOTA / 4);
        CU_ASSERT_EQUAL(count_allowed(loose, "hot-key", T0, QUOTA), QUOTA - QUOTA / 4);
        limiter_free(tight);
        limiter_free(loose);
    }
}

static void *hammer_reversed(void *arg)
{
    struct pair_hammer *h = arg;
    struct limiter *reversed[2] = {h->limits[1], h->limits[0]};
    struct limiter_decision d[2];

    for (int i = 0; i < ATTEMPTS_PER_THREAD; i++)
        if (limiter_decide_all(reversed, 2, hot_key_twice, T0, d) == 0 && d[0].allowed &&
            d[1].allowed)
            h->allowed++;
    return NULL;
}

/* Half the threads name the two limits in the other order (as a reload that reorders a
 * route's limits does): no deadlock, and still exactly the tighter quota. */
static void test_limits_in_either_order(void)
{
    struct limiter *a = new_limiter("gcra", QUOTA / 4, SEC(3600), 0, 0);
    struct limiter *b = new_limiter("fixed_window", QUOTA, SEC(3600), 0, 0);
    struct pair_hammer h[THREADS];
    pthread_t threads[THREADS];
    unsigned total = 0;

    for (int t = 0; t < THREADS; t++) {
        h[t] = (struct pair_hammer){{a, b}, 0};
        CU_ASSERT_EQUAL_FATAL(
            pthread_create(&threads[t], NULL, t % 2 ? hammer_reversed : hammer_two_limits, &h[t]),
            0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        total += h[t].allowed;
    }
    CU_ASSERT_EQUAL(total, QUOTA / 4);
    limiter_free(a);
    limiter_free(b);
}

struct churn {
    struct limiter *limiter;
    unsigned seed;
    unsigned errors; /* CUnit asserts are not thread-safe: count here, assert after join */
};

static void *churn_clients(void *arg)
{
    struct churn *c = arg;
    struct limiter_decision d;
    char id[32];

    for (int i = 0; i < 4000; i++) {
        unsigned r = rand_r(&c->seed);

        /* Mostly other clients, forcing reclaim and eviction, with one shared client that
         * may be evicted and recreated under the others' feet. */
        if (r % 4 == 0)
            snprintf(id, sizeof id, "shared");
        else
            snprintf(id, sizeof id, "c%u", r % 500);
        c->errors += limiter_decide(c->limiter, id, T0 + i * MS(1), &d) != 0;
    }
    return NULL;
}

/* Insertion, reclamation and eviction racing with lookups in a small table. */
static void test_churn_many_threads(void)
{
    for (int a = 0; a < 5; a++) {
        struct limiter *l = new_limiter(all_algorithms[a], 5, MS(50), 0, 64);
        struct churn c[THREADS];
        pthread_t threads[THREADS];

        for (int t = 0; t < THREADS; t++) {
            c[t] = (struct churn){l, (unsigned)t + 1, 0};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, churn_clients, &c[t]), 0);
        }
        for (int t = 0; t < THREADS; t++) {
            pthread_join(threads[t], NULL);
            CU_ASSERT_EQUAL(c[t].errors, 0);
        }
        CU_ASSERT_TRUE(stats_of(l).clients <= 64);
        CU_ASSERT_TRUE(stats_of(l).evictions + stats_of(l).reclaimed > 0);
        limiter_free(l);
    }
}

void register_table_tests(void)
{
    CU_pSuite s = add_suite("table");
    CU_pSuite c = add_suite("table_concurrency");

    add_test(s, "idle states are reclaimed before any eviction",
             test_idle_states_are_reclaimed_first);
    add_test(s, "the least recently used client is evicted", test_lru_eviction);
    add_test(s, "never more than max_clients states", test_bounded);
    add_test(c, "8 threads, one client: exactly the quota", test_one_client_many_threads);
    add_test(c, "8 threads churning a small table", test_churn_many_threads);
    add_test(c, "8 threads, two limits: no double charge", test_two_limits_many_threads);
    add_test(c, "two limits named in either order", test_limits_in_either_order);
}
