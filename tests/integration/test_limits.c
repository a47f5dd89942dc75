/* Limits at the gateway: 429s, their fields, and exactness under concurrency. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static long status_of(const char *target, const char *api_key)
{
    char field[128];
    const char *headers[] = {field, NULL};
    struct reply r;
    long status;

    snprintf(field, sizeof field, "X-API-Key: %s", api_key ? api_key : "");
    http(gw.port, "GET", target, api_key ? headers : NULL, NULL, &r);
    status = r.status;
    reply_free(&r);
    return status;
}

static void test_denied_answer(void)
{
    const char *headers[] = {"X-API-Key: alpha", NULL};
    unsigned long before, after, conns;
    struct reply r;

    http(gw.port, "GET", "/keyed/x", headers, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_STRING_EQUAL(header(&r, "RateLimit-Policy"), "\"keyed\";q=2;w=3600");
    CU_ASSERT_PTR_NOT_NULL(strstr(header(&r, "RateLimit"), "\"keyed\";r=1;t="));
    reply_free(&r);
    CU_ASSERT_EQUAL(status_of("/keyed/x", "alpha"), 200);

    upstream_stats(&before, &conns);
    http(gw.port, "GET", "/keyed/x", headers, NULL, &r);
    upstream_stats(&after, &conns);
    CU_ASSERT_EQUAL(after, before); /* the upstream never saw it */
    CU_ASSERT_EQUAL(r.status, 429);
    CU_ASSERT_STRING_EQUAL(header(&r, "Content-Type"), "application/problem+json");
    CU_ASSERT_STRING_EQUAL(header(&r, "RateLimit-Policy"), "\"keyed\";q=2;w=3600");
    CU_ASSERT_PTR_NOT_NULL(strstr(header(&r, "RateLimit"), "\"keyed\";r=0;t="));
    CU_ASSERT_TRUE(atol(header(&r, "Retry-After")) >= 1);
    CU_ASSERT_TRUE(atol(header(&r, "Retry-After")) <= 3600);
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
    CU_ASSERT_EQUAL(status_of("/keyed/y", "bravo"), 200);
    CU_ASSERT_EQUAL(status_of("/keyed/y", "bravo"), 200);
    CU_ASSERT_EQUAL(status_of("/keyed/y", "bravo"), 429);
    CU_ASSERT_EQUAL(status_of("/keyed/y", "charlie"), 200);
    /* Without the header the client's address is the key, its own quota. */
    CU_ASSERT_EQUAL(status_of("/keyed/y", NULL), 200);
    CU_ASSERT_EQUAL(status_of("/keyed/y", NULL), 200);
    CU_ASSERT_EQUAL(status_of("/keyed/y", NULL), 429);
    CU_ASSERT_EQUAL(status_of("/keyed/y", "delta"), 200);
    /* Query keys are decoded: %61 is the same client as a. */
    CU_ASSERT_EQUAL(status_of("/query/x?key=a", NULL), 200);
    CU_ASSERT_EQUAL(status_of("/query/x?key=%61", NULL), 429);
    CU_ASSERT_EQUAL(status_of("/query/x?key=b", NULL), 200);
}

static void test_retry_after_is_enough(void)
{
    struct reply r;
    long wait_s;

    CU_ASSERT_EQUAL(status_of("/second/x", NULL), 200);
    http(gw.port, "GET", "/second/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 429);
    wait_s = atol(header(&r, "Retry-After"));
    CU_ASSERT_EQUAL(wait_s, 1);
    reply_free(&r);
    sleep_ms((int)wait_s * 1000);
    CU_ASSERT_EQUAL(status_of("/second/x", NULL), 200);
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

/* 200 requests for one key at once, on 200 connections: exactly the quota passes. */
static void test_concurrent_race_is_exact(void)
{
    enum { N = 200 };
    CURLM *multi = curl_multi_init();
    CURL *easy[N];
    struct curl_slist *headers = curl_slist_append(NULL, "X-API-Key: racer");
    char url[64];
    int running = 0, ok = 0, denied = 0, other = 0;

    snprintf(url, sizeof url, "http://127.0.0.1:%u/race/x", gw.port);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)N);
    for (int i = 0; i < N; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy[i], CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy[i], CURLOPT_TIMEOUT, 30L);
        curl_multi_add_handle(multi, easy[i]);
    }
    do {
        curl_multi_perform(multi, &running);
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    } while (running > 0);
    for (int i = 0; i < N; i++) {
        long status = 0;

        curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &status);
        ok += status == 200;
        denied += status == 429;
        other += status != 200 && status != 429;
        curl_multi_remove_handle(multi, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    CU_ASSERT_EQUAL(ok, 50);
    CU_ASSERT_EQUAL(denied, 150);
    CU_ASSERT_EQUAL(other, 0);
}

static void test_dry_run_never_denies(void)
{
    struct reply r;

    CU_ASSERT_EQUAL(status_of("/dry/x", NULL), 200);
    http(gw.port, "GET", "/dry/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(header(&r, "RateLimit"), "\"dry\";r=0;"));
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

void register_limits_tests(void)
{
    CU_pSuite s = add_suite_with("limits", init, clean);

    add_test(s, "a denied request: 429, fields, problem+json", test_denied_answer);
    add_test(s, "clients are limited apart", test_clients_are_isolated);
    add_test(s, "waiting Retry-After is enough", test_retry_after_is_enough);
    add_test(s, "200 racing requests, exactly the quota", test_concurrent_race_is_exact);
    add_test(s, "dry_run decides but never denies", test_dry_run_never_denies);
    add_test(s, "exempt addresses are never limited", test_exempt_addresses);
}
