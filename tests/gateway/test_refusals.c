/* The shared store's refusals kept by this replica (gateway/modules/limit/refusals.h), called
 * directly on limit sets made by hand: what a kept refusal answers and until when (Redis's
 * retry less its rounding, never past refusal_cache), the cost rule, what it is matched by
 * (the set's serial and the client's keys), which sets are never kept, what an operator's
 * change forgets, and sluice_store_calls_saved_total.
 *
 * The table is the process's, and an operator's change (gw_refusals_forget()) makes a
 * refusal asked before it unkeepable: so each test asks at a fresh instant, limiter_now_ns()
 * once it starts, and on sets of its own (a new serial each, as a reload gives). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/modules/limit/refusals.h"
#include "tests/unit.h"

#define MS     INT64_C(1000000)
#define SECOND (1000 * MS)

/* A fixed window (5 a minute) and a GCRA (10 a second) under two keys of the client. */
static struct config_limit two_limits[] = {
    {.name = "minute",
     .params = {.algorithm = "fixed_window", .algorithm_id = LIMITER_FIXED_WINDOW}},
    {.name = "burst", .params = {.algorithm = "gcra", .algorithm_id = LIMITER_GCRA}},
};

/* What Redis said: the window refuses, 500 ms to wait, 60 s until it ends; the GCRA had room. */
static const struct limiter_decision redis_said[] = {
    {.allowed = false, .limit = 5, .remaining = 0, .reset_ms = 60000, .retry_after_ms = 500},
    {.allowed = true, .limit = 10, .remaining = 3, .reset_ms = 700, .retry_after_ms = 0},
};

static const char *const client[] = {"key:alice", "ip:198.51.100.1"};
static const char *const other_client[] = {"key:bob", "ip:198.51.100.1"};
static const uint64_t cost_one[] = {1, 1};

/* A set of `n` of `config` with a serial no other set of this run has. */
static struct gw_limit_set new_set(const struct config_limit *config, size_t n)
{
    static uint64_t serial = UINT64_C(1) << 48; /* far from those of any runtime built here */

    return (struct gw_limit_set){.serial = serial++, .config = config, .n_limits = n};
}

/* An instant after every operator's change so far (refusals.h: none asked before is kept). */
static int64_t fresh_instant(void)
{
    return limiter_now_ns() + 1;
}

/* Redis's refusal of `client` on `set` at cost 1, asked at `asked`, kept at most a second. */
static void keep_said(const struct gw_limit_set *set, const char *const *ids, int64_t asked)
{
    gw_refusals_keep(set, ids, cost_one, redis_said, asked, SECOND);
}

/* Whether a request of cost 1 of `ids` on `set` at `now` is answered by a kept refusal. */
static bool found(const struct gw_limit_set *set, const char *const *ids, int64_t now)
{
    struct limiter_decision each[LIMITER_MAX_PER_REQUEST];

    return gw_refusals_find(set, ids, cost_one, now, each);
}

/* Found 200 ms on: what Redis said, its times counted down by 200 ms. */
static void test_found_counted_down(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    struct limiter_decision each[2];
    int64_t asked = fresh_instant();

    keep_said(&set, client, asked);
    CU_ASSERT_TRUE_FATAL(gw_refusals_find(&set, client, cost_one, asked + 200 * MS, each));
    CU_ASSERT_FALSE(each[0].allowed);
    CU_ASSERT_EQUAL(each[0].limit, 5);
    CU_ASSERT_EQUAL(each[0].remaining, 0);
    CU_ASSERT_EQUAL(each[0].retry_after_ms, 300);
    CU_ASSERT_EQUAL(each[0].reset_ms, 59800);
    CU_ASSERT_TRUE(each[1].allowed);
    CU_ASSERT_EQUAL(each[1].limit, 10);
    CU_ASSERT_EQUAL(each[1].remaining, 3);
    CU_ASSERT_EQUAL(each[1].retry_after_ms, 0);
    CU_ASSERT_EQUAL(each[1].reset_ms, 500);
    /* At the instant it was asked, all of it; a part of a millisecond on, rounded up. */
    CU_ASSERT_TRUE_FATAL(gw_refusals_find(&set, client, cost_one, asked, each));
    CU_ASSERT_EQUAL(each[0].retry_after_ms, 500);
    CU_ASSERT_EQUAL(each[0].reset_ms, 60000);
    CU_ASSERT_TRUE_FATAL(gw_refusals_find(&set, client, cost_one, asked + 200 * MS + 1, each));
    CU_ASSERT_EQUAL(each[0].retry_after_ms, 300);
    CU_ASSERT_TRUE_FATAL(gw_refusals_find(&set, client, cost_one, asked + 499 * MS - 1, each));
    CU_ASSERT_EQUAL(each[0].retry_after_ms, 2);
}

