#include <stdlib.h>

#include "gateway/limits/decide.h"
#include "tests/unit.h"

#define SECOND INT64_C(1000000000)
#define NOW    (INT64_C(1764756000) * SECOND)

static struct config_cost post_costs_5[] = {{.method = "POST", .units = 5}};

/* A route keyed by X-API-Key: "per_key" counts under it, "per_ip" under the address, and
 * "writes" (the route's key too) takes 5 units of a POST and 2 of anything else. route_key
 * is as config_load() marks it. */
static struct config_limit own_limits[] = {
    {.name = "per_key", .key_kind = CONFIG_KEY_HEADER, .key_name = "X-API-Key", .route_key = true},
    {.name = "per_ip", .key_kind = CONFIG_KEY_IP, .key_set = true},
    {.name = "writes",
     .key_kind = CONFIG_KEY_HEADER,
     .key_name = "X-API-Key",
     .route_key = true,
     .costs = post_costs_5,
     .n_costs = 1,
     .default_cost = 2},
};
static struct config_limit free_limits[] = {
    {.name = "minute", .key_kind = CONFIG_KEY_HEADER, .key_name = "X-API-Key", .route_key = true}};
static struct config_limit gold_limits[] = {
    {.name = "minute", .key_kind = CONFIG_KEY_HEADER, .key_name = "X-API-Key", .route_key = true},
    {.name = "per_ip", .key_kind = CONFIG_KEY_IP, .key_set = true}};
static struct config_plan plans[] = {
    {.name = "free", .limits = free_limits, .n_limits = 1},
    {.name = "gold", .limits = gold_limits, .n_limits = 2},
};

static struct config_route route(bool consumers, enum config_unknown_key unknown, int anonymous)
{
    return (struct config_route){.name = "api",
                                 .key_kind = CONFIG_KEY_HEADER,
                                 .key_name = "X-API-Key",
                                 .limits = own_limits,
                                 .n_limits = 3,
                                 .plans = consumers ? plans : NULL,
                                 .n_plans = consumers ? 2 : 0,
                                 .identifies_consumers = consumers,
                                 .unknown_key = unknown,
                                 .anonymous_plan = anonymous};
}

static void test_select_own_keys_and_costs(void)
{
    struct config_route r = route(false, CONFIG_UNKNOWN_KEY_ANONYMOUS, -1);
    struct gw_limits_selection sel;

    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&r, NULL, false, "POST", &sel), 0);
    CU_ASSERT_EQUAL(sel.plan, GW_LIMITS_OWN);
    CU_ASSERT_PTR_EQUAL(sel.limits, own_limits);
    CU_ASSERT_EQUAL_FATAL(sel.n_limits, 3);
    CU_ASSERT_TRUE(sel.route_key[0]);
    CU_ASSERT_FALSE(sel.route_key[1]); /* its own key: the address */
    CU_ASSERT_TRUE(sel.route_key[2]);
    CU_ASSERT_EQUAL(sel.costs[0], 1);
    CU_ASSERT_EQUAL(sel.costs[1], 1);
    CU_ASSERT_EQUAL(sel.costs[2], 5);
    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&r, NULL, false, "GET", &sel), 0);
    CU_ASSERT_EQUAL(sel.costs[2], 2); /* default: 2 */
}

static void test_key_sources(void)
{
    struct config_route own = route(false, CONFIG_UNKNOWN_KEY_ANONYMOUS, -1);
    struct config_route consumers = route(true, CONFIG_UNKNOWN_KEY_ANONYMOUS, -1);
    char source[GW_KEY_SOURCE_LEN];

    gw_limits_key_source(&own, &own_limits[0], source);
    CU_ASSERT_STRING_EQUAL(source, "header:x-api-key");
    gw_limits_key_source(&own, &own_limits[1], source);
    CU_ASSERT_STRING_EQUAL(source, "ip");
    gw_limits_key_source(&consumers, &gold_limits[0], source);
    CU_ASSERT_STRING_EQUAL(source, "consumer");
    gw_limits_key_source(&consumers, &gold_limits[1], source);
    CU_ASSERT_STRING_EQUAL(source, "ip");
}

