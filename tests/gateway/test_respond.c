#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "gateway/common/text.h"
#include "tests/unit.h"

static void test_fields(void)
{
    struct limiter_params p = {.algorithm = "gcra",
                               .requests = 100,
                               .per_ns = 60 * (int64_t)1000000000,
                               .algorithm_id = LIMITER_GCRA};
    struct limiter_decision d = {false, 100, 0, 16001, 1500, 0, 0};
    char field[GW_FIELD_LEN];

    gw_format_policy(field, "api", &p);
    CU_ASSERT_STRING_EQUAL(field, "\"api\";q=100;w=60");
    gw_format_ratelimit(field, "api", &p, &d);
    CU_ASSERT_STRING_EQUAL(field, "\"api\";r=0;t=17");
    p.per_ns = 250000000; /* a sub-second window still says w=1 */
    gw_format_policy(field, "fast", &p);
    CU_ASSERT_STRING_EQUAL(field, "\"fast\";q=100;w=1");
}

/* q, w and t of each algorithm, by the draft's definitions (respond.h): q is what a client
 * can spend within w seconds, t when it is whole again, never past w. */
static void test_fields_per_algorithm(void)
{
    static const struct {
        const char *algorithm;
        uint64_t requests, burst;
        int64_t per_s;
        const char *policy;
    } cases[] = {
        {"token_bucket", 10, 5, 1, "\"l\";q=5;w=1"},      /* 5 at once, back in 0.5 s */
        {"token_bucket", 60, 0, 60, "\"l\";q=60;w=60"},   /* burst defaults to requests */
        {"token_bucket", 100, 20, 60, "\"l\";q=20;w=12"}, /* 20 at once, 12 s to refill */
        {"gcra", 10, 5, 1, "\"l\";q=5;w=1"},
        {"gcra", 1000, 100, 3600, "\"l\";q=100;w=360"},
        {"fixed_window", 10, 0, 60, "\"l\";q=10;w=60"},
        {"sliding_window_log", 10, 0, 60, "\"l\";q=10;w=60"},
        {"sliding_window_counter", 10, 0, 60, "\"l\";q=10;w=60"},
    };
    char field[GW_FIELD_LEN];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct limiter_params p = {.algorithm = cases[i].algorithm,
                                   .requests = cases[i].requests,
                                   .burst = cases[i].burst,
                                   .per_ns = cases[i].per_s * (int64_t)1000000000,
                                   .algorithm_id = limiter_algorithm_from_name(cases[i].algorithm)};
        /* A reset further off than the window: a sliding window counter's estimate. */
        struct limiter_decision far = {
            false, cases[i].requests, 0, 2 * cases[i].per_s * 1000, 1000, 0, 0};
        int64_t window;

        gw_format_policy(field, "l", &p);
        CU_ASSERT_STRING_EQUAL(field, cases[i].policy);
        CU_ASSERT_EQUAL(gw_quota(&p, &window), cases[i].burst ? cases[i].burst : cases[i].requests);
        CU_ASSERT_EQUAL(gw_reset_seconds(&p, &far), window);
    }
}

static void test_retry_after_rounds_up(void)
{
    CU_ASSERT_EQUAL(gw_retry_after_seconds(0), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1000), 1);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(1001), 2);
    CU_ASSERT_EQUAL(gw_retry_after_seconds(59999), 60);
}

static void test_problem_json(void)
{
    char *body = gw_problem_json(429, "slow \"down\"\n", "api", NULL);

    CU_ASSERT_STRING_EQUAL(body, "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\","
                                 "\"status\":429,\"detail\":\"slow \\\"down\\\"\\u000a\","
                                 "\"route\":\"api\"}\n");
    free(body);
    body = gw_problem_json(404, "no route", NULL, NULL);
    CU_ASSERT_PTR_NULL(strstr(body, "route\":"));
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"title\":\"Not Found\",\"status\":404"));
    CU_ASSERT_PTR_NULL(strstr(body, "request_id"));
    free(body);
    body = gw_problem_json(413, "too big", "api", "req-7");
    CU_ASSERT_STRING_EQUAL(body, "{\"type\":\"about:blank\",\"title\":\"Content Too Large\","
                                 "\"status\":413,\"detail\":\"too big\",\"route\":\"api\","
                                 "\"request_id\":\"req-7\"}\n");
    free(body);
}

/* JSON strings are valid whatever the bytes: well-formed UTF-8 passes, each byte of anything
 * else becomes U+FFFD, and a cut never falls inside an escape or a character. */
