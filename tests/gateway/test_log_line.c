#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gateway/ops/log_line.h"
#include "tests/unit.h"

#define GOOD                                                                                       \
    "{\"time\":\"2026-11-30T10:00:00.123Z\",\"route\":\"api\",\"method\":\"GET\","                 \
    "\"path\":\"/api/a\\\"b\\\\c\\u001f\\/d\",\"status\":429,\"decision\":\"denied\","             \
    "\"upstream_ms\":1.875,\"host\":\"api.example.com\",\"limit\":\"burst\",\"consumer\":"         \
    "\"acme\","                                                                                    \
    "\"decided_ns\":1795946400121456789,"                                                          \
    "\"keys\":{\"ip\":\"9f2c4e1a7b3d5f60\",\"header:x-api-key\":\"0d1e2f3a4b5c6d7e\"}}"

static int parse(const char *text, struct gw_log_line *line, const char **reason)
{
    return gw_log_line_parse(text, strlen(text), line, reason);
}

static void test_good_line(void)
{
    struct gw_log_line line;
    const char *reason = "unset";

    CU_ASSERT_EQUAL_FATAL(parse(GOOD, &line, &reason), 0);
    CU_ASSERT_PTR_NULL(reason);
    CU_ASSERT_STRING_EQUAL(line.method, "GET");
    CU_ASSERT_STRING_EQUAL(line.path, "/api/a\"b\\c\x1f/d");
    CU_ASSERT_STRING_EQUAL(line.host, "api.example.com");
    CU_ASSERT_STRING_EQUAL(line.consumer, "acme");
    CU_ASSERT_EQUAL(line.decided_ns, 1795946400121456789LL);
    CU_ASSERT_EQUAL(line.n_keys, 2);
    CU_ASSERT_STRING_EQUAL(gw_log_line_key(&line, "ip"), "9f2c4e1a7b3d5f60");
    CU_ASSERT_STRING_EQUAL(gw_log_line_key(&line, "header:x-api-key"), "0d1e2f3a4b5c6d7e");
    CU_ASSERT_PTR_NULL(gw_log_line_key(&line, "query:k"));
    /* Fields it does not know, empty keys, no host: still a line. */
    CU_ASSERT_EQUAL(parse("{\"method\":\"POST\",\"path\":\"/\",\"decided_ns\":0,\"keys\":{},"
                          "\"extra\":-1.5e3}",
                          &line, &reason),
                    0);
    CU_ASSERT_STRING_EQUAL(line.host, "");
    CU_ASSERT_STRING_EQUAL(line.consumer, "");
    CU_ASSERT_EQUAL(line.n_keys, 0);
    /* A byte that was not UTF-8 was logged as U+FFFD: it reads back as that character. */
    CU_ASSERT_EQUAL(parse("{\"method\":\"GET\",\"path\":\"/a\\ufffdb\",\"decided_ns\":1,"
                          "\"keys\":{}}",
                          &line, &reason),
                    0);
    CU_ASSERT_STRING_EQUAL(line.path, "/a\xef\xbf\xbd"
                                      "b");
}

/* Names and strings at the edges of the fast paths: an escaped name is read unescaped, a name
 * that only starts like a known one is another field, and plain runs of every length around
 * eight bytes end at the right byte. */
static void test_names_and_runs(void)
{
    struct gw_log_line line;
    const char *reason = NULL;

    CU_ASSERT_EQUAL_FATAL(parse("{\"met\\u0068od\":\"PUT\",\"path\":\"/\",\"decided_ns\":7,"
                                "\"methods\":\"x\",\"pat\":\"y\",\"hostname\":\"z\","
                                "\"keys\":{\"query:\\u006b\":\"00112233445566ff\"}}",
                                &line, &reason),
                          0);
    CU_ASSERT_STRING_EQUAL(line.method, "PUT");
    CU_ASSERT_STRING_EQUAL(line.path, "/");
    CU_ASSERT_STRING_EQUAL(line.host, "");
    CU_ASSERT_EQUAL(line.decided_ns, 7);
    CU_ASSERT_STRING_EQUAL(gw_log_line_key(&line, "query:k"), "00112233445566ff");
    for (size_t n = 1; n <= 20; n++) {
        char text[200], path[32];

        for (size_t i = 0; i < n; i++)
            path[i] = (char)('a' + i);
        path[n] = '\0';
        snprintf(text, sizeof text,
                 "{\"method\":\"GET\",\"path\":\"/%s\\/%s\",\"decided_ns\":1,\"keys\":{}}", path,
                 path);
        CU_ASSERT_EQUAL_FATAL(parse(text, &line, &reason), 0);
        CU_ASSERT_EQUAL(strncmp(line.path + 1, path, n), 0);
        CU_ASSERT_EQUAL(line.path[n + 1], '/');
        CU_ASSERT_STRING_EQUAL(line.path + n + 2, path);
        /* A raw control character or a bare quote at any place in the run is caught. */
        path[n / 2] = '\x01';
        snprintf(text, sizeof text,
                 "{\"method\":\"GET\",\"path\":\"/%s\",\"decided_ns\":1,\"keys\":{}}", path);
        CU_ASSERT_EQUAL(parse(text, &line, &reason), -1);
        path[n / 2] = '"';
        snprintf(text, sizeof text,
                 "{\"method\":\"GET\",\"path\":\"/%s\",\"decided_ns\":1,\"keys\":{}}", path);
        CU_ASSERT_EQUAL(parse(text, &line, &reason), -1);
    }
}

/* Anything the access log does not write is refused, with a reason. */
static void test_malformed_lines(void)
{
    static const char *const bad[] = {
        "",
        "not json",
        "[1]",
        "{\"method\":\"GET\",\"path\":\"/\",\"keys\":{}}", /* no decided_ns: an old line */
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}} x",
        "{\"method\":\"GET\",\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"G\\nET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"G\\u0100\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"G\\ufffe\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"G\\ufff\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"G\tET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":-1,\"keys\":{}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":99999999999999999999,\"keys\":{}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{\"ip\":\"XYZ\"}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,"
        "\"keys\":{\"ip\":\"9f2c4e1a7b3d5f60\",\"ip\":\"9f2c4e1a7b3d5f60\"}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},\"x\":true}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},\"x\":{}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{}",
        "{\"method\":\"GETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGET\",\"path\":\"/\","
        "\"decided_ns\":1,\"keys\":{}}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},"
        "\"consumer\":\"a\",\"consumer\":\"a\"}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},"
        "\"consumer\":\"01234567890123456789012345678901234567890123456789012345678901234\"}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},"
        "\"a_field_name_longer_than_any_key_source_the_log_writes\":1}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},"
        "\"an_escaped_name_longer_than_any_key_source_the_log_w\\u0072ites\":1}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},\"na\nme\":1}",
        "{\"method\":\"GET\",\"path\":\"/\",\"decided_ns\":1,\"keys\":{},\"name",
    };
    struct gw_log_line line;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *reason = NULL;
        bool refused = parse(bad[i], &line, &reason) == -1 && reason != NULL;

        CU_ASSERT_TRUE(refused);
        if (!refused)
            fprintf(stderr, "accepted: %s\n", bad[i]);
    }
}

void register_log_line_tests(void)
{
    CU_pSuite s = add_suite("gateway_log_line");

    add_test(s, "an access log line: the fields a replay needs", test_good_line);
    add_test(s, "escaped names, look-alike names, plain runs of each length", test_names_and_runs);
    add_test(s, "malformed lines refused with a reason", test_malformed_lines);
}
