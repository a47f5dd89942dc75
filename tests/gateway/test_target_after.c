/* gw_target_after() (gateway/common/target.c): where strip_prefix cuts the raw target, given
 * how much of the routing path the route's path_prefix matched. Kept apart from
 * test_target.c, which its owner keeps. */
#include <string.h>

#include "gateway/common/target.h"
#include "tests/unit.h"

/* The rest of `target` after `len` bytes of its routing path, checked to lie within it. */
static const char *after(const char *target, size_t len)
{
    const char *rest = gw_target_after(target, len);

    CU_ASSERT_FATAL(rest >= target && rest <= target + strlen(target));
    return rest;
}

static void test_after_plain_prefix(void)
{
    CU_ASSERT_STRING_EQUAL(after("/v1/users/7?x=1", 3), "/users/7?x=1");
    CU_ASSERT_STRING_EQUAL(after("/v1", 3), "");
    CU_ASSERT_STRING_EQUAL(after("/v1?q=1", 3), "?q=1");
    CU_ASSERT_STRING_EQUAL(after("/v1/x", 0), "/v1/x");
    CU_ASSERT_STRING_EQUAL(after("/", 1), "");
}

static void test_after_counts_decoded_bytes(void)
{
    /* /v%31/x is routed as /v1/x: the three bytes of %31 are the one byte '1'. */
    CU_ASSERT_STRING_EQUAL(after("/v%31/x", 3), "/x");
    CU_ASSERT_STRING_EQUAL(after("/%76%31/x", 3), "/x");
    CU_ASSERT_STRING_EQUAL(after("/v%31/x", 2), "%31/x");
}

static void test_after_merged_slashes(void)
{
    /* //v1//x is routed as /v1/x: a run of '/' is one, and is taken whole. */
    CU_ASSERT_STRING_EQUAL(after("//v1//x", 3), "//x");
    CU_ASSERT_STRING_EQUAL(after("//v1//x", 4), "x"); /* path_prefix "/v1/" */
    CU_ASSERT_STRING_EQUAL(after("///x", 1), "x");
}

static void test_after_stops_at_the_end(void)
{
    /* A malformed tail (gw_target_path refuses such a path, so where it ends is moot) or a
     * len past the path: never beyond the end (after() checks the bounds). */
    after("/a%2", 3);
    CU_ASSERT_STRING_EQUAL(after("/a%2", 10), "");
    CU_ASSERT_STRING_EQUAL(after("/a%", 10), "");
    after("/a%2?q", 10);
    CU_ASSERT_STRING_EQUAL(after("/v1", 10), "");
    CU_ASSERT_STRING_EQUAL(after("/v1?a=/b", 10), "?a=/b");
    CU_ASSERT_STRING_EQUAL(after("", 3), "");
}

void register_target_after_tests(void)
{
    CU_pSuite s = add_suite("gateway_target_after");

    add_test(s, "a plain prefix", test_after_plain_prefix);
    add_test(s, "%XX counts as the byte it decodes to", test_after_counts_decoded_bytes);
    add_test(s, "a run of slashes counts as one", test_after_merged_slashes);
    add_test(s, "never past the end", test_after_stops_at_the_end);
}
