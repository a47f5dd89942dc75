/* The quota endpoints when something goes wrong: the shared store does not answer (a reset
 * then changes nothing anywhere, not even this replica's local fallback, and is neither
 * logged nor counted); the admin token file is rewritten, removed or read again on SIGHUP
 * under a running gateway (it is watched with the config: a new token takes without SIGHUP,
 * and a failed reload changes nothing); and calls the endpoints cannot read without guessing
 * (a name given twice in different cases, a value with a control character, a method in
 * lower case) are refused and change nothing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/quota_calls.h"

/* --- the shared store does not answer ---------------------------------------------------- */

/* On Redis (%2$u) with a short timeout; while it fails, each replica limits locally with the
 * whole quota (replicas: 1). */
static const char store_down_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token: \"" TOKEN "\"}\n"
    "limiter: {store: redis, redis: {address: \"127.0.0.1:%2$u\", timeout: 100ms}, replicas: 1,\n"
    "          on_store_error: local}\n" ROUTES;

#define DOWN_PATH   "/fixed_window/down"
#define DOWN_KEY    "store-down"
#define DOWN_TARGET "/quota?route=fixed_window&key=" DOWN_KEY

/* Asks `gw` for the client's quota until the store answers again (200: a look is a store
 * call, so it probes the degraded store), up to 10 s; whether it did. */
static bool store_answers(const struct proc *gw)
{
    struct reply r;
    long status = 0;

    for (int waited = 0; waited < 10000 && status != 200; waited += 100) {
        status = as_operator(gw, "GET", DOWN_TARGET, &r);
        reply_free(&r);
        if (status != 200)
            sleep_ms(100);
    }
    return status == 200;
}

/* Every change through `gw` while the store is down: 503 problem+json, nothing logged or
 * counted. */
static void expect_changes_refused(const struct proc *gw)
{
    static const char *const calls[][2] = {
        {"DELETE", DOWN_TARGET},
        {"DELETE", DOWN_TARGET "&limit=hourly"},
        {"POST", "/quota/grant?route=fixed_window&key=" DOWN_KEY "&limit=hourly&n=5"},
        {"GET", DOWN_TARGET},
    };
    struct reply r;

    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        as_operator(gw, calls[i][0], calls[i][1], &r);
        check_case(r.status == 503, calls[i][1], "%s: status %ld, %s", calls[i][0], r.status,
                   r.body);
        expect_header(&r, "Content-Type", "application/problem+json");
        CU_ASSERT_EQUAL(limit_number(r.body, NULL, "status"), 503);
        reply_free(&r);
    }
    sleep_ms(200); /* the log has a writer thread of its own: time for a line to come */
    CU_ASSERT_EQUAL(log_count(gw, "quota reset:"), 0);
    CU_ASSERT_EQUAL(log_count(gw, "quota grant:"), 0);
    CU_ASSERT_EQUAL(metric(gw, "sluice_quota_changes_total{action=\"reset\"}"), 0);
    CU_ASSERT_EQUAL(metric(gw, "sluice_quota_changes_total{action=\"grant\"}"), 0);
}

/* A client exhausted in Redis (through gws[1]); Redis stopped; the client spends its local
 * share on gws[0] (5, on_store_error: local, replicas: 1), and a reset through gws[0] fails
 * (503). The client must still be refused there: change() asks the store first and touches
 * this replica's fallback limiters only when the store did the change. Had it reset them
 * before asking, the next request would pass. Then, with Redis back (empty: it keeps nothing),
 * a reset through gws[0] that the store answers does clear the fallback: in a second outage
 * the client has its local share again.
 *
 * Redis is stopped, not paused (CLIENT PAUSE, DEBUG SLEEP): a paused Redis runs the calls it
 * held when it wakes, the reset among them if it was sent, and the local fallback is what is
 * under test here, which needs only a store that does not answer. */
