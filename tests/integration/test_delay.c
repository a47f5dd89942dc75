/* A limit's delay: seen from outside: a request the limit would deny, but would allow within
 * delay.max, waits for its turn and is admitted then, at the instants the algorithm says
 * (read back from the access log's decided_ns and waited_ms); at most delay.queue wait at
 * once; a client that leaves while waiting frees its place and is not charged; in event mode
 * a thousand waiting requests cost no thread each. Against the test upstream. */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define MS_NS 1000000LL

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\",\n"
    "         max_connections: 2000, max_connections_per_ip: 2000}\n"
    "routes:\n"
    "  - name: ten\n    match: {path_prefix: /ten/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: %2$s, requests: 10, per: 1s, delay: {max: 1s, queue: 100}}\n"
    "  - name: three\n    match: {path_prefix: /three/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 10, per: 1s, delay: {max: 1s, queue: 3}}\n"
    "  - name: one\n    match: {path_prefix: /one/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 1, per: 1s, delay: {max: 3s}}\n"
    "  - name: many\n    match: {path_prefix: /many/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 200, per: 1s, burst: 1,\n"
    "            delay: {max: 20s, queue: 1500}}\n"
    "  - name: trial\n    match: {path_prefix: /trial/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    dry_run: true\n"
    "    limit: {algorithm: gcra, requests: 1, per: 1h, delay: {max: 2s}}\n";

/* One access log line's figures. */
struct line {
    unsigned status;
    long long decided_ns;
    double waited_ms;
};

/* The lines of `route` in `gw`'s access log, up to `cap`: how many. */
static int read_lines(const struct proc *gw, const char *route, struct line *out, int cap)
{
    char *log = read_file(gw->access_path), needle[64], *at;
    int n = 0;

    snprintf(needle, sizeof needle, "\"route\":\"%s\"", route);
    for (at = log; at != NULL && n < cap && (at = strstr(at, needle)) != NULL; at++) {
        const char *status = strstr(at, "\"status\":"), *decided = strstr(at, "\"decided_ns\":");
        const char *waited = strstr(at, "\"waited_ms\":");

        if (status == NULL || decided == NULL || waited == NULL)
            break;
        out[n].status = (unsigned)strtoul(status + 9, NULL, 10);
        out[n].decided_ns = strtoll(decided + 13, NULL, 10);
        out[n].waited_ms = strtod(waited + 12, NULL);
        n++;
    }
    free(log);
    return n;
}

static int by_decision(const void *a, const void *b)
{
    const char *x = strstr(*(char *const *)a, "\"decided_ns\":");
    const char *y = strstr(*(char *const *)b, "\"decided_ns\":");
    long long dx = x ? strtoll(x + 13, NULL, 10) : 0, dy = y ? strtoll(y + 13, NULL, 10) : 0;

    return dx < dy ? -1 : dx > dy;
}

/* `sluice simulate` replays the log, sorted by decision (a request that waited is logged when
 * it ends: README), against its own config: a request that waited for its turn is replayed as
 * waiting, its place kept at its decision, so every decision comes out as recorded: 10 denied
 * of 30. */
static void expect_replayed(const struct proc *gw, const char *label)
{
    char command[512], out[8192], path[128], *log = read_file(gw->access_path), *lines[64];
    const char *proposed;
    size_t n = 0;
    FILE *f;
    int code;

    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    for (char *line = strtok(log, "\n"); line != NULL && n < 64; line = strtok(NULL, "\n"))
        lines[n++] = line;
    qsort(lines, n, sizeof lines[0], by_decision);
    scratch_path(path, sizeof path, "delay-sorted.log");
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", lines[i]);
    fclose(f);
    free(log);
    snprintf(command, sizeof command, "simulate --format json -c %s %s", gw->config_path, path);
    code = run_sluice(command, out, sizeof out);
    proposed = strstr(out, "\"proposed\":");
    check_case(code == 0 && proposed != NULL && strstr(proposed, "\"denied\":10,") != NULL &&
                   strstr(proposed, "\"recorded_denied\":10") != NULL,
               label, "the replay did not decide as recorded (exit %d):\n%.600s", code, out);
    unlink(path);
}

static int by_admission(const void *a, const void *b)
{
    const struct line *x = a, *y = b;
    double ax = (double)x->decided_ns + x->waited_ms * 1e6,
           ay = (double)y->decided_ns + y->waited_ms * 1e6;

    return ax < ay ? -1 : ax > ay;
}

/* 10 a second (a burst of 10), waiting up to 1 s: 30 at once get 10 answers now, 10 after
 * waiting, 10 denials; the k-th that waited was admitted no sooner than k intervals (100 ms)
 * after the first decision, as the algorithm says, and not much later; and no two admissions
 * come closer than the interval allows beyond the burst. For both buckets. */
