/* algorithm: concurrency seen from outside: at most `requests` of a key's requests in flight,
 * whatever races for them; a slot back when its request ends, by its answer, an upstream's
 * failure or its client's leaving; the RateLimit fields and Retry-After it sends. Against the
 * test upstream, whose /slow?ms=N answers after N ms and whose /stats counts what reached it.
 * (A tunnel holding its slot while open is in test_tunnels.c.) */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: five\n    match: {path_prefix: /slow}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 5}\n"
    "  - name: one\n    match: {path_prefix: /one/}\n    strip_prefix: true\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 1}\n"
    "  - name: down\n    match: {path_prefix: /down/}\n    upstream: \"http://127.0.0.1:1\"\n"
    "    limit: {name: cap, algorithm: concurrency, requests: 1}\n";

static struct proc gw;

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static unsigned long upstream_requests(void)
{
    unsigned long requests, connections;

    upstream_stats(&requests, &connections);
    return requests;
}

/* Waits up to 5 s for the route's slots in use to come back to 0. */
static bool slots_back(const char *route)
{
    char series[128];

    snprintf(series, sizeof series, "sluice_limit_in_flight{route=\"%s\",limit=\"cap\"}", route);
    for (int i = 0; i < 250; i++) {
        if (metric_now(&gw, series) == 0)
            return true;
        sleep_ms(20);
    }
    return false;
}

/* sluice simulate on what the gateway logged: a concurrency limit is not replayed (a log does
 * not say which requests overlapped), and its rows say so rather than guess. */
static void expect_not_replayed(int lines)
{
    char command[512], out[16384];
    int code;

    check_case(wait_for_access_lines(&gw, lines) >= lines, "simulate", "the log lacks lines");
    snprintf(command, sizeof command, "simulate -c %s %s", gw.config_path, gw.access_path);
    code = run_sluice(command, out, sizeof out);
    check_case(code == 0 && strstr(out, "not replayed: a log does not say which requests were "
                                        "in flight together") != NULL,
               "simulate", "exit %d:\n%.800s", code, out);
    snprintf(command, sizeof command, "simulate --format json -c %s %s", gw.config_path,
             gw.access_path);
    code = run_sluice(command, out, sizeof out);
    check_case(code == 0 && strstr(out, "\"name\":\"cap\",\"plan\":null,\"algorithm\":"
                                        "\"concurrency\",\"key\":\"ip\",\"replayed\":false,"
                                        "\"requests\":100,\"denied\":0,") != NULL,
               "simulate", "exit %d:\n%.800s", code, out);
}

/* 50 at once against a cap of 5, each held 800 ms upstream: exactly 5 pass and reach the
 * upstream, 45 get 429; once they end, 5 more pass. */
static void test_fifty_race_for_five(void)
{
    unsigned long before = upstream_requests();
    int ok, other;

    ok = race_requests(&gw.port, 1, 50, "/slow?ms=800", NULL, &other);
    check_case(ok == 5 && other == 0, "50 at once",
               "%d answered 200 (expected 5), %d neither "
               "200 nor 429",
               ok, other);
    check_case(upstream_requests() - before == 5, "50 at once", "the upstream saw %lu",
               upstream_requests() - before);
    check_case(slots_back("five"), "50 at once", "the slots did not come back");
    ok = race_requests(&gw.port, 1, 50, "/slow?ms=800", NULL, &other);
    check_case(ok == 5 && other == 0, "again", "%d answered 200 (expected 5)", ok);
    expect_not_replayed(100);
}

static void *slow_request(void *arg)
{
    (void)arg;
    get_status(gw.port, "/one/slow?ms=1000", NULL);
    return NULL;
}

/* While one request holds the one slot: 429, Retry-After 1, and the fields that say what the
 * limit counts (the draft's concurrent-requests unit, no window). */
static void test_answer_fields(void)
{
    pthread_t holder;
    struct reply r;

    CU_ASSERT_EQUAL(http(gw.port, "GET", "/one/x", NULL, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header(&r, "RateLimit-Policy", "\"cap\";q=1;qu=\"concurrent-requests\"");
    reply_free(&r);
    CU_ASSERT_FATAL(pthread_create(&holder, NULL, slow_request, NULL) == 0);
    for (int i = 0; i < 100 && metric_now(&gw, "sluice_limit_in_flight{route=\"one\","
                                               "limit=\"cap\"}") != 1;
         i++)
        sleep_ms(10);
    CU_ASSERT_EQUAL(http(gw.port, "GET", "/one/x", NULL, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.status, 429);
    expect_header(&r, "Retry-After", "1");
    expect_header(&r, "RateLimit", "\"cap\";r=0;t=1");
    reply_free(&r);
    pthread_join(holder, NULL);
    check_case(slots_back("one"), "after the slow one", "its slot did not come back");
    CU_ASSERT_EQUAL(get_status(gw.port, "/one/x", NULL), 200);
}

/* An upstream that fails ends the request: its slot comes back at once. */
static void test_failure_gives_back(void)
{
    int failed = 0;

    for (int i = 0; i < 5; i++)
        failed += get_status(gw.port, "/down/x", NULL) == 502;
    check_case(failed == 5, "upstream failure", "%d of 5 answered 502; a slot was kept", failed);
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

static void *leaving_request(void *arg)
{
    char url[128];
    CURL *curl = curl_easy_init();

    (void)arg;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/one/slow?ms=1500", gw.port);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 700L);
    curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    return NULL;
}

/* A client that leaves before its answer: its slot, held meanwhile, comes back once sluice
 * sees it gone (at the latest when the upstream's answer cannot be sent), not kept for good. */
static void test_leaving_client_gives_back(void)
{
    pthread_t client;
    bool held = false;

    CU_ASSERT_FATAL(pthread_create(&client, NULL, leaving_request, NULL) == 0);
    for (int i = 0; i < 60 && !held; i++) {
        held = metric_now(&gw, "sluice_limit_in_flight{route=\"one\",limit=\"cap\"}") == 1;
        if (!held)
            sleep_ms(10);
    }
    pthread_join(client, NULL);
    check_case(held, "client left", "the request never held its slot");
    check_case(slots_back("one"), "client left", "its slot was kept");
    CU_ASSERT_EQUAL(get_status(gw.port, "/one/x", NULL), 200);
}

/* Answers streamed with a Content-Length: the slot is free again with the last byte, so a
 * client's next request, sent as soon as it has read one, never finds it taken. */
static void test_streamed_answers_back_to_back(void)
{
    int ok = 0;

    for (int i = 0; i < 20; i++)
        ok += get_status(gw.port, "/one/bytes?n=300000", NULL) == 200;
    check_case(ok == 20, "back to back", "%d of 20 sequential answers got 200", ok);
}

void register_concurrency_it_tests(void)
{
    CU_pSuite s = add_suite_with("concurrency", init, clean);

    add_test(s, "50 racing for 5 slots: exactly 5 pass", test_fifty_race_for_five);
    add_test(s, "429 with Retry-After 1 and the fields", test_answer_fields);
    add_test(s, "an upstream's failure gives the slot back", test_failure_gives_back);
    add_test(s, "a client that leaves gives the slot back", test_leaving_client_gives_back);
    add_test(s, "streamed answers back to back find the slot free",
             test_streamed_answers_back_to_back);
}
