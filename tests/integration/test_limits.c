/* Limits at the gateway: 429s, their fields, and exactness under concurrency; a denied request
 * with a body is answered before its body and closes its connection. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static struct proc gw;

static const char config[] =
    "server: {listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: keyed\n    match: {path_prefix: /keyed/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n"
    "  - name: by-query\n    match: {path_prefix: /query/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"query:key\"\n"
    "    limit: {algorithm: sliding_window_log, requests: 1, per: 1h}\n"
    "  - name: second\n    match: {path_prefix: /second/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: token_bucket, requests: 1, per: 1s, burst: 1}\n"
    "  - name: race\n    match: {path_prefix: /race/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: gcra, requests: 50, per: 1h}\n"
    "  - name: dry\n    match: {path_prefix: /dry/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    dry_run: true\n"
    "    limit: {algorithm: sliding_window_counter, requests: 1, per: 1h}\n"
    "  - name: exempt\n    match: {path_prefix: /exempt/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    exempt: [\"127.0.0.0/8\"]\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    /* Two limits that both refuse the second request, one for an hour and one for a minute,
     * listed in both orders. */
    "  - name: hour-first\n    match: {path_prefix: /hour-first/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: [{name: hourly, algorithm: sliding_window_log, requests: 1, per: 1h},\n"
    "            {name: minutely, algorithm: sliding_window_log, requests: 1, per: 1m}]\n"
    "  - name: minute-first\n    match: {path_prefix: /minute-first/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: [{name: minutely, algorithm: sliding_window_log, requests: 1, per: 1m},\n"
    "            {name: hourly, algorithm: sliding_window_log, requests: 1, per: 1h}]\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static void test_denied_answer(void)
{
    const char *headers[] = {"X-API-Key: alpha", NULL};
    unsigned long before, after, conns;
    struct reply r;

    http(gw.port, "GET", "/keyed/x", headers, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header(&r, "RateLimit-Policy", "\"keyed\";q=2;w=3600");
    expect_header_has(&r, "RateLimit", "\"keyed\";r=1;t=");
    reply_free(&r);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/x", "alpha"), 200);

    upstream_stats(&before, &conns);
    http(gw.port, "GET", "/keyed/x", headers, NULL, &r);
    upstream_stats(&after, &conns);
    CU_ASSERT_EQUAL(after, before); /* the upstream never saw it */
    CU_ASSERT_EQUAL(r.status, 429);
    expect_header(&r, "Content-Type", "application/problem+json");
    expect_header(&r, "RateLimit-Policy", "\"keyed\";q=2;w=3600");
    expect_header_has(&r, "RateLimit", "\"keyed\";r=0;t=");
    CU_ASSERT_TRUE(header_number(&r, "Retry-After") >= 1);
    CU_ASSERT_TRUE(header_number(&r, "Retry-After") <= 3600);
    CU_ASSERT_PTR_NULL(header(&r, "Connection")); /* the connection stays open */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"type\":\"about:blank\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"title\":\"Too Many Requests\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"status\":429"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"detail\":"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"route\":\"keyed\""));
    reply_free(&r);
}

static void test_clients_are_isolated(void)
{
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", "bravo"), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", "bravo"), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", "bravo"), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", "charlie"), 200);
    /* Without the header the client's address is the key, its own quota. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/keyed/y", "delta"), 200);
    /* Query keys are decoded: %61 is the same client as a. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x?key=a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x?key=%61", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x?key=b", NULL), 200);
    /* Without the parameter the address is the key, whatever else the query holds, and
     * whatever a longer query before it left in memory: one quota, then 429. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x?other=abcdefghijklmnopqrstuvwxyz1", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/x?other=abcdefghijklmnopqrstuvwxyz2", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/query/y", NULL), 429);
}

static void test_retry_after_is_enough(void)
{
    struct reply r;
    long wait_s;

    CU_ASSERT_EQUAL(get_status(gw.port, "/second/x", NULL), 200);
    http(gw.port, "GET", "/second/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 429);
    wait_s = header_number(&r, "Retry-After");
    CU_ASSERT_EQUAL(wait_s, 1);
    reply_free(&r);
    sleep_ms(wait_s > 0 ? (int)wait_s * 1000 : 1000);
    CU_ASSERT_EQUAL(get_status(gw.port, "/second/x", NULL), 200);
}

/* 200 requests for one key at once, on 200 connections: exactly the quota passes. */
static void test_concurrent_race_is_exact(void)
{
    int other;

    CU_ASSERT_EQUAL(race_requests(&gw.port, 1, 200, "/race/x", "racer", &other), 50);
    CU_ASSERT_EQUAL(other, 0); /* the other 150 were 429s */
}

