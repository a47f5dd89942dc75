/* Upstreams defined once under upstreams: and named by several routes, seen from outside: a
 * server's health is checked once however many routes name its upstream, a failure seen
 * through one route skips the server for the others (and not for a route whose own upstream
 * has the same URL), and logs and metrics name the upstream.
 *
 * The servers are recorders in this process (recorder.h), a and b, started once for the
 * suite and put back to plain 200 answers before each case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static struct recorder recs[2]; /* a, b */
static struct proc gw;

#define SERVER "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"

static int clean(void)
{
    for (int i = 0; i < 2; i++)
        recorder_stop(&recs[i]);
    return 0;
}

static int init(void)
{
    for (int i = 0; i < 2; i++)
        if (recorder_start(&recs[i]) != 0) {
            clean();
            return -1;
        }
    return 0;
}

static void recorders_plain(void)
{
    for (int i = 0; i < 2; i++) {
        recorder_set_status(&recs[i], 200);
        recorder_set_path_status(&recs[i], NULL, 0);
        recorder_reset(&recs[i]);
    }
}

/* The whole /metrics page (the caller frees it). */
static char *metrics_page(void)
{
    struct reply r;
    char *page;

    http(gw.admin_port, "GET", "/metrics", NULL, NULL, &r);
    page = r.body != NULL ? strdup(r.body) : NULL;
    reply_free(&r);
    return page;
}

/* `n` GETs of `target` one after another; how many were answered `status`. */
static int count_status(const char *target, int n, long status)
{
    int got = 0;

    for (int i = 0; i < n; i++)
        got += get_status(gw.port, target, NULL) == status;
    return got;
}

static const char checked_config[] =
    SERVER "upstreams:\n"
           "  backend:\n"
           "    servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
           "    health_check: {path: /health, interval: 200ms, timeout: 100ms, healthy: 1, "
           "unhealthy: 2}\n"
           "routes:\n"
           "  - {name: reads, match: {path_prefix: /r}, upstream: backend}\n"
           "  - {name: writes, match: {path_prefix: /w}, upstream: backend}\n";

/* Two routes name one upstream with checks: each server gets one check an interval, not one
 * per route; a's failing checks are logged once, under the upstream's name, and both routes
 * then send everything to b. */
