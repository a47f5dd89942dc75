/* The admin listener's quota endpoints (gateway/modules/limit/quota.h, gateway/front/
 * admin_quota.c) and `sluice quota` (gateway/ops/quota_cli.h), against real requests: what
 * GET /quota shows is what the client has spent, and a look charges nothing; DELETE /quota
 * and POST /quota/grant change what the next requests get, in memory (this replica) and in
 * Redis (every replica: the suite "quota shared" runs two on one redis-server); the admin
 * token guards them; consumers and limits with keys of their own (under long header names
 * too) are found; a key of any bytes is found through the CLI's %-escaping; a change is logged
 * by digest, never by key, and only where the client had spent something; the admin's
 * start-up line names /quota when it answers. Each test starts the gateways it needs;
 * test_quota_faults.c has what goes wrong. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/quota_calls.h"

/* %2$u Redis's port. */
/* Without refusals kept (refusal_cache: 0): a change through one replica then shows on the
 * other at once, as these tests check; with them it shows there within refusal_cache (the
 * suite "refusal cache" checks that bound). */
static const char redis_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token: \"" TOKEN "\"}\n"
    "limiter: {store: redis, redis: {address: \"127.0.0.1:%2$u\", timeout: 1s, refusal_cache: "
    "0s}}\n" ROUTES;

static struct redis redis;

/* Two replicas on one Redis, emptied first. */
static bool start_replicas(struct proc *gws)
{
    return redis_cli_wait(&redis, "FLUSHALL") == 0 &&
           start_sluice(&gws[0], redis_config, upstream.port, redis.port) == 0 &&
           start_sluice(&gws[1], redis_config, upstream.port, redis.port) == 0;
}

static void stop_replicas(struct proc *gws)
{
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(stop_sluice(&gws[i], 5000), 0);
}

/* --- looking: GET /quota ------------------------------------------------------------------ */

/* 3 of the 5 requests of route `algo` sent, turn about over the `n` gateways `gws`: each of
 * three reads (turn about too) shows 2 remaining and changes nothing: exactly 2 more pass. */
static void check_show(const struct proc *gws, int n, const char *algo, const char *scope)
{
    unsigned ports[2] = {gws[0].port, gws[n - 1].port};
    unsigned long mark = 0;
    char path[64], key[64], target[160], algorithm[64], label[96];
    struct reply r;

    snprintf(path, sizeof path, "/%s/x", algo);
    snprintf(key, sizeof key, "show-%s", algo);
    snprintf(target, sizeof target, "/quota?route=%s&key=%s", algo, key);
    snprintf(algorithm, sizeof algorithm, "\"%s\"", algo);
    snprintf(label, sizeof label, "%s (%s)", algo, scope);
    upstream_reached(&mark);
    check_case(send_requests(ports, 2, path, key, 3) == 3, label, "3 requests did not pass");
    for (int i = 0; i < 3; i++) {
        as_operator(&gws[i % n], "GET", target, &r);
        check_case(r.status == 200 && limit_number(r.body, "hourly", "remaining") == QUOTA - 3,
                   label, "read %d: status %ld, remaining %lld (expected 2)", i + 1, r.status,
                   limit_number(r.body, "hourly", "remaining"));
        CU_ASSERT_EQUAL(limit_number(r.body, "hourly", "quota"), QUOTA);
        CU_ASSERT_TRUE(json_is(r.body, "hourly", "algorithm", algorithm));
        CU_ASSERT_TRUE(json_is(r.body, "hourly", "looked_up", "true"));
        CU_ASSERT_TRUE(json_is(r.body, "hourly", "allowed", "true"));
        CU_ASSERT_TRUE(json_is(r.body, "hourly", "key_source", "\"header:x-api-key\""));
        CU_ASSERT_TRUE(json_is(r.body, NULL, "scope", scope));
        CU_ASSERT_TRUE(json_is(r.body, NULL, "action", "\"show\""));
        CU_ASSERT_TRUE(json_is(r.body, NULL, "changed", "[]"));
        reply_free(&r);
    }
    expect_passes(ports[n - 1], path, key, QUOTA - 3, label);
    check_case(upstream_reached(&mark) == QUOTA, label, "the upstream did not see exactly 5");
}

/* A concurrency limit counts requests in flight: after 3 that ended, all 5 are there, read
 * after read. Its slot goes back just after the answer, so the first read may wait a moment. */
