/* Consumers and plans (config.h, "Consumers and plans"): a known API key is counted under its
 * consumer's name in the route's version of the consumer's plan; an unknown or missing key is
 * refused with 401 (unknown_key: reject) or counted by address under the anonymous plan
 * (unknown_key: anonymous); server.consumer_header names the consumer upstream and is never
 * taken from the client; the access log names consumer and plan; a reload keeps a consumer's
 * state while its plan is unchanged, and one moved back to a plan finds what it spent there.
 * Each test starts a gateway of its own. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define ACME_KEY  "acme-key-0001"
#define BOB_KEY   "bob-key-0002"
#define CAROL_KEY "carol-key-0003"
/* The consumer "hashed" is configured by digest only: printf %s hashed-key-7f3a | sha256sum */
#define HASHED_KEY    "hashed-key-7f3a"
#define HASHED_DIGEST "59302434fafd140bf1a68da3b027cac922ba13c0e38dda94aa827b337b8fd2d6"

/* What sluice adds to what a client on 127.0.0.1 sends (as in test_upstream_edge.c). */
#define FORWARDED_BY(host)                                                                         \
    "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: " host "\r\n"

static struct recorder rec; /* the upstream of the consumer_header test */

/* gold 4/1h and free 2/1h; acme is gold, bob free, hashed gold by digest. Routes: /api/ (the
 * top-level plans), /special/ (its own gold: 6/1h), /q/ (keyed by the query parameter
 * api_key), /anon/ (unknown_key: anonymous, its own limit 100/1h and no anonymous plan). */
static const char main_config[] =
    "server: {listen: \"127.0.0.1:0\"}\n"
    "plans:\n"
    "  gold: {algorithm: fixed_window, requests: 4, per: 1h}\n"
    "  free: {algorithm: fixed_window, requests: 2, per: 1h}\n"
    "consumers:\n"
    "  - {name: acme, key: \"" ACME_KEY "\", plan: gold}\n"
    "  - {name: bob, key: \"" BOB_KEY "\", plan: free}\n"
    "  - {name: hashed, key: \"sha256:" HASHED_DIGEST "\", plan: gold}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    plan: free\n"
    "  - name: special\n    match: {path_prefix: /special/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    plan: free\n"
    "    plans: {gold: {algorithm: fixed_window, requests: 6, per: 1h}}\n"
    "  - name: byquery\n    match: {path_prefix: /q/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"query:api_key\"\n"
    "    plan: free\n"
    "  - name: anon\n    match: {path_prefix: /anon/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    unknown_key: anonymous\n"
    "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n";

static int init(void)
{
    return recorder_start(&rec);
}

static int clean(void)
{
    recorder_stop(&rec);
    return 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

/* GET `target` with the header line `field` ("Name: value"), or none when NULL. */
static void get_with(unsigned port, const char *target, const char *field, struct reply *r)
{
    const char *headers[] = {field, NULL};

    http(port, "GET", target, field ? headers : NULL, NULL, r);
}

/* A key no consumer holds, different on every call. */
static const char *random_key(void)
{
    static char key[64];
    static unsigned n;

    snprintf(key, sizeof key, "rnd-%d-%u-%ld", (int)getpid(), n++, random());
    return key;
}

static unsigned long upstream_requests(void)
{
    unsigned long requests, connections;

    upstream_stats(&requests, &connections);
    return requests;
}

/* `n` GETs for `target` with X-API-Key `key` (none when NULL) each answered `status`, with
 * RateLimit-Policy `policy` (unchecked when NULL). */
static void expect_answers(unsigned port, const char *target, const char *key, int n, long status,
                           const char *policy, const char *label)
{
    char field[256];

    snprintf(field, sizeof field, "X-API-Key: %s", key ? key : "");
    for (int i = 0; i < n; i++) {
        struct reply r;
        const char *seen;

        get_with(port, target, key ? field : NULL, &r);
        check_case(r.status == status, label, "request %d for %s: status %ld, expected %ld", i + 1,
                   target, r.status, status);
        if (policy != NULL) {
            seen = header(&r, "RateLimit-Policy");
            check_case(seen != NULL && strcmp(seen, policy) == 0, label,
                       "request %d for %s: RateLimit-Policy %s, expected %s", i + 1, target,
                       seen ? seen : "(none)", policy);
        }
        reply_free(&r);
    }
}

/* How many header lines named `name` (any case) the request head in `bytes` holds. */
static int count_fields(const char *bytes, const char *name)
{
    size_t len = strlen(name);
    int n = 0;

    for (const char *line = strstr(bytes, "\r\n"); line != NULL; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncmp(line, "\r\n", 2) == 0)
            break; /* the end of the head */
        n += strncasecmp(line, name, len) == 0 && line[len] == ':';
    }
    return n;
}