static void test_thirty_at_once(void)
{
    static const char *const algorithms[] = {"gcra", "token_bucket"};

    for (size_t a = 0; a < 2; a++) {
        struct proc gw;
        struct line lines[64];
        int ok, other, n, waited = 0;
        long long first = 0;

        CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, algorithms[a]) == 0);
        ok = race_requests(&gw.port, 1, 30, "/ten/status/200", NULL, &other);
        check_case(ok == 20 && other == 0, algorithms[a],
                   "%d answered 200 (expected 20), %d neither", ok, other);
        CU_ASSERT(wait_for_access_lines(&gw, 30) >= 30);
        n = read_lines(&gw, "ten", lines, 64);
        CU_ASSERT_EQUAL_FATAL(n, 30);
        for (int i = 0; i < n; i++)
            if (first == 0 || lines[i].decided_ns < first)
                first = lines[i].decided_ns;
        qsort(lines, (size_t)n, sizeof lines[0], by_admission);
        for (int i = 0; i < n; i++) {
            double admitted_ms = (double)(lines[i].decided_ns - first) / 1e6 + lines[i].waited_ms;

            if (lines[i].status != 200 || lines[i].waited_ms == 0)
                continue;
            waited++;
            check_case(admitted_ms >= waited * 100.0 && admitted_ms < waited * 100.0 + 150.0,
                       algorithms[a],
                       "the %d-th to wait was admitted %.1f ms after the first "
                       "decision (its turn: %d ms)",
                       waited, admitted_ms, waited * 100);
        }
        check_case(waited == 10, algorithms[a], "%d waited (expected 10)", waited);
        expect_replayed(&gw, algorithms[a]);
        CU_ASSERT_EQUAL(metric(&gw, "sluice_limit_waiting{route=\"ten\",limit=\"ten\"}"), 0);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

/* A queue of 3: 30 at once get 10 now, 3 after waiting, 17 denials. */
static void test_queue_bound(void)
{
    struct proc gw;
    struct line lines[64];
    int ok, other, n, waited = 0, denied = 0;

    CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, "gcra") == 0);
    ok = race_requests(&gw.port, 1, 30, "/three/status/200", NULL, &other);
    check_case(ok == 13 && other == 0, "queue 3", "%d answered 200 (expected 13)", ok);
    CU_ASSERT(wait_for_access_lines(&gw, 30) >= 30);
    n = read_lines(&gw, "three", lines, 64);
    for (int i = 0; i < n; i++) {
        waited += lines[i].status == 200 && lines[i].waited_ms > 0;
        denied += lines[i].status == 429;
    }
    check_case(waited == 3 && denied == 17, "queue 3", "%d waited, %d denied", waited, denied);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

/* GET `target` on `port`, giving up after `timeout_ms`: its status, 0 when it gave up. */
static long get_within(unsigned port, const char *target, long timeout_ms)
{
    char url[256];
    long status = 0;
    CURL *curl = curl_easy_init();

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, target);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    return status;
}

/* One a second, waiting up to 3 s. A passes; B waits for its turn a second later but leaves
 * after 300 ms: logged 499 after waiting about that long, its seat and its place given back;
 * so C, sent at 400 ms, takes B's place (about 600 ms on), not the one after it (1.6 s). */
static void test_client_leaves(void)
{
    struct proc gw;
    struct line lines[8];
    double started;
    long status;
    int n;

    CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, "gcra") == 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/one/status/200", NULL), 200);
    started = seconds_now();
    CU_ASSERT_EQUAL(get_within(gw.port, "/one/status/200", 300), 0);
    sleep_ms(100);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_limit_waiting{route=\"one\",limit=\"one\"}"), 0);
    status = get_within(gw.port, "/one/status/200", 5000);
    check_case(status == 200 && seconds_now() - started < 1.3, "client left",
               "C got %ld after %.2f s; B's place was not freed", status, seconds_now() - started);
    CU_ASSERT(wait_for_access_lines(&gw, 3) >= 3);
    n = read_lines(&gw, "one", lines, 8);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    check_case(lines[1].status == 499 && lines[1].waited_ms >= 250 && lines[1].waited_ms < 600,
               "client left", "B was logged %u after waiting %.1f ms", lines[1].status,
               lines[1].waited_ms);
    check_case(lines[2].waited_ms > 300 && lines[2].waited_ms < 800, "client left",
               "C waited %.1f ms", lines[2].waited_ms);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A dry_run route never makes a request wait: it passes as dry_run_denied at once. */
static void test_dry_run_does_not_wait(void)
{
    struct proc gw;
    struct line lines[8];
    int n;

    CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, "gcra") == 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/trial/status/200", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/trial/status/200", NULL), 200);
    CU_ASSERT(wait_for_access_lines(&gw, 2) >= 2);
    n = read_lines(&gw, "trial", lines, 8);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_EQUAL(lines[1].waited_ms, 0);
    {
        char *log = read_file(gw.access_path);

        CU_ASSERT(log != NULL && occurrences(log, "\"decision\":\"dry_run_denied\"") == 1);
        free(log);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Opens `n` connections to `port`, each sending GET `target`: their sockets into `fds`. */
static int open_requests(unsigned port, const char *target, int *fds, int n)
{
    char request[256];
    int len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);

    for (int i = 0; i < n; i++) {
        fds[i] = raw_connect(port);
        if (fds[i] < 0 || send(fds[i], request, (size_t)len, 0) != len)
            return -1;
    }
    return 0;
}