static void check_in_flight(const struct proc *gws, int n, const char *scope)
{
    unsigned ports[2] = {gws[0].port, gws[n - 1].port};
    long long seen = -1;

    CU_ASSERT_EQUAL(send_requests(ports, 2, "/concurrency/x", "show-concurrency", 3), 3);
    for (int waited = 0; waited <= 1000 && seen != QUOTA; waited += 20, sleep_ms(20))
        seen = remaining(&gws[0], "concurrency", "show-concurrency", "hourly");
    for (int i = 0; i < 2; i++)
        check_case(seen == QUOTA &&
                       remaining(&gws[i % n], "concurrency", "show-concurrency", "hourly") == QUOTA,
                   scope, "concurrency: remaining %lld, expected 5", seen);
    CU_ASSERT_EQUAL(send_requests(ports, 2, "/concurrency/x", "show-concurrency", 8), 8);
}

static void test_show_in_memory(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_show(&gw, 1, algorithms[i], "\"replica\"");
    check_in_flight(&gw, 1, "\"replica\"");
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"reset\"}"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static void test_show_shared(void)
{
    struct proc gws[2];

    CU_ASSERT_FATAL(start_replicas(gws));
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_show(gws, 2, algorithms[i], "\"shared\"");
    check_in_flight(gws, 2, "\"shared\"");
    stop_replicas(gws);
}

/* --- changing: DELETE /quota and POST /quota/grant --------------------------------------- */

/* Route `algo`'s client exhausted through gws[0], reset through gws[n - 1]: 5 pass again on
 * gws[0]. Then exhausted again and granted 3 (through gws[n - 1]): exactly 3 pass; granted
 * 100, more than it holds: a fresh client's 5, no more. */
static void check_changes(const struct proc *gws, int n, const char *algo)
{
    const char *reset_target = "/quota?route=%s&key=change-%s";
    const char *grant_target = "/quota/grant?route=%s&key=change-%s&limit=hourly&n=%s";
    char path[64], key[64], target[160];
    struct reply r;

    snprintf(path, sizeof path, "/%s/x", algo);
    snprintf(key, sizeof key, "change-%s", algo);
    expect_passes(gws[0].port, path, key, QUOTA, algo);
    snprintf(target, sizeof target, reset_target, algo, algo);
    CU_ASSERT_EQUAL(as_operator(&gws[n - 1], "GET", target, &r), 200);
    check_case(limit_number(r.body, "hourly", "remaining") == 0 &&
                   json_is(r.body, "hourly", "allowed", "false") &&
                   limit_number(r.body, "hourly", "retry_after_ms") > 0,
               algo, "exhausted, it shows %s", r.body);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gws[n - 1], "DELETE", target, &r), 200);
    CU_ASSERT_TRUE(json_is(r.body, NULL, "action", "\"reset\""));
    CU_ASSERT_TRUE(json_is(r.body, NULL, "changed", "[\"hourly\"]"));
    CU_ASSERT_EQUAL(limit_number(r.body, "hourly", "remaining"), QUOTA);
    reply_free(&r);
    CU_ASSERT_EQUAL(remaining(&gws[0], algo, key, "hourly"), QUOTA);
    expect_passes(gws[0].port, path, key, QUOTA, algo);

    snprintf(target, sizeof target, grant_target, algo, algo, "3");
    CU_ASSERT_EQUAL(as_operator(&gws[n - 1], "POST", target, &r), 200);
    CU_ASSERT_TRUE(json_is(r.body, NULL, "action", "\"grant\""));
    CU_ASSERT_TRUE(json_is(r.body, NULL, "changed", "[\"hourly\"]"));
    check_case(limit_number(r.body, "hourly", "remaining") == 3, algo, "granted 3: remaining %lld",
               limit_number(r.body, "hourly", "remaining"));
    reply_free(&r);
    expect_passes(gws[0].port, path, key, 3, algo);
    snprintf(target, sizeof target, grant_target, algo, algo, "100");
    CU_ASSERT_EQUAL(as_operator(&gws[n - 1], "POST", target, &r), 200);
    check_case(limit_number(r.body, "hourly", "remaining") == QUOTA, algo,
               "granted 100: remaining %lld", limit_number(r.body, "hourly", "remaining"));
    reply_free(&r);
    expect_passes(gws[0].port, path, key, QUOTA, algo);
}

/* What cannot be changed is refused, and counted nowhere: a concurrency limit (409 when named;
 * skipped otherwise), a grant without its limit or units. */
