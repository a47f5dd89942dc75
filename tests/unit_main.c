/* Runs every unit suite, or only those whose name contains argv[1] (the sanitizer builds use
 * this to pick the concurrency suites). Exits non-zero on any failure. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "gateway/modules.h"
#include "tests/unit.h"

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    unsigned failures;

    /* As the gateway does before it reads a config: the modules' own keys are known. */
    if (gw_modules_register() != 0) {
        fputs("the gateway's modules do not register\n", stderr);
        return 2;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 2;
    }
    register_limiter_tests();
    register_table_tests();
    register_token_bucket_tests();
    register_gcra_tests();
    register_fixed_window_tests();
    register_sliding_window_log_tests();
    register_sliding_window_counter_tests();
    register_refund_tests();
    register_reserve_tests();
    register_peek_tests();
    register_grant_tests();
    register_concurrency_tests();
    register_units_tests();
    register_methods_tests();
    register_load_tests();
    register_blocks_tests();
    register_upstreams_tests();
    register_man_defaults_tests();
    register_count_config_tests();
    register_delay_config_tests();
    register_sentinels_config_tests();
    register_config_admin_tests();
    register_routes_tests();
    register_keys_tests();
    register_headers_tests();
    register_respond_tests();
    register_head_tests();
    register_target_tests();
    register_wire_tests();
    register_consumers_unit_tests();
    register_cost_tests();
    register_backends_tests();
    register_target_after_tests();
    register_body_tests();
    register_trace_tests();
    register_log_line_tests();
    register_log_reader_tests();
    register_random_tests();
    register_store_call_tests();
    register_decide_tests();
    register_route_module_tests();
    register_access_module_tests();
    register_identify_tests();
    register_limit_module_tests();
    register_refusals_tests();
    register_upstream_headers_tests();

    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        if (only != NULL && strstr(s->pName, only) == NULL)
            CU_set_suite_active(s, CU_FALSE);

    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
               CU_get_run_summary()->nSuitesFailed;
    if (CU_get_number_of_tests_run() == 0) {
        fprintf(stderr, "no test ran\n");
        failures = 1;
    }
    CU_cleanup_registry();
    return failures == 0 ? 0 : 1;
}
