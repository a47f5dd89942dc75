/* Registering CUnit suites and tests (tests/suites.c), shared by both runners. */
#ifndef SLUICE_TESTS_SUITES_H
#define SLUICE_TESTS_SUITES_H

#include <CUnit/CUnit.h>

CU_pSuite add_suite(const char *name);
CU_pSuite add_suite_with(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean);
void add_test(CU_pSuite suite, const char *name, CU_TestFunc test);

#endif