/* R = 500 ms, rounded up by the store: held until asked + 499 ms, not from then on, and not
 * before it was asked. */
static void test_held_until_retry_less_rounding(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    int64_t asked = fresh_instant();

    keep_said(&set, client, asked);
    CU_ASSERT_TRUE(found(&set, client, asked + 499 * MS - 1));
    CU_ASSERT_FALSE(found(&set, client, asked + 499 * MS));
    CU_ASSERT_FALSE(found(&set, client, asked + 500 * MS));
    CU_ASSERT_FALSE(found(&set, client, asked + 10 * SECOND));
    CU_ASSERT_FALSE(found(&set, client, asked - 1));
    CU_ASSERT_TRUE(found(&set, client, asked));
}

/* Held for the longest retry of the limits that refuse: 800 ms of two refusing. */
static void test_held_for_the_longest_retry(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    struct limiter_decision both[] = {redis_said[0], redis_said[0]};
    int64_t asked = fresh_instant();

    both[1].retry_after_ms = 800;
    gw_refusals_keep(&set, client, cost_one, both, asked, SECOND);
    CU_ASSERT_TRUE(found(&set, client, asked + 799 * MS - 1));
    CU_ASSERT_FALSE(found(&set, client, asked + 799 * MS));
}

/* refusal_cache caps it; 0 keeps nothing, nor does a retry of 1 ms (which may be less). */
static void test_capped(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    struct limiter_decision short_retry[] = {redis_said[0], redis_said[1]};
    int64_t asked = fresh_instant();

    gw_refusals_keep(&set, client, cost_one, redis_said, asked, 100 * MS);
    CU_ASSERT_TRUE(found(&set, client, asked + 100 * MS - 1));
    CU_ASSERT_FALSE(found(&set, client, asked + 100 * MS));

    set = new_set(two_limits, 2);
    gw_refusals_keep(&set, client, cost_one, redis_said, asked, 0);
    CU_ASSERT_FALSE(found(&set, client, asked));
    CU_ASSERT_FALSE(found(&set, client, asked + 1 * MS));

    set = new_set(two_limits, 2);
    short_retry[0].retry_after_ms = 1;
    gw_refusals_keep(&set, client, cost_one, short_retry, asked, SECOND);
    CU_ASSERT_FALSE(found(&set, client, asked));

    set = new_set(two_limits, 2);
    short_retry[0].retry_after_ms = 2;
    gw_refusals_keep(&set, client, cost_one, short_retry, asked, SECOND);
    CU_ASSERT_TRUE(found(&set, client, asked + 1 * MS - 1));
    CU_ASSERT_FALSE(found(&set, client, asked + 1 * MS));
}

/* Refused at cost 2 and 1: a request of at least that on every limit is answered here; one
 * cheaper on either limit asks Redis (it might pass). */
static void test_cost_rule(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    struct limiter_decision each[2];
    const uint64_t refused_costs[] = {2, 1};
    const uint64_t same[] = {2, 1}, dearer[] = {3, 5}, cheaper_first[] = {1, 1},
                   cheaper_second[] = {2, 0}, dearer_but_cheaper[] = {9, 0};
    int64_t asked = fresh_instant();

    gw_refusals_keep(&set, client, refused_costs, redis_said, asked, SECOND);
    CU_ASSERT_TRUE(gw_refusals_find(&set, client, same, asked + MS, each));
    CU_ASSERT_TRUE(gw_refusals_find(&set, client, dearer, asked + MS, each));
    CU_ASSERT_FALSE(gw_refusals_find(&set, client, cheaper_first, asked + MS, each));
    CU_ASSERT_FALSE(gw_refusals_find(&set, client, cheaper_second, asked + MS, each));
    CU_ASSERT_FALSE(gw_refusals_find(&set, client, dearer_but_cheaper, asked + MS, each));
}

/* Matched by the set's serial and the client's keys, whole: another set (a reload's, even of
 * the same limits), another client, keys in another order or split otherwise, or fewer
 * limits, find nothing. */