static void test_dry_run_never_denies(void)
{
    struct reply r;

    CU_ASSERT_EQUAL(get_status(gw.port, "/dry/x", NULL), 200);
    http(gw.port, "GET", "/dry/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header_has(&r, "RateLimit", "\"dry\";r=0;");
    reply_free(&r);
}

static void test_exempt_addresses(void)
{
    struct reply r;

    for (int i = 0; i < 5; i++) {
        http(gw.port, "GET", "/exempt/x", NULL, NULL, &r);
        CU_ASSERT_EQUAL(r.status, 200);
        CU_ASSERT_PTR_NULL(header(&r, "RateLimit"));
        reply_free(&r);
    }
}

/* Sends `len` bytes of `request` in one write on a new connection and reads into `answer`
 * (`cap` bytes, NUL-terminated) until the server closes the connection or `timeout_ms` passes;
 * true when it closed. */
static bool send_and_read_to_close(unsigned port, const char *request, size_t len, char *answer,
                                   size_t cap, int timeout_ms)
{
    double deadline = seconds_now() + timeout_ms / 1000.0;
    int fd = raw_connect(port);
    bool closed = false;
    size_t got = 0;

    answer[0] = '\0';
    if (fd < 0)
        return false;
    if (send(fd, request, len, MSG_NOSIGNAL) == (ssize_t)len) {
        for (;;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int left = (int)((deadline - seconds_now()) * 1000);
            ssize_t n;

            if (left <= 0 || poll(&p, 1, left) <= 0)
                break;
            n = recv(fd, answer + got, cap - got - 1, 0);
            if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                closed = true;
                break;
            }
            if (n < 0 || (got += (size_t)n) + 1 >= cap)
                break;
            answer[got] = '\0';
        }
    }
    close(fd);
    return closed;
}

/* The three checks on a denied POST: one answer, a 429 that says the connection closes, the
 * connection closed, and nothing at the upstream. */
static void expect_denied_and_closed(const char *label, const char *answer, bool closed,
                                     struct recorder *rec)
{
    char shown[1024], *upstream;
    size_t upstream_len;

    visible_bytes(answer, strlen(answer), shown, sizeof shown);
    check_case(strncmp(answer, "HTTP/1.1 429 ", 13) == 0, label, "the client got: %s", shown);
    check_case(count_responses(answer) == 1, label, "%d answers, expected one: %s",
               count_responses(answer), shown);
    check_case(strcasestr(answer, "\r\nConnection: close\r\n") != NULL, label,
               "no \"Connection: close\": %s", shown);
    check_case(strcasestr(answer, "\r\nRetry-After: ") != NULL &&
                   strstr(answer, "\"status\":429") != NULL,
               label, "not the limit's problem+json answer: %s", shown);
    check_case(closed, label, "the connection was left open after: %s", shown);
    upstream = recorder_bytes(rec, &upstream_len);
    check_case(upstream_len == 0, label, "the upstream received \"%s\"",
               visible_bytes(upstream, upstream_len, shown, sizeof shown));
    free(upstream);
}

/* README "A denied request without a body is answered on the same keep-alive connection; one
 * with a body is answered at once and its connection closed, so the body is never read." At
 * once: before the body has come (client_timeout is far longer than the wait). Never read: a
 * request pipelined behind the body, for a client with quota left, is neither answered nor
 * forwarded. */