/* --- 1. plans ---------------------------------------------------------------------------- */

/* A gold consumer gets gold's quota, a free one free's; RateLimit-Policy names the plan; a
 * route's own version of gold changes gold on that route only. */
static void test_plans_set_quotas(void)
{
    struct proc gw;
    struct reply r;
    const char *field;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, main_config, upstream.port), 0);

    get_with(gw.port, "/api/gold", "X-API-Key: " ACME_KEY, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    field = header(&r, "RateLimit");
    check_case(field != NULL && strstr(field, "\"gold\";r=3;t=") != NULL, "gold first",
               "RateLimit %s, expected \"gold\";r=3;t=...", field ? field : "(none)");
    reply_free(&r);
    expect_answers(gw.port, "/api/gold", ACME_KEY, 3, 200, "\"gold\";q=4;w=3600", "gold 2-4");
    get_with(gw.port, "/api/gold", "X-API-Key: " ACME_KEY, &r);
    CU_ASSERT_EQUAL(r.status, 429);
    field = header(&r, "RateLimit-Policy");
    check_case(field != NULL && strcmp(field, "\"gold\";q=4;w=3600") == 0, "gold 5th",
               "RateLimit-Policy %s", field ? field : "(none)");
    CU_ASSERT_PTR_NOT_NULL(r.body != NULL ? strstr(r.body, "\"status\":429") : NULL);
    reply_free(&r);

    expect_answers(gw.port, "/api/free", BOB_KEY, 2, 200, "\"free\";q=2;w=3600", "free 1-2");
    expect_answers(gw.port, "/api/free", BOB_KEY, 1, 429, "\"free\";q=2;w=3600", "free 3rd");
    /* acme is still held to gold: bob's requests were not counted for it, nor its for bob. */
    expect_answers(gw.port, "/api/gold", ACME_KEY, 1, 429, NULL, "gold after free");

    /* /special has its own gold, 6 an hour; free there is the top-level one. */
    expect_answers(gw.port, "/special/x", ACME_KEY, 6, 200, "\"gold\";q=6;w=3600", "special gold");
    expect_answers(gw.port, "/special/x", ACME_KEY, 1, 429, "\"gold\";q=6;w=3600",
                   "special gold 7th");
    expect_answers(gw.port, "/special/x", BOB_KEY, 2, 200, "\"free\";q=2;w=3600", "special free");
    expect_answers(gw.port, "/special/x", BOB_KEY, 1, 429, NULL, "special free 3rd");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 2. unknown keys --------------------------------------------------------------------- */

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

static void test_unknown_key_rejected(void)
{
    struct proc gw;
    struct reply r;
    unsigned long before, after;
    const char *field;
    char key_field[128];
    CURL *curl;
    long status = 0, connects = -1;
    struct curl_slist *list;
    char url[128];

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, main_config, upstream.port), 0);

    before = upstream_requests();
    get_with(gw.port, "/api/x", "X-API-Key: not-a-key", &r);
    CU_ASSERT_EQUAL(r.status, 401);
    field = header(&r, "Content-Type");
    check_case(field != NULL && strcmp(field, "application/problem+json") == 0, "401 type",
               "Content-Type %s", field ? field : "(none)");
    CU_ASSERT_PTR_NULL(header(&r, "Connection")); /* the connection stays open */
    check_case(r.body != NULL && strstr(r.body, "\"status\":401") != NULL &&
                   strstr(r.body, "\"title\":\"Unauthorized\"") != NULL &&
                   strstr(r.body, "\"detail\":\"an API key issued for this API is required in "
                                  "the X-API-Key header\"") != NULL,
               "401 body", "body %s", r.body ? r.body : "(none)");
    reply_free(&r);

    /* No key at all, an empty one: the same. */
    get_with(gw.port, "/api/x", NULL, &r);
    CU_ASSERT_EQUAL(r.status, 401);
    CU_ASSERT_PTR_NOT_NULL(r.body != NULL ? strstr(r.body, "\"status\":401") : NULL);
    reply_free(&r);
    get_with(gw.port, "/api/x", "X-API-Key;", &r); /* curl's way to send it empty */
    CU_ASSERT_EQUAL(r.status, 401);
    reply_free(&r);
    /* Near misses of a held key. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/api/x", "ACME-KEY-0001"), 401);
    CU_ASSERT_EQUAL(get_status(gw.port, "/api/x", ACME_KEY "x"), 401);
    CU_ASSERT_EQUAL(get_status(gw.port, "/api/x", "acme-key-000"), 401);

    /* Rotating keys is no way around it, nor a way to the upstream. */
    for (int i = 0; i < 30; i++) {
        long s = get_status(gw.port, "/api/x", random_key());

        check_case(s == 401, "rotating keys", "random key %d: status %ld", i, s);
    }
    after = upstream_requests();
    check_case(after == before, "unknown keys", "the upstream got %lu request(s), expected none",
               after - before);

    /* On one connection: the 401, then a known key's request is served on the same one. */
    curl = curl_easy_init();
    snprintf(url, sizeof url, "http://127.0.0.1:%u/api/x", gw.port);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    list = curl_slist_append(NULL, "X-API-Key: still-not-a-key");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    CU_ASSERT_EQUAL(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    CU_ASSERT_EQUAL(status, 401);
    curl_slist_free_all(list);
    snprintf(key_field, sizeof key_field, "X-API-Key: %s", BOB_KEY);
    list = curl_slist_append(NULL, key_field);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    CU_ASSERT_EQUAL(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
    CU_ASSERT_EQUAL(status, 200);
    check_case(connects == 0, "kept open", "the request after the 401 needed %ld new connection(s)",
               connects);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    CU_ASSERT_EQUAL(upstream_requests(), after + 1); /* only the known key's */
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 3. keys given by digest ------------------------------------------------------------- */

static void test_sha256_key(void)
{
    struct proc gw;
    unsigned long before;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, main_config, upstream.port), 0);
    before = upstream_requests();
    expect_answers(gw.port, "/api/h", HASHED_KEY, 4, 200, "\"gold\";q=4;w=3600", "hashed 1-4");
    expect_answers(gw.port, "/api/h", HASHED_KEY, 1, 429, "\"gold\";q=4;w=3600", "hashed 5th");
    CU_ASSERT_EQUAL(upstream_requests(), before + 4);
    /* The digest is not the key, in either spelling, and neither is the key in another case. */
    expect_answers(gw.port, "/api/h", HASHED_DIGEST, 1, 401, NULL, "the digest as key");
    expect_answers(gw.port, "/api/h", "sha256:" HASHED_DIGEST, 1, 401, NULL, "sha256:digest");
    expect_answers(gw.port, "/api/h", "HASHED-KEY-7F3A", 1, 401, NULL, "upper case");
    CU_ASSERT_EQUAL(upstream_requests(), before + 4);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 4. unknown_key: anonymous ----------------------------------------------------------- */

static void test_unknown_key_anonymous(void)
{
    static const char with_plan[] =
        "server: {listen: \"127.0.0.1:0\"}\n"
        "plans:\n"
        "  gold: {algorithm: fixed_window, requests: 4, per: 1h}\n"
        "  anonymous: {algorithm: fixed_window, requests: 2, per: 1h}\n"
        "consumers:\n  - {name: acme, key: \"" ACME_KEY "\", plan: gold}\n"
        "routes:\n"
        "  - name: open\n    match: {path_prefix: /open/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    unknown_key: anonymous\n"
        "    limit: {algorithm: fixed_window, requests: 5, per: 1h}\n"
        "  - name: mine\n    match: {path_prefix: /mine/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    unknown_key: anonymous\n    plan: gold\n"
        "    plans: {anonymous: {algorithm: fixed_window, requests: 1, per: 1h}}\n";
    static const char without_plan[] =
        "server: {listen: \"127.0.0.1:0\"}\n"
        "plans:\n  gold: {algorithm: fixed_window, requests: 4, per: 1h}\n"
        "consumers:\n  - {name: acme, key: \"" ACME_KEY "\", plan: gold}\n"
        "routes:\n"
        "  - name: own\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    unknown_key: anonymous\n"
        "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n";
    struct proc gw;
    unsigned long before;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, with_plan, upstream.port), 0);
    before = upstream_requests();
    /* Every random key from this address shares the anonymous plan's 2 an hour. */
    expect_answers(gw.port, "/open/x", random_key(), 1, 200, "\"anonymous\";q=2;w=3600", "anon 1");
    expect_answers(gw.port, "/open/x", random_key(), 1, 200, "\"anonymous\";q=2;w=3600", "anon 2");
    expect_answers(gw.port, "/open/x", random_key(), 1, 429, "\"anonymous\";q=2;w=3600", "anon 3");
    expect_answers(gw.port, "/open/x", NULL, 1, 429, "\"anonymous\";q=2;w=3600", "anon, no key");
    CU_ASSERT_EQUAL(upstream_requests(), before + 2);
    /* A known key is not anonymous. */
    expect_answers(gw.port, "/open/x", ACME_KEY, 4, 200, "\"gold\";q=4;w=3600", "known on open");
    expect_answers(gw.port, "/open/x", ACME_KEY, 1, 429, NULL, "known on open, 5th");
    /* A route's own version of the anonymous plan: 1 an hour there. */
    expect_answers(gw.port, "/mine/x", random_key(), 1, 200, "\"anonymous\";q=1;w=3600", "mine 1");
    expect_answers(gw.port, "/mine/x", random_key(), 1, 429, "\"anonymous\";q=1;w=3600", "mine 2");
    expect_answers(gw.port, "/mine/x", ACME_KEY, 1, 200, "\"gold\";q=4;w=3600", "known on mine");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    /* Without a plan named anonymous, the route's own limits, by address. */
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, without_plan, upstream.port), 0);
    expect_answers(gw.port, "/x", random_key(), 1, 200, "\"own\";q=3;w=3600", "own 1");
    expect_answers(gw.port, "/x", NULL, 1, 200, "\"own\";q=3;w=3600", "own 2");
    expect_answers(gw.port, "/x", random_key(), 1, 200, "\"own\";q=3;w=3600", "own 3");
    expect_answers(gw.port, "/x", random_key(), 1, 429, "\"own\";q=3;w=3600", "own 4");
    expect_answers(gw.port, "/x", ACME_KEY, 1, 200, "\"gold\";q=4;w=3600", "known on own");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 5. server.consumer_header ----------------------------------------------------------- */

