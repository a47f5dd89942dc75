/* The shared store against a real redis-server started here: one count across replicas, the
 * same semantics as the memory store, falling back when Redis dies or stalls, and coming
 * back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static struct redis redis;

static int init(void)
{
    return start_redis(&redis);
}

static int clean(void)
{
    stop_redis(&redis);
    return 0;
}

/* Two routes per algorithm, one in Redis and one in memory, same limit. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  redis: {address: \"127.0.0.1:%2$u\", timeout: %3$s}\n  replicas: 2\n"
    "routes:\n"
    "  - name: race\n    match: {path_prefix: /race/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: \"header:X-API-Key\"\n    store: redis\n"
    "    limit: {algorithm: gcra, requests: 50, per: 1h}\n"
    "  - name: bucket\n    match: {path_prefix: /r/token_bucket/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
    "    limit: {algorithm: token_bucket, requests: 2, per: 1s}\n"
    "  - name: bucket-mem\n    match: {path_prefix: /m/token_bucket/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: token_bucket, requests: 2, per: 1s}\n"
    "  - name: gcra\n    match: {path_prefix: /r/gcra/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    store: redis\n    limit: {algorithm: gcra, requests: 2, per: 1s}\n"
    "  - name: gcra-mem\n    match: {path_prefix: /m/gcra/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit: {algorithm: gcra, requests: 2, per: 1s}\n"
    "  - name: fixed\n    match: {path_prefix: /r/fixed_window/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: fixed-mem\n    match: {path_prefix: /m/fixed_window/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: log\n    match: {path_prefix: /r/sliding_window_log/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
    "    limit: {algorithm: sliding_window_log, requests: 3, per: 2s}\n"
    "  - name: log-mem\n    match: {path_prefix: /m/sliding_window_log/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: sliding_window_log, requests: 3, per: 2s}\n"
    "  - name: counter\n    match: {path_prefix: /r/sliding_window_counter/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
    "    limit: {algorithm: sliding_window_counter, requests: 3, per: 1h}\n"
    "  - name: counter-mem\n    match: {path_prefix: /m/sliding_window_counter/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: sliding_window_counter, requests: 3, per: 1h}\n"
    "  - name: probe\n    match: {path_prefix: /probe/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    store: redis\n    limit: {algorithm: fixed_window, requests: 1000000, per: 1h}\n"
    "  - name: stall\n    match: {path_prefix: /stall/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    store: redis\n    limit: {algorithm: fixed_window, requests: 4, per: 1h}\n"
    /* Per API key and per address on one route, in Redis and in memory. */
    "  - name: rotate\n    match: {path_prefix: /r/rotate/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n    key: \"header:X-API-Key\"\n"
    "    limit:\n"
    "      - {name: per_key, algorithm: token_bucket, requests: 5, per: 1h}\n"
    "      - {name: per_ip, algorithm: gcra, requests: 3, per: 1h, key: ip}\n"
    "  - name: rotate-mem\n    match: {path_prefix: /m/rotate/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit:\n"
    "      - {name: per_key, algorithm: token_bucket, requests: 5, per: 1h}\n"
    "      - {name: per_ip, algorithm: gcra, requests: 3, per: 1h, key: ip}\n"
    "  - name: own\n    match: {path_prefix: /r/own/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n    key: \"header:X-API-Key\"\n"
    "    limit:\n"
    "      - {name: per_key, algorithm: token_bucket, requests: 2, per: 1h}\n"
    "      - {name: per_ip, algorithm: gcra, requests: 3, per: 1h, key: ip}\n"
    "  - name: own-mem\n    match: {path_prefix: /m/own/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit:\n"
    "      - {name: per_key, algorithm: token_bucket, requests: 2, per: 1h}\n"
    "      - {name: per_ip, algorithm: gcra, requests: 3, per: 1h, key: ip}\n";

static int start_gateway(struct proc *gw, const char *timeout)
{
    return start_sluice(gw, config, upstream.port, redis.port, timeout);
}

