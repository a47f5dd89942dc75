/* The servers behind a route (gateway/upstream/backends.c): the weighted schedule, the two
 * random balances, passive and active health, panic mode, the retry budget and the samples
 * the metrics page shows. Time is the argument each call takes: nothing here sleeps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/upstream/backends.h"
#include "tests/unit.h"

#define SECOND_NS ((int64_t)1000000000)
#define T0        (1000 * SECOND_NS) /* an arbitrary start, well past zero ("never failed") */

/* A route of `n` servers built by hand, as config/upstream.c would, and its chosen-from set. */
struct fixture {
    char urls[CONFIG_MAX_SERVERS][48];
    struct config_server servers[CONFIG_MAX_SERVERS];
    struct config_route route;
    struct gw_backends *backends;
    struct gw_backend_set set;
    bool probe; /* the last pick was a server's probe */
    int probes; /* picks that were probes, since make_route() */
};

static struct fixture fx;

/* Fills `fx` with `n` servers of `weights`, chosen by `balance`, and the passive health
 * defaults the tests below change where they need to: max_fails 3 within 10 s, skipped for
 * 1 s, connect failures counting. */
static void make_route(enum config_balance balance, const uint32_t *weights, size_t n)
{
    memset(&fx, 0, sizeof fx);
    for (size_t i = 0; i < n; i++) {
        snprintf(fx.urls[i], sizeof fx.urls[i], "http://10.0.0.%zu:8080", i + 1);
        fx.servers[i] = (struct config_server){
            .url = fx.urls[i],
            .origin = fx.urls[i],
            .base_path = "",
            .authority = fx.urls[i] + strlen("http://"),
            .weight = weights[i],
        };
    }
    fx.route = (struct config_route){
        .name = "api",
        .upstream.servers = fx.servers,
        .upstream.n_servers = n,
        .upstream.balance = balance,
        .upstream.passive.max_fails = 3,
        .upstream.passive.fail_window_ns = 10 * SECOND_NS,
        .upstream.passive.fail_timeout_ns = 1 * SECOND_NS,
        .upstream.passive.fail_on = CONFIG_FAIL_CONNECT,
    };
    fx.backends = gw_backends_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx.backends);
    CU_ASSERT_EQUAL_FATAL(gw_backend_set_init(&fx.set, fx.backends, &fx.route), 0);
}

static void free_route(void)
{
    gw_backend_set_free(&fx.set);
    gw_backends_free(fx.backends);
}

static struct gw_backend *server(size_t i)
{
    return fx.set.servers[i];
}

/* How often each server is picked in `picks` picks at `now_ns`, into `counts`. */
static void count_picks(uint64_t tried, int64_t now_ns, int picks, int *counts)
{
    memset(counts, 0, fx.set.n * sizeof *counts);
    for (int k = 0; k < picks; k++) {
        size_t i = gw_backend_pick(&fx.set, tried, now_ns, &fx.probe);

        CU_ASSERT_FATAL(i < fx.set.n);
        counts[i]++;
        fx.probes += fx.probe;
    }
}

/* `times` connect failures of server `i`, `step_ns` apart from `at_ns`; whether the last
 * made it be skipped. */
static bool refuse(size_t i, int times, int64_t at_ns, int64_t step_ns)
{
    bool skipped = false;

    for (int k = 0; k < times; k++)
        skipped = gw_backend_report(server(i), &fx.route, GW_FAULT_REFUSED, 0, at_ns + k * step_ns,
                                    false);
    return skipped;
}

/* --- round robin --------------------------------------------------------------------- */

/* `picks` picks in a row match `expected` (of `n`) over and over. */
static void assert_sequence(const size_t *expected, size_t n, int picks)
{
    for (int k = 0; k < picks; k++)
        CU_ASSERT_EQUAL(gw_backend_pick(&fx.set, 0, T0, &fx.probe), expected[k % n]);
}

static void test_round_robin_smooth_weights(void)
{
    static const uint32_t weights[] = {5, 1, 1};
    static const size_t expected[] = {0, 0, 1, 0, 2, 0, 0}; /* a a b a c a a */

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    CU_ASSERT_EQUAL(fx.set.n_schedule, 7);
    assert_sequence(expected, 7, 7 * 4);
    free_route();
}

static void test_round_robin_cycle_counts(void)
{
    static const uint32_t one_two_one[] = {1, 2, 1};
    static const uint32_t by_two[] = {2, 4, 6};
    size_t first[6];
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, one_two_one, 3);
    CU_ASSERT_EQUAL(fx.set.n_schedule, 4);
    for (int cycle = 0; cycle < 3; cycle++) {
        count_picks(0, T0, 4, counts);
        CU_ASSERT_EQUAL(counts[0], 1);
        CU_ASSERT_EQUAL(counts[1], 2);
        CU_ASSERT_EQUAL(counts[2], 1);
    }
    free_route();

    /* 2, 4, 6 is 1, 2, 3 (their gcd taken out): a cycle of 6, not 12. */
    make_route(CONFIG_BALANCE_ROUND_ROBIN, by_two, 3);
    CU_ASSERT_EQUAL(fx.set.n_schedule, 6);
    for (int k = 0; k < 6; k++)
        first[k] = gw_backend_pick(&fx.set, 0, T0, &fx.probe);
    for (int cycle = 0; cycle < 3; cycle++) {
        count_picks(0, T0, 6, counts);
        CU_ASSERT_EQUAL(counts[0], 1);
        CU_ASSERT_EQUAL(counts[1], 2);
        CU_ASSERT_EQUAL(counts[2], 3);
    }
    assert_sequence(first, 6, 12);
    free_route();
}