/* Sends `request` (a whole head from a client) and checks that the upstream got exactly
 * `expected`, with `n_consumer` X-Consumer fields. */
static void expect_upstream_head(const struct proc *gw, const char *label, const char *request,
                                 const char *expected, int n_consumer)
{
    char answer[8192], seen[4096], want[4096];
    bool closed;
    int status;
    size_t len = 0;
    char *bytes;

    recorder_reset(&rec);
    status = raw_session(gw->port, request, strlen(request), answer, sizeof answer, 5000, &closed);
    check_case(status == 200, label, "status %d: %s", status, answer);
    bytes = recorder_bytes(&rec, &len);
    recorder_strip_request_ids(bytes, &len);
    check_case(bytes != NULL && len == strlen(expected) && memcmp(bytes, expected, len) == 0, label,
               "the upstream got \"%s\", expected \"%s\"",
               visible_bytes(bytes ? bytes : "", len, seen, sizeof seen),
               visible_bytes(expected, strlen(expected), want, sizeof want));
    check_case(bytes != NULL && count_fields(bytes, "X-Consumer") == n_consumer, label,
               "%d X-Consumer field(s) upstream, expected %d",
               bytes ? count_fields(bytes, "X-Consumer") : -1, n_consumer);
    check_case(bytes != NULL && strstr(bytes, "forged") == NULL, label,
               "the client's X-Consumer reached the upstream");
    free(bytes);
}

