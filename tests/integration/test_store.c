/* The shared store against a real redis-server started here: one count across replicas, the
 * same semantics as the memory store (across reloads too), falling back when Redis dies,
 * stalls or refuses, saying why, and coming back when a probe, and only a probe, succeeds. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

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
    return start_sluice(gw, config, upstream.port, suite_redis.port, timeout);
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

/* Three requests on one connection, each decided in Redis (in event mode, off the loop while
 * the connection waits): a body by length, a chunked one, and none. Each reaches the upstream
 * whole, and each is answered on the same connection. */
static void test_body_and_connection_kept(void)
{
    static const char requests[] =
        "POST /probe/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello=1&x=2"
        "POST /probe/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nabcde\r\n0\r\n\r\n"
        "GET /probe/echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    char answer[16384];
    struct proc gw;
    int answered = 0;

    CU_ASSERT_EQUAL_FATAL(start_gateway(&gw, "1s"), 0);
    CU_ASSERT_EQUAL(
        raw_exchange(gw.port, requests, sizeof requests - 1, answer, sizeof answer, 5000), 200);
    for (const char *at = answer; (at = strstr(at, "HTTP/1.1 200 ")) != NULL; at++)
        answered++;
    check_case(answered == 3, "three requests on one connection",
               "%d answered 200 on it, expected 3: %.600s", answered, answer);
    check_case(strstr(answer, "method POST\ntarget /probe/echo\n") != NULL &&
                   strstr(answer, "body 11\nhello=1&x=2") != NULL,
               "a body by Content-Length", "the upstream's echo: %.600s", answer);
    check_case(strstr(answer, "body 5\nabcde") != NULL, "a chunked body",
               "the upstream's echo: %.600s", answer);
    check_case(strstr(answer, "method GET\ntarget /probe/echo\n") != NULL, "no body",
               "the upstream's echo: %.600s", answer);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
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
    /* Refill over time: the buckets, spent again just now (the requests since may have taken
     * long enough to refill them), give one back after half a second. */
    for (int i = 0; i < 3 && get(&gw, "/r/token_bucket/x", NULL) == 200; i++)
        ;
    for (int i = 0; i < 3 && get(&gw, "/m/token_bucket/x", NULL) == 200; i++)
        ;
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

    stop_redis(&suite_redis);
    passed = race_requests(ports, 2, 100, "/race/x", "during", &other);
    CU_ASSERT_EQUAL(other, 0);        /* no request failed */
    CU_ASSERT_EQUAL(passed, 25 + 25); /* each replica allows its half of 50 */
    CU_ASSERT_EQUAL(metric(&a, "sluice_store_degraded"), 1);
    CU_ASSERT_TRUE(metric(&a, "sluice_store_errors_total") >= 1);
    CU_ASSERT_TRUE(wait_for_log(&a, "; limiting per on_store_error", 1, 1000));
    CU_ASSERT_TRUE(wait_for_log(&a, "failed (connect: Connection refused)", 1, 0));

    CU_ASSERT_EQUAL_FATAL(start_redis(&suite_redis), 0); /* on the same port */
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
    double start, took, errors;

    CU_ASSERT_EQUAL_FATAL(start_gateway(&gw, "50ms"), 0);
    CU_ASSERT_EQUAL(get(&gw, "/stall/", NULL), 200); /* leaves a pooled connection */
    redis_cli(&suite_redis, "DEBUG SLEEP 2");
    sleep_ms(300);
    start = seconds_now();
    http(gw.port, "GET", "/stall/", NULL, NULL, &r);
    took = seconds_now() - start;
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_TRUE(took < 1.9); /* the timeout, not Redis's 2 s sleep */
    reply_free(&r);
    /* While Redis is left alone to recover, requests do not wait for it at all: decided
     * locally, on this replica's half of the quota of 4, of which this is the second. No call
     * is made, so none fails. */
    errors = metric(&gw, "sluice_store_errors_total");
    CU_ASSERT_EQUAL(get(&gw, "/stall/", NULL), 200);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), errors);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    sleep_ms(2500);
    for (int i = 0; i < 50 && metric(&gw, "sluice_store_degraded") != 0; i++) {
        get(&gw, "/probe/", NULL);
        sleep_ms(100);
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);
    CU_ASSERT_TRUE(wait_for_log(&gw, "answers again", 1, 2000));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Routes in Redis, each with a twin in memory, whose limits a reload changes (%3$s, %4$s), and
 * one it leaves alone. */