static void test_round_robin_equal_weights_rotate(void)
{
    static const uint32_t ones[] = {1, 1, 1, 1};
    static const uint32_t threes[] = {3, 3, 3};
    static const size_t rotation[] = {0, 1, 2, 3};

    make_route(CONFIG_BALANCE_ROUND_ROBIN, ones, 4);
    CU_ASSERT_EQUAL(fx.set.n_schedule, 4);
    assert_sequence(rotation, 4, 16);
    free_route();

    make_route(CONFIG_BALANCE_ROUND_ROBIN, threes, 3);
    CU_ASSERT_EQUAL(fx.set.n_schedule, 3);
    assert_sequence(rotation, 3, 9);
    free_route();
}

/* Whether `got` is within a tenth of `total` of `expected`. */
static bool near(int got, int expected, int total)
{
    return abs(got - expected) <= total / 10;
}

/* A server skipped (here marked down) gives up its turns to the others by their weights,
 * not all to the one after it in the schedule. */
static void test_round_robin_skipped_turns_are_shared(void)
{
    static const uint32_t equal[] = {1, 1, 1};
    static const uint32_t five_one_one[] = {5, 1, 1};
    static const uint32_t one_two_three[] = {1, 2, 3};
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, equal, 3);
    atomic_store(&server(1)->healthy, false);
    count_picks(0, T0, 300, counts);
    CU_ASSERT_EQUAL(counts[1], 0);
    CU_ASSERT(near(counts[0], 150, 300));
    CU_ASSERT(near(counts[2], 150, 300));
    free_route();

    make_route(CONFIG_BALANCE_ROUND_ROBIN, five_one_one, 3);
    atomic_store(&server(0)->healthy, false);
    count_picks(0, T0, 700, counts);
    CU_ASSERT_EQUAL(counts[0], 0);
    CU_ASSERT(near(counts[1], 350, 700));
    CU_ASSERT(near(counts[2], 350, 700));
    free_route();

    make_route(CONFIG_BALANCE_ROUND_ROBIN, one_two_three, 3);
    atomic_store(&server(0)->healthy, false);
    count_picks(0, T0, 600, counts);
    CU_ASSERT_EQUAL(counts[0], 0);
    CU_ASSERT(near(counts[1], 240, 600));
    CU_ASSERT(near(counts[2], 360, 600));
    free_route();
}

/* --- tried servers, under each balance ------------------------------------------------ */

static void test_tried_servers_are_skipped(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    static const enum config_balance balances[] = {
        CONFIG_BALANCE_ROUND_ROBIN, CONFIG_BALANCE_LEAST_REQUEST, CONFIG_BALANCE_RANDOM_TWO};
    int counts[3];

    for (size_t b = 0; b < sizeof balances / sizeof balances[0]; b++) {
        make_route(balances[b], weights, 3);
        count_picks(UINT64_C(1) << 0, T0, 60, counts);
        CU_ASSERT_EQUAL(counts[0], 0);
        CU_ASSERT(counts[1] > 0);
        CU_ASSERT(counts[2] > 0);
        count_picks((UINT64_C(1) << 0) | (UINT64_C(1) << 1), T0, 30, counts);
        CU_ASSERT_EQUAL(counts[2], 30);
        /* All tried: any healthy one will do, but still a healthy one. */
        atomic_store(&server(1)->healthy, false);
        count_picks(7, T0, 60, counts);
        CU_ASSERT_EQUAL(counts[1], 0);
        CU_ASSERT_EQUAL(counts[0] + counts[2], 60);
        /* The untried ones down: a tried healthy one rather than a down one. */
        atomic_store(&server(2)->healthy, false);
        count_picks(UINT64_C(1) << 0, T0, 30, counts);
        CU_ASSERT_EQUAL(counts[0], 30);
        free_route();
    }
}

/* --- the random balances ------------------------------------------------------------- */

static void test_least_request_avoids_the_busy_server(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int counts[3];

    make_route(CONFIG_BALANCE_LEAST_REQUEST, weights, 3);
    for (int k = 0; k < 50; k++)
        gw_backend_begin(server(0));
    count_picks(0, T0, 1000, counts);
    CU_ASSERT(counts[0] < 50);
    CU_ASSERT(counts[1] > 300);
    CU_ASSERT(counts[2] > 300);
    for (int k = 0; k < 50; k++)
        gw_backend_finish(server(0), true, false);
    CU_ASSERT_EQUAL(atomic_load(&server(0)->in_flight), 0);
    free_route();
}