static void test_select_consumer_plan(void)
{
    struct config_route r = route(true, CONFIG_UNKNOWN_KEY_ANONYMOUS, -1);
    struct gw_consumer alice = {.name = "alice", .plan = 1};
    struct gw_limits_selection sel;

    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&r, &alice, false, "GET", &sel), 0);
    CU_ASSERT_EQUAL(sel.plan, 1);
    CU_ASSERT_PTR_EQUAL(sel.limits, gold_limits);
    CU_ASSERT_EQUAL_FATAL(sel.n_limits, 2);
    CU_ASSERT_TRUE(sel.route_key[0]); /* the consumer's name */
    CU_ASSERT_FALSE(sel.route_key[1]);
    CU_ASSERT_EQUAL(sel.costs[0], 1);
}

static void test_select_unknown_key(void)
{
    struct config_route anonymous = route(true, CONFIG_UNKNOWN_KEY_ANONYMOUS, 0);
    struct config_route own = route(true, CONFIG_UNKNOWN_KEY_ANONYMOUS, -1);
    struct config_route reject = route(true, CONFIG_UNKNOWN_KEY_REJECT, -1);
    struct gw_consumer alice = {.name = "alice", .plan = 1};
    struct gw_limits_selection sel;

    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&anonymous, NULL, false, "GET", &sel), 0);
    CU_ASSERT_EQUAL(sel.plan, 0);
    CU_ASSERT_PTR_EQUAL(sel.limits, free_limits);
    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&own, NULL, false, "GET", &sel), 0);
    CU_ASSERT_EQUAL(sel.plan, GW_LIMITS_OWN);
    CU_ASSERT_EQUAL(sel.n_limits, 3);
    CU_ASSERT_EQUAL(gw_limits_select(&reject, NULL, false, "GET", &sel), -1);
    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&reject, NULL, true, "GET", &sel), 0); /* exempt */
    CU_ASSERT_EQUAL(sel.plan, GW_LIMITS_OWN);
    CU_ASSERT_EQUAL_FATAL(gw_limits_select(&reject, &alice, false, "GET", &sel), 0);
    CU_ASSERT_EQUAL(sel.plan, 1);
}

/* Two limits of one request each: "burst" back after a second, "daily" after a day. */
static void two_limiters(struct limiter *limiters[2], struct gw_limits_selection *sel)
{
    static struct config_limit limits[2] = {{.name = "burst"}, {.name = "daily"}};
    struct limiter_params burst = {.algorithm = "fixed_window", .requests = 1, .per_ns = SECOND};
    struct limiter_params daily = {
        .algorithm = "fixed_window", .requests = 1, .per_ns = 86400 * SECOND};
    char err[LIMITER_ERR_LEN];

    limits[0].params = burst;
    limits[1].params = daily;
    limiters[0] = limiter_create(&burst, err);
    limiters[1] = limiter_create(&daily, err);
    *sel = (struct gw_limits_selection){
        .plan = GW_LIMITS_OWN, .limits = limits, .n_limits = 2, .costs = {1, 1}};
}