static void test_matched_by_set_and_keys(void)
{
    struct gw_limit_set set = new_set(two_limits, 2), reloaded = new_set(two_limits, 2);
    struct gw_limit_set fewer = set;
    const char *const swapped[] = {client[1], client[0]};
    const char *const split_a[] = {"ab", "c"}, *const split_b[] = {"a", "bc"};
    int64_t asked = fresh_instant();

    keep_said(&set, client, asked);
    CU_ASSERT_TRUE(found(&set, client, asked + MS));
    CU_ASSERT_FALSE(found(&reloaded, client, asked + MS));
    CU_ASSERT_FALSE(found(&set, other_client, asked + MS));
    CU_ASSERT_FALSE(found(&set, swapped, asked + MS));
    fewer.n_limits = 1;
    CU_ASSERT_FALSE(found(&fewer, client, asked + MS));

    keep_said(&set, split_a, asked);
    CU_ASSERT_TRUE(found(&set, split_a, asked + MS));
    CU_ASSERT_FALSE(found(&set, split_b, asked + MS));
}

/* Only sets whose counts go down by time alone: none with count:, delay: or a concurrency
 * limit, and not an empty one. */
static void test_may_keep(void)
{
    static const char *const names[] = {"token_bucket", "gcra", "fixed_window",
                                        "sliding_window_log", "sliding_window_counter"};
    struct config_limit limits[2] = {two_limits[0], two_limits[1]};
    struct gw_limit_set set = new_set(limits, 2);

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        limits[1].params.algorithm = names[i];
        limits[1].params.algorithm_id = limiter_algorithm_from_name(names[i]);
        CU_ASSERT_TRUE(gw_refusals_may_keep(&set));
    }
    limits[1].count.set = true;
    CU_ASSERT_FALSE(gw_refusals_may_keep(&set));
    limits[1].count.set = false;
    limits[1].delay = (struct config_delay){.set = true, .max_ns = SECOND, .queue = 100};
    CU_ASSERT_FALSE(gw_refusals_may_keep(&set));
    limits[1].delay.set = false;
    limits[1].params.algorithm = "concurrency";
    limits[1].params.algorithm_id = LIMITER_CONCURRENCY;
    CU_ASSERT_FALSE(gw_refusals_may_keep(&set));
    set.n_limits = 1;
    CU_ASSERT_TRUE(gw_refusals_may_keep(&set));
    set.n_limits = 0;
    CU_ASSERT_FALSE(gw_refusals_may_keep(&set));
}

/* An operator's change of one client forgets that client's refusal on that set only. */
static void test_forget_one_client(void)
{
    struct gw_limit_set set = new_set(two_limits, 2), other_set = new_set(two_limits, 2);
    int64_t asked = fresh_instant();

    keep_said(&set, client, asked);
    keep_said(&set, other_client, asked);
    keep_said(&other_set, client, asked);
    gw_refusals_forget(&set, client);
    CU_ASSERT_FALSE(found(&set, client, asked + MS));
    CU_ASSERT_TRUE(found(&set, other_client, asked + MS));
    CU_ASSERT_TRUE(found(&other_set, client, asked + MS));
}

/* A key not known (NULL): every client's refusal on that set, none of another set's. */
static void test_forget_every_client(void)
{
    struct gw_limit_set set = new_set(two_limits, 2), other_set = new_set(two_limits, 2);
    const char *const unknown[] = {client[0], NULL};
    int64_t asked = fresh_instant();

    keep_said(&set, client, asked);
    keep_said(&set, other_client, asked);
    keep_said(&other_set, client, asked);
    gw_refusals_forget(&set, unknown);
    CU_ASSERT_FALSE(found(&set, client, asked + MS));
    CU_ASSERT_FALSE(found(&set, other_client, asked + MS));
    CU_ASSERT_TRUE(found(&other_set, client, asked + MS));
}

/* A refusal asked before an operator's change here may predate it: not kept. One asked
 * after is. */
static void test_not_kept_from_before_a_change(void)
{
    struct gw_limit_set set = new_set(two_limits, 2), changed = new_set(two_limits, 2);
    int64_t asked = fresh_instant();

    gw_refusals_forget(&changed, client);
    keep_said(&set, client, asked);
    CU_ASSERT_FALSE(found(&set, client, asked + MS));
    asked = fresh_instant();
    keep_said(&set, client, asked);
    CU_ASSERT_TRUE(found(&set, client, asked + MS));
}

/* sluice_store_calls_saved_total as gw_refusals_render() writes it, or -1. */
static long long saved_total(void)
{
    static const char series[] = "\nsluice_store_calls_saved_total ";
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    const char *at;
    long long n = -1;

    if (out == NULL)
        return -1;
    gw_refusals_render(out);
    fclose(out);
    at = strstr(text, series);
    if (at != NULL && strstr(text, "# TYPE sluice_store_calls_saved_total counter\n") != NULL)
        n = strtoll(at + strlen(series), NULL, 10);
    free(text);
    return n;
}