static void test_least_request_weighs_load(void)
{
    /* Server 0 has 4 in flight but weight 10: 5/10 per unit against 1/1 for server 1. */
    static const uint32_t weights[] = {10, 1};
    int counts[2];

    make_route(CONFIG_BALANCE_LEAST_REQUEST, weights, 2);
    for (int k = 0; k < 4; k++)
        gw_backend_begin(server(0));
    count_picks(0, T0, 200, counts);
    CU_ASSERT_EQUAL(counts[0], 200);
    free_route();
}

static void test_random_two_follows_weight(void)
{
    static const uint32_t weights[] = {1, 1, 4};
    int counts[3];

    make_route(CONFIG_BALANCE_RANDOM_TWO, weights, 3);
    count_picks(0, T0, 3000, counts);
    CU_ASSERT(counts[2] > 1500);
    CU_ASSERT(counts[0] >= 150);
    CU_ASSERT(counts[1] >= 150);
    free_route();
}

/* --- passive health ------------------------------------------------------------------ */

static void test_failures_skip_a_server(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    CU_ASSERT_FALSE(refuse(0, 2, T0, SECOND_NS));
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), T0 + SECOND_NS));
    count_picks(0, T0 + SECOND_NS, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 10);
    CU_ASSERT_TRUE(
        gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, T0 + 2 * SECOND_NS, false));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), T0 + 2 * SECOND_NS));
    CU_ASSERT_TRUE(gw_backend_healthy(server(1), T0 + 2 * SECOND_NS));
    count_picks(0, T0 + 2 * SECOND_NS, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 0);
    CU_ASSERT_EQUAL(counts[1] + counts[2], 30);
    /* Still skipped a moment before fail_timeout is up. */
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), T0 + 3 * SECOND_NS - 1));
    free_route();
}

static void test_failures_spread_out_do_not_add_up(void)
{
    static const uint32_t weights[] = {1, 1};

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    /* Every 6 s: never 3 within 10 s. */
    for (int k = 0; k < 6; k++) {
        int64_t at = T0 + k * 6 * SECOND_NS;

        CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, at, false));
        CU_ASSERT_TRUE(gw_backend_healthy(server(0), at));
    }
    /* Three within 9 s: skipped. */
    CU_ASSERT_TRUE(refuse(1, 3, T0, SECOND_NS * 9 / 2));
    CU_ASSERT_FALSE(gw_backend_healthy(server(1), T0 + 9 * SECOND_NS));
    free_route();
}

/* Server 0 of three failed three times, the last at `at`; returns when it is due its probe. */
static int64_t skip_server_zero(int64_t at)
{
    CU_ASSERT_TRUE(refuse(0, 3, at - 2, 1));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), at));
    return at + fx.route.upstream.passive.fail_timeout_ns;
}

static void test_one_probe_after_fail_timeout(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int64_t due, later;
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    due = skip_server_zero(T0);
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due - 1));
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), due));
    /* Many requests at once: exactly one is let through to it. */
    count_picks(0, due, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 1);
    CU_ASSERT_EQUAL(fx.probes, 1);
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due));
    count_picks(0, due + SECOND_NS, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 0);
    /* A request sent to it before it was skipped answers late: that decides nothing. */
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 200, due, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, due, false));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due + 1));
    /* The probe answers: back in the rotation. */
    gw_backend_begin(server(0));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 200, due + 1, true));
    gw_backend_finish(server(0), true, true);
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), due + 1));
    CU_ASSERT_EQUAL(atomic_load(&server(0)->down_until_ns), 0);
    count_picks(0, due + 1, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 10);
    /* And it takes max_fails failures again to be skipped: the count started afresh. */
    later = due + 60 * SECOND_NS;
    CU_ASSERT_FALSE(refuse(0, 2, later, 1));
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), later + 1));
    free_route();
}

static void test_failed_probe_skips_again(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int64_t due;
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    due = skip_server_zero(T0);
    count_picks(0, due, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 1);
    /* One failure of the probe is enough, whatever max_fails says. */
    CU_ASSERT_TRUE(gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, due + 5, true));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due + 5));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due + 5 + SECOND_NS - 1));
    count_picks(0, due + 5 + SECOND_NS - 1, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 0);
    /* Another fail_timeout on: another single probe. */
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), due + 5 + SECOND_NS));
    count_picks(0, due + 5 + SECOND_NS, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 1);
    free_route();
}

/* One server alone is skipped and probed like any: after fail_timeout a request is its
 * probe, and failing it puts the server out again (panic mode still sends it requests). */