static const char reload_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\",\n"
    "         watch_config: false}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s}\n"
    "routes:\n"
    "  - name: switch\n    match: {path_prefix: /r/switch/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit: {algorithm: %3$s, requests: 2, per: 1h}\n"
    "  - name: switch-mem\n    match: {path_prefix: /m/switch/}\n    store: memory\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit: {algorithm: %3$s, requests: 2, per: 1h}\n"
    "  - name: grow\n    match: {path_prefix: /r/grow/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: %4$s, per: 1h}\n"
    "  - name: grow-mem\n    match: {path_prefix: /m/grow/}\n    store: memory\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: %4$s, per: 1h}\n"
    "  - name: steady\n    match: {path_prefix: /r/steady/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit: {algorithm: gcra, requests: 2, per: 1h}\n"
    "  - name: steady-mem\n    match: {path_prefix: /m/steady/}\n    store: memory\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit: {algorithm: gcra, requests: 2, per: 1h}\n";

/* Sends `n` requests for /STORE/ROUTE/x and checks that `want` of them pass; says where when
 * not. */
static void expect_passing(const struct proc *gw, const char *store, const char *route, int n,
                           int want, int step)
{
    char target[64];
    int passed = 0;

    snprintf(target, sizeof target, "/%s/%s/x", store, route);
    for (int i = 0; i < n; i++)
        passed += get_status(gw->port, target, NULL) == 200;
    if (passed != want)
        fprintf(stderr, "\nstep %d, %s: %d of %d passed, not %d\n", step, target, passed, n, want);
    CU_ASSERT_EQUAL(passed, want);
}

/* A reload that changes a limit's algorithm or numbers starts it afresh in Redis as in memory
 * (no WRONGTYPE from the old algorithm's keys, no old count under a new quota); a limit the
 * reload leaves alone keeps its count, in Redis across a restart too. Step 1 changes only
 * grow's quota (the key's type stays); the others change switch's algorithm. */
static void test_changed_limit_starts_afresh(void)
{
    static const char *const algorithms[] = {
        "gcra",         "gcra",         "sliding_window_log",
        "token_bucket", "fixed_window", "sliding_window_counter"};
    static const int quotas[] = {3, 4, 4, 5, 5, 5};
    static const char *const stores[] = {"r", "m"};
    enum { STEPS = sizeof quotas / sizeof quotas[0] };
    char quota[8];
    struct proc gw;

    snprintf(quota, sizeof quota, "%d", quotas[0]);
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, reload_config, upstream.port, suite_redis.port, algorithms[0], quota), 0);
    for (int s = 0; s < 2; s++) {
        expect_passing(&gw, stores[s], "switch", 3, 2, 0);
        expect_passing(&gw, stores[s], "grow", 4, 3, 0);
        expect_passing(&gw, stores[s], "steady", 3, 2, 0);
    }
    for (int step = 1; step < STEPS; step++) {
        bool switched = strcmp(algorithms[step], algorithms[step - 1]) != 0;
        bool grown = quotas[step] != quotas[step - 1];

        snprintf(quota, sizeof quota, "%d", quotas[step]);
        rewrite_config(&gw, true, reload_config, upstream.port, suite_redis.port, algorithms[step],
                       quota);
        kill(gw.pid, SIGHUP);
        CU_ASSERT_TRUE_FATAL(wait_for_log(&gw, "reloaded", step, 3000));
        for (int s = 0; s < 2; s++) {
            expect_passing(&gw, stores[s], "switch", 3, switched ? 2 : 0, step);
            expect_passing(&gw, stores[s], "grow", 6, grown ? quotas[step] : 0, step);
            expect_passing(&gw, stores[s], "steady", 1, 0, step);
        }
        CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
        CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, reload_config, upstream.port, suite_redis.port,
                                       algorithms[STEPS - 1], quota),
                          0);
    expect_passing(&gw, "r", "steady", 1, 0, STEPS);
    expect_passing(&gw, "r", "switch", 1, 0, STEPS);
    expect_passing(&gw, "m", "steady", 1, 1, STEPS); /* memory forgets on restart */
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static const char password_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  store: redis\n"
    "  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s%3$s}\n"
    "routes:\n"
    "  - name: guarded\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 100, per: 1h}\n";

