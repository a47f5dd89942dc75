/* Runs the integration suites against the real binaries in build/, in the serving mode that
 * $SLUICE_MODE and $SLUICE_WORKERS name (harness.h). Exits non-zero on any failure. */
#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

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
    register_streams_tests();
    register_tunnels_tests();
    register_proxy_protocol_tests();
    register_park_tests();
    register_trace_tests();
    register_logs_tests();
    register_tls_tests();
    register_deploy_tests();
    register_simulate_tests();
    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        if (only != NULL && strstr(s->pName, only) == NULL)
            CU_set_suite_active(s, CU_FALSE);

    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
               CU_get_run_summary()->nSuitesFailed;
    if (CU_get_number_of_tests_run() == 0)
        failures = 1;
    CU_cleanup_registry();
    stop_upstream();
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