static void test_one_server_is_probed_too(void)
{
    static const uint32_t weights[] = {1};
    int64_t due;

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 1);
    CU_ASSERT_TRUE(refuse(0, 3, T0, 1));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), T0 + 3));
    CU_ASSERT_EQUAL(gw_backend_pick(&fx.set, 0, T0 + 3, &fx.probe), 0); /* panic mode */
    CU_ASSERT_FALSE(fx.probe);
    due = T0 + 2 + fx.route.upstream.passive.fail_timeout_ns;
    CU_ASSERT_EQUAL(gw_backend_pick(&fx.set, 0, due, &fx.probe), 0);
    CU_ASSERT_TRUE(fx.probe);
    CU_ASSERT_EQUAL(gw_backend_pick(&fx.set, 0, due, &fx.probe), 0);
    CU_ASSERT_FALSE(fx.probe); /* one probe only */
    CU_ASSERT_TRUE(gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, due + 1, true));
    CU_ASSERT_FALSE(gw_backend_healthy(server(0), due + 1));
    CU_ASSERT_EQUAL(
        gw_backend_pick(&fx.set, 0, due + 1 + fx.route.upstream.passive.fail_timeout_ns, &fx.probe),
        0);
    CU_ASSERT_TRUE(fx.probe);
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 200,
                                      due + 2 + fx.route.upstream.passive.fail_timeout_ns, true));
    CU_ASSERT_TRUE(
        gw_backend_healthy(server(0), due + 2 + fx.route.upstream.passive.fail_timeout_ns));
    free_route();
}

static void test_abandoned_probe_lets_the_next_request_probe(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int64_t due;
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    due = skip_server_zero(T0);
    count_picks(0, due, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 1);
    gw_backend_begin(server(0));
    gw_backend_finish(server(0), false, true); /* the probe, given up before any outcome */
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), due));
    count_picks(0, due, 30, counts);
    CU_ASSERT_EQUAL(counts[0], 1);
    CU_ASSERT_EQUAL(atomic_load(&server(0)->in_flight), 0);
    free_route();
}

static void test_statuses_count_when_fail_on_names_them(void)
{
    static const uint32_t weights[] = {1, 1};

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    /* Default fail_on (here connect only): a 503 is an answer like another. */
    for (int k = 0; k < 5; k++)
        CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 503, T0 + k, false));
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), T0 + 5));
    CU_ASSERT_EQUAL(atomic_load(&server(0)->last_failed_ns), 0);

    fx.route.upstream.passive.fail_on = CONFIG_FAIL_CONNECT | CONFIG_FAIL_503;
    for (int k = 0; k < 3; k++) /* neither a 502 nor a 500 */
        CU_ASSERT_FALSE(
            gw_backend_report(server(1), &fx.route, GW_FAULT_NONE, k ? 502 : 500, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(1), &fx.route, GW_FAULT_NONE, 503, T0 + 1, false));
    CU_ASSERT_FALSE(gw_backend_report(server(1), &fx.route, GW_FAULT_NONE, 503, T0 + 2, false));
    CU_ASSERT_TRUE(gw_backend_healthy(server(1), T0 + 2));
    CU_ASSERT_TRUE(gw_backend_report(server(1), &fx.route, GW_FAULT_NONE, 503, T0 + 3, false));
    CU_ASSERT_FALSE(gw_backend_healthy(server(1), T0 + 3));
    CU_ASSERT_EQUAL(atomic_load(&server(1)->last_failed_ns), T0 + 3);
    free_route();
}

static void test_max_fails_zero_never_skips(void)
{
    static const uint32_t weights[] = {1, 1};
    int counts[2];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    fx.route.upstream.passive.max_fails = 0;
    for (int k = 0; k < 100; k++)
        CU_ASSERT_FALSE(
            gw_backend_report(server(0), &fx.route, GW_FAULT_REFUSED, 0, T0 + k, false));
    CU_ASSERT_TRUE(gw_backend_healthy(server(0), T0 + 100));
    count_picks(0, T0 + 100, 10, counts);
    CU_ASSERT_EQUAL(counts[0], 5);
    free_route();
}

/* --- panic mode and active health ----------------------------------------------------- */

static void test_panic_picks_the_least_recently_failed(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int64_t now = T0 + 4 * SECOND_NS;
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    fx.route.upstream.passive.fail_timeout_ns = 60 * SECOND_NS;
    CU_ASSERT_TRUE(refuse(0, 3, T0 + 3 * SECOND_NS, 1));
    CU_ASSERT_TRUE(refuse(1, 3, T0 + 1 * SECOND_NS, 1));
    CU_ASSERT_TRUE(refuse(2, 3, T0 + 2 * SECOND_NS, 1));
    for (size_t i = 0; i < 3; i++)
        CU_ASSERT_FALSE(gw_backend_healthy(server(i), now));
    count_picks(0, now, 10, counts);
    CU_ASSERT_EQUAL(counts[1], 10);
    /* Among the untried ones while there are some. */
    count_picks(UINT64_C(1) << 1, now, 10, counts);
    CU_ASSERT_EQUAL(counts[2], 10);
    count_picks(7, now, 10, counts);
    CU_ASSERT_EQUAL(counts[1], 10);
    free_route();
}

