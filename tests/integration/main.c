/* Runs the integration suites against the real binaries in build/, in the serving mode that
 * $SLUICE_MODE and $SLUICE_WORKERS name (harness.h). Each test's line ends "passed", "FAILED"
 * with its failures, or "SKIPPED: why" for one that could not check here (skip_test()), and
 * the run ends with one summary line that counts the skipped apart from the passed:
 *   integration: 209 tests run: 207 passed, 0 failed, 2 skipped; 3012 asserts, 0 failed; 0
 *   suites failed to set up or clean up
 * and a line for each test skipped, with its reason.
 * Exits non-zero on any failure. */
#include <CUnit/CUnit.h>
#include <CUnit/TestRun.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static void on_suite_start(const CU_pSuite suite)
{
    if (suite->fActive) /* those left out by the command line are not named */
        printf("\nSuite: %s", suite->pName);
    fflush(stdout);
}

static void on_test_start(const CU_pTest test, const CU_pSuite suite)
{
    (void)suite;
    printf("\n  Test: %s ...", test->pName);
    fflush(stdout);
}

/* `failures`: this test's, or NULL. A test that failed and then skipped is a failure. */
static void on_test_complete(const CU_pTest test, const CU_pSuite suite,
                             const CU_pFailureRecord failures)
{
    const char *why = skip_reason(test);
    int i = 1;

    (void)suite;
    if (failures == NULL && why != NULL) {
        printf("SKIPPED: %s", why);
    } else if (failures == NULL) {
        printf("passed");
    } else {
        printf("FAILED");
        for (CU_pFailureRecord f = failures; f != NULL; f = f->pNext, i++)
            printf("\n    %d. %s:%u  - %s", i, f->strFileName, f->uiLineNumber, f->strCondition);
    }
    fflush(stdout);
}

static void on_suite_init_failure(const CU_pSuite suite)
{
    printf("\nSuite %s: its setup FAILED; its tests did not run", suite->pName);
}

static void on_suite_cleanup_failure(const CU_pSuite suite)
{
    printf("\nSuite %s: its cleanup FAILED", suite->pName);
}

/* Whether `test` has a failure recorded. */
static bool failed(CU_pTest test)
{
    for (CU_pFailureRecord f = CU_get_failure_list(); f != NULL; f = f->pNext)
        if (f->pTest == test)
            return true;
    return false;
}

/* The tests run that were skipped without a failure, a line each into `out` when it is not
 * NULL; how many. */
static unsigned skipped_tests(FILE *out)
{
    unsigned skipped = 0;

    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        for (CU_pTest t = s->pTest; s->fActive && t != NULL; t = t->pNext)
            if (skip_reason(t) != NULL && !failed(t)) {
                skipped++;
                if (out != NULL)
                    fprintf(out, "  skipped: %s: %s: %s\n", s->pName, t->pName, skip_reason(t));
            }
    return skipped;
}

static void print_summary(void)
{
    unsigned run = CU_get_number_of_tests_run(), failures = CU_get_number_of_tests_failed();
    unsigned skipped = skipped_tests(NULL);

    printf("\n\nintegration: %u tests run: %u passed, %u failed, %u skipped; %u asserts, %u "
           "failed; %u suites failed to set up or clean up\n",
           run, run - failures - skipped, failures, skipped, CU_get_number_of_asserts(),
           CU_get_number_of_failures(), CU_get_run_summary()->nSuitesFailed);
    skipped_tests(stdout);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *mode = serving_mode(), *workers = serving_workers(); /* checked first */
    unsigned failures;

    printf("sluice integration suites: %s, server.mode %s, server.workers %s\n", sluice_binary(),
           mode ? mode : "as each config says (SLUICE_MODE unset)",
           workers ? workers : "as each config says (SLUICE_WORKERS unset)");
    fflush(stdout);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (start_upstream() != 0)
        return 2;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    register_proxy_tests();
    register_limits_tests();
    register_cli_tests();
    register_docs_tests();
    register_upstreams_tests();
    register_reload_tests();
    register_observe_tests();
    register_store_tests();
    register_store_faults_tests();
    register_hostile_tests();
    register_valgrind_tests();
    register_edge_tests();
    register_pressure_tests();
    register_upstream_edge_tests();
    register_modes_tests();
    register_consumers_tests();
    register_answers_tests();
    register_costs_tests();
    register_backends_tests();
    register_shared_upstreams_tests();
    register_count_tests();
    register_concurrency_it_tests();
    register_shared_limits_tests();
    register_refusals_it_tests();
    register_delay_tests();
    register_streams_tests();
    register_tunnels_tests();
    register_proxy_protocol_tests();
    register_park_tests();
    register_trace_tests();
    register_logs_tests();
    register_tls_tests();
    register_tls_tunnels_tests();
    register_quota_tests();
    register_quota_cli_tests();
    register_quota_faults_tests();
    register_admin_api_tests();
    register_replicas_tests();
    /* Redis's topologies (one master, a replica, three sentinels): slow to set up, so run by
     * `make test-topologies`, which .ci/run calls after `make test`, not by `make test`. */
    if (getenv("SLUICE_IT_TOPOLOGIES") != NULL)
        register_sentinel_tests();
    register_deploy_tests();
    register_simulate_tests();
    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        if (only != NULL && strstr(s->pName, only) == NULL)
            CU_set_suite_active(s, CU_FALSE);

    CU_set_suite_start_handler(on_suite_start);
    CU_set_test_start_handler(on_test_start);
    CU_set_test_complete_handler(on_test_complete);
    CU_set_suite_init_failure_handler(on_suite_init_failure);
    CU_set_suite_cleanup_failure_handler(on_suite_cleanup_failure);
    CU_run_all_tests();
    print_summary();
    failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
               CU_get_run_summary()->nSuitesFailed;
    if (CU_get_number_of_tests_run() == 0)
        failures = 1;
    CU_cleanup_registry();
    stop_upstream();
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
