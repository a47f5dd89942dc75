#include <stdint.h>
#include <string.h>

#include "gateway/common/trace.h"
#include "tests/unit.h"

#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT   "00f067aa0ba902b7"

static bool is_lower_hex(const char *text, size_t len)
{
    return strlen(text) == len && strspn(text, "0123456789abcdef") == len;
}

static void test_request_ids(void)
{
    char long_id[GW_REQUEST_ID_MAX + 2], id[GW_REQUEST_ID_LEN], other[GW_REQUEST_ID_LEN];

    CU_ASSERT_TRUE(gw_request_id_is_sane("a"));
    CU_ASSERT_TRUE(gw_request_id_is_sane("f47ac10b-58cc-4372-a567-0e02b2c3d479"));
    CU_ASSERT_TRUE(gw_request_id_is_sane("host-1:4711/42"));
    CU_ASSERT_TRUE(gw_request_id_is_sane("aGVsbG8+d29ybGQ/=="));
    CU_ASSERT_TRUE(gw_request_id_is_sane("A.b_C"));
    CU_ASSERT_FALSE(gw_request_id_is_sane(""));
    CU_ASSERT_FALSE(gw_request_id_is_sane("two words"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("quote\""));
    CU_ASSERT_FALSE(gw_request_id_is_sane("back\\slash"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("semi;colon"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("comma,"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("tab\there"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("caf\xc3\xa9"));
    CU_ASSERT_FALSE(gw_request_id_is_sane("<script>"));

    memset(long_id, 'a', GW_REQUEST_ID_MAX);
    long_id[GW_REQUEST_ID_MAX] = '\0';
    CU_ASSERT_TRUE(gw_request_id_is_sane(long_id)); /* 128 bytes */
    long_id[GW_REQUEST_ID_MAX] = 'a';
    long_id[GW_REQUEST_ID_MAX + 1] = '\0';
    CU_ASSERT_FALSE(gw_request_id_is_sane(long_id)); /* 129 */

    gw_request_id_new(id);
    gw_request_id_new(other);
    CU_ASSERT_TRUE(is_lower_hex(id, 32));
    CU_ASSERT_TRUE(gw_request_id_is_sane(id));
    CU_ASSERT_STRING_NOT_EQUAL(id, other);
}

/* Whether `value` parses, and if so into TRACE_ID and `flags`; when not, the trace is left
 * as it was. */
static bool parses(const char *value, const char *flags)
{
    struct gw_trace t = {.trace_id = "untouched"};

    if (gw_traceparent_parse(value, &t) != 0) {
        CU_ASSERT_STRING_EQUAL(t.trace_id, "untouched");
        return false;
    }
    CU_ASSERT_STRING_EQUAL(t.trace_id, TRACE_ID);
    CU_ASSERT_STRING_EQUAL(t.flags, flags);
    return true;
}

static void test_traceparent_parse(void)
{
    CU_ASSERT_TRUE(parses("00-" TRACE_ID "-" PARENT "-01", "01"));
    CU_ASSERT_TRUE(parses("00-" TRACE_ID "-" PARENT "-00", "00"));
    CU_ASSERT_TRUE(parses("00-" TRACE_ID "-" PARENT "-09", "09")); /* flags kept as sent */
    /* A later version: its first four fields, then the end or '-'. */
    CU_ASSERT_TRUE(parses("01-" TRACE_ID "-" PARENT "-01", "01"));
    CU_ASSERT_TRUE(parses("cc-" TRACE_ID "-" PARENT "-01-what-comes-next", "01"));
    CU_ASSERT_FALSE(parses("cc-" TRACE_ID "-" PARENT "-01x", "01"));
    CU_ASSERT_FALSE(parses("cc-" TRACE_ID "-" PARENT "-0", "0"));

    CU_ASSERT_FALSE(parses("", ""));
    CU_ASSERT_FALSE(parses("ff-" TRACE_ID "-" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-" PARENT "-01-", "01")); /* 00 is exactly 55 */
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-" PARENT "-1", "1"));
    CU_ASSERT_FALSE(parses("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-00F067AA0BA902B7-01", "01"));
    CU_ASSERT_FALSE(parses("0A-" TRACE_ID "-" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-" PARENT "-0A", "0A"));
    CU_ASSERT_FALSE(parses("00-00000000000000000000000000000000-" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-0000000000000000-01", "01"));
    CU_ASSERT_FALSE(parses("00_" TRACE_ID "-" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "_" PARENT "-01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-" PARENT "_01", "01"));
    CU_ASSERT_FALSE(parses("00-" TRACE_ID "-" PARENT "-0g", "0g"));
    CU_ASSERT_FALSE(parses("00-4bf92f3577b34da6a3ce929d0e0e473-" PARENT "0-01", "01"));
    CU_ASSERT_FALSE(parses(" 00-" TRACE_ID "-" PARENT "-01", "01"));
}

static void test_traceparent_format(void)
{
    struct gw_trace t = {.trace_id = TRACE_ID, .span_id = "b7ad6b7169203331", .flags = "01"};
    char out[GW_TRACEPARENT_LEN];

    gw_traceparent_format(&t, out);
    CU_ASSERT_STRING_EQUAL(out, "00-" TRACE_ID "-b7ad6b7169203331-01");
}

static void test_sampling(void)
{
    CU_ASSERT_FALSE(gw_trace_sampled(0, 0));
    CU_ASSERT_FALSE(gw_trace_sampled(0, UINT32_MAX));
    CU_ASSERT_TRUE(gw_trace_sampled(1, 0));
    CU_ASSERT_TRUE(gw_trace_sampled(1, UINT32_MAX));
    CU_ASSERT_TRUE(gw_trace_sampled(0.5, 0x7fffffff));
    CU_ASSERT_FALSE(gw_trace_sampled(0.5, 0x80000000u));
    CU_ASSERT_TRUE(gw_trace_sampled(0.01, 42949672)); /* just under 1% of 2^32 */
    CU_ASSERT_FALSE(gw_trace_sampled(0.01, 42949673));
}

static void test_trace_begin(void)
{
    struct gw_trace t, again;
    char out[GW_TRACEPARENT_LEN];

    /* Continued: the trace-id and flags kept, a span id of sluice's own. */
    gw_trace_begin(&t, "00-" TRACE_ID "-" PARENT "-00", 0);
    CU_ASSERT_TRUE(t.continued);
    CU_ASSERT_STRING_EQUAL(t.trace_id, TRACE_ID);
    CU_ASSERT_STRING_EQUAL(t.flags, "00");
    CU_ASSERT_TRUE(is_lower_hex(t.span_id, 16));
    CU_ASSERT_STRING_NOT_EQUAL(t.span_id, PARENT);
    gw_trace_begin(&again, "00-" TRACE_ID "-" PARENT "-00", 0);
    CU_ASSERT_STRING_NOT_EQUAL(t.span_id, again.span_id);
    gw_traceparent_format(&t, out);
    CU_ASSERT_EQUAL(strncmp(out, "00-" TRACE_ID "-", 36), 0);

    /* Absent or invalid, sample 0: none; sample 1: a new sampled trace. */
    gw_trace_begin(&t, NULL, 0);
    CU_ASSERT_STRING_EQUAL(t.trace_id, "");
    CU_ASSERT_FALSE(t.continued);
    gw_trace_begin(&t, "ff-" TRACE_ID "-" PARENT "-01", 0);
    CU_ASSERT_STRING_EQUAL(t.trace_id, "");
    gw_trace_begin(&t, "ff-" TRACE_ID "-" PARENT "-01", 1);
    CU_ASSERT_FALSE(t.continued);
    CU_ASSERT_TRUE(is_lower_hex(t.trace_id, 32));
    CU_ASSERT_STRING_NOT_EQUAL(t.trace_id, TRACE_ID);
    CU_ASSERT_TRUE(is_lower_hex(t.span_id, 16));
    CU_ASSERT_STRING_EQUAL(t.flags, "01");
    gw_trace_begin(&again, NULL, 1);
    CU_ASSERT_STRING_NOT_EQUAL(t.trace_id, again.trace_id);
}

void register_trace_tests(void)
{
    CU_pSuite s = add_suite("gateway_trace");

    add_test(s, "request ids: the charset, 1 to 128 bytes, new ones", test_request_ids);
    add_test(s, "traceparent: strict version 00, later versions, invalid ones",
             test_traceparent_parse);
    add_test(s, "traceparent: written as version 00", test_traceparent_format);
    add_test(s, "sampling: 0 never, 1 always, in between by the draw", test_sampling);
    add_test(s, "a request's trace: continued, started or none", test_trace_begin);
}