static void test_store_down_changes_nothing(void)
{
    struct redis redis = {0};
    struct proc gws[2];
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_redis(&redis), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gws[0], store_down_config, upstream.port, redis.port), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gws[1], store_down_config, upstream.port, redis.port), 0);
    expect_passes(gws[1].port, DOWN_PATH, DOWN_KEY, QUOTA, "in Redis");
    CU_ASSERT_EQUAL(remaining(&gws[0], "fixed_window", DOWN_KEY, "hourly"), 0);

    stop_redis(&redis);
    expect_passes(gws[0].port, DOWN_PATH, DOWN_KEY, QUOTA, "the local share, Redis down");
    CU_ASSERT_TRUE(metric(&gws[0], "sluice_store_degraded") == 1);
    expect_changes_refused(&gws[0]);
    check_case(get_status(gws[0].port, DOWN_PATH, DOWN_KEY) == 429, "after the failed reset",
               "the client passed on gws[0]: its local fallback was reset though the store "
               "did not answer");
    CU_ASSERT_EQUAL(get_status(gws[0].port, "/fixed_window/down", "another-client"), 200);

    CU_ASSERT_EQUAL_FATAL(start_redis(&redis), 0); /* the same port, no counts */
    CU_ASSERT_TRUE(store_answers(&gws[0]));
    CU_ASSERT_EQUAL(as_operator(&gws[0], "DELETE", DOWN_TARGET, &r), 200);
    CU_ASSERT_EQUAL(limit_number(r.body, "hourly", "remaining"), QUOTA);
    reply_free(&r);
    stop_redis(&redis);
    expect_passes(gws[0].port, DOWN_PATH, DOWN_KEY, QUOTA, "a second outage, after a reset");
    CU_ASSERT_EQUAL(stop_sluice(&gws[0], 5000), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gws[1], 5000), 0);
}

/* --- the admin token file ---------------------------------------------------------------- */

/* %2$s the token file. */
static const char token_file_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token_file: \"%2$s\"}\n"
    "routes:\n" ROUTE("fixed_window", ", per: 1h");

static void write_token(const char *path, const char *token)
{
    FILE *f = fopen(path, "w");

    if (f != NULL) {
        fprintf(f, "%s\n", token);
        fclose(f);
    }
}

/* The status of GET /quota on `gw` with bearer `token`. */
static long with_token(const struct proc *gw, const char *token)
{
    char auth[128];
    const char *const headers[] = {auth, NULL};
    struct reply r;
    long status;

    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    status = admin_call(gw, "GET", "/quota?route=fixed_window&key=k", headers, &r);
    reply_free(&r);
    return status;
}

/* admin_token_file: read at start and again on SIGHUP; the old token then fails. */
static void test_token_file_reloads(void)
{
    const char *const old_token[] = {AUTH, NULL};
    char path[64];
    struct proc gw;
    struct reply r;

    write_token(scratch_path(path, sizeof path, "admin-token"), TOKEN);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, token_file_config, upstream.port, path), 0);
    CU_ASSERT_EQUAL(with_token(&gw, TOKEN), 200);
    CU_ASSERT_EQUAL(with_token(&gw, OTHER_TOKEN), 401);
    write_token(path, OTHER_TOKEN);
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/quota?route=fixed_window&key=k", old_token, &r), 401);
    expect_header_has(&r, "WWW-Authenticate", "error=\"invalid_token\"");
    reply_free(&r);
    CU_ASSERT_EQUAL(with_token(&gw, OTHER_TOKEN), 200);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    unlink(path);
}

/* Waits up to 5 s until `good` is taken and `bad` refused (401); whether they were. */
static bool token_turns(const struct proc *gw, const char *good, const char *bad)
{
    for (int waited = 0; waited < 5000; waited += 50) {
        if (with_token(gw, good) == 200 && with_token(gw, bad) == 401)
            return true;
        sleep_ms(50);
    }
    return false;
}

/* admin_token_file is watched with the config (watch_config, true by default): rewritten, the
 * new token takes and the old one fails, with no SIGHUP. Removed, the reload fails ("reload
 * rejected", naming the file) and, as any failed reload, changes nothing: the token read last
 * keeps working. Written again, it takes: the watch outlived the failure.
 *
 * Removing the file is no revocation (a new token is): the watch reloads on a file written or
 * moved in, not on one removed, so the token in force stays; the next reload (a SIGHUP here)
 * fails on the missing file, says so, and changes nothing either. */
