/* A short run of the real binary under valgrind's memcheck: every kind of answer, a reload,
 * a graceful stop; memcheck must find no error and no definite leak (it would make the exit
 * code 99). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static void test_memcheck_clean(void)
{
    struct proc gw;
    const char *config = "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                         "max_body: 1KiB, watch_config: false}\nroutes:\n"
                         "  - name: limited\n    match: {path_prefix: /limited/}\n"
                         "    upstream: \"http://127.0.0.1:%1$u\"\n"
                         "    limit:\n      - {name: a, algorithm: sliding_window_log, "
                         "requests: 2, per: 1h}\n      - {name: b, algorithm: gcra, requests: 5, "
                         "per: 1s}\n"
                         "  - name: dead\n    match: {path_prefix: /dead/}\n"
                         "    upstream: \"http://127.0.0.1:1\"\n"
                         "  - name: main\n    match: {path_prefix: /}\n"
                         "    upstream: \"http://127.0.0.1:%1$u\"\n";
    char path[128], *report;
    unsigned long long bytes;
    struct reply r;

    if (sluice_sanitized()) { /* any path to a plain build is run */
        skip_test("valgrind cannot run a sanitizer build, which checks its own memory");
        return;
    }
    CU_ASSERT_EQUAL_FATAL(start_sluice_under_valgrind(&gw, config, upstream.port), 0);
    for (int i = 0; i < 3; i++) { /* allowed, allowed, denied */
        http(gw.port, "GET", "/limited/x", NULL, NULL, &r);
        CU_ASSERT_EQUAL(r.status, i < 2 ? 200 : 429);
        reply_free(&r);
    }
    http(gw.port, "POST", "/echo", NULL, "a body", &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    CU_ASSERT_EQUAL(http_count(gw.port, "/bytes?n=3000000", &bytes), 200);
    CU_ASSERT_EQUAL(http_count(gw.port, "/chunked?n=100000", &bytes), 200);
    CU_ASSERT_EQUAL(http_count(gw.port, "/dead/x", &bytes), 502);
    http(gw.admin_port, "GET", "/metrics", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    rewrite_config(&gw, true, config, upstream.port);
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 20000));
    http(gw.port, "GET", "/limited/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 429); /* state kept across the reload */
    reply_free(&r);

    snprintf(path, sizeof path, "%s.valgrind", gw.config_path);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 60000), 0);
    report = read_file(path);
    if (report != NULL && report[0] != '\0')
        fprintf(stderr, "\nvalgrind:\n%s\n", report);
    free(report);
    remove(path);
}

void register_valgrind_tests(void)
{
    CU_pSuite s = add_suite_with("valgrind", NULL, NULL);

    add_test(s, "memcheck: no errors, no leaks", test_memcheck_clean);
}
