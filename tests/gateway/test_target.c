#include <stdlib.h>
#include <string.h>

#include "gateway/common/target.h"
#include "tests/unit.h"

/* The routing path of `target`, or NULL when refused; static. */
static const char *path_of(const char *target)
{
    static char out[256];
    const char *reason = NULL;

    if (gw_target_path(target, out, &reason) != 0) {
        CU_ASSERT_PTR_NOT_NULL(reason);
        return NULL;
    }
    return out;
}

static void test_paths_are_decoded_and_merged(void)
{
    CU_ASSERT_STRING_EQUAL(path_of("/api/x"), "/api/x");
    CU_ASSERT_STRING_EQUAL(path_of("/api/x?q=1&r=%00"), "/api/x");
    CU_ASSERT_STRING_EQUAL(path_of("/%61pi/x"), "/api/x");
    CU_ASSERT_STRING_EQUAL(path_of("//api/x"), "/api/x");
    CU_ASSERT_STRING_EQUAL(path_of("/api///x//"), "/api/x/");
    CU_ASSERT_STRING_EQUAL(path_of("/caf%C3%A9"), "/caf\xc3\xa9");
    CU_ASSERT_STRING_EQUAL(path_of("/a.b/..c/.d"), "/a.b/..c/.d");
    CU_ASSERT_STRING_EQUAL(path_of("/a/;x/..x;y"), "/a/;x/..x;y"); /* no dot segment */
    CU_ASSERT_STRING_EQUAL(path_of("/"), "/");
}

static void test_paths_read_two_ways_are_refused(void)
{
    static const char *const refused[] = {
        "/x%00/../api/x",
        "/api/%00",
        "/api/%0a",
        "/api/%0D",
        "/api/%7f",
        "/api/%1b",
        "/api%2Fx",
        "/api%2fx",
        "/api\\x",
        "/api%5Cx",
        "/api/x#frag",
        "/api/x?q#f",
        "/api/%zz",
        "/api/%4",
        "/api/%",
        "/public/../admin",
        "/a/%2e%2e/admin",
        "/./x",
        "/a/.",
        "/a/..",
        "/a/%2E",
        "/a//../b",
        /* Dot segments with path parameters, which servlet containers read as . and .. */
        "/a/..;x/b",
        "/a/..;/b",
        "/a/.;v=1",
        "/a/%2e%2e;x/b",
    };

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CU_ASSERT_PTR_NULL(path_of(refused[i]));
}

/* The key parameter's value, "<absent>" or "<refused>"; static. */
static const char *key_of(const char *target)
{
    static char out[256];
    const char *reason = NULL;
    int found = gw_target_query_value(target, "key", out, &reason);

    if (found < 0)
        return "<refused>";
    return found ? out : "<absent>";
}

static void test_query_keys(void)
{
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=bob"), "bob");
    CU_ASSERT_STRING_EQUAL(key_of("/x?a=1&key=bob&b=2"), "bob");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=b%6Fb+smith"), "bob smith");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key="), "");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key"), "");
    CU_ASSERT_STRING_EQUAL(key_of("/x"), "<absent>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?"), "<absent>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?keys=bob&akey=1"), "<absent>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?k%zzy=bob"), "<absent>");
    /* Two readings: refused. */
    CU_ASSERT_STRING_EQUAL(key_of("/x?KEY=junk&key=bob"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?k%65y=junk&key=bob"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=a&key=b"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=a;key=b"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?x=1;key=b"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=b;x=1"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?k%65y=bob"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?KEY=bob"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=al%00ice"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=al%0aice"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=al%zzice"), "<refused>");
    CU_ASSERT_STRING_EQUAL(key_of("/x?key=al%2"), "<refused>");
}

/* PHP reads api.key, "api key" and api[key as api_key. */
static void test_query_names_as_php_reads_them(void)
{
    static const char *const refused[] = {"/x?api.key=mine", "/x?api_key=victim&api.key=mine",
                                          "/x?api+key=mine", "/x?api%20key=mine",
                                          "/x?api[key=mine", "/x?API_KEY=mine"};
    char out[64];
    const char *reason = NULL;

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CU_ASSERT_EQUAL(gw_target_query_value(refused[i], "api_key", out, &reason), -1);
    CU_ASSERT_EQUAL(gw_target_query_value("/x?api_key=mine&apikey=2", "api_key", out, &reason), 1);
    CU_ASSERT_STRING_EQUAL(out, "mine");
}

static void test_path_parameters(void)
{
    static const struct {
        const char *path, *stripped;
    } cases[] = {
        {"/api;v=1/x", "/api/x"}, {"/api/x;jsessionid=1", "/api/x"},
        {"/a;b;c/d;e", "/a/d"},   {"/;x", "/"},
        {"/api/x", "/api/x"},
    };
    char out[64];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gw_target_strip_params(cases[i].path, out);
        CU_ASSERT_STRING_EQUAL(out, cases[i].stripped);
    }
}

void register_target_tests(void)
{
    CU_pSuite suite = add_suite("target");

    add_test(suite, "paths are decoded once, slashes merged", test_paths_are_decoded_and_merged);
    add_test(suite, "paths read two ways are refused", test_paths_read_two_ways_are_refused);
    add_test(suite, "query keys: one exact spelling, once", test_query_keys);
    add_test(suite, "query names as PHP reads them", test_query_names_as_php_reads_them);
    add_test(suite, "path parameters are stripped for a second reading", test_path_parameters);
}
