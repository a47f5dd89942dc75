/* Limits that give back what they took, held together by two replicas on one real Redis:
 * concurrency slots (leases, renewed while a request lives, lapsing when a replica dies) and
 * count: (a charge given back once its answer shows it does not count). Against the test
 * upstream, whose /slow?ms=N answers after N ms, /peak says the most /slow requests it had in
 * flight at once, /status/NNN answers NNN, and /stats counts what reached it. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/integration/harness.h"

static const char slots_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 500ms, lease: 1s}\n"
    "routes:\n"
    "  - name: five\n    match: {path_prefix: /slow}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 5}\n"
    "  - name: one\n    match: {path_prefix: /one/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 1}\n"
    "  - name: down\n    match: {path_prefix: /down/}\n    upstream: \"http://127.0.0.1:1\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 1}\n";

static struct proc gws[2];

/* Two replicas on `config`, its third argument `lease` (a slot's lease, for slots_config). */
static int start_pair_with(const char *config, const char *lease)
{
    for (int i = 0; i < 2; i++)
        if (start_sluice(&gws[i], config, upstream.port, suite_redis.port, lease) != 0)
            return -1;
    return 0;
}

/* With leases of 30 s: a slot that comes back sooner was given back, not left to lapse. */
static int start_pair(const char *config)
{
    return start_pair_with(config, "30s");
}

static void stop_pair(void)
{
    for (int i = 0; i < 2; i++)
        if (gws[i].pid > 0)
            CU_ASSERT_EQUAL(stop_sluice(&gws[i], 5000), 0);
}

/* Slots in use in Redis for `route`'s limit `cap`: members of its sorted sets of leases that
 * have not lapsed by Redis's clock. */
static long slots_in_redis(const char *route)
{
    char command[640], out[256];
    long n = -1;

    snprintf(command, sizeof command,
             "redis-cli -p %u EVAL \"local t = redis.call('TIME') local n = 0 "
             "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
             "n = n + redis.call('ZCOUNT', k, t[1] * 1000000 + t[2], '+inf') end return n\" 0 "
             "'sluice:%s:cap:*:slots'",
             suite_redis.port, route);
    if (run_command(command, out, sizeof out) == 0)
        n = strtol(out, NULL, 10);
    return n;
}

/* Waits up to `ms` for `route`'s slots in Redis to come back to `n` or fewer. */
static bool slots_down_to(const char *route, long n, int ms)
{
    for (int waited = 0; waited <= ms; waited += 20) {
        if (slots_in_redis(route) <= n)
            return true;
        sleep_ms(20);
    }
    return false;
}

/* 50 at once, spread over both replicas, against a cap of 5, each held 800 ms upstream:
 * exactly 5 pass, the upstream never has more than 5 in flight, and once they end the slots
 * are free in Redis and 5 more pass. */
static void test_fifty_race_for_five(void)
{
    unsigned ports[2];
    int ok, other;

    CU_ASSERT_FATAL(start_pair(slots_config) == 0);
    ports[0] = gws[0].port, ports[1] = gws[1].port;
    upstream_peak();
    ok = race_requests(ports, 2, 50, "/slow?ms=800", NULL, &other);
    check_case(ok == 5 && other == 0, "50 at once", "%d answered 200 (expected 5), %d neither", ok,
               other);
    check_case(upstream_peak() == 5, "50 at once", "the upstream's peak in flight was not 5");
    check_case(slots_down_to("five", 0, 500), "50 at once", "%ld slots left in Redis",
               slots_in_redis("five"));
    CU_ASSERT_EQUAL(metric(&gws[0], "sluice_store_leases"), 0);
    ok = race_requests(ports, 2, 50, "/slow?ms=800", NULL, &other);
    check_case(ok == 5 && other == 0, "again", "%d answered 200 (expected 5)", ok);
    check_case(upstream_peak() == 5, "again", "the upstream's peak in flight was not 5");
    stop_pair();
}

struct held_request {
    unsigned port;
    const char *target;
    long timeout_ms; /* 0: none */
    int status;
};

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

static void *send_held(void *arg)
{
    struct held_request *h = arg;
    char url[256];
    long status = 0;
    CURL *curl = curl_easy_init();

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", h->port, h->target);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, h->timeout_ms);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    h->status = (int)status;
    curl_easy_cleanup(curl);
    return NULL;
}

/* Leases of 1 s: a request on one replica holds the one slot for 3 s, three leases; renewed,
 * it stays held, so the other replica refuses all along; then it comes back. */
