/* A limit's count: (which answers its charge stands for) seen from outside: a login route
 * that counts only 401s lets exactly its quota of failed logins through however many race for
 * it, and charges successes nothing; a quota that does not count 5xx never runs out on them
 * (the same in the shared store: test_shared_limits.c). Against the test upstream,
 * whose /status/NNN answers NNN and whose /stats counts what reached it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static const char login_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: login\n    match: {path_prefix: /status/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: %2$s, requests: 5, per: 1h, count: {statuses: [401, 403]}}\n";

/* `sluice simulate` replays the run's log against its own config: count: given back from the
 * logged status as the gateway did, every decision comes out as recorded. */
static void expect_replayed(struct proc *gw, const char *label, int lines)
{
    char command[512], out[8192], log[128], config[128];
    char *text;
    int code;

    check_case(wait_for_access_lines(gw, lines) == lines, label, "the access log lacks lines");
    scratch_path(log, sizeof log, "count-access.log");
    scratch_path(config, sizeof config, "count-config.yaml");
    snprintf(command, sizeof command, "cp %s %s && cp %s %s", gw->access_path, log, gw->config_path,
             config);
    CU_ASSERT_EQUAL_FATAL(run_command(command, out, sizeof out), 0);
    snprintf(command, sizeof command, "simulate --format json -c %s %s", config, log);
    code = run_sluice(command, out, sizeof out);
    text = strstr(out, "\"proposed\":");
    check_case(code == 0 && text != NULL && strstr(text, "\"denied\":96,") != NULL &&
                   strstr(text, "\"recorded_denied\":96") != NULL,
               label, "the replay did not decide as recorded (exit %d):\n%.600s", code, out);
    unlink(log);
    unlink(config);
}

/* Successes are charged nothing; then 100 failed logins at once: exactly 5 reach the
 * upstream and are answered 401, the rest 429; then a success is denied too, the 5 counted
 * answers holding the quota. For each algorithm. */
static void test_failed_logins_counted_exactly(void)
{
    static const char *const algorithms[] = {"fixed_window", "sliding_window_log",
                                             "sliding_window_counter", "token_bucket", "gcra"};

    for (size_t a = 0; a < sizeof algorithms / sizeof algorithms[0]; a++) {
        struct proc gw;
        unsigned long mark = 0;
        int ok, other, ok_count = 0;

        if (start_sluice(&gw, login_config, upstream.port, algorithms[a]) != 0) {
            CU_FAIL("sluice did not start");
            return;
        }
        upstream_reached(&mark);
        for (int i = 0; i < 20; i++)
            ok_count += get_status(gw.port, "/status/200", NULL) == 200;
        check_case(ok_count == 20 && upstream_reached(&mark) == 20, algorithms[a],
                   "%d of 20 successes passed; each should, none being counted", ok_count);
        ok = race_requests(&gw.port, 1, 100, "/status/401", NULL, &other);
        check_case(ok == 0 && other == 5, algorithms[a],
                   "100 failed logins at once: %d answered 401 (expected 5), %d 200", other, ok);
        check_case(upstream_reached(&mark) == 5, algorithms[a],
                   "the upstream saw other than 5 of them");
        check_case(get_status(gw.port, "/status/200", NULL) == 429 && upstream_reached(&mark) == 0,
                   algorithms[a], "a success passed once 5 failures had counted");
        CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"login\",decision=\"denied\"}"),
                        96);
        /* Given back: the 20 successes, which 401 and 403 alone count. */
        CU_ASSERT_EQUAL(metric(&gw, "sluice_limit_refunds_total{route=\"login\",limit=\"login\"}"),
                        20);
        expect_replayed(&gw, algorithms[a], 121);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

static const char except_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: quota\n    match: {path_prefix: /status/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: sliding_window_counter, requests: 3, per: 1h,\n"
    "            count: {except: [\"5xx\"]}}\n"
    "  - name: down\n    match: {path_prefix: /down/}\n    upstream: \"http://127.0.0.1:1\"\n"
    "    limit: {algorithm: gcra, requests: 2, per: 1h, count: {except: [\"5xx\"]}}\n";

/* The upstream's 503s and the gateway's own 502s are not charged; 2xx and 4xx are. */
static void test_errors_not_charged(void)
{
    struct proc gw;
    int statuses[4] = {0};

    CU_ASSERT_FATAL(start_sluice(&gw, except_config, upstream.port) == 0);
    for (int i = 0; i < 10; i++)
        statuses[0] += get_status(gw.port, "/status/503", NULL) == 503;
    for (int i = 0; i < 10; i++)
        statuses[1] += get_status(gw.port, "/down/x", NULL) == 502;
    check_case(statuses[0] == 10 && statuses[1] == 10, "5xx", "%d 503s and %d 502s of 10 each",
               statuses[0], statuses[1]);
    statuses[2] += get_status(gw.port, "/status/200", NULL) == 200;
    statuses[2] += get_status(gw.port, "/status/404", NULL) == 404;
    statuses[2] += get_status(gw.port, "/status/200", NULL) == 200;
    statuses[3] = (int)get_status(gw.port, "/status/200", NULL);
    check_case(statuses[2] == 3 && statuses[3] == 429, "2xx and 4xx",
               "%d of 3 counted answers passed; the fourth got %d, not 429", statuses[2],
               statuses[3]);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_count_tests(void)
{
    CU_pSuite s = add_suite_with("count", NULL, NULL);

    add_test(s, "count: failed logins counted exactly, successes free",
             test_failed_logins_counted_exactly);
    add_test(s, "count: except 5xx charges no error", test_errors_not_charged);
}