static void test_active_health_flag(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    int counts[3];

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    CU_ASSERT_TRUE(atomic_load(&server(1)->healthy)); /* until checks say otherwise */
    atomic_store(&server(1)->healthy, false);
    CU_ASSERT_FALSE(gw_backend_healthy(server(1), T0));
    count_picks(0, T0, 30, counts);
    CU_ASSERT_EQUAL(counts[1], 0);
    CU_ASSERT_EQUAL(counts[0] + counts[2], 30);
    /* All marked down and none ever failed: panic still gives one. */
    atomic_store(&server(0)->healthy, false);
    atomic_store(&server(2)->healthy, false);
    count_picks(0, T0, 3, counts);
    CU_ASSERT_EQUAL(counts[0] + counts[1] + counts[2], 3);
    atomic_store(&server(1)->healthy, true);
    CU_ASSERT_TRUE(gw_backend_healthy(server(1), T0));
    count_picks(0, T0, 10, counts);
    CU_ASSERT_EQUAL(counts[1], 10);
    free_route();
}

/* --- faults -------------------------------------------------------------------------- */

static void test_fault_classes(void)
{
    static const struct {
        enum gw_fault fault;
        long status;
        unsigned class;
    } cases[] = {
        {GW_FAULT_NONE, 200, 0},
        {GW_FAULT_NONE, 500, 0},
        {GW_FAULT_NONE, 501, 0},
        {GW_FAULT_NONE, 502, CONFIG_FAIL_502},
        {GW_FAULT_NONE, 503, CONFIG_FAIL_503},
        {GW_FAULT_NONE, 504, CONFIG_FAIL_504},
        {GW_FAULT_NONE, 0, 0},
        {GW_FAULT_DNS, 0, CONFIG_FAIL_CONNECT},
        {GW_FAULT_REFUSED, 0, CONFIG_FAIL_CONNECT},
        {GW_FAULT_CONNECT_TIMEOUT, 0, CONFIG_FAIL_CONNECT},
        {GW_FAULT_TLS, 0, CONFIG_FAIL_CONNECT},
        {GW_FAULT_RESET, 0, CONFIG_FAIL_RESET},
        {GW_FAULT_TIMEOUT, 0, CONFIG_FAIL_TIMEOUT},
        /* After the head: the answer is the client's already, nothing to retry. */
        {GW_FAULT_CUT, 200, 0},
        /* The server answered, and another would answer as large. */
        {GW_FAULT_TOO_LARGE, 0, 0},
        {GW_FAULT_INVALID, 0, CONFIG_FAIL_RESET},
        {GW_FAULT_OTHER, 0, CONFIG_FAIL_RESET},
        /* A fault decides, whatever status came with it. */
        {GW_FAULT_TIMEOUT, 503, CONFIG_FAIL_TIMEOUT},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT_EQUAL(gw_fault_class(cases[i].fault, cases[i].status), cases[i].class);
}

static void test_fault_names(void)
{
    static const char *const names[GW_N_FAULTS] = {
        [GW_FAULT_NONE] = "",
        [GW_FAULT_DNS] = "dns",
        [GW_FAULT_REFUSED] = "refused",
        [GW_FAULT_CONNECT_TIMEOUT] = "connect_timeout",
        [GW_FAULT_TLS] = "tls",
        [GW_FAULT_RESET] = "reset",
        [GW_FAULT_TIMEOUT] = "timeout",
        [GW_FAULT_CUT] = "cut",
        [GW_FAULT_TOO_LARGE] = "too_large",
        [GW_FAULT_INVALID] = "invalid",
        [GW_FAULT_OTHER] = "other",
    };

    for (int f = 0; f < GW_N_FAULTS; f++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(names[f]);
        CU_ASSERT_STRING_EQUAL(gw_fault_name((enum gw_fault)f), names[f]);
    }
}

static void test_failures_logged_once_a_second(void)
{
    static const uint32_t weights[] = {1, 1};

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    CU_ASSERT_TRUE(gw_backend_should_log(server(0), GW_FAULT_REFUSED, T0));
    CU_ASSERT_FALSE(gw_backend_should_log(server(0), GW_FAULT_REFUSED, T0 + SECOND_NS - 1));
    CU_ASSERT_TRUE(gw_backend_should_log(server(0), GW_FAULT_TIMEOUT, T0)); /* another kind */
    CU_ASSERT_TRUE(gw_backend_should_log(server(1), GW_FAULT_REFUSED, T0)); /* another server */
    CU_ASSERT_TRUE(gw_backend_should_log(server(0), GW_FAULT_REFUSED, T0 + SECOND_NS));
    free_route();
}

/* --- retry budget -------------------------------------------------------------------- */

/* How many retries `budget` grants in a row at `now_ns` (at most 1000). */
static int retries_granted(struct gw_retry_budget *budget, uint32_t percent, int64_t now_ns)
{
    int n = 0;

    while (n < 1000 && gw_retry_budget_take(budget, percent, now_ns))
        n++;
    return n;
}

static void test_retry_budget(void)
{
    struct gw_backends *backends = gw_backends_new();
    struct gw_retry_budget *budget, *quiet, *none;

    CU_ASSERT_PTR_NOT_NULL_FATAL(backends);
    budget = gw_backends_budget(backends, "api");
    quiet = gw_backends_budget(backends, "quiet");
    none = gw_backends_budget(backends, "none");
    CU_ASSERT_PTR_NOT_NULL_FATAL(budget);
    CU_ASSERT_PTR_NOT_NULL_FATAL(quiet);
    CU_ASSERT_PTR_NOT_NULL_FATAL(none);
    CU_ASSERT_PTR_EQUAL(gw_backends_budget(backends, "api"), budget);
    CU_ASSERT_PTR_NOT_EQUAL(quiet, budget);

    /* No requests yet: the floor of GW_RETRY_MIN. */
    CU_ASSERT_EQUAL(retries_granted(quiet, 20, T0), GW_RETRY_MIN);
    CU_ASSERT_FALSE(gw_retry_budget_take(quiet, 20, T0));
    /* 100 requests: 20% of them and the floor. */
    for (int k = 0; k < 100; k++)
        gw_retry_budget_count(budget, T0);
    CU_ASSERT_EQUAL(retries_granted(budget, 20, T0), 20 + GW_RETRY_MIN);
    /* One more request: 20% of 101 is still 20. */
    gw_retry_budget_count(budget, T0);
    CU_ASSERT_FALSE(gw_retry_budget_take(budget, 20, T0));
    /* Percent 0: no retries, not even the floor. */
    for (int k = 0; k < 100; k++)
        gw_retry_budget_count(none, T0);
    CU_ASSERT_EQUAL(retries_granted(none, 0, T0), 0);
    /* The next window starts afresh: its own floor, its own requests. */
    CU_ASSERT_EQUAL(retries_granted(budget, 20, T0 + GW_BUDGET_WINDOW_NS), GW_RETRY_MIN);
    CU_ASSERT_EQUAL(retries_granted(quiet, 20, T0 + GW_BUDGET_WINDOW_NS), GW_RETRY_MIN);
    for (int k = 0; k < 10; k++)
        gw_retry_budget_count(budget, T0 + GW_BUDGET_WINDOW_NS);
    CU_ASSERT_EQUAL(retries_granted(budget, 20, T0 + GW_BUDGET_WINDOW_NS), 2);
    gw_backends_free(backends);
}

/* --- the registry -------------------------------------------------------------------- */

static void test_registry_keeps_state_across_reloads(void)
{
    static const uint32_t weights[] = {1, 1, 1};
    struct gw_backend_set again;
    struct gw_backend *a, *b, *c;

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 3);
    a = gw_backends_get(fx.backends, "api", false, fx.urls[0]);
    b = gw_backends_get(fx.backends, "api", false, fx.urls[1]);
    c = gw_backends_get(fx.backends, "web", false, fx.urls[0]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_EQUAL(a, server(0));
    CU_ASSERT_PTR_EQUAL(b, server(1));
    CU_ASSERT_PTR_NOT_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_EQUAL(a, c); /* the same URL under another route is another server */
    CU_ASSERT_PTR_EQUAL(gw_backends_get(fx.backends, "web", false, fx.urls[0]), c);
    CU_ASSERT_STRING_EQUAL(a->owner, "api");
    CU_ASSERT_STRING_EQUAL(a->url, fx.urls[0]);
    /* A shared upstream called api is not the route api. */
    CU_ASSERT_PTR_NOT_EQUAL(gw_backends_get(fx.backends, "api", true, fx.urls[0]), a);
    CU_ASSERT_STRING_EQUAL(gw_backend_owner_kind(a), "route");

    /* A reload builds the set again from the same registry: the state is still there. */
    CU_ASSERT_TRUE(refuse(1, 3, T0, 1));
    gw_backend_begin(server(2));
    CU_ASSERT_FALSE(gw_backend_report(server(2), &fx.route, GW_FAULT_NONE, 200, T0, false));
    CU_ASSERT_EQUAL_FATAL(gw_backend_set_init(&again, fx.backends, &fx.route), 0);
    for (size_t i = 0; i < 3; i++)
        CU_ASSERT_PTR_EQUAL(again.servers[i], server(i));
    CU_ASSERT_FALSE(gw_backend_healthy(again.servers[1], T0 + 3));
    CU_ASSERT_EQUAL(atomic_load(&again.servers[2]->in_flight), 1);
    CU_ASSERT_EQUAL(atomic_load(&again.servers[2]->answers[1]), 1);
    gw_backend_finish(server(2), true, false);
    gw_backend_set_free(&again);
    free_route();
}

/* Two routes naming one shared upstream get the same servers, under its name; a third with
 * its own upstream of the same URLs gets its own. */
static void test_registry_shares_named_upstreams(void)
{
    static const uint32_t weights[] = {1, 1};
    struct config_route named, other;
    struct gw_backend_set first, second, own;

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    named = fx.route;
    named.upstream.name = "backend";
    other = named;
    other.name = "writes";
    CU_ASSERT_EQUAL_FATAL(gw_backend_set_init(&first, fx.backends, &named), 0);
    CU_ASSERT_EQUAL_FATAL(gw_backend_set_init(&second, fx.backends, &other), 0);
    other.upstream.name = NULL;
    CU_ASSERT_EQUAL_FATAL(gw_backend_set_init(&own, fx.backends, &other), 0);
    for (size_t i = 0; i < 2; i++) {
        CU_ASSERT_PTR_EQUAL(second.servers[i], first.servers[i]);
        CU_ASSERT_PTR_NOT_EQUAL(own.servers[i], first.servers[i]);
        CU_ASSERT_PTR_NOT_EQUAL(server(i), first.servers[i]); /* the route api's own */
        CU_ASSERT_STRING_EQUAL(first.servers[i]->owner, "backend");
        CU_ASSERT_TRUE(first.servers[i]->shared);
        CU_ASSERT_STRING_EQUAL(gw_backend_owner_kind(first.servers[i]), "upstream");
        CU_ASSERT_STRING_EQUAL(own.servers[i]->owner, "writes");
    }
    /* Failures seen through one route skip the server for the other, not for the route whose
     * own upstream has the same URL. */
    for (int k = 0; k < 3; k++)
        gw_backend_report(first.servers[0], &named, GW_FAULT_REFUSED, 0, T0 + k, false);
    CU_ASSERT_FALSE(gw_backend_healthy(second.servers[0], T0 + 4));
    CU_ASSERT_TRUE(gw_backend_healthy(own.servers[0], T0 + 4));
    gw_backend_set_free(&first);
    gw_backend_set_free(&second);
    gw_backend_set_free(&own);
    free_route();
}

/* --- metrics samples ------------------------------------------------------------------ */

/* One sample line: `name{route="..",server="..",status_class=".."} value`. */
struct sample {
    char name[64], route[32], server[64], status_class[16];
    long long value;
};

/* Reads the value of label `key` from `labels` (the text between the braces) into `out`;
 * "" when absent. */
static void label_value(const char *labels, const char *key, char *out, size_t size)
{
    char pattern[40];
    const char *at, *end;

    out[0] = '\0';
    snprintf(pattern, sizeof pattern, "%s=\"", key);
    at = strstr(labels, pattern);
    while (at != NULL && at != labels && at[-1] != ',') /* not the tail of another name */
        at = strstr(at + 1, pattern);
    if (at == NULL)
        return;
    at += strlen(pattern);
    end = strchr(at, '"');
    if (end == NULL || (size_t)(end - at) >= size)
        return;
    memcpy(out, at, (size_t)(end - at));
    out[end - at] = '\0';
}

/* Parses the lines of `text` into `samples` (at most `max`); how many, or -1 for a line that
 * is not a sample. */
static int parse_samples(char *text, struct sample *samples, int max)
{
    int n = 0;

    for (char *line = text; *line != '\0' && n < max; n++) {
        char *newline = strchr(line, '\n'), *open = strchr(line, '{'), *close, *end;
        struct sample *s = &samples[n];

        if (newline == NULL || open == NULL || open > newline)
            return -1;
        *newline = '\0';
        close = strchr(open, '}');
        if (close == NULL || close[1] != ' ' || (size_t)(open - line) >= sizeof s->name)
            return -1;
        memcpy(s->name, line, (size_t)(open - line));
        s->name[open - line] = '\0';
        *close = '\0';
        label_value(open + 1, "route", s->route, sizeof s->route);
        label_value(open + 1, "server", s->server, sizeof s->server);
        label_value(open + 1, "status_class", s->status_class, sizeof s->status_class);
        s->value = strtoll(close + 2, &end, 10);
        if (end == close + 2 || *end != '\0')
            return -1;
        line = newline + 1;
    }
    return n;
}

/* The samples of `family` at `now_ns`, parsed; how many. */
static int render(enum gw_backend_family family, int64_t now_ns, struct sample *samples, int max)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    int n;

    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    gw_backend_set_render(&fx.set, out, family, now_ns);
    fclose(out);
    n = parse_samples(text, samples, max);
    free(text);
    return n;
}