static void check_refused_changes(const struct proc *gw)
{
    static const struct {
        const char *method, *target;
        long status;
    } calls[] = {
        {"DELETE", "/quota?route=concurrency&key=k&limit=hourly", 409},
        {"POST", "/quota/grant?route=concurrency&key=k&limit=hourly&n=1", 409},
        {"POST", "/quota/grant?route=fixed_window&key=k&n=1", 400},
        {"POST", "/quota/grant?route=fixed_window&key=k&limit=hourly", 400},
        {"POST", "/quota/grant?route=fixed_window&key=k&limit=hourly&n=0", 400},
        {"POST", "/quota/grant?route=fixed_window&key=k&limit=nothing&n=1", 404},
        {"DELETE", "/quota?route=nowhere&key=k", 404},
        {"DELETE", "/quota?route=concurrency&key=k", 200},
    };
    struct reply r;

    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        as_operator(gw, calls[i].method, calls[i].target, &r);
        check_case(r.status == calls[i].status, calls[i].target, "status %ld, expected %ld",
                   r.status, calls[i].status);
        if (r.status == 200)
            CU_ASSERT_TRUE(json_is(r.body, NULL, "changed", "[]"));
        reply_free(&r);
    }
}

/* limit=first resets that limit only (through gws[n - 1]): "second" keeps what was spent
 * and holds the client to it; "by_ip", not given ip=, is neither looked up nor changed. */
static void check_one_limit(const struct proc *gws, int n)
{
    struct reply r;

    CU_ASSERT_EQUAL(send_requests(&gws[0].port, 1, "/pair/x", "one-limit", 3), 3);
    as_operator(&gws[n - 1], "DELETE", "/quota?route=pair&key=one-limit&limit=first", &r);
    CU_ASSERT_TRUE(r.status == 200 && json_is(r.body, NULL, "changed", "[\"first\"]"));
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "remaining"), 5);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gws[0], "GET", "/quota?route=pair&key=one-limit", &r), 200);
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "remaining"), 5);
    CU_ASSERT_EQUAL(limit_number(r.body, "second", "remaining"), 2);
    CU_ASSERT_TRUE(json_is(r.body, "by_ip", "looked_up", "false"));
    CU_ASSERT_EQUAL(limit_number(r.body, "by_ip", "remaining"), -1);
    reply_free(&r);
    expect_passes(gws[0].port, "/pair/x", "one-limit", 2, "second unchanged");
}

static void test_reset_and_grant_in_memory(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_changes(&gw, 1, algorithms[i]);
    check_one_limit(&gw, 1);
    check_refused_changes(&gw);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"reset\"}"), 6);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"grant\"}"), 10);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Exhausted through one replica, changed through the other: the first sees the change. */
static void test_reset_and_grant_shared(void)
{
    struct proc gws[2];

    CU_ASSERT_FATAL(start_replicas(gws));
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_changes(gws, 2, algorithms[i]);
    check_one_limit(gws, 2);
    check_refused_changes(&gws[1]);
    CU_ASSERT_EQUAL(metric(&gws[1], "sluice_quota_changes_total{action=\"reset\"}"), 6);
    CU_ASSERT_EQUAL(metric(&gws[0], "sluice_quota_changes_total{action=\"reset\"}"), 0);
    stop_replicas(gws);
}

/* --- changing a client that spent nothing ------------------------------------------------- */

/* `method` `target` through `gw`: 200, and the answer's "changed" is `changed` (JSON text). */
static void expect_changed(const struct proc *gw, const char *method, const char *target,
                           const char *changed)
{
    char got[256] = "(none)";
    struct reply r;

    as_operator(gw, method, target, &r);
    json_at(r.body, NULL, "changed", got, sizeof got);
    check_case(r.status == 200 && strcmp(got, changed) == 0, target,
               "%s: status %ld, changed %s (expected %s)", method, r.status, got, changed);
    reply_free(&r);
}

/* On route `algo`, a client "spent" that spent 2 (through gws[0]). Through gws[n - 1]: a reset
 * of a mistyped key and a grant to a key never seen change nothing ("changed": []), nor the
 * client; a grant and a reset of the client change "hourly"; once reset it is fresh, and a
 * reset or grant changes nothing again. Spent 1 and granted 100, it has spent nothing either.
 * A reset and two grants here change something. (In Redis a grant leaves a window's key in
 * place holding 0: a key, but nothing spent, which a reset must not count.) */