static void test_local_longest_wait_binds(void)
{
    struct limiter *limiters[2], *reversed[2];
    struct gw_limits_selection sel;
    struct gw_limits_decision d = {0};
    const char *ids[2] = {"ip:192.0.2.1", "ip:192.0.2.1"};

    two_limiters(limiters, &sel);
    CU_ASSERT_PTR_NOT_NULL_FATAL(limiters[0]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(limiters[1]);
    CU_ASSERT_EQUAL(gw_limits_decide_local(&d, limiters, ids, &sel, NOW), GW_LIMITS_ALLOWED);
    CU_ASSERT_EQUAL(d.decided_ns, NOW);
    CU_ASSERT_EQUAL(gw_limits_decide_local(&d, limiters, ids, &sel, NOW + 1), GW_LIMITS_DENIED);
    CU_ASSERT_FALSE(d.each[0].allowed);
    CU_ASSERT_FALSE(d.each[1].allowed);
    CU_ASSERT_EQUAL(d.binding, 1); /* daily: a retry after burst's second would be refused */
    /* The same, listed the other way round: the wait binds, not the place. */
    reversed[0] = limiters[1];
    reversed[1] = limiters[0];
    CU_ASSERT_EQUAL(gw_limits_decide_local(&d, reversed, ids, &sel, NOW + 2), GW_LIMITS_DENIED);
    CU_ASSERT_EQUAL(d.binding, 0);
    CU_ASSERT_TRUE(d.each[0].retry_after_ms > d.each[1].retry_after_ms);
    limiter_free(limiters[0]);
    limiter_free(limiters[1]);
}

static void test_local_fewest_left_binds(void)
{
    struct limiter *limiters[2];
    struct gw_limits_selection sel;
    struct gw_limits_decision d = {0};
    const char *ids[2] = {"ip:192.0.2.1", "ip:192.0.2.2"};
    struct limiter_params roomy = {.algorithm = "fixed_window", .requests = 10, .per_ns = SECOND};
    char err[LIMITER_ERR_LEN];

    two_limiters(limiters, &sel);
    limiter_free(limiters[0]);
    limiters[0] = limiter_create(&roomy, err);
    CU_ASSERT_EQUAL(gw_limits_decide_local(&d, limiters, ids, &sel, NOW), GW_LIMITS_ALLOWED);
    CU_ASSERT_EQUAL(d.binding, 1); /* daily has none left, burst 9 */
    /* A cost above what a limit lets through at once cannot be decided: refused uncounted. */
    sel.costs[1] = 2;
    CU_ASSERT_EQUAL(gw_limits_decide_local(&d, limiters, ids, &sel, NOW), GW_LIMITS_FAILED_CLOSED);
    limiter_free(limiters[0]);
    limiter_free(limiters[1]);
}

static void test_shared_answer(void)
{
    struct limiter *limiters[2];
    struct gw_limits_selection sel;
    struct gw_limits_decision d = {.decided_ns = 0};
    const char *ids[2] = {"ip:192.0.2.1", "ip:192.0.2.1"};

    two_limiters(limiters, &sel);
    d.each[0] = (struct limiter_decision){.allowed = false, .retry_after_ms = 400};
    d.each[1] = (struct limiter_decision){.allowed = false, .retry_after_ms = 5 * 3600 * 1000};
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_OK, CONFIG_ON_STORE_ERROR_LOCAL, limiters,
                                            ids, &sel, NOW),
                    GW_LIMITS_DENIED);
    CU_ASSERT_EQUAL(d.binding, 1);
    CU_ASSERT_EQUAL(d.decided_ns, NOW); /* when the store's answer came */
    d.each[0].allowed = d.each[1].allowed = true;
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_OK, CONFIG_ON_STORE_ERROR_LOCAL, limiters,
                                            ids, &sel, NOW),
                    GW_LIMITS_ALLOWED);
    limiter_free(limiters[0]);
    limiter_free(limiters[1]);
}

static void test_on_store_error(void)
{
    struct limiter *limiters[2];
    struct gw_limits_selection sel;
    struct gw_limits_decision d = {0};
    const char *ids[2] = {"ip:192.0.2.1", "ip:192.0.2.1"};

    two_limiters(limiters, &sel);
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_FAILED, CONFIG_ON_STORE_ERROR_ALLOW,
                                            limiters, ids, &sel, NOW),
                    GW_LIMITS_FAILED_OPEN);
    CU_ASSERT_EQUAL(d.decided_ns, 0);
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_FAILED, CONFIG_ON_STORE_ERROR_DENY,
                                            limiters, ids, &sel, NOW),
                    GW_LIMITS_FAILED_CLOSED);
    CU_ASSERT_EQUAL(d.binding, 0);
    CU_ASSERT_FALSE(d.each[0].allowed);
    CU_ASSERT_EQUAL(d.each[0].limit, 1);
    CU_ASSERT_EQUAL(d.each[0].retry_after_ms, 1000);
    CU_ASSERT_EQUAL(d.decided_ns, 0);
    /* local: this process's limiters decide, the first request allowed, the next not. */
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_FAILED, CONFIG_ON_STORE_ERROR_LOCAL,
                                            limiters, ids, &sel, NOW),
                    GW_LIMITS_ALLOWED);
    CU_ASSERT_EQUAL(d.decided_ns, NOW);
    CU_ASSERT_EQUAL(gw_limits_decide_shared(&d, GW_STORE_FAILED, CONFIG_ON_STORE_ERROR_LOCAL,
                                            limiters, ids, &sel, NOW + 1),
                    GW_LIMITS_DENIED);
    CU_ASSERT_EQUAL(d.binding, 1);
    limiter_free(limiters[0]);
    limiter_free(limiters[1]);
}