static void test_consumer_header(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\", consumer_header: X-Consumer}\n"
        "plans:\n"
        "  gold: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "  anonymous: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "consumers:\n  - {name: acme, key: \"" ACME_KEY "\", plan: gold}\n"
        "routes:\n"
        "  - name: all\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    unknown_key: anonymous\n    plan: gold\n";
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, rec.port), 0);
    expect_upstream_head(&gw, "known, forged",
                         "GET /known HTTP/1.1\r\nHost: h\r\nX-API-Key: " ACME_KEY
                         "\r\nX-Consumer: forged\r\nConnection: close\r\n\r\n",
                         "GET /known HTTP/1.1\r\nHost: h\r\nX-API-Key: " ACME_KEY
                         "\r\n" FORWARDED_BY("h") "X-Consumer: acme\r\n\r\n",
                         1);
    expect_upstream_head(
        &gw, "known, forged twice in other cases",
        "GET /twice HTTP/1.1\r\nHost: h\r\nx-consumer: forged\r\nX-API-Key: " ACME_KEY
        "\r\nX-CONSUMER: forged2\r\nConnection: close\r\n\r\n",
        "GET /twice HTTP/1.1\r\nHost: h\r\nX-API-Key: " ACME_KEY
        "\r\n" FORWARDED_BY("h") "X-Consumer: acme\r\n\r\n",
        1);
    expect_upstream_head(&gw, "known, none sent",
                         "GET /plain HTTP/1.1\r\nHost: h\r\nX-API-Key: " ACME_KEY
                         "\r\nConnection: close\r\n\r\n",
                         "GET /plain HTTP/1.1\r\nHost: h\r\nX-API-Key: " ACME_KEY
                         "\r\n" FORWARDED_BY("h") "X-Consumer: acme\r\n\r\n",
                         1);
    expect_upstream_head(
        &gw, "unknown key, forged",
        "GET /anon HTTP/1.1\r\nHost: h\r\nX-API-Key: nobody\r\n"
        "X-Consumer: forged\r\nConnection: close\r\n\r\n",
        "GET /anon HTTP/1.1\r\nHost: h\r\nX-API-Key: nobody\r\n" FORWARDED_BY("h") "\r\n", 0);
    expect_upstream_head(&gw, "no key, forged",
                         "GET /nokey HTTP/1.1\r\nHost: h\r\nX-Consumer: forged\r\n"
                         "Connection: close\r\n\r\n",
                         "GET /nokey HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n", 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 6. the access log ------------------------------------------------------------------- */

/* GETs `target` with X-API-Key `key` (none when NULL); its access log line (found by the
 * target's path, which must be unique) must hold `fields` and `more`. */
static void expect_logged(const struct proc *gw, const char *target, const char *key,
                          const char *fields, const char *more)
{
    char field[128], path[128];
    struct reply r;
    char *line;

    snprintf(field, sizeof field, "X-API-Key: %s", key ? key : "");
    snprintf(path, sizeof path, "%.*s", (int)strcspn(target, "?"), target);
    get_with(gw->port, target, key ? field : NULL, &r);
    reply_free(&r);
    line = access_log_line(gw, path);
    check_case(line != NULL && strstr(line, fields) != NULL && strstr(line, more) != NULL, target,
               "access log line %s, expected it to hold %s and %s", line ? line : "(none)", fields,
               more);
    free(line);
}

#define NO_CONSUMER "\"consumer\":\"\",\"plan\":\"\""

static void test_access_log(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, main_config, upstream.port), 0);
    expect_logged(&gw, "/api/log-acme", ACME_KEY, "\"status\":200",
                  "\"consumer\":\"acme\",\"plan\":\"gold\"");
    expect_logged(&gw, "/api/log-bob", BOB_KEY, "\"status\":200",
                  "\"consumer\":\"bob\",\"plan\":\"free\"");
    expect_logged(&gw, "/api/log-hashed", HASHED_KEY, "\"status\":200",
                  "\"consumer\":\"hashed\",\"plan\":\"gold\"");
    expect_logged(&gw, "/q/log-query?api_key=" ACME_KEY, NULL, "\"route\":\"byquery\"",
                  "\"consumer\":\"acme\",\"plan\":\"gold\"");
    /* The route's own version of gold is still gold. */
    expect_logged(&gw, "/special/log-acme", ACME_KEY, "\"route\":\"special\"",
                  "\"consumer\":\"acme\",\"plan\":\"gold\"");
    /* Refused and anonymous requests have neither. */
    expect_logged(&gw, "/api/log-unknown", "nobody", "\"status\":401", NO_CONSUMER);
    expect_logged(&gw, "/api/log-none", NULL, "\"status\":401", NO_CONSUMER);
    expect_logged(&gw, "/anon/log-anon", "nobody", "\"status\":200", NO_CONSUMER);
    expect_logged(&gw, "/anon/log-known", ACME_KEY, "\"status\":200",
                  "\"consumer\":\"acme\",\"plan\":\"gold\"");
    /* A consumer's denied request is still its: bob has had 1 of free's 2. */
    expect_answers(gw.port, "/api/spend", BOB_KEY, 1, 200, NULL, "spend bob");
    expect_logged(&gw, "/api/log-bob-denied", BOB_KEY, "\"status\":429",
                  "\"consumer\":\"bob\",\"plan\":\"free\"");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 7. reloads -------------------------------------------------------------------------- */