/* One request through a gateway on `guarded` with `password_field`: whether the store took
 * it, and whether the log holds `expected`. */
static void check_password(const struct redis *guarded, const char *password_field, bool accepted,
                           const char *expected)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, password_config, upstream.port, guarded->port, password_field), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), accepted ? 0 : 1);
    if (expected != NULL && !wait_for_log(&gw, expected, 1, 1000)) {
        char *log = read_log(&gw);

        fprintf(stderr, "\nno \"%s\" in the log:\n%s\n", expected, log ? log : "");
        free(log);
        CU_FAIL("the log does not say why Redis failed");
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A Redis that refuses sluice's password (or wants one) is reported with the server's own
 * words; the right password works, and an empty one means none. A probe that fails for
 * another reason says so once. */
static void test_auth_failure_is_explained(void)
{
    struct redis guarded = {0};
    struct proc gw;

    guarded.password = "right-horse";
    CU_ASSERT_EQUAL_FATAL(start_redis(&guarded), 0);
    check_password(&guarded, ", password: wrong-horse", false, "WRONGPASS");
    check_password(&guarded, "", false, "NOAUTH");
    check_password(&guarded, ", password: right-horse", true, NULL);
    check_password(&suite_redis, ", password: \"\"", true, NULL);

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, password_config, upstream.port, guarded.port, ", password: wrong-horse"),
        0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    stop_redis(&guarded);
    for (int i = 0; i < 100 && !wait_for_log(&gw, "still fails", 1, 0); i++) {
        CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
        sleep_ms(50);
    }
    CU_ASSERT_TRUE(wait_for_log(&gw, "failed (AUTH: WRONGPASS", 1, 0));
    CU_ASSERT_TRUE(wait_for_log(&gw, "still fails (connect: Connection refused)", 1, 0));
    CU_ASSERT_FALSE(wait_for_log(&gw, "still fails", 2, 0));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- what Redis holds -------------------------------------------------------------------- */

#define RAW_KEY "RawKey-Zq7XvK2m" /* an API key to look for in Redis */

/* One route per algorithm keyed by the X-API-Key header, one by a query parameter, and one whose
 * limit has a key of its own; each limit named as its route. */
static const char hashed_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s, prefix: "
    "\"hashed:\"}\n"
    "routes:\n"
    "  - {name: tb, match: {path_prefix: /tb/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\", limit: {name: tb, algorithm: token_bucket, requests: 9, "
    "per: 1h}}\n"
    "  - {name: gcra, match: {path_prefix: /gcra/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\", limit: {name: gcra, algorithm: gcra, requests: 9, per: 1h}}\n"
    "  - {name: fw, match: {path_prefix: /fw/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\", limit: {name: fw, algorithm: fixed_window, requests: 9, "
    "per: 1h}}\n"
    "  - {name: swl, match: {path_prefix: /swl/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\", limit: {name: swl, algorithm: sliding_window_log, "
    "requests: 9, per: 1h}}\n"
    "  - {name: swc, match: {path_prefix: /swc/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\", limit: {name: swc, algorithm: sliding_window_counter, "
    "requests: 9, per: 1h}}\n"
    "  - {name: q, match: {path_prefix: /q/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"query:api_key\", limit: {name: q, algorithm: fixed_window, requests: 9, "
    "per: 1h}}\n"
    "  - {name: own, match: {path_prefix: /own/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     limit: {name: own, algorithm: gcra, requests: 9, per: 1h, key: \"header:X-API-Key\"}}\n";

/* The same key held by a consumer: counted under the consumer's name, in its plan. */
static const char hashed_consumer_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s, prefix: "
    "\"hashed:\"}\n"
    "plans: {gold: {algorithm: fixed_window, requests: 9, per: 1h}}\n"
    "consumers: [{name: acme, key: \"" RAW_KEY "\", plan: gold}]\n"
    "routes:\n"
    "  - {name: api, match: {path_prefix: /api/}, upstream: \"http://127.0.0.1:%1$u\",\n"
    "     key: \"header:X-API-Key\"}\n";

/* Each key's route and limit, and what follows the hash: a window's start (digits) for the
 * window algorithms, ":log" for the log, nothing for the buckets. The last is the consumer's. */
static const struct {
    const char *route_limit, *path, *suffix;
} hashed_keys[] = {
    {"tb:tb", "/tb/x", ""},          {"gcra:gcra", "/gcra/x", ""},
    {"fw:fw", "/fw/x", "digits"},    {"swl:swl", "/swl/x", "log"},
    {"swc:swc", "/swc/x", "digits"}, {"q:q", "/q/x?api_key=" RAW_KEY, "digits"},
    {"own:own", "/own/x", ""},       {"api:gold/gold", "/api/x", "digits"},
};
#define N_HASHED (sizeof hashed_keys / sizeof hashed_keys[0])

static bool all_hex(const char *text, size_t len)
{
    return strspn(text, "0123456789abcdef") >= len;
}

/* Whether `key` (one line of --scan) is "hashed:ROUTE:LIMIT:VERSION:HASH" and the suffix that
 * `i` names, VERSION 8 hex digits and HASH 32 (a 128-bit BLAKE2b). */
static bool documented_form(const char *key, size_t i)
{
    size_t len = strlen("hashed:") + strlen(hashed_keys[i].route_limit);
    const char *at = key + len, *suffix = hashed_keys[i].suffix;

    if (strncmp(key, "hashed:", 7) != 0 || strncmp(key + 7, hashed_keys[i].route_limit, len - 7))
        return false;
    if (at[0] != ':' || !all_hex(at + 1, 8) || at[9] != ':' || !all_hex(at + 10, 32))
        return false;
    at += 42;
    if (strcmp(suffix, "") == 0)
        return *at == '\0';
    if (strcmp(suffix, "log") == 0)
        return strcmp(at, ":log") == 0;
    return at[0] == ':' && at[1] != '\0' && strspn(at + 1, "0123456789") == strlen(at + 1);
}

/* README "the client key appears only as a BLAKE2b hash" (keys are "PREFIX
 * ROUTE:LIMIT:VERSION:HASH", with a window's start or ":log"); docs/security.md "Redis keys
 * hold a 128-bit BLAKE2b". Every algorithm, a header key, a query key, a limit's own key and a
 * consumer's: after a request of each, every key in Redis has that form, and none holds the
 * API key. */
static void test_keys_never_hold_the_raw_key(void)
{
    static char listing[64 * 1024];
    char command[160], *line, *next, *raw;
    int found[N_HASHED] = {0}, keys = 0;
    struct proc plain, consumers;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&plain, hashed_config, upstream.port, suite_redis.port), 0);
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&consumers, hashed_consumer_config, upstream.port, suite_redis.port), 0);
    for (size_t i = 0; i < N_HASHED; i++) {
        unsigned port = i < N_HASHED - 1 ? plain.port : consumers.port;

        check_case(get_status(port, hashed_keys[i].path, RAW_KEY) == 200, hashed_keys[i].path,
                   "not 200");
    }
    CU_ASSERT_EQUAL(metric(&plain, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(metric(&consumers, "sluice_store_errors_total"), 0);

    snprintf(command, sizeof command, "redis-cli -p %u --scan", suite_redis.port);
    CU_ASSERT_EQUAL_FATAL(run_command(command, listing, sizeof listing), 0);
    raw = strstr(listing, RAW_KEY);
    while (raw != NULL && raw > listing && raw[-1] != '\n')
        raw--;
    check_case(raw == NULL, "every key in Redis", "the API key is in %.*s",
               raw ? (int)strcspn(raw, "\n") : 0, raw ? raw : "");
    for (line = listing; *line != '\0'; line = next) {
        bool known = false;

        next = line + strcspn(line, "\n");
        if (*next == '\n')
            *next++ = '\0';
        if (strncmp(line, "hashed:", 7) != 0)
            continue; /* the other tests' */
        keys++;
        for (size_t i = 0; i < N_HASHED; i++)
            if (documented_form(line, i)) {
                found[i]++;
                known = true;
            }
        check_case(known, line, "not of the documented form");
    }
    for (size_t i = 0; i < N_HASHED; i++)
        check_case(found[i] == 1, hashed_keys[i].route_limit, "%d keys, expected 1", found[i]);
    CU_ASSERT_EQUAL(keys, (int)N_HASHED);
    CU_ASSERT_EQUAL(stop_sluice(&plain, 5000), 0);
    CU_ASSERT_EQUAL(stop_sluice(&consumers, 5000), 0);
}

struct in_flight {
    unsigned port;
    long status;
};

static void *get_calm(void *arg)
{
    struct in_flight *f = arg;

    f->status = get_status(f->port, "/calm/", NULL);
    return NULL;
}

static const char flap_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 5s}\n"
    "routes:\n"
    "  - name: calm\n    match: {path_prefix: /calm/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 1000000, per: 1h}\n"
    "  - name: broken\n    match: {path_prefix: /broken/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 1000000, per: 1h}\n";