static void test_renewed_while_held(void)
{
    struct held_request h = {0, "/one/slow?ms=3000", 0, 0};
    pthread_t holder;
    int refused = 0;

    CU_ASSERT_FATAL(start_pair_with(slots_config, "1s") == 0);
    h.port = gws[0].port;
    CU_ASSERT_FATAL(pthread_create(&holder, NULL, send_held, &h) == 0);
    sleep_ms(300);
    for (int i = 0; i < 5; i++, sleep_ms(500))
        refused += get_status(gws[1].port, "/one/x", NULL) == 429;
    pthread_join(holder, NULL);
    check_case(h.status == 200 && refused == 5, "renewed",
               "the holder got %d; the other replica refused %d of 5 over 2.5 s", h.status,
               refused);
    stop_pair();
}

/* Leases of 30 s, so that a slot back within a second was given back: by a request's end
 * (its answer), by its client's leaving (at the latest when its answer, 1.5 s on, cannot be
 * sent), by its upstream's failure. */
static void test_given_back_at_the_end(void)
{
    struct held_request h = {0, "/one/slow?ms=500", 0, 0};
    pthread_t holder;
    double start;
    int failed = 0;

    CU_ASSERT_FATAL(start_pair(slots_config) == 0);
    h.port = gws[0].port;
    CU_ASSERT_FATAL(pthread_create(&holder, NULL, send_held, &h) == 0);
    pthread_join(holder, NULL);
    check_case(h.status == 200 && slots_down_to("one", 0, 300), "answered",
               "the holder got %d; its slot was not given back", h.status);
    CU_ASSERT_EQUAL(get_status(gws[1].port, "/one/x", NULL), 200);

    h = (struct held_request){gws[1].port, "/one/slow?ms=1500", 400, 0};
    start = seconds_now();
    CU_ASSERT_FATAL(pthread_create(&holder, NULL, send_held, &h) == 0);
    pthread_join(holder, NULL);
    check_case(slots_down_to("one", 0, 2500) && seconds_now() - start < 3.0, "client left",
               "its slot was kept %.1f s", seconds_now() - start);
    CU_ASSERT_EQUAL(get_status(gws[0].port, "/one/x", NULL), 200);

    /* The slot goes back to Redis just after the answer is handed over, so the next request
     * on the other replica may find it still taken for a moment: it waits for Redis first. */
    for (int i = 0; i < 4; i++) {
        failed += get_status(gws[i % 2].port, "/down/x", NULL) == 502;
        failed -= !slots_down_to("down", 0, 300);
    }
    check_case(failed == 4, "upstream failure", "%d of 4 answered 502 and gave back the slot",
               failed);
    stop_pair();
}

/* A replica killed while its request holds the slot: the other refuses at once, and admits
 * again once the lease (1 s) lapses, not before 0.5 s and well within 2.5 s. */
static void test_dead_replica_lapses(void)
{
    struct held_request h = {0, "/one/slow?ms=10000", 0, 0};
    pthread_t holder;
    double killed, back = 0;

    CU_ASSERT_FATAL(start_pair_with(slots_config, "1s") == 0);
    h.port = gws[0].port;
    CU_ASSERT_FATAL(pthread_create(&holder, NULL, send_held, &h) == 0);
    for (int i = 0; i < 100 && slots_in_redis("one") != 1; i++)
        sleep_ms(10);
    kill(gws[0].pid, SIGKILL);
    waitpid(gws[0].pid, NULL, 0);
    gws[0].pid = 0;
    killed = seconds_now();
    CU_ASSERT_EQUAL(get_status(gws[1].port, "/one/x", NULL), 429);
    while (back == 0 && seconds_now() - killed < 2.5) {
        if (get_status(gws[1].port, "/one/x", NULL) == 200)
            back = seconds_now() - killed;
        else
            sleep_ms(50);
    }
    pthread_join(holder, NULL);
    check_case(back >= 0.5 && back < 2.5, "replica killed",
               "the slot came back after %.2f s (the lease is 1 s; 0: never)", back);
    stop_pair();
}

static const char login_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 500ms}\n"
    "routes:\n"
    "  - name: login-%3$s\n    match: {path_prefix: /status/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: %3$s, requests: 5, per: 1h, count: {statuses: [401, 403]}}\n";

/* For each algorithm, on two replicas: 20 successes charge nothing; then 100 failed logins at
 * once over both admit exactly 5 counted answers; then a success is refused too. */