/* "%2$s" is gold's quota, "%3$s" bob's plan, "%4$s" more consumers. */
static const char reload_config[] =
    "server: {listen: \"127.0.0.1:0\", watch_config: false}\n"
    "plans:\n"
    "  gold: {algorithm: fixed_window, requests: %2$s, per: 1h}\n"
    "  free: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "consumers:\n"
    "  - {name: acme, key: \"" ACME_KEY "\", plan: gold}\n"
    "  - {name: bob, key: \"" BOB_KEY "\", plan: %3$s}\n"
    "%4$s"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    plan: free\n";

static bool reload(struct proc *gw, int count, const char *gold, const char *bob_plan,
                   const char *more)
{
    rewrite_config(gw, true, reload_config, upstream.port, gold, bob_plan, more);
    kill(gw->pid, SIGHUP);
    return wait_for_log(gw, "reloaded", count, 3000);
}

static void test_reload_keeps_state(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, reload_config, upstream.port, "2", "free", ""), 0);
    expect_answers(gw.port, "/x", ACME_KEY, 2, 200, "\"gold\";q=2;w=3600", "acme before");
    expect_answers(gw.port, "/x", ACME_KEY, 1, 429, NULL, "acme spent");
    expect_answers(gw.port, "/x", BOB_KEY, 1, 200, "\"free\";q=1;w=3600", "bob before");
    expect_answers(gw.port, "/x", BOB_KEY, 1, 429, NULL, "bob spent");

    /* A consumer added, bob moved to gold: acme's gold is unchanged, so still spent; bob starts
     * afresh in gold; carol, new, has free's quota. */
    CU_ASSERT_TRUE(
        reload(&gw, 1, "2", "gold", "  - {name: carol, key: \"" CAROL_KEY "\", plan: free}\n"));
    expect_answers(gw.port, "/x", ACME_KEY, 1, 429, "\"gold\";q=2;w=3600", "acme kept");
    expect_answers(gw.port, "/x", BOB_KEY, 2, 200, "\"gold\";q=2;w=3600", "bob in gold");
    expect_answers(gw.port, "/x", BOB_KEY, 1, 429, NULL, "bob in gold, spent");
    expect_answers(gw.port, "/x", CAROL_KEY, 1, 200, "\"free\";q=1;w=3600", "carol");
    expect_answers(gw.port, "/x", CAROL_KEY, 1, 429, NULL, "carol spent");

    /* Only an unrelated change (carol removed): everyone keeps their state. */
    CU_ASSERT_TRUE(reload(&gw, 2, "2", "gold", ""));
    expect_answers(gw.port, "/x", ACME_KEY, 1, 429, NULL, "acme kept again");
    expect_answers(gw.port, "/x", BOB_KEY, 1, 429, NULL, "bob kept in gold");
    expect_answers(gw.port, "/x", CAROL_KEY, 1, 401, NULL, "carol gone");

    /* gold's limit changed: its consumers start afresh under the new one. */
    CU_ASSERT_TRUE(reload(&gw, 3, "3", "gold", ""));
    expect_answers(gw.port, "/x", ACME_KEY, 3, 200, "\"gold\";q=3;w=3600", "acme, new gold");
    expect_answers(gw.port, "/x", ACME_KEY, 1, 429, NULL, "acme, new gold spent");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* One request of bob's: `status`, and a RateLimit field that starts with `remaining` (say
 * "\"gold\";r=1;"). */