/* Once the store is degraded, only the probe may end it: a call that was already under way
 * and succeeds afterwards does not (it would cut the backoff short, and under load the store
 * would flap). Deterministic: CLIENT PAUSE holds a call to route calm inside Redis while an ACL
 * that allows only calm's keys fails a call to route broken at once (NOPERM). */
static void test_only_the_probe_ends_degraded(void)
{
    struct redis acl = {0};
    struct in_flight held;
    pthread_t thread;
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_redis(&acl), 0);
    CU_ASSERT_EQUAL_FATAL(redis_cli_wait(&acl, "ACL SETUSER default resetkeys '~sluice:calm:*'"),
                          0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, flap_config, upstream.port, acl.port), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/calm/", NULL), 200); /* the script is loaded */
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);

    CU_ASSERT_EQUAL_FATAL(redis_cli_wait(&acl, "CLIENT PAUSE 2000 WRITE"), 0);
    held.port = gw.port;
    held.status = 0;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, get_calm, &held), 0);
    for (int i = 0; i < 300 && redis_number(&acl, "INFO clients", "blocked_clients") < 1; i++)
        sleep_ms(10);
    /* calm's call waits inside Redis */
    CU_ASSERT_EQUAL(redis_number(&acl, "INFO clients", "blocked_clients"), 1);

    CU_ASSERT_EQUAL(get_status(gw.port, "/broken/", NULL), 200); /* decided locally */
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    CU_ASSERT_TRUE(wait_for_log(&gw, "NOPERM", 1, 1000));

    pthread_join(thread, NULL); /* the pause ends; calm's call succeeds */
    CU_ASSERT_EQUAL(held.status, 200);
    CU_ASSERT_EQUAL(redis_number(&acl, "INFO clients", "blocked_clients"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 1);
    CU_ASSERT_FALSE(wait_for_log(&gw, "answers again", 1, 0));

    /* The backoff (100 ms) is long over: the next call is the probe, and it ends it. */
    for (int i = 0; i < 50 && metric(&gw, "sluice_store_degraded") != 0; i++) {
        get_status(gw.port, "/calm/", NULL);
        sleep_ms(100);
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);
    CU_ASSERT_TRUE(wait_for_log(&gw, "answers again", 1, 2000));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    stop_redis(&acl);
}

void register_store_tests(void)
{
    CU_pSuite s = add_suite_with("store", redis_suite_init, redis_suite_clean);

    add_test(s, "two replicas share one count", test_two_replicas_share_one_count);
    add_test(s, "a request decided in Redis keeps its body and its connection",
             test_body_and_connection_kept);
    add_test(s, "the same answers as the memory store", test_same_semantics_as_memory);
    add_test(s, "each limit counts under its own key", test_each_limit_its_own_key);
    add_test(s, "Redis dies, requests go on; it returns", test_redis_dies_and_returns);
    add_test(s, "a stalled Redis costs at most the timeout",
             test_slow_redis_costs_at_most_the_timeout);
    add_test(s, "a changed limit starts afresh, an unchanged one keeps its count",
             test_changed_limit_starts_afresh);
    add_test(s, "a refused password is logged in Redis's words", test_auth_failure_is_explained);
    add_test(s, "only the probe ends the degraded state", test_only_the_probe_ends_degraded);
    add_test(s, "Redis keys hold a hash, never the API key", test_keys_never_hold_the_raw_key);
}