/* How many of the `n` sockets were answered 200 within `ms`; each is closed. */
static int answered_ok(int *fds, int n, int ms)
{
    int ok = 0;

    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char head[64] = "";

        if (fds[i] >= 0 && poll(&p, 1, ms) == 1 && recv(fds[i], head, sizeof head - 1, 0) > 12)
            ok += strncmp(head, "HTTP/1.1 200", 12) == 0;
        if (fds[i] >= 0)
            close(fds[i]);
    }
    return ok;
}

/* 200 a second, no burst, waiting up to 20 s, queue 1500: 1,000 at once (200 in
 * thread_per_connection mode, whose connections have a thread each anyway) all wait their
 * turn and pass, about 5 ms apart; while they wait, event mode runs no more threads than it
 * did idle, give or take a few. */
static void test_thousand_waiting(void)
{
    bool event = getenv("SLUICE_MODE") != NULL && strcmp(getenv("SLUICE_MODE"), "event") == 0;
    int n = event ? 1000 : 200, *fds = calloc((size_t)n, sizeof *fds), ok;
    struct proc gw;
    long idle_threads, busy_threads = 0;

    CU_ASSERT_FATAL(fds != NULL);
    CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, "gcra") == 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/many/status/200", NULL), 200);
    idle_threads = proc_threads(gw.pid);
    CU_ASSERT_FATAL(open_requests(gw.port, "/many/status/200", fds, n) == 0);
    for (int i = 0; i < 200; i++) {
        if (metric_now(&gw, "sluice_limit_waiting{route=\"many\",limit=\"many\"}") >= n / 2) {
            busy_threads = proc_threads(gw.pid);
            break;
        }
        sleep_ms(10);
    }
    if (event)
        check_case(busy_threads > 0 && busy_threads <= idle_threads + 4, "1,000 waiting",
                   "%ld threads while they waited, %ld idle", busy_threads, idle_threads);
    ok = answered_ok(fds, n, 15000);
    check_case(ok == n, "waiting", "%d of %d answered 200", ok, n);
    free(fds);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static const char reload_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: one\n    match: {path_prefix: /one/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: gcra, requests: 1, per: 1s, delay: {max: 5s, queue: %2$s}}\n";

struct waiter {
    unsigned port;
    long status;
};

static void *wait_one(void *arg)
{
    struct waiter *w = arg;

    w->status = get_within(w->port, "/one/status/200", 8000);
    return NULL;
}

/* A reload that keeps the limit (only its queue grows) keeps its places and its queue: two
 * requests waiting across it pass at their turns, still counted as waiting after it, and a
 * request after it queues behind them (its turn 3 s on), where a limit started afresh would
 * let it pass at once. */
static void test_reload_keeps_places(void)
{
    struct waiter w[2];
    pthread_t t[2];
    struct proc gw;
    struct line lines[8];
    int n;

    CU_ASSERT_FATAL(start_sluice(&gw, reload_config, upstream.port, "10") == 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/one/status/200", NULL), 200);
    for (int i = 0; i < 2; i++) {
        w[i] = (struct waiter){gw.port, 0};
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, wait_one, &w[i]) == 0);
    }
    for (int i = 0; i < 100 && metric_now(&gw, "sluice_limit_waiting{route=\"one\","
                                               "limit=\"one\"}") < 2;
         i++)
        sleep_ms(10);
    rewrite_config(&gw, true, reload_config, upstream.port, "20");
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_limit_waiting{route=\"one\",limit=\"one\"}"), 2);
    CU_ASSERT_EQUAL(get_within(gw.port, "/one/status/200", 8000), 200);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(w[i].status, 200);
    }
    CU_ASSERT(wait_for_access_lines(&gw, 4) >= 4);
    n = read_lines(&gw, "one", lines, 8);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    qsort(lines, (size_t)n, sizeof lines[0], by_admission);
    check_case(lines[3].waited_ms > 2000, "reload",
               "the request after the reload waited %.0f ms "
               "(its turn was 3 s after the first)",
               lines[3].waited_ms);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_delay_tests(void)
{
    CU_pSuite s = add_suite_with("delay", NULL, NULL);

    add_test(s, "30 at once: 10 now, 10 at their turns, 10 denied", test_thirty_at_once);
    add_test(s, "at most queue wait at once", test_queue_bound);
    add_test(s, "a client that leaves frees its place", test_client_leaves);
    add_test(s, "dry_run never makes a request wait", test_dry_run_does_not_wait);
    add_test(s, "a reload that keeps the limit keeps its places and queue",
             test_reload_keeps_places);
    add_test(s, "1,000 waiting, no thread each in event mode", test_thousand_waiting);
}