/* One more for each find that holds, none for one that does not. */
static void test_counted(void)
{
    struct gw_limit_set set = new_set(two_limits, 2);
    int64_t asked = fresh_instant();
    long long before = saved_total();

    CU_ASSERT_TRUE_FATAL(before >= 0);
    keep_said(&set, client, asked);
    CU_ASSERT_EQUAL(saved_total(), before);
    CU_ASSERT_TRUE(found(&set, client, asked + MS));
    CU_ASSERT_TRUE(found(&set, client, asked + 2 * MS));
    CU_ASSERT_EQUAL(saved_total(), before + 2);
    CU_ASSERT_FALSE(found(&set, other_client, asked + MS));
    CU_ASSERT_FALSE(found(&set, client, asked + SECOND));
    CU_ASSERT_EQUAL(saved_total(), before + 2);
}

/* The race between an operator's change and a refusal being kept. */
struct race {
    struct gw_limit_set set;
    atomic_bool stop;
};

/* Keeps Redis's refusal of `client` again and again, each asked now, its instant written in
 * the window's `remaining` (kept and found as it is) so that the finder can tell when. */
static void *keep_again_and_again(void *arg)
{
    struct race *race = arg;

    while (!atomic_load(&race->stop)) {
        struct limiter_decision said[] = {redis_said[0], redis_said[1]};
        int64_t asked = limiter_now_ns();

        said[0].remaining = (uint64_t)asked;
        gw_refusals_keep(&race->set, client, cost_one, said, asked, SECOND);
    }
    return NULL;
}

/* An operator's change forgets the client's refusal at once (refusals.h), and a refusal asked
 * before it is not kept: so right after gw_refusals_forget() returns, no refusal asked before
 * it was called is found, whatever another thread is keeping meanwhile. A keep that looked at
 * the last change before the forget and wrote its slot after it would undo the forget, and
 * the replica the operator changed the client on would refuse it until the refusal lapsed
 * (up to refusal_cache): so gw_refusals_keep() looks again under the slot's lock. Without
 * that, this failed within a few thousand rounds on two cores. */
static void test_forget_races_keep(void)
{
    struct race race = {.set = new_set(two_limits, 2)};
    pthread_t keeper;
    long rounds, stale = 0;
    int64_t began = limiter_now_ns();

    CU_ASSERT_EQUAL_FATAL(pthread_create(&keeper, NULL, keep_again_and_again, &race), 0);
    for (rounds = 0; rounds < 500000 && stale == 0 && limiter_now_ns() - began < 2 * SECOND;
         rounds++) {
        struct limiter_decision each[2];
        int64_t before = limiter_now_ns();

        gw_refusals_forget(&race.set, client);
        if (gw_refusals_find(&race.set, client, cost_one, limiter_now_ns(), each) &&
            (int64_t)each[0].remaining < before)
            stale++;
    }
    atomic_store(&race.stop, true);
    pthread_join(keeper, NULL);
    if (stale > 0)
        fprintf(stderr,
                "\na refusal asked before an operator's change was found after it, "
                "in round %ld\n",
                rounds);
    CU_ASSERT_EQUAL(stale, 0);
}

void register_refusals_tests(void)
{
    CU_pSuite s = add_suite("gateway_refusals");

    add_test(s, "found while it holds, its times counted down", test_found_counted_down);
    add_test(s, "held until the retry less its rounding, not before it was asked",
             test_held_until_retry_less_rounding);
    add_test(s, "held for the longest retry of the limits that refuse",
             test_held_for_the_longest_retry);
    add_test(s, "capped by refusal_cache; 0, or a retry of 1 ms, keeps nothing", test_capped);
    add_test(s, "a request as dear on every limit is answered; a cheaper one is not",
             test_cost_rule);
    add_test(s, "matched by the set's serial and the client's keys", test_matched_by_set_and_keys);
    add_test(s, "never kept with count:, delay: or concurrency", test_may_keep);
    add_test(s, "an operator's change forgets that client's on that set", test_forget_one_client);
    add_test(s, "a key not known forgets every client's on that set", test_forget_every_client);
    add_test(s, "a refusal asked before an operator's change is not kept",
             test_not_kept_from_before_a_change);
    add_test(s, "sluice_store_calls_saved_total counts each find that holds", test_counted);
    add_test(add_suite("gateway_refusals_concurrency"),
             "an operator's change is not undone by a refusal kept meanwhile",
             test_forget_races_keep);
}