static void test_render_samples(void)
{
    static const uint32_t weights[] = {1, 1};
    static const char *const classes[GW_STATUS_CLASSES] = {"1xx", "2xx", "3xx",
                                                           "4xx", "5xx", "error"};
    static const long long answers[2][GW_STATUS_CLASSES] = {{1, 2, 0, 1, 1, 1}, {0, 0, 0, 0, 0, 3}};
    struct sample samples[16];
    int64_t now = T0 + 10;

    make_route(CONFIG_BALANCE_ROUND_ROBIN, weights, 2);
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 101, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 200, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 204, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 404, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_NONE, 503, T0, false));
    CU_ASSERT_FALSE(gw_backend_report(server(0), &fx.route, GW_FAULT_TIMEOUT, 0, T0, false));
    CU_ASSERT_TRUE(refuse(1, 3, T0, 1));
    gw_backend_begin(server(0));
    gw_backend_begin(server(0));

    CU_ASSERT_EQUAL_FATAL(render(GW_FAMILY_REQUESTS, now, samples, 16), 2 * GW_STATUS_CLASSES);
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < GW_STATUS_CLASSES; c++) {
            const struct sample *s = &samples[i * GW_STATUS_CLASSES + c];

            CU_ASSERT_STRING_EQUAL(s->name, "sluice_upstream_requests_total");
            CU_ASSERT_STRING_EQUAL(s->route, "api");
            CU_ASSERT_STRING_EQUAL(s->server, fx.urls[i]);
            CU_ASSERT_STRING_EQUAL(s->status_class, classes[c]);
            CU_ASSERT_EQUAL(s->value, answers[i][c]);
        }

    CU_ASSERT_EQUAL_FATAL(render(GW_FAMILY_HEALTHY, now, samples, 16), 2);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_STRING_EQUAL(samples[i].name, "sluice_upstream_healthy");
        CU_ASSERT_STRING_EQUAL(samples[i].route, "api");
        CU_ASSERT_STRING_EQUAL(samples[i].server, fx.urls[i]);
        CU_ASSERT_STRING_EQUAL(samples[i].status_class, "");
    }
    CU_ASSERT_EQUAL(samples[0].value, 1);
    CU_ASSERT_EQUAL(samples[1].value, 0);
    /* Due its probe, it counts as healthy again. */
    CU_ASSERT_EQUAL_FATAL(render(GW_FAMILY_HEALTHY, T0 + 2 + SECOND_NS, samples, 16), 2);
    CU_ASSERT_EQUAL(samples[1].value, 1);

    CU_ASSERT_EQUAL_FATAL(render(GW_FAMILY_INFLIGHT, now, samples, 16), 2);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_STRING_EQUAL(samples[i].name, "sluice_upstream_inflight");
        CU_ASSERT_STRING_EQUAL(samples[i].route, "api");
        CU_ASSERT_STRING_EQUAL(samples[i].server, fx.urls[i]);
    }
    CU_ASSERT_EQUAL(samples[0].value, 2);
    CU_ASSERT_EQUAL(samples[1].value, 0);
    gw_backend_finish(server(0), true, false);
    gw_backend_finish(server(0), true, false);
    free_route();
}