static void expect_bob(unsigned port, long status, const char *remaining, const char *label)
{
    struct reply r;
    const char *seen;

    get_with(port, "/x", "X-API-Key: " BOB_KEY, &r);
    seen = header(&r, "RateLimit");
    check_case(r.status == status, label, "status %ld, expected %ld", r.status, status);
    check_case(seen != NULL && strncmp(seen, remaining, strlen(remaining)) == 0, label,
               "RateLimit %s, expected %s...", seen ? seen : "(none)", remaining);
    reply_free(&r);
}

/* bob alone may hold gold ("%2$s" is bob's plan): moved to free, no consumer holds it. */
static const char round_trip_config[] =
    "server: {listen: \"127.0.0.1:0\", watch_config: false}\n"
    "plans:\n"
    "  gold: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  free: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "consumers:\n"
    "  - {name: acme, key: \"" ACME_KEY "\", plan: free}\n"
    "  - {name: bob, key: \"" BOB_KEY "\", plan: %2$s}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    plan: free\n";

static bool move_bob(struct proc *gw, int count, const char *plan)
{
    rewrite_config(gw, true, round_trip_config, upstream.port, plan);
    kill(gw->pid, SIGHUP);
    return wait_for_log(gw, "reloaded", count, 3000);
}

/* README "A consumer moved to another plan is counted there from what it spent in that plan:
 * nothing, unless it was on that plan earlier and those requests are still within the plan's
 * window (moving a consumer back and forth does not give it a fresh quota)." bob spends two of
 * gold's three, goes to free (a fresh count there: one), and back to gold, where one is left,
 * though no consumer held gold meanwhile; back in free, free is still spent. */