static void check_fresh_changes(const struct proc *gws, int n, const char *algo)
{
    const struct proc *admin = &gws[n - 1];
    char path[64], reset[128], grant[128], target[192];

    snprintf(path, sizeof path, "/%s/x", algo);
    snprintf(reset, sizeof reset, "/quota?route=%s&key=spent", algo);
    snprintf(grant, sizeof grant, "/quota/grant?route=%s&key=spent&limit=hourly&n=", algo);
    CU_ASSERT_EQUAL(send_requests(&gws[0].port, 1, path, "spent", 2), 2);
    snprintf(target, sizeof target, "/quota?route=%s&key=spnet", algo);
    expect_changed(admin, "DELETE", target, "[]");
    snprintf(target, sizeof target, "/quota/grant?route=%s&key=never-seen&limit=hourly&n=1", algo);
    expect_changed(admin, "POST", target, "[]");
    CU_ASSERT_EQUAL(remaining(&gws[0], algo, "spent", "hourly"), QUOTA - 2);

    snprintf(target, sizeof target, "%s1", grant);
    expect_changed(admin, "POST", target, "[\"hourly\"]");
    CU_ASSERT_EQUAL(remaining(&gws[0], algo, "spent", "hourly"), QUOTA - 1);
    expect_changed(admin, "DELETE", reset, "[\"hourly\"]");
    expect_changed(admin, "DELETE", reset, "[]");
    expect_changed(admin, "POST", target, "[]");
    CU_ASSERT_EQUAL(remaining(&gws[0], algo, "spent", "hourly"), QUOTA);

    CU_ASSERT_EQUAL(send_requests(&gws[0].port, 1, path, "spent", 1), 1);
    snprintf(target, sizeof target, "%s100", grant);
    expect_changed(admin, "POST", target, "[\"hourly\"]");
    CU_ASSERT_EQUAL(remaining(&gws[0], algo, "spent", "hourly"), QUOTA);
    snprintf(target, sizeof target, "%s1", grant);
    expect_changed(admin, "POST", target, "[]");
    expect_changed(admin, "DELETE", reset, "[]");
}

/* On route "pair" (first and second count under the API key, by_ip under the address), a
 * client's 3 requests spent at all three. Through gws[n - 1]: a reset of a fresh key at the
 * same address (ip=) changes by_ip alone; one of the client's key without ip= changes first
 * and second (by_ip is not looked up); then, with ip=, nothing is left (a person is told
 * so). A client reset at "first" alone and then at all changes "second" alone. Each change
 * is logged once, naming just those limits: 4 resets here. */