static void test_failed_logins_across_replicas(void)
{
    static const char *const algorithms[] = {"fixed_window", "sliding_window_log",
                                             "sliding_window_counter", "token_bucket", "gcra"};

    for (size_t a = 0; a < sizeof algorithms / sizeof algorithms[0]; a++) {
        unsigned long mark = 0;
        unsigned ports[2];
        char series[160];
        int ok, other, successes = 0;

        for (int i = 0; i < 2; i++)
            CU_ASSERT_FATAL(start_sluice(&gws[i], login_config, upstream.port, suite_redis.port,
                                         algorithms[a]) == 0);
        ports[0] = gws[0].port, ports[1] = gws[1].port;
        upstream_reached(&mark);
        for (int i = 0; i < 20; i++)
            successes += get_status(ports[i % 2], "/status/200", NULL) == 200;
        check_case(successes == 20 && upstream_reached(&mark) == 20, algorithms[a],
                   "%d of 20 successes passed; each should, none being counted", successes);
        ok = race_requests(ports, 2, 100, "/status/401", NULL, &other);
        check_case(ok == 0 && other == 5, algorithms[a],
                   "100 failed logins at once: %d answered 401 (expected 5), %d 200", other, ok);
        check_case(upstream_reached(&mark) == 5, algorithms[a],
                   "the upstream saw other than 5 of them");
        check_case(get_status(ports[0], "/status/200", NULL) == 429 &&
                       get_status(ports[1], "/status/200", NULL) == 429 &&
                       upstream_reached(&mark) == 0,
                   algorithms[a], "a success passed once 5 failures had counted");
        snprintf(series, sizeof series,
                 "sluice_limit_refunds_total{route=\"login-%s\","
                 "limit=\"login-%s\"}",
                 algorithms[a], algorithms[a]);
        check_case(metric(&gws[0], series) + metric(&gws[1], series) == 20, algorithms[a],
                   "the replicas gave back other than the 20 successes' charges");
        stop_pair();
    }
}

static const char delay_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 500ms}\n"
    "routes:\n"
    "  - name: ten\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s, queue: 100}}\n";

/* The instant (ms: decided + waited) each access log line of `gw` with status 200 was
 * admitted at, into `at`, up to `cap`; how many of them waited into `*waited`. How many. */
static int admissions(const struct proc *gw, double *at, int cap, int *waited)
{
    char *log = read_file(gw->access_path), *line = log;
    int n = 0;

    while (line != NULL && *line != '\0' && n < cap) {
        char *end = strchr(line, '\n');
        const char *decided, *wait;

        if (end != NULL)
            *end = '\0';
        decided = strstr(line, "\"decided_ns\":");
        wait = strstr(line, "\"waited_ms\":");
        if (strstr(line, "\"status\":200,") != NULL && decided != NULL && wait != NULL) {
            double w = strtod(wait + 12, NULL);

            *waited += w > 0;
            at[n++] = (double)strtoll(decided + 13, NULL, 10) / 1e6 + w;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    free(log);
    return n;
}

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* 10 a second in Redis, waiting up to 1 s, two replicas: 30 at once over both get 20 answers
 * and 10 denials; the places are Redis's, so the requests that waited on either replica were
 * admitted 100 ms apart, the k-th no sooner than k intervals after the first admission. */
static void test_delay_across_replicas(void)
{
    double at[64], first;
    unsigned ports[2];
    int ok, other, n = 0, late = 0, waited = 0;

    CU_ASSERT_FATAL(start_pair(delay_config) == 0);
    ports[0] = gws[0].port, ports[1] = gws[1].port;
    ok = race_requests(ports, 2, 30, "/status/200", NULL, &other);
    check_case(ok == 20 && other == 0, "delay in Redis", "%d answered 200 (expected 20)", ok);
    for (int tries = 0, lines = 0; lines < 30 && tries < 100; tries++, sleep_ms(20)) {
        char *a = read_file(gws[0].access_path), *b = read_file(gws[1].access_path);

        lines = (a ? occurrences(a, "\n") : 0) + (b ? occurrences(b, "\n") : 0);
        free(a);
        free(b);
    }
    for (int i = 0; i < 2; i++)
        n += admissions(&gws[i], at + n, 64 - n, &waited);
    CU_ASSERT_EQUAL_FATAL(n, 20);
    CU_ASSERT_EQUAL(waited, 10);
    qsort(at, (size_t)n, sizeof at[0], ascending);
    first = at[0];
    for (int k = 10; k < n; k++)
        if (at[k] < first + (k - 9) * 100.0 - 5.0 || at[k] > first + (k - 9) * 100.0 + 200.0)
            late++;
    check_case(late == 0, "delay in Redis",
               "%d of the 10 that waited were admitted off their "
               "turn (first %.1f, last %.1f ms after the first)",
               late, at[10] - first, at[19] - first);
    stop_pair();
}

void register_shared_limits_tests(void)
{
    CU_pSuite s = add_suite_with("shared_limits", redis_suite_init, redis_suite_clean);

    add_test(s, "concurrency in Redis: 50 racing over two replicas for 5 slots",
             test_fifty_race_for_five);
    add_test(s, "concurrency in Redis: held while renewed", test_renewed_while_held);
    add_test(s, "concurrency in Redis: given back by answer, leaving client, failure",
             test_given_back_at_the_end);
    add_test(s, "concurrency in Redis: a dead replica's slot lapses with its lease",
             test_dead_replica_lapses);
    add_test(s, "count: in Redis: failed logins counted exactly across replicas",
             test_failed_logins_across_replicas);
    add_test(s, "delay: in Redis: places kept at Redis's turns across replicas",
             test_delay_across_replicas);
}
