/* Registering CUnit suites and tests, for both test runners: a registry that cannot take one
 * more is a broken test build, so it stops the run. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/suites.h"

CU_pSuite add_suite_with(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean)
{
    CU_pSuite suite = CU_add_suite(name, init, clean);

    if (suite == NULL) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        exit(2);
    }
    return suite;
}

CU_pSuite add_suite(const char *name)
{
    return add_suite_with(name, NULL, NULL);
}

void add_test(CU_pSuite suite, const char *name, CU_TestFunc test)
{
    if (CU_add_test(suite, name, test) == NULL) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        exit(2);
    }
}