static void check_only_spent_limits(const struct proc *gws, int n)
{
    const struct proc *admin = &gws[n - 1];
    static const char *const logged[] = {"by_ip", "first,second", "first", "second"};
    const char *const text[] = {AUTH, OPERATOR, "Accept: text/plain", NULL};
    struct reply r;

    CU_ASSERT_EQUAL(send_requests(&gws[0].port, 1, "/pair/x", "pair-spent", 3), 3);
    expect_changed(admin, "DELETE", "/quota?route=pair&key=pair-fresh&ip=127.0.0.1", "[\"by_ip\"]");
    CU_ASSERT_EQUAL(remaining(&gws[0], "pair", "pair-spent", "first"), QUOTA - 3);
    expect_changed(admin, "DELETE", "/quota?route=pair&key=pair-spent", "[\"first\",\"second\"]");
    expect_changed(admin, "DELETE", "/quota?route=pair&key=pair-spent&ip=127.0.0.1", "[]");
    admin_call(admin, "DELETE", "/quota?route=pair&key=pair-spent&ip=127.0.0.1", text, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    check_case(r.body != NULL && strstr(r.body, "\nnothing changed: the client was fresh\n"),
               "text", "%s", r.body);
    reply_free(&r);

    CU_ASSERT_EQUAL(send_requests(&gws[0].port, 1, "/pair/x", "pair-part", 2), 2);
    expect_changed(admin, "DELETE", "/quota?route=pair&key=pair-part&limit=first", "[\"first\"]");
    expect_changed(admin, "DELETE", "/quota?route=pair&key=pair-part", "[\"second\"]");
    for (size_t i = 0; i < sizeof logged / sizeof logged[0]; i++) {
        char line[96];

        snprintf(line, sizeof line, "quota reset: route=pair limits=%s client=", logged[i]);
        wait_for_log(admin, line, 1, 2000); /* the log has a writer thread of its own */
        check_case(log_count(admin, line) == 1, line, "logged %d times", log_count(admin, line));
    }
}

/* The changes counted and logged on `admin`: `resets` and `grants`, and none on `other`
 * (NULL: no other). */
static void expect_counted(const struct proc *admin, const struct proc *other, int resets,
                           int grants)
{
    CU_ASSERT_EQUAL(metric(admin, "sluice_quota_changes_total{action=\"reset\"}"), resets);
    CU_ASSERT_EQUAL(metric(admin, "sluice_quota_changes_total{action=\"grant\"}"), grants);
    wait_for_log(admin, "quota reset: ", resets, 2000);
    wait_for_log(admin, "quota grant: ", grants, 2000);
    sleep_ms(100); /* time for a line too many to be written */
    CU_ASSERT_EQUAL(log_count(admin, "quota reset: "), resets);
    CU_ASSERT_EQUAL(log_count(admin, "quota grant: "), grants);
    if (other != NULL) {
        CU_ASSERT_EQUAL(metric(other, "sluice_quota_changes_total{action=\"reset\"}"), 0);
        CU_ASSERT_EQUAL(log_count(other, "quota reset: ") + log_count(other, "quota grant: "), 0);
    }
}

static void test_fresh_changes_in_memory(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_fresh_changes(&gw, 1, algorithms[i]);
    check_only_spent_limits(&gw, 1);
    expect_counted(&gw, NULL, 5 + 4, 2 * 5);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* The counts are what they should be, in Redis as in memory. */
static void test_fresh_changes_shared(void)
{
    struct proc gws[2];

    CU_ASSERT_FATAL(start_replicas(gws));
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        check_fresh_changes(gws, 2, algorithms[i]);
    check_only_spent_limits(gws, 2);
    expect_counted(&gws[1], &gws[0], 5 + 4, 2 * 5);
    stop_replicas(gws);
}

/* --- the admin token ----------------------------------------------------------------------- */

/* Each refused call (no token, wrong ones, near misses) is 401 with its WWW-Authenticate,
 * changes nothing, reaches no upstream, and is counted. Whether the comparison takes as long
 * for a near miss as for a wild guess cannot be measured reliably here; the gateway compares
 * BLAKE2b digests with sodium_memcmp (admin_quota.c), and these calls show that a token
 * differing only in its last character, a prefix of it and a longer one all fail. */
static void test_token_guards(void)
{
    static const char *const wrong[] = {
        NULL,                                                         /* no Authorization */
        "Authorization: Bearer sluice-admin-token-0123456789abcdeX",  /* the last character */
        "Authorization: Bearer sluice-admin-token-0123456789abcdef0", /* longer */
        "Authorization: Bearer sluice-admin-token-0123456789",        /* a prefix */
        "Authorization: Bearer xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",  /* another, same length */
        "Authorization: Bearer short",                                /* another, shorter */
        "Authorization: Basic " TOKEN,                                /* not Bearer */
        "Authorization: Bearer",                                      /* none after it */
    };
    static const char *const methods[] = {"GET", "DELETE", "POST"};
    struct proc gw;
    unsigned long mark = 0;
    struct reply r;
    int refused = 0;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/fixed_window/x", "guarded", 2), 2);
    upstream_reached(&mark);
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++)
        for (size_t m = 0; m < 3; m++, refused++) {
            const char *headers[] = {wrong[i], NULL};
            const char *target = m == 2 ? "/quota/grant?route=fixed_window&key=guarded&"
                                          "limit=hourly&n=2"
                                        : "/quota?route=fixed_window&key=guarded";

            admin_call(&gw, methods[m], target, wrong[i] ? headers : NULL, &r);
            check_case(r.status == 401, wrong[i] ? wrong[i] : "no token", "%s: status %ld",
                       methods[m], r.status);
            if (wrong[i] == NULL)
                expect_header(&r, "WWW-Authenticate", "Bearer realm=\"sluice-admin\"");
            else
                expect_header(&r, "WWW-Authenticate",
                              "Bearer realm=\"sluice-admin\", error=\"invalid_token\"");
            CU_ASSERT_PTR_NULL(strstr(r.body, "remaining"));
            reply_free(&r);
        }
    CU_ASSERT_EQUAL(remaining(&gw, "fixed_window", "guarded", "hourly"), QUOTA - 2);
    CU_ASSERT_EQUAL(upstream_reached(&mark), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_admin_unauthorized_total"), refused);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"reset\"}"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"grant\"}"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Without a token the endpoints are not there (404), with the right token or none, whether
 * admin_quota is left unset or written true on a loopback address (config_check_admin() then
 * turns it off, with a warning); /metrics answers. */
static void test_without_a_token(void)
{
    static const char *const settings[] = {"", ", admin_quota: true"};
    const char *const headers[] = {AUTH, NULL};
    struct proc gw;
    struct reply r;

    for (size_t i = 0; i < 2; i++) {
        const char *label = i == 0 ? "admin_quota unset" : "admin_quota: true on 127.0.0.1";

        CU_ASSERT_EQUAL_FATAL(
            start_sluice(&gw,
                         "server: {listen: \"127.0.0.1:0\", admin_listen: "
                         "\"127.0.0.1:0\"%2$s}\nroutes:\n" ROUTE("fixed_window", ", per: 1h"),
                         upstream.port, settings[i]),
            0);
        admin_call(&gw, "GET", "/quota?route=fixed_window&key=k", headers, &r);
        check_case(r.status == 404, label, "GET /quota with a token: status %ld", r.status);
        reply_free(&r);
        admin_call(&gw, "DELETE", "/quota?route=fixed_window&key=k", NULL, &r);
        check_case(r.status == 404, label, "DELETE /quota without one: status %ld", r.status);
        reply_free(&r);
        CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/metrics", NULL, &r), 200);
        reply_free(&r);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

/* admin_quota: true on 0.0.0.0 needs a token: --check refuses it without one, names the key,
 * and passes it with one. */
static void test_open_quota_needs_a_token(void)
{
    char path[64], args[128], out[2048];
    FILE *f;

    scratch_path(path, sizeof path, "quota-open.yaml");
    snprintf(args, sizeof args, "--check -c %s", path);
    for (int with_token = 0; with_token < 2; with_token++) {
        f = fopen(path, "w");
        fprintf(f,
                "server: {listen: \"127.0.0.1:0\", admin_listen: \"0.0.0.0:0\", "
                "admin_quota: true%2$s}\nroutes:\n" ROUTE("fixed_window", ", per: 1h"),
                upstream.port, with_token ? ", admin_token: \"" TOKEN "\"" : "");
        fclose(f);
        check_case(run_sluice(args, out, sizeof out) == (with_token ? 0 : 1),
                   with_token ? "0.0.0.0 with a token" : "0.0.0.0 without a token", "%s", out);
        if (!with_token)
            CU_ASSERT_PTR_NOT_NULL(strstr(out, "admin_quota: the quota endpoints on 0.0.0.0"));
    }
    unlink(path);
}

static void test_metrics_need_token(void)
{
    const char *const right[] = {AUTH, NULL};
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw,
                                       "server: {listen: \"127.0.0.1:0\", admin_listen: "
                                       "\"127.0.0.1:0\", metrics_need_token: true, "
                                       "admin_token: \"" TOKEN
                                       "\"}\nroutes:\n" ROUTE("fixed_window", ", per: 1h"),
                                       upstream.port),
                          0);
    CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/metrics", NULL, &r), 401);
    expect_header(&r, "WWW-Authenticate", "Bearer realm=\"sluice-admin\"");
    CU_ASSERT_PTR_NULL(strstr(r.body, "sluice_"));
    reply_free(&r);
    CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/metrics", right, &r), 200);
    /* The refused call above is counted. */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\nsluice_admin_unauthorized_total 1\n"));
    reply_free(&r);
    CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/healthz", NULL, &r), 200);
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- finding the client ------------------------------------------------------------------ */

/* gold 4 an hour, free 2; acme holds gold. */
static const char consumers_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token: \"" TOKEN "\"}\n"
    "plans:\n"
    "  gold: {name: hourly, algorithm: fixed_window, requests: 4, per: 1h}\n"
    "  free: {name: hourly, algorithm: fixed_window, requests: 2, per: 1h}\n"
    "consumers:\n  - {name: acme, key: \"acme-key-0001\", plan: gold}\n"
    "routes:\n  - name: api\n    match: {path_prefix: /api/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n    plan: free\n";

/* A consumer read by its API key and by its name is one client, in its plan; a name or a key
 * no consumer has is 404. */
static void test_consumers(void)
{
    static const char *const targets[] = {"/quota?route=api&key=acme-key-0001",
                                          "/quota?route=api&consumer=acme"};
    char client[2][64];
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, consumers_config, upstream.port), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/api/x", "acme-key-0001", 3), 3);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(as_operator(&gw, "GET", targets[i], &r), 200);
        check_case(limit_number(r.body, "hourly", "remaining") == 1 &&
                       limit_number(r.body, "hourly", "quota") == 4,
                   targets[i], "%s", r.body);
        CU_ASSERT_TRUE(json_is(r.body, NULL, "consumer", "\"acme\""));
        CU_ASSERT_TRUE(json_is(r.body, NULL, "plan", "\"gold\""));
        if (!json_at(r.body, NULL, "client", client[i], sizeof client[i]))
            snprintf(client[i], sizeof client[i], "(none %d)", i);
        reply_free(&r);
    }
    check_case(strcmp(client[0], client[1]) == 0 && strlen(client[0]) == 18, "one client",
               "by key %s, by name %s", client[0], client[1]);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=api&consumer=nobody", &r), 404);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=api&key=nobody-key", &r), 404);
    reply_free(&r);
    expect_passes(gw.port, "/api/x", "acme-key-0001", 1, "acme");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A limit counted by address is looked up (and changed) only when ip= names one. */
static void test_limit_with_its_own_key(void)
{
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/pair/x", "own-key", 3), 3);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=pair&key=own-key", &r), 200);
    CU_ASSERT_TRUE(json_is(r.body, "by_ip", "looked_up", "false"));
    CU_ASSERT_TRUE(json_is(r.body, "by_ip", "key_source", "\"ip\""));
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "remaining"), 2);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=pair&key=own-key&ip=127.0.0.1", &r), 200);
    CU_ASSERT_TRUE(json_is(r.body, "by_ip", "looked_up", "true"));
    CU_ASSERT_EQUAL(limit_number(r.body, "by_ip", "remaining"), 7);
    CU_ASSERT_EQUAL(limit_number(r.body, "first", "remaining"), 2);
    reply_free(&r);
    /* Another address has spent nothing; the key's limits are the same whoever sends it. */
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=pair&key=own-key&ip=10.1.2.3", &r), 200);
    CU_ASSERT_EQUAL(limit_number(r.body, "by_ip", "remaining"), 10);
    CU_ASSERT_EQUAL(limit_number(r.body, "second", "remaining"), 2);
    reply_free(&r);
    CU_ASSERT_EQUAL(as_operator(&gw, "DELETE", "/quota?route=pair&key=own-key&limit=by_ip", &r),
                    400);
    reply_free(&r);
    CU_ASSERT_EQUAL(
        as_operator(&gw, "DELETE", "/quota?route=pair&key=own-key&limit=by_ip&ip=127.0.0.1", &r),
        200);
    CU_ASSERT_TRUE(json_is(r.body, NULL, "changed", "[\"by_ip\"]"));
    CU_ASSERT_EQUAL(limit_number(r.body, "by_ip", "remaining"), 10);
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