/* Two replicas, one Redis: 100 racing requests for a quota of 50 pass exactly 50. */
static void test_two_replicas_share_one_count(void)
{
    struct proc a, b;
    unsigned ports[2];
    int other;

    CU_ASSERT_EQUAL_FATAL(start_gateway(&a, "1s"), 0);
    CU_ASSERT_EQUAL_FATAL(start_gateway(&b, "1s"), 0);
    ports[0] = a.port;
    ports[1] = b.port;
    CU_ASSERT_EQUAL(race_requests(ports, 2, 100, "/race/x", "shared-key", &other), 50);
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT_EQUAL(metric(&a, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&a, 5000), 0);
    CU_ASSERT_EQUAL(stop_sluice(&b, 5000), 0);
}

static long get(const struct proc *gw, const char *target, long *retry_after)
{
    struct reply r;
    long status;
    const char *field;

    http(gw->port, "GET", target, NULL, NULL, &r);
    status = r.status;
    field = header(&r, "Retry-After");
    if (retry_after != NULL)
        *retry_after = field ? atol(field) : 0;
    reply_free(&r);
    return status;
}

/* The same requests through a route in Redis and its twin in memory get the same answers. */
static void test_same_semantics_as_memory(void)
{
    static const char *const algorithms[] = {"token_bucket", "gcra", "fixed_window",
                                             "sliding_window_log", "sliding_window_counter"};
    struct proc gw;
    char in_redis[64], in_memory[64];

    CU_ASSERT_EQUAL_FATAL(start_gateway(&gw, "1s"), 0);
    for (int a = 0; a < 5; a++) {
        long retry_redis = 0, retry_memory = 0;

        snprintf(in_redis, sizeof in_redis, "/r/%s/x", algorithms[a]);
        snprintf(in_memory, sizeof in_memory, "/m/%s/x", algorithms[a]);
        for (int i = 0; i < 5; i++) {
            long shared = get(&gw, in_redis, &retry_redis);
            long local = get(&gw, in_memory, &retry_memory);

            if (shared != local)
                fprintf(stderr, "\n%s request %d: redis %ld, memory %ld\n", algorithms[a], i,
                        shared, local);
            CU_ASSERT_EQUAL(shared, local);
        }
        CU_ASSERT_TRUE(retry_redis >= 1);
        CU_ASSERT_TRUE(labs(retry_redis - retry_memory) <= 1);
    }
    /* Refill over time: the buckets give one back after half a second. */
    sleep_ms(600);
    CU_ASSERT_EQUAL(get(&gw, "/r/token_bucket/x", NULL), 200);
    CU_ASSERT_EQUAL(get(&gw, "/m/token_bucket/x", NULL), 200);
    CU_ASSERT_EQUAL(get(&gw, "/r/token_bucket/x", NULL), 429);
    CU_ASSERT_EQUAL(get(&gw, "/m/token_bucket/x", NULL), 429);
    /* The log's window slides: after its 2 s the first requests have left it. */
    sleep_ms(1500);
    CU_ASSERT_EQUAL(get(&gw, "/r/sliding_window_log/x", NULL), 200);
    CU_ASSERT_EQUAL(get(&gw, "/m/sliding_window_log/x", NULL), 200);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Each limit counts under its own key, in Redis as in memory. A client rotating API keys from
 * one address is held by the address limit (3) though no key reaches its own (5); and a key
 * spent under the key limit is refused without charging the address. */
static void test_each_limit_its_own_key(void)
{
    static const char *const stores[] = {"r", "m"};
    struct proc gw;
    char target[64], key[32];

    CU_ASSERT_EQUAL_FATAL(start_gateway(&gw, "1s"), 0);
    for (int s = 0; s < 2; s++) {
        int passed = 0;

        snprintf(target, sizeof target, "/%s/rotate/x", stores[s]);
        for (int i = 0; i < 10; i++) {
            snprintf(key, sizeof key, "rotated-%d", i);
            passed += get_status(gw.port, target, key) == 200;
        }
        CU_ASSERT_EQUAL(passed, 3);

        snprintf(target, sizeof target, "/%s/own/x", stores[s]);
        CU_ASSERT_EQUAL(get_status(gw.port, target, "a"), 200);
        CU_ASSERT_EQUAL(get_status(gw.port, target, "a"), 200);
        CU_ASSERT_EQUAL(get_status(gw.port, target, "a"), 429); /* per_key; per_ip not charged */
        CU_ASSERT_EQUAL(get_status(gw.port, target, "b"), 200); /* per_ip's third */
        CU_ASSERT_EQUAL(get_status(gw.port, target, "c"), 429); /* per_ip */
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Redis killed mid-run: requests go on, limited locally with the quota split between the two
 * replicas; Redis back: the count is shared again. */
static void test_redis_dies_and_returns(void)
{
    struct proc a, b;
    unsigned ports[2];
    int other, passed = 0;

    CU_ASSERT_EQUAL_FATAL(start_gateway(&a, "1s"), 0);
    CU_ASSERT_EQUAL_FATAL(start_gateway(&b, "1s"), 0);
    ports[0] = a.port;
    ports[1] = b.port;
    CU_ASSERT_EQUAL(race_requests(ports, 2, 20, "/race/x", "before", &other), 20);

    stop_redis(&redis);
    passed = race_requests(ports, 2, 100, "/race/x", "during", &other);
    CU_ASSERT_EQUAL(other, 0);           /* no request failed */
    CU_ASSERT_EQUAL(passed, 25 + 25);    /* each replica allows its half of 50 */
    CU_ASSERT_EQUAL(metric(&a, "sluice_store_degraded"), 1);
    CU_ASSERT_TRUE(metric(&a, "sluice_store_errors_total") >= 1);
    CU_ASSERT_TRUE(wait_for_log(&a, "failed; limiting per on_store_error", 1, 1000));

    CU_ASSERT_EQUAL_FATAL(start_redis(&redis), 0); /* on the same port */
    /* Each replica probes Redis again after its backoff and goes back to it by itself. */
    for (int i = 0; i < 100; i++) {
        get(&a, "/probe/", NULL);
        get(&b, "/probe/", NULL);
        if (metric(&a, "sluice_store_degraded") == 0 && metric(&b, "sluice_store_degraded") == 0)
            break;
        sleep_ms(100);
    }
    CU_ASSERT_EQUAL(metric(&a, "sluice_store_degraded"), 0);
    CU_ASSERT_EQUAL(metric(&b, "sluice_store_degraded"), 0);
    CU_ASSERT_EQUAL(race_requests(ports, 2, 100, "/race/x", "after", &other), 50);
    CU_ASSERT_EQUAL(stop_sluice(&a, 5000), 0);
    CU_ASSERT_EQUAL(stop_sluice(&b, 5000), 0);
}

/* Redis stalls (DEBUG SLEEP): a request waits for it no longer than the store timeout, then
 * is decided locally; when Redis wakes, the gateway returns to it by itself. */
static void test_slow_redis_costs_at_most_the_timeout(void)
{
    struct proc gw;
    struct reply r;
    double start, took;

    CU_ASSERT_EQUAL_FATAL(start_gateway(&gw, "50ms"), 0);
    CU_ASSERT_EQUAL(get(&gw, "/stall/", NULL), 200); /* leaves a pooled connection */
    redis_cli(&redis, "DEBUG SLEEP 2");
    sleep_ms(300);
    start = seconds_now();
    http(gw.port, "GET", "/stall/", NULL, NULL, &r);
    took = seconds_now() - start;
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_TRUE(took < 0.5); /* 50 ms, with room for a loaded machine */
    reply_free(&r);
    /* While Redis is left alone to recover, requests do not wait for it at all: decided
     * locally, on this replica's half of the quota of 4, of which this is the second. */
    start = seconds_now();
    CU_ASSERT_EQUAL(get(&gw, "/stall/", NULL), 200);
    CU_ASSERT_TRUE(seconds_now() - start < 0.05);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    sleep_ms(2500);
    for (int i = 0; i < 50 && metric(&gw, "sluice_store_degraded") != 0; i++) {
        get(&gw, "/probe/", NULL);
        sleep_ms(100);
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);
    CU_ASSERT_TRUE(wait_for_log(&gw, "answers again", 1, 0));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_store_tests(void)
{
    CU_pSuite s = add_suite_with("store", init, clean);

    add_test(s, "two replicas share one count", test_two_replicas_share_one_count);
    add_test(s, "the same answers as the memory store", test_same_semantics_as_memory);
    add_test(s, "each limit counts under its own key", test_each_limit_its_own_key);
    add_test(s, "Redis dies, requests go on; it returns", test_redis_dies_and_returns);
    add_test(s, "a stalled Redis costs at most the timeout",
             test_slow_redis_costs_at_most_the_timeout);
}