static void test_plan_round_trip_keeps_spend(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, round_trip_config, upstream.port, "gold"), 0);
    expect_bob(gw.port, 200, "\"gold\";r=2;", "bob in gold, 1st");
    expect_bob(gw.port, 200, "\"gold\";r=1;", "bob in gold, 2nd");

    CU_ASSERT_TRUE(move_bob(&gw, 1, "free"));
    expect_bob(gw.port, 200, "\"free\";r=0;", "bob moved to free");
    expect_bob(gw.port, 429, "\"free\";r=0;", "bob in free, spent");

    CU_ASSERT_TRUE(move_bob(&gw, 2, "gold"));
    expect_bob(gw.port, 200, "\"gold\";r=0;", "bob back in gold: the one left");
    expect_bob(gw.port, 429, "\"gold\";r=0;", "bob back in gold, spent");

    CU_ASSERT_TRUE(move_bob(&gw, 3, "free"));
    expect_bob(gw.port, 429, "\"free\";r=0;", "bob back in free, still spent");
    /* acme, in free all along, has its own count. */
    expect_answers(gw.port, "/x", ACME_KEY, 1, 200, "\"free\";q=1;w=3600", "acme, its own free");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 8. query keys ----------------------------------------------------------------------- */

static void test_query_keys(void)
{
    struct proc gw;
    struct reply r;
    unsigned long before;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, main_config, upstream.port), 0);
    before = upstream_requests();
    expect_answers(gw.port, "/q/a?api_key=" ACME_KEY, NULL, 4, 200, "\"gold\";q=4;w=3600",
                   "query gold");
    expect_answers(gw.port, "/q/a?x=1&api_key=" ACME_KEY, NULL, 1, 429, "\"gold\";q=4;w=3600",
                   "query gold 5th");
    /* Decoded before the look-up: bob%2Dkey is bob's key. */
    expect_answers(gw.port, "/q/b?api_key=bob%2Dkey-0002", NULL, 1, 200, "\"free\";q=2;w=3600",
                   "query encoded");
    expect_answers(gw.port, "/q/b?api_key=" BOB_KEY, NULL, 1, 200, "\"free\";q=2;w=3600",
                   "query plain");
    expect_answers(gw.port, "/q/b?api_key=" BOB_KEY, NULL, 1, 429, NULL, "query free 3rd");
    expect_answers(gw.port, "/q/h?api_key=" HASHED_KEY, NULL, 1, 200, "\"gold\";q=4;w=3600",
                   "query hashed");
    CU_ASSERT_EQUAL(upstream_requests(), before + 7);

    expect_answers(gw.port, "/q/c?api_key=", NULL, 1, 401, NULL, "query empty");
    expect_answers(gw.port, "/q/c?api_key=" ACME_KEY "&api_key=" BOB_KEY, NULL, 1, 400, NULL,
                   "query given twice");
    http(gw.port, "GET", "/q/c?api_key=wrong", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 401);
    check_case(r.body != NULL &&
                   strstr(r.body, "\"detail\":\"an API key issued for this API is "
                                  "required in the api_key query parameter\"") != NULL,
               "query 401 body", "body %s", r.body ? r.body : "(none)");
    reply_free(&r);
    /* Without the parameter: no key, whatever the header says (the route reads the query
     * only). Kept last, so that a gateway ended by one of these cannot hide the checks above. */
    expect_answers(gw.port, "/q/c", NULL, 1, 401, NULL, "query absent");
    expect_answers(gw.port, "/q/c?other=1", NULL, 1, 401, NULL, "query absent, another");
    expect_answers(gw.port, "/q/c", CAROL_KEY, 1, 401, NULL, "query route, header key");
    expect_answers(gw.port, "/q/c", ACME_KEY, 1, 401, NULL, "query route, known header key");
    CU_ASSERT_EQUAL(upstream_requests(), before + 7);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- 9. config errors -------------------------------------------------------------------- */

