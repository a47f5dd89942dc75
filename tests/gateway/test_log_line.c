#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../unit.h"
#include "log_line.h"

#define GOOD                                                                                       \
    "{\"time\":\"2026-11-30T10:00:00.123Z\",\"route\":\"api\",\"method\":\"GET\","                 \
    "\"path\":\"/api/a\\\"b\\\\c\\u001f\\/d\",\"status\":429,\"decision\":\"denied\","             \
    "\"upstream_ms\":1.875,\"host\":\"api.example.com\",\"limit\":\"burst\","                      \
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
    CU_ASSERT_STRING_EQUAL(line.route, "api");
    CU_ASSERT_STRING_EQUAL(line.decision, "denied");
    CU_ASSERT_STRING_EQUAL(line.limit, "burst");
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
    CU_ASSERT_EQUAL(line.n_keys, 0);
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
    add_test(s, "malformed lines refused with a reason", test_malformed_lines);
}
