#include <stdbool.h>
#include <stddef.h>

#include "config/methods.h"
#include "tests/unit.h"

/* Each standard method, what it is, and that its place is its own. */
static void test_standard_methods(void)
{
    static const struct {
        const char *name;
        bool idempotent, may_retry;
    } methods[] = {
        {"GET", true, true},     {"HEAD", true, true},   {"POST", false, false},
        {"PUT", true, true},     {"DELETE", true, true}, {"CONNECT", false, false},
        {"OPTIONS", true, true}, {"TRACE", true, false}, {"PATCH", false, false},
    };
    unsigned seen = 0;

    CU_ASSERT_EQUAL_FATAL(sizeof methods / sizeof methods[0], CONFIG_METHOD_COUNT);
    for (size_t i = 0; i < CONFIG_METHOD_COUNT; i++) {
        const char *m = methods[i].name;
        int index = config_method_index(m);

        CU_ASSERT_TRUE(config_method_is_standard(m));
        CU_ASSERT_FALSE(config_method_is_miscased(m));
        CU_ASSERT_STRING_EQUAL(config_method_standard(m), m);
        CU_ASSERT_EQUAL(config_method_is_idempotent(m), methods[i].idempotent);
        CU_ASSERT_EQUAL(config_method_may_retry(m), methods[i].may_retry);
        CU_ASSERT_TRUE(index >= 0 && index < CONFIG_METHOD_COUNT);
        CU_ASSERT_FALSE(seen & 1u << index);
        seen |= 1u << index;
    }
}

/* Another case names a standard method, but is not one: methods are case-sensitive. */
static void test_other_case(void)
{
    CU_ASSERT_STRING_EQUAL(config_method_standard("get"), "GET");
    CU_ASSERT_STRING_EQUAL(config_method_standard("Patch"), "PATCH");
    CU_ASSERT_FALSE(config_method_is_standard("get"));
    CU_ASSERT_TRUE(config_method_is_miscased("get"));
    CU_ASSERT_TRUE(config_method_is_miscased("Post"));
    CU_ASSERT_TRUE(config_method_is_miscased("tRACE"));
    CU_ASSERT_FALSE(config_method_is_idempotent("get"));
    CU_ASSERT_FALSE(config_method_may_retry("put"));
    CU_ASSERT_EQUAL(config_method_index("get"), -1);
}

/* Extension methods, near misses and nothing are none of them, in any case. */
static void test_other_methods(void)
{
    static const char *const others[] = {"GETT",  "GE",       "GET ", " GET",
                                         "PURGE", "PROPFIND", "",     "G\tET"};

    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CU_ASSERT_PTR_NULL(config_method_standard(others[i]));
        CU_ASSERT_FALSE(config_method_is_standard(others[i]));
        CU_ASSERT_FALSE(config_method_is_miscased(others[i]));
        CU_ASSERT_FALSE(config_method_is_idempotent(others[i]));
        CU_ASSERT_FALSE(config_method_may_retry(others[i]));
        CU_ASSERT_EQUAL(config_method_index(others[i]), -1);
    }
    CU_ASSERT_PTR_NULL(config_method_standard(NULL));
    CU_ASSERT_FALSE(config_method_is_standard(NULL));
    CU_ASSERT_FALSE(config_method_is_miscased(NULL));
}

void register_methods_tests(void)
{
    CU_pSuite s = add_suite("config_methods");

    add_test(s, "the standard methods: idempotent, retried, each its own place",
             test_standard_methods);
    add_test(s, "a standard method in another case is not one", test_other_case);
    add_test(s, "extension methods and near misses", test_other_methods);
}