static void test_denied_post_closes_unread(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\", client_timeout: 60s}\n"
        "routes:\n  - name: posted\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n";
    static const char half_body[] = "POST /orders HTTP/1.1\r\nHost: h\r\nX-API-Key: poster\r\n"
                                    "Content-Type: application/json\r\nContent-Length: 1000\r\n"
                                    "\r\n{\"item\": 1,";
    static const char pipelined[] = "POST /orders HTTP/1.1\r\nHost: h\r\nX-API-Key: poster\r\n"
                                    "Content-Type: application/json\r\nContent-Length: 11\r\n"
                                    "\r\n{\"item\": 2}"
                                    "GET /behind HTTP/1.1\r\nHost: h\r\nX-API-Key: fresh\r\n\r\n";
    static const char chunked[] =
        "POST /orders HTTP/1.1\r\nHost: h\r\nX-API-Key: poster\r\n"
        "Transfer-Encoding: chunked\r\n\r\nb\r\n{\"item\": 3}\r\n0\r\n\r\n"
        "GET /behind HTTP/1.1\r\nHost: h\r\nX-API-Key: fresh\r\n\r\n";
    struct recorder rec;
    struct proc p;
    char answer[8192];
    bool closed;

    CU_ASSERT_EQUAL_FATAL(recorder_start(&rec), 0);
    if (start_sluice(&p, config, rec.port) != 0) {
        CU_FAIL("sluice did not start");
        recorder_stop(&rec);
        return;
    }
    CU_ASSERT_EQUAL(get_status(p.port, "/spend", "poster"), 200);
    CU_ASSERT_EQUAL(recorder_requests(&rec), 1);

    recorder_reset(&rec);
    closed = send_and_read_to_close(p.port, half_body, sizeof half_body - 1, answer, sizeof answer,
                                    10000);
    expect_denied_and_closed("a POST denied before its body's end", answer, closed, &rec);

    recorder_reset(&rec);
    closed = send_and_read_to_close(p.port, pipelined, sizeof pipelined - 1, answer, sizeof answer,
                                    10000);
    expect_denied_and_closed("a POST denied with a GET pipelined behind it", answer, closed, &rec);

    recorder_reset(&rec);
    closed =
        send_and_read_to_close(p.port, chunked, sizeof chunked - 1, answer, sizeof answer, 10000);
    expect_denied_and_closed("a chunked POST denied with a GET pipelined behind it", answer, closed,
                             &rec);

    /* The client behind it has its quota: on a connection of its own it is served. */
    CU_ASSERT_EQUAL(get_status(p.port, "/behind", "fresh"), 200);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
    recorder_stop(&rec);
}

/* Both limits refuse: the one that makes the client wait longest binds. Retry-After, the
 * RateLimit field and the access log's limit all name the hour, whichever order the route
 * lists its limits in. */
static void test_longest_wait_binds(void)
{
    static const char *const routes[] = {"/hour-first/", "/minute-first/"};

    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        char first[64], second[64], *line;
        struct reply r;
        long wait_s;

        snprintf(first, sizeof first, "%sfirst", routes[i]);
        snprintf(second, sizeof second, "%ssecond", routes[i]);
        check_case(get_status(gw.port, first, NULL) == 200, routes[i], "the first was refused");
        http(gw.port, "GET", second, NULL, NULL, &r);
        check_case(r.status == 429, routes[i], "the second got %ld", r.status);
        wait_s = header_number(&r, "Retry-After");
        check_case(wait_s > 3000 && wait_s <= 3600, routes[i],
                   "Retry-After: %ld; the hour's wait is about 3600, the minute's 60", wait_s);
        expect_header_has(&r, "RateLimit", "\"hourly\";r=0;");
        reply_free(&r);
        line = access_log_line(&gw, second);
        check_case(line != NULL && strstr(line, "\"limit\":\"hourly\"") != NULL, routes[i],
                   "access log: %s", line ? line : "no line");
        free(line);
    }
}

void register_limits_tests(void)
{
    CU_pSuite s = add_suite_with("limits", init, clean);

    add_test(s, "a denied request: 429, fields, problem+json", test_denied_answer);
    add_test(s, "clients are limited apart", test_clients_are_isolated);
    add_test(s, "waiting Retry-After is enough", test_retry_after_is_enough);
    add_test(s, "200 racing requests, exactly the quota", test_concurrent_race_is_exact);
    add_test(s, "dry_run decides but never denies", test_dry_run_never_denies);
    add_test(s, "exempt addresses are never limited", test_exempt_addresses);
    add_test(s, "a denied POST: answered before its body, closed, nothing behind it read",
             test_denied_post_closes_unread);
    add_test(s, "two limits refuse: the longest wait binds", test_longest_wait_binds);
}