#define CERT_HEADER   "X-Client-Certificate-Fingerprint"            /* 32 characters */
#define LONGER_HEADER "X-Client-Certificate-Fingerprint-Sha256-Hex" /* 43: past 40 */

/* Route "cert", keyed by API key, with two limits under headers of their own, of long names. */
static const char long_names_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token: \"" TOKEN "\"}\n"
    "routes:\n  - name: cert\n    match: {path_prefix: /cert/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n    limit:\n"
    "      - {name: by_cert, algorithm: fixed_window, requests: 5, per: 1h,\n"
    "         key: \"header:" CERT_HEADER "\"}\n"
    "      - {name: by_longer, algorithm: fixed_window, requests: 5, per: 1h,\n"
    "         key: \"header:" LONGER_HEADER "\"}\n";

/* `n` GETs of /cert/x on `gw` with the API key, CERT_HEADER `fingerprint` and LONGER_HEADER
 * `longer`; how many got 200. */
static int send_certified(const struct proc *gw, const char *fingerprint, const char *longer, int n)
{
    char cert[96], other[96];
    const char *const headers[] = {"X-API-Key: cert-key", cert, other, NULL};
    struct reply r;
    int passed = 0;

    snprintf(cert, sizeof cert, CERT_HEADER ": %s", fingerprint);
    snprintf(other, sizeof other, LONGER_HEADER ": %s", longer);
    for (int i = 0; i < n; i++) {
        http(gw->port, "GET", "/cert/x", headers, NULL, &r);
        passed += r.status == 200;
        reply_free(&r);
    }
    return passed;
}