static void test_token_file_watched(void)
{
    static const char third[] = "a-third-admin-token-0123456789";
    char path[64];
    struct proc gw;

    write_token(scratch_path(path, sizeof path, "watched-token"), TOKEN);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, token_file_config, upstream.port, path), 0);
    CU_ASSERT_EQUAL(with_token(&gw, TOKEN), 200);
    CU_ASSERT_EQUAL(with_token(&gw, OTHER_TOKEN), 401);

    write_token(path, OTHER_TOKEN);
    check_case(token_turns(&gw, OTHER_TOKEN, TOKEN), "rewritten", "within 5 s: new %ld, old %ld",
               with_token(&gw, OTHER_TOKEN), with_token(&gw, TOKEN));
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 1000));

    unlink(path);
    CU_ASSERT_EQUAL(with_token(&gw, OTHER_TOKEN), 200);
    kill(gw.pid, SIGHUP);
    check_case(wait_for_log(&gw, "admin_token_file: cannot read", 1, 3000), "removed, SIGHUP",
               "no \"reload rejected: ... admin_token_file: cannot read\"");
    CU_ASSERT_EQUAL(log_count(&gw, "reloaded"), 1);
    CU_ASSERT_EQUAL(with_token(&gw, OTHER_TOKEN), 200);
    CU_ASSERT_EQUAL(with_token(&gw, TOKEN), 401);

    write_token(path, third);
    check_case(token_turns(&gw, third, OTHER_TOKEN), "written again",
               "within 5 s: new %ld, old %ld", with_token(&gw, third),
               with_token(&gw, OTHER_TOKEN));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    unlink(path);
}

/* --- calls that cannot be read without guessing ------------------------------------------ */

/* Parameter names are one name whatever their case (libmicrohttpd's look-up ignores it), so
 * one given twice in two cases is refused (header:X-User and header:x-user; KEY= and Route=
 * are refused even alone, as names the endpoints do not know), as is a value holding a control
 * character, and a method not written as requests send it. A refused DELETE or grant changes
 * nothing. */
static void test_ambiguous_calls_refused(void)
{
    static const char *const bad[] = {
        "/quota?route=pair&key=spent&KEY=j",
        "/quota?route=pair&KEY=j&key=spent",
        "/quota?route=pair&Route=pair&key=spent",
        "/quota?route=pair&key=spent&query:USER=a&query:user=b",
        "/quota?route=pair&key=spent&header:X-User=a&header:x-user=b",
        "/quota?route=pair&key=a%01b",
        "/quota?route=pair&key=a%00b",
        "/quota?route=pair&key=a%0Ab",
        "/quota?route=pair&key=a%7Fb",
        "/quota?route=pair&key=spent&method=post",
    };
    static const char *const methods[] = {"GET", "DELETE"};
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/pair/x", "spent", 2), 2);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t m = 0; m < 2; m++) {
            as_operator(&gw, methods[m], bad[i], &r);
            check_case(r.status == 400, bad[i], "%s: status %ld, %s", methods[m], r.status, r.body);
            expect_header(&r, "Content-Type", "application/problem+json");
            reply_free(&r);
        }
    as_operator(&gw, "POST", "/quota/grant?route=pair&key=spent&limit=first&n=1&N=2", &r);
    CU_ASSERT_EQUAL(r.status, 400);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=pair&key=spent&method=POST", &r), 200);
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "remaining"), QUOTA - 2);
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "cost"), 1);
    reply_free(&r);
    CU_ASSERT_EQUAL(remaining(&gw, "pair", "spent", "second"), QUOTA - 2);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"reset\"}"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"grant\"}"), 0);
    sleep_ms(200); /* the log has a writer thread of its own: time for a line to come */
    CU_ASSERT_EQUAL(log_count(&gw, "quota reset:") + log_count(&gw, "quota grant:"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_quota_faults_tests(void)
{
    CU_pSuite s = add_suite("quota faults");

    add_test(s, "a change the store did not answer changes nothing, here either",
             test_store_down_changes_nothing);
    add_test(s, "admin_token_file is read again on SIGHUP", test_token_file_reloads);
    add_test(s, "admin_token_file is watched; a failed reload keeps the token",
             test_token_file_watched);
    add_test(s, "names in two cases, control characters, post: refused",
             test_ambiguous_calls_refused);
}