/* Runs sluice on `yaml`; its exit code, its output in `out`. */
static int run_on(const char *path, const char *yaml, char *out, size_t cap)
{
    char command[256];
    FILE *f = fopen(path, "w"), *p;
    size_t n;
    int status;

    fputs(yaml, f);
    fclose(f);
    snprintf(command, sizeof command, "%s -c %s 2>&1", sluice_binary(), path);
    p = popen(command, "r");
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    status = pclose(p);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_refuses_bad_config(void)
{
    char out[4096], path[64];
    int rc;

    scratch_path(path, sizeof path, "consumers.yaml");
    rc = run_on(path,
                "server: {listen: \"127.0.0.1:0\"}\n"
                "plans:\n  gold: {algorithm: fixed_window, requests: 4, per: 1h}\n"
                "consumers:\n"
                "  - {name: acme, key: \"k1\", plan: platinum}\n"
                "routes:\n  - name: a\n    match: {path_prefix: /}\n"
                "    upstream: \"http://127.0.0.1:1\"\n    key: \"header:X-API-Key\"\n"
                "    plan: gold\n",
                out, sizeof out);
    check_case(rc == 1, "unknown plan", "exit %d: %s", rc, out);
    check_case(strstr(out, "-consumers.yaml:5:35: plan: \"platinum\"") != NULL, "unknown plan",
               "output: %s", out);

    rc = run_on(path,
                "server: {listen: \"127.0.0.1:0\"}\n"
                "plans:\n  gold: {algorithm: fixed_window, requests: 4, per: 1h}\n"
                "consumers:\n"
                "  - {name: acme, key: \"k1\", plan: gold}\n"
                "  - {name: bob, key: \"k1\", plan: gold}\n"
                "routes:\n  - name: a\n    match: {path_prefix: /}\n"
                "    upstream: \"http://127.0.0.1:1\"\n    key: \"header:X-API-Key\"\n"
                "    plan: gold\n",
                out, sizeof out);
    check_case(rc == 1, "same key", "exit %d: %s", rc, out);
    check_case(strstr(out, "-consumers.yaml:6:") != NULL && strstr(out, "the same key") != NULL,
               "same key", "output: %s", out);
}

void register_consumers_tests(void)
{
    CU_pSuite s = add_suite_with("consumers", init, clean);

    add_test(s, "plans set each consumer's quota; a route's own plan", test_plans_set_quotas);
    add_test(s, "an unknown or missing key: 401, never forwarded", test_unknown_key_rejected);
    add_test(s, "a key given as its sha256 digest", test_sha256_key);
    add_test(s, "unknown_key: anonymous counts by address", test_unknown_key_anonymous);
    add_test(s, "consumer_header: set by the gateway only", test_consumer_header);
    add_test(s, "the access log names consumer and plan", test_access_log);
    add_test(s, "a reload keeps a consumer's state while its plan stays", test_reload_keeps_state);
    add_test(s, "a consumer moved gold, free, gold keeps what it spent",
             test_plan_round_trip_keeps_spend);
    add_test(s, "query parameter keys identify consumers", test_query_keys);
    add_test(s, "a bad consumers config is refused at its place", test_refuses_bad_config);
}
