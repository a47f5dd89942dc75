/* The unit test runner's registry: each test file exports one register function, and
 * tests/unit_main.c calls them all. */
#ifndef SLUICE_TESTS_UNIT_H
#define SLUICE_TESTS_UNIT_H

#include "tests/suites.h"

void register_limiter_tests(void);
void register_table_tests(void);
void register_token_bucket_tests(void);
void register_gcra_tests(void);
void register_fixed_window_tests(void);
void register_sliding_window_log_tests(void);
void register_sliding_window_counter_tests(void);
void register_refund_tests(void);
void register_reserve_tests(void);
void register_peek_tests(void);
void register_grant_tests(void);
void register_concurrency_tests(void);
void register_units_tests(void);
void register_methods_tests(void);
void register_load_tests(void);
void register_blocks_tests(void);
void register_upstreams_tests(void);
void register_man_defaults_tests(void);
void register_count_config_tests(void);
void register_delay_config_tests(void);
void register_sentinels_config_tests(void);
void register_config_admin_tests(void);
void register_routes_tests(void);
void register_keys_tests(void);
void register_headers_tests(void);
void register_respond_tests(void);
void register_head_tests(void);
void register_target_tests(void);
void register_wire_tests(void);
void register_consumers_unit_tests(void);
void register_cost_tests(void);
void register_backends_tests(void);
void register_target_after_tests(void);
void register_body_tests(void);
void register_trace_tests(void);
void register_log_line_tests(void);
void register_log_reader_tests(void);
void register_random_tests(void);
void register_store_call_tests(void);
void register_decide_tests(void);
void register_route_module_tests(void);
void register_access_module_tests(void);
void register_identify_tests(void);
void register_limit_module_tests(void);
void register_refusals_tests(void);
void register_upstream_headers_tests(void);

#endif