static void test_params(void)
{
    struct config config = {.replicas = 3, .max_clients = 5000};
    struct config_limit bucket = {.name = "b",
                                  .params = {.algorithm = "token_bucket",
                                             .algorithm_id = LIMITER_TOKEN_BUCKET,
                                             .requests = 100,
                                             .per_ns = 60 * SECOND,
                                             .burst = 20}};
    struct config_limit unset = {
        .name = "u",
        .params = {
            .algorithm = "gcra", .algorithm_id = LIMITER_GCRA, .requests = 2, .per_ns = SECOND}};
    struct config_limit window = {.name = "w",
                                  .params = {.algorithm = "fixed_window",
                                             .algorithm_id = LIMITER_FIXED_WINDOW,
                                             .requests = 10,
                                             .per_ns = SECOND}};
    struct limiter_params p;

    p = gw_limits_store_params(&bucket);
    CU_ASSERT_EQUAL(p.requests, 100);
    CU_ASSERT_EQUAL(p.burst, 20);
    p = gw_limits_store_params(&unset);
    CU_ASSERT_EQUAL(p.burst, 2); /* a bucket's burst defaults to its requests */
    p = gw_limits_store_params(&window);
    CU_ASSERT_EQUAL(p.burst, 0); /* a window has none */
    p = gw_limits_local_params(&config, &bucket, false);
    CU_ASSERT_EQUAL(p.requests, 100);
    CU_ASSERT_EQUAL(p.burst, 20);
    CU_ASSERT_EQUAL(p.max_clients, 5000);
    p = gw_limits_local_params(&config, &bucket, true); /* this replica's third */
    CU_ASSERT_EQUAL(p.requests, 33);
    CU_ASSERT_EQUAL(p.burst, 6);
    CU_ASSERT_EQUAL(p.max_clients, 5000);
    p = gw_limits_local_params(&config, &unset, true); /* never below one */
    CU_ASSERT_EQUAL(p.requests, 1);
    CU_ASSERT_EQUAL(p.burst, 1);
    p = gw_limits_local_params(&config, &window, true);
    CU_ASSERT_EQUAL(p.requests, 3);
    CU_ASSERT_EQUAL(p.burst, 0);
}

/* replicas: auto: the fallback holds each whole quota and charges a request its cost times
 * the replicas alive, so each replica passes its share, at least one. */
static void test_share_by_live_replicas(void)
{
    struct config config = {.replicas = 1, .replicas_auto = true, .max_clients = 100};
    struct config_limit window = {.name = "w",
                                  .params = {.algorithm = "fixed_window",
                                             .algorithm_id = LIMITER_FIXED_WINDOW,
                                             .requests = 30,
                                             .per_ns = SECOND}};
    struct limiter_params p = gw_limits_local_params(&config, &window, true);
    struct gw_limits_selection sel = {.limits = &window, .n_limits = 1, .costs = {1}};
    struct limiter_decision d[1];
    char err[LIMITER_ERR_LEN];
    struct limiter *l;
    int passed = 0;

    CU_ASSERT_EQUAL(p.requests, 30); /* whole: shared by cost */
    l = limiter_create(&p, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    gw_limits_share(&sel, &l, 1);
    CU_ASSERT_EQUAL(sel.costs[0], 1);
    gw_limits_share(&sel, &l, 3);
    CU_ASSERT_EQUAL(sel.costs[0], 3);
    for (int i = 0; i < 20; i++)
        passed +=
            limiter_decide_all_cost(&l, 1, (const char *const[]){"c"}, sel.costs, SECOND, d) == 0 &&
            d[0].allowed;
    CU_ASSERT_EQUAL(passed, 10); /* 30 / 3 */
    sel.costs[0] = 1;
    gw_limits_share(&sel, &l, 40); /* more replicas than the quota: one each, the whole quota */
    CU_ASSERT_EQUAL(sel.costs[0], 30);
    limiter_free(l);
}

void register_decide_tests(void)
{
    CU_pSuite s = add_suite("gateway_decide");

    add_test(s, "a route's own limits: each one's key and cost", test_select_own_keys_and_costs);
    add_test(s, "each limit's key source, as the access log names it", test_key_sources);
    add_test(s, "a consumer's plan, its limits on the consumer's name", test_select_consumer_plan);
    add_test(s, "an unknown key: anonymous plan, own limits, or 401 unless exempt",
             test_select_unknown_key);
    add_test(s, "two refuse: the longest wait binds", test_local_longest_wait_binds);
    add_test(s, "allowed: the fewest left binds; an undecidable cost fails closed",
             test_local_fewest_left_binds);
    add_test(s, "the shared store's answer", test_shared_answer);
    add_test(s, "on_store_error: allow, deny, local", test_on_store_error);
    add_test(s, "a limit as the store runs it, and as this replica does", test_params);
    add_test(s, "replicas: auto shares each quota by the replicas alive",
             test_share_by_live_replicas);
}