static void test_checked_once_per_server(void)
{
    char a[64], b[64], down[256], series[256], *page;
    double started, seconds;
    int checks;

    recorders_plain();
    snprintf(a, sizeof a, "http://127.0.0.1:%u", recs[0].port);
    snprintf(b, sizeof b, "http://127.0.0.1:%u", recs[1].port);
    if (start_sluice(&gw, checked_config, recs[0].port, recs[1].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    /* Checks a second and a half long: one checker an interval makes at most 8 + 1, two would
     * make about 15. A slow machine makes fewer, never more (the next is due an interval
     * after the last began). */
    recorder_reset(&recs[0]);
    started = seconds_now();
    sleep_ms(1500);
    checks = recorder_count(&recs[0], "GET /health HTTP/1.1\r\n");
    seconds = seconds_now() - started;
    check_case(checks >= 1 && checks <= (int)(seconds / 0.2) + 1, "one check an interval",
               "a received %d checks in %.2f s at a 200ms interval; one checker makes at most %d",
               checks, seconds, (int)(seconds / 0.2) + 1);
    check_case(recorder_count(&recs[1], "GET /health HTTP/1.1\r\n") >= 1, "one check an interval",
               "b received no check");

    recorder_set_path_status(&recs[0], "/health", 503);
    snprintf(down, sizeof down,
             "upstream backend: server %s is unhealthy: 2 checks failed, the last: status 503", a);
    check_case(wait_for_log(&gw, down, 1, 3000), "a fails its checks", "no log line \"%s\"", down);
    sleep_ms(600); /* three more checks, in which a second checker would log again */
    check_case(log_count(&gw, "is unhealthy") == 1, "a fails its checks",
               "%d lines say a server is unhealthy; expected 1", log_count(&gw, "is unhealthy"));
    check_case(log_count(&gw, "route reads: server") + log_count(&gw, "route writes: server") == 0,
               "a fails its checks", "a route logged its own view of a shared server");
    snprintf(series, sizeof series, "sluice_upstream_healthy{upstream=\"backend\",server=\"%s\"}",
             a);
    check_case(metric(&gw, series) == 0, "a fails its checks", "%s is %g; expected 0", series,
               metric(&gw, series));
    snprintf(series, sizeof series, "sluice_upstream_healthy{upstream=\"backend\",server=\"%s\"}",
             b);
    check_case(metric(&gw, series) == 1, "a fails its checks", "%s is %g; expected 1", series,
               metric(&gw, series));
    page = metrics_page();
    check_case(page != NULL && occurrences(page, "sluice_upstream_healthy{") == 2,
               "a fails its checks",
               "/metrics has %d sluice_upstream_healthy samples; expected 2 (one per server)",
               occurrences(page, "sluice_upstream_healthy{"));
    free(page);

    recorder_reset(&recs[0]);
    recorder_reset(&recs[1]);
    check_case(count_status("/r/x", 5, 200) == 5 && count_status("/w/x", 5, 200) == 5,
               "both routes skip a", "a request through reads or writes was not answered 200");
    check_case(recorder_count(&recs[0], "GET /r/x ") + recorder_count(&recs[0], "GET /w/x ") == 0 &&
                   recorder_count(&recs[1], "GET /r/x ") == 5 &&
                   recorder_count(&recs[1], "GET /w/x ") == 5,
               "both routes skip a", "a received %d requests, b %d of reads' and %d of writes'",
               recorder_count(&recs[0], "GET /r/x ") + recorder_count(&recs[0], "GET /w/x "),
               recorder_count(&recs[1], "GET /r/x "), recorder_count(&recs[1], "GET /w/x "));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static const char passive_config[] =
    SERVER "upstreams:\n"
           "  backend:\n"
           "    servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
           "    max_fails: 1\n    fail_timeout: 1h\n    fail_on: [503]\n"
           "routes:\n"
           "  - {name: reads, match: {path_prefix: /r}, upstream: backend}\n"
           "  - {name: writes, match: {path_prefix: /w}, upstream: backend}\n"
           "  - name: own\n    match: {path_prefix: /o}\n"
           "    upstream: {servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"], "
           "max_fails: 1, fail_timeout: 1h, fail_on: [503]}\n";

/* a answers 503: the one request reads sends it skips a for writes too, logged under the
 * upstream with the route it came through; the route with its own upstream of the same URLs
 * still tries a. */
static void test_passive_failures_shared(void)
{
    char a[64], skipped[256], series[256];

    recorders_plain();
    snprintf(a, sizeof a, "http://127.0.0.1:%u", recs[0].port);
    if (start_sluice(&gw, passive_config, recs[0].port, recs[1].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    recorder_set_status(&recs[0], 503);
    /* round_robin's first turn is a. */
    check_case(get_status(gw.port, "/r/x", NULL) == 503, "reads meets a",
               "the first request through reads was not answered a's 503");
    snprintf(skipped, sizeof skipped,
             "upstream backend (route reads): server %s is skipped for fail_timeout (1h)", a);
    check_case(wait_for_log(&gw, skipped, 1, 2000), "reads meets a", "no log line \"%s\"", skipped);
    check_case(count_status("/w/x", 6, 200) == 6, "writes skips a",
               "a request through writes was not answered 200");
    check_case(recorder_count(&recs[0], "GET /w/x ") == 0 &&
                   recorder_count(&recs[1], "GET /w/x ") == 6,
               "writes skips a", "a received %d of writes' requests and b %d; expected 0 and 6",
               recorder_count(&recs[0], "GET /w/x "), recorder_count(&recs[1], "GET /w/x "));
    check_case(get_status(gw.port, "/o/x", NULL) == 503 &&
                   recorder_count(&recs[0], "GET /o/x ") == 1,
               "own keeps its own view", "the route with its own upstream did not try a first");
    snprintf(series, sizeof series,
             "sluice_upstream_requests_total{upstream=\"backend\",server=\"%s\",status_class="
             "\"5xx\"}",
             a);
    check_case(metric(&gw, series) == 1, "metrics by upstream", "%s is %g; expected 1", series,
               metric(&gw, series));
    snprintf(series, sizeof series,
             "sluice_upstream_requests_total{route=\"own\",server=\"%s\",status_class=\"5xx\"}", a);
    check_case(metric(&gw, series) == 1, "metrics by upstream", "%s is %g; expected 1", series,
               metric(&gw, series));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_shared_upstreams_tests(void)
{
    CU_pSuite s = add_suite_with("shared_upstreams", init, clean);

    add_test(s, "a shared upstream's servers are checked once", test_checked_once_per_server);
    add_test(s, "passive failures are shared by the routes naming it",
             test_passive_failures_shared);
}
