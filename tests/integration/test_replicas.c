/* limiter.replicas: auto (gateway/store/store_replicas.h): replicas on one real Redis count
 * one another as they come and go (1, 2, then 3 started, one stopped), and while Redis is
 * down each limits alone on the share of the count it last saw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

/* fixed_window 30 an hour per API key; on_store_error local, with the count of replicas. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  replicas: auto\n  on_store_error: local\n"
    "  redis: {address: \"127.0.0.1:%2$u\", timeout: 100ms}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {name: hourly, algorithm: fixed_window, requests: 30, per: 1h}\n";

/* Waits up to `ms` for every one of the `n` gateways to count `want` replicas. */
static bool all_count(const struct proc *gws, int n, double want, int ms)
{
    for (int waited = 0; waited <= ms; waited += 100) {
        bool all = true;

        for (int i = 0; i < n; i++)
            all = all && metric_now(&gws[i], "sluice_store_replicas") == want;
        if (all)
            return true;
        sleep_ms(100);
    }
    return false;
}

/* Members of the set of replicas in Redis (0 when it is not there). */
static long replicas_in_redis(void)
{
    char command[128], out[64];

    snprintf(command, sizeof command, "redis-cli -p %u ZCARD sluice:replicas", suite_redis.port);
    return run_command(command, out, sizeof out) == 0 ? strtol(out, NULL, 10) : -1;
}

/* How many of `n` requests with `key` gateway `gw` passes. */
static int passes(const struct proc *gw, const char *key, int n)
{
    int passed = 0;

    for (int i = 0; i < n; i++)
        passed += get_status(gw->port, "/x", key) == 200;
    return passed;
}

static void test_replicas_counted_as_they_come_and_go(void)
{
    struct proc gws[3];

    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(start_sluice(&gws[i], config, upstream.port, suite_redis.port), 0);
        check_case(all_count(gws, i + 1, i + 1, 5000), "started", "%d replicas did not count %d",
                   i + 1, i + 1);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gws[2], 5000), 0);
    check_case(all_count(gws, 2, 2, 6000), "one stopped", "the two left did not count 2");
    /* Shared while Redis answers: the fleet passes 30, whichever replica is asked. */
    CU_ASSERT_EQUAL(passes(&gws[0], "shared", 20) + passes(&gws[1], "shared", 20), 30);
    /* Redis down: each passes its share of the 2 it last counted, 30 / 2. */
    stop_redis(&suite_redis);
    CU_ASSERT_EQUAL(passes(&gws[0], "alone", 20), 15);
    CU_ASSERT_EQUAL(passes(&gws[1], "alone", 20), 15);
    CU_ASSERT_EQUAL(metric_now(&gws[0], "sluice_store_replicas"), 2); /* kept while down */
    CU_ASSERT_EQUAL(start_redis(&suite_redis), 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(stop_sluice(&gws[i], 5000), 0);
}

/* Without auto the count is not kept (0), and the fallback divides by the number given. */
static void test_a_number_is_not_counted(void)
{
    static const char fixed[] =
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
        "limiter:\n  store: redis\n  replicas: 3\n  on_store_error: local\n"
        "  redis: {address: \"127.0.0.1:%2$u\", timeout: 100ms}\n"
        "routes:\n"
        "  - name: api\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    limit: {name: hourly, algorithm: fixed_window, requests: 30, per: 1h}\n";
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, fixed, upstream.port, suite_redis.port), 0);
    sleep_ms(1500);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_replicas"), 0);
    CU_ASSERT_EQUAL(replicas_in_redis(), 0);
    stop_redis(&suite_redis);
    CU_ASSERT_EQUAL(passes(&gw, "fixed", 20), 10); /* 30 / 3 */
    CU_ASSERT_EQUAL(start_redis(&suite_redis), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_replicas_tests(void)
{
    CU_pSuite s = add_suite_with("replicas auto", redis_suite_init, redis_suite_clean);

    add_test(s, "replicas count one another as they come and go",
             test_replicas_counted_as_they_come_and_go);
    add_test(s, "a number of replicas is not counted", test_a_number_is_not_counted);
}