/* `target` on `gw`: limit `limit` is looked up and shows `want` remaining. */
static void expect_looked_up(const struct proc *gw, const char *target, const char *limit,
                             long long want)
{
    struct reply r;

    as_operator(gw, "GET", target, &r);
    check_case(r.status == 200 && json_is(r.body, limit, "looked_up", "true") &&
                   limit_number(r.body, limit, "remaining") == want,
               target, "status %ld, expected %s looked up with %lld remaining: %s", r.status, limit,
               want, r.body);
    reply_free(&r);
}

/* A limit under a header of a long name of its own is found by that name, in lower case as
 * the access log writes it or as the config does, and counts each value apart.
 * A name longer than the access log's key sources (40 bytes, keys.h cuts them) is found by
 * its whole name too. */
static void test_long_header_names(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, long_names_config, upstream.port), 0);
    CU_ASSERT_EQUAL(send_certified(&gw, "fp-1", "fp-long", 3), 3);
    CU_ASSERT_EQUAL(send_certified(&gw, "fp-2", "fp-other", 1), 1);
    expect_looked_up(&gw,
                     "/quota?route=cert&key=cert-key&header:x-client-certificate-fingerprint=fp-1",
                     "by_cert", QUOTA - 3);
    expect_looked_up(&gw, "/quota?route=cert&key=cert-key&header:" CERT_HEADER "=fp-1", "by_cert",
                     QUOTA - 3);
    expect_looked_up(&gw,
                     "/quota?route=cert&key=cert-key&header:x-client-certificate-fingerprint=fp-2",
                     "by_cert", QUOTA - 1);
    /* Its header not given, the limit is not looked up. */
    CU_ASSERT_EQUAL(remaining(&gw, "cert", "cert-key", "by_cert"), -1);
    expect_changed(&gw, "DELETE",
                   "/quota?route=cert&key=cert-key&limit=by_cert&"
                   "header:x-client-certificate-fingerprint=fp-1",
                   "[\"by_cert\"]");
    expect_looked_up(&gw,
                     "/quota?route=cert&key=cert-key&header:x-client-certificate-fingerprint=fp-1",
                     "by_cert", QUOTA);
    expect_looked_up(&gw,
                     "/quota?route=cert&key=cert-key&"
                     "header:x-client-certificate-fingerprint-sha256-hex=fp-long",
                     "by_longer", QUOTA - 3);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* The admin listener's start-up line names /quota when the endpoints answer: with a token
 * (admin_quota unset or true), not without one (even written true) nor written false. */