static void test_json_escape_utf8(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"caf\xe9", "caf\\ufffd"},                            /* Latin-1 */
        {"\xc0\xaf", "\\ufffd\\ufffd"},                       /* an overlong '/' */
        {"\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"},            /* another */
        {"\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"},            /* a surrogate */
        {"\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"}, /* above U+10FFFF */
        {"\xf5\xbf", "\\ufffd\\ufffd"},
        {"a\xe2\x82", "a\\ufffd\\ufffd"}, /* cut short */
        {"\x80x", "\\ufffdx"},            /* a lone continuation byte */
        {"\"\\\x7f\x01", "\\\"\\\\\\u007f\\u0001"},
    };
    char out[64];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = gw_json_escape(out, sizeof out, cases[i].in, strlen(cases[i].in));

        CU_ASSERT_STRING_EQUAL(out, cases[i].out);
        CU_ASSERT_EQUAL(len, strlen(cases[i].out));
    }
    /* Room for "ab" and two bytes more: the euro sign (three) is left out whole. */
    gw_json_escape(out, 5, "ab\xe2\x82\xac", 5);
    CU_ASSERT_STRING_EQUAL(out, "ab");
    gw_json_escape(out, 7, "a\xff", 2);
    CU_ASSERT_STRING_EQUAL(out, "a");
}

/* A run of plain characters is cut where the room ends, an escape after it is left out whole,
 * and nothing is written past `cap` (the guard bytes stay). */
static void test_json_escape_cuts(void)
{
    static const struct {
        size_t cap;
        const char *in, *out;
    } cases[] = {
        {4, "abcdef", "abc"}, {4, "ab\"c", "ab"},        {5, "ab\"c", "ab\\\""},
        {3, "abc", "ab"},     {4, "abc", "abc"},         {1, "abc", ""},
        {7, "a\nbcd", "a"},   {8, "a\nbcd", "a\\u000a"}, {2, "\x01b", ""},
    };
    char out[16];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;

        memset(out, '#', sizeof out);
        len = gw_json_escape(out, cases[i].cap, cases[i].in, strlen(cases[i].in));
        CU_ASSERT_STRING_EQUAL(out, cases[i].out);
        CU_ASSERT_EQUAL(len, strlen(cases[i].out));
        CU_ASSERT_EQUAL(out[cases[i].cap], '#');
    }
    memset(out, '#', sizeof out);
    CU_ASSERT_EQUAL(gw_json_escape(out, 0, "abc", 3), 0);
    CU_ASSERT_EQUAL(out[0], '#');
}

/* gw_text_address() writes what inet_ntop() does, and never past the buffer's end. */
static void test_text_address(void)
{
    static const struct {
        int family;
        const char *address;
    } cases[] = {
        {AF_INET, "0.0.0.0"},      {AF_INET, "127.0.0.1"},      {AF_INET, "255.255.255.255"},
        {AF_INET, "10.20.3.100"},  {AF_INET, "192.168.100.7"},  {AF_INET6, "::1"},
        {AF_INET6, "2001:db8::1"}, {AF_INET6, "fe80::1:2:3:4"},
    };
    unsigned char bytes[16];
    char text[INET6_ADDRSTRLEN + 1], cut[8];
    struct gw_text t;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(inet_pton(cases[i].family, cases[i].address, bytes), 1);
        t = gw_text_on(text, sizeof text - 1);
        gw_text_address(&t, cases[i].family, bytes);
        gw_text_finish(&t);
        CU_ASSERT_STRING_EQUAL(text, cases[i].address);
    }
    inet_pton(AF_INET, "192.168.100.7", bytes);
    t = gw_text_on(cut, sizeof cut - 1);
    gw_text_address(&t, AF_INET, bytes);
    gw_text_finish(&t);
    CU_ASSERT_STRING_EQUAL(cut, "192.168");
}

void register_respond_tests(void)
{
    CU_pSuite s = add_suite("gateway_respond");

    add_test(s, "RateLimit-Policy and RateLimit", test_fields);
    add_test(s, "q, w and t for each algorithm", test_fields_per_algorithm);
    add_test(s, "Retry-After rounds up, never 0", test_retry_after_rounds_up);
    add_test(s, "problem+json bodies", test_problem_json);
    add_test(s, "JSON strings: UTF-8 kept, other bytes U+FFFD", test_json_escape_utf8);
    add_test(s, "JSON strings: cut at the room, never inside an escape", test_json_escape_cuts);
    add_test(s, "an IP address as inet_ntop() writes it", test_text_address);
}