void register_backends_tests(void)
{
    CU_pSuite s = add_suite("gateway_backends");

    add_test(s, "round robin: smooth weights 5,1,1 give a a b a c a a",
             test_round_robin_smooth_weights);
    add_test(s, "round robin: a cycle is the weights over their gcd",
             test_round_robin_cycle_counts);
    add_test(s, "round robin: equal weights rotate", test_round_robin_equal_weights_rotate);
    add_test(s, "round robin: a skipped server's turns are shared by weight",
             test_round_robin_skipped_turns_are_shared);
    add_test(s, "tried servers are skipped while others are healthy",
             test_tried_servers_are_skipped);
    add_test(s, "least_request avoids the busy server", test_least_request_avoids_the_busy_server);
    add_test(s, "least_request weighs in-flight by weight", test_least_request_weighs_load);
    add_test(s, "random_two follows weight", test_random_two_follows_weight);
    add_test(s, "max_fails failures skip a server", test_failures_skip_a_server);
    add_test(s, "failures spread beyond fail_window do not add up",
             test_failures_spread_out_do_not_add_up);
    add_test(s, "one probe after fail_timeout, success puts it back",
             test_one_probe_after_fail_timeout);
    add_test(s, "a failed probe skips it again", test_failed_probe_skips_again);
    add_test(s, "an abandoned probe lets the next request probe",
             test_abandoned_probe_lets_the_next_request_probe);
    add_test(s, "one server alone is skipped and probed too", test_one_server_is_probed_too);
    add_test(s, "statuses count when fail_on names them",
             test_statuses_count_when_fail_on_names_them);
    add_test(s, "max_fails 0 never skips", test_max_fails_zero_never_skips);
    add_test(s, "panic: the least recently failed", test_panic_picks_the_least_recently_failed);
    add_test(s, "active health flag", test_active_health_flag);
    add_test(s, "fault classes", test_fault_classes);
    add_test(s, "fault names", test_fault_names);
    add_test(s, "failures are logged once a second", test_failures_logged_once_a_second);
    add_test(s, "retry budget", test_retry_budget);
    add_test(s, "the registry keeps state across reloads",
             test_registry_keeps_state_across_reloads);
    add_test(s, "registry: routes naming one upstream share its servers",
             test_registry_shares_named_upstreams);
    add_test(s, "metrics samples", test_render_samples);
}