static void test_start_line_names_quota(void)
{
    static const struct {
        const char *server;
        bool named;
    } cases[] = {
        {", admin_token: \"" TOKEN "\"", true},
        {", admin_token: \"" TOKEN "\", admin_quota: true", true},
        {", admin_token: \"" TOKEN "\", admin_quota: false", false},
        {"", false},
        {", admin_quota: true", false},
    };
    char line[128];
    struct proc gw;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(
            start_sluice(&gw,
                         "server: {listen: \"127.0.0.1:0\", admin_listen: "
                         "\"127.0.0.1:0\"%2$s}\nroutes:\n" ROUTE("fixed_window", ", per: 1h"),
                         upstream.port, cases[i].server),
            0);
        snprintf(line, sizeof line, "admin endpoints (/metrics, /healthz, /readyz%s) on http://",
                 cases[i].named ? ", /quota behind the admin token" : "");
        check_case(wait_for_log(&gw, line, 1, 2000) && log_count(&gw, "/quota") == cases[i].named,
                   cases[i].server[0] ? cases[i].server : "no token", "no \"%s\" alone", line);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

/* Calls the endpoints cannot read without guessing are refused; a person gets a table. */
static void test_bad_calls_and_text(void)
{
    static const char *const bad[] = {
        "/quota?route=fixed_window&key=a&key=b",
        "/quota?route=fixed_window&key=a&limt=hourly",
        "/quota?key=a",
        "/quota?route=fixed_window",
        "/quota?route=pair&key=a&ip=nope",
        "/quota?route=fixed_window&consumer=acme",
        "/quota?route=pair&key=a&consumer=b",
    };
    const char *const text[] = {AUTH, "Accept: text/plain", NULL};
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, 0u), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        as_operator(&gw, "GET", bad[i], &r);
        check_case(r.status == 400, bad[i], "status %ld", r.status);
        expect_header(&r, "Content-Type", "application/problem+json");
        reply_free(&r);
    }
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/fixed_window/x", "text", 2), 2);
    CU_ASSERT_EQUAL(admin_call(&gw, "GET", "/quota?route=fixed_window&key=text", text, &r), 200);
    expect_header(&r, "Content-Type", "text/plain; charset=utf-8");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "route fixed_window (this replica), client "));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "hourly           fixed_window"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "remaining 3, allowed now"));
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static int init_shared(void)
{
    return start_redis(&redis);
}

static int clean_shared(void)
{
    stop_redis(&redis);
    return 0;
}

void register_quota_tests(void)
{
    CU_pSuite s = add_suite_with("quota", NULL, NULL);

    add_test(s, "a look shows what was spent and charges nothing", test_show_in_memory);
    add_test(s, "reset and grant give back exactly what they say", test_reset_and_grant_in_memory);
    add_test(s, "the admin token guards every call", test_token_guards);
    add_test(s, "without a token there are no quota endpoints", test_without_a_token);
    add_test(s, "admin_quota on 0.0.0.0 needs a token", test_open_quota_needs_a_token);
    add_test(s, "metrics_need_token puts /metrics behind the token", test_metrics_need_token);
    add_test(s, "a consumer by key and by name is one client", test_consumers);
    add_test(s, "a limit counted by address needs ip=", test_limit_with_its_own_key);
    add_test(s, "bad calls are refused; a person gets a table", test_bad_calls_and_text);
    add_test(s, "a client that spent nothing is not changed", test_fresh_changes_in_memory);
    add_test(s, "a limit under a header of a long name is found", test_long_header_names);
    add_test(s, "the start-up line names /quota when it answers", test_start_line_names_quota);

    s = add_suite_with("quota shared", init_shared, clean_shared);
    add_test(s, "two replicas on Redis show one count", test_show_shared);
    add_test(s, "a change through one replica holds on the other", test_reset_and_grant_shared);
    add_test(s, "a client that spent nothing is not changed in Redis", test_fresh_changes_shared);
}
