/* The admin listener against its OpenAPI description (docs/admin-openapi.yaml): every
 * endpoint called the ways an operator calls it, each real answer recorded and held to the
 * description by tests/deploy/check_openapi.py, which also fails a documented operation that
 * was never called. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define TOKEN "admin-token-0123456789abcdef"

static const char config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  admin_listen: \"127.0.0.1:0\"\n"
    "  admin_token: \"" TOKEN "\"\n"
    "  metrics_need_token: true\n"
    "plans:\n"
    "  gold: {algorithm: token_bucket, requests: 20, per: 1m}\n"
    "  free: {algorithm: fixed_window, requests: 2, per: 1h}\n"
    "consumers:\n"
    "  - {name: acme, key: acme-key-1, plan: gold}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: ip\n"
    "    limit:\n"
    "      - {name: burst, algorithm: gcra, requests: 10, per: 1m, burst: 5}\n"
    "      - {name: daily, algorithm: fixed_window, requests: 1000, per: 1d}\n"
    "      - {name: by_user, algorithm: sliding_window_log, requests: 50, per: 1m,\n"
    "         key: \"header:X-User\"}\n"
    "      - {name: open, algorithm: concurrency, requests: 4}\n"
    "  - name: paid\n    match: {path_prefix: /paid/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: header:X-API-Key\n"
    "    plan: free\n";

/* `text` as a JSON string, into `out`. */
static void put_json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)(text ? text : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

/* One call to the admin port, recorded in `calls` as check_openapi.py reads it. */
static long call(FILE *calls, unsigned port, const char *method, const char *target, bool token,
                 const char *accept, const char *body)
{
    char auth[128], accepts[64];
    const char *headers[3] = {NULL, NULL, NULL};
    struct reply r;
    size_t n = 0;
    long status;

    snprintf(auth, sizeof auth, "Authorization: Bearer %s", TOKEN);
    snprintf(accepts, sizeof accepts, "Accept: %s", accept ? accept : "application/json");
    if (token)
        headers[n++] = auth;
    headers[n++] = accepts;
    if (http(port, method, target, headers, body, &r) != 0) {
        check_case(false, target, "no answer");
        return 0;
    }
    fprintf(calls, "{\"method\":");
    put_json_string(calls, method);
    fprintf(calls, ",\"path\":");
    fprintf(calls, "\"%.*s\"", (int)strcspn(target, "?"), target);
    fprintf(calls, ",\"status\":%ld,\"content_type\":", r.status);
    put_json_string(calls, header(&r, "Content-Type"));
    fprintf(calls, ",\"www_authenticate\":");
    put_json_string(calls, header(&r, "WWW-Authenticate"));
    fprintf(calls, ",\"body\":");
    put_json_string(calls, r.body);
    fprintf(calls, "}\n");
    status = r.status;
    reply_free(&r);
    return status;
}

/* The calls an operator makes, and the statuses each must get. */
static void make_calls(FILE *calls, const struct proc *gw)
{
    static const struct {
        const char *method, *target;
        bool token;
        const char *accept, *body;
        long want;
    } script[] = {
        {"GET", "/healthz", false, NULL, NULL, 200},
        {"GET", "/readyz", false, NULL, NULL, 200},
        {"GET", "/metrics", true, NULL, NULL, 200},
        {"GET", "/metrics", false, NULL, NULL, 401},
        {"GET", "/quota?route=api&key=127.0.0.1", true, NULL, NULL, 200},
        {"GET", "/quota?route=api&key=127.0.0.1&header:x-user=bob&method=POST", true, NULL, NULL,
         200},
        {"GET", "/quota?route=api&key=127.0.0.1", true, "text/plain", NULL, 200},
        {"GET", "/quota?route=paid&consumer=acme", true, NULL, NULL, 200},
        {"GET", "/quota?route=paid&key=acme-key-1&limit=gold", true, NULL, NULL, 200},
        {"GET", "/quota?route=api&key=127.0.0.1", false, NULL, NULL, 401},
        {"GET", "/quota?route=nope&key=k1", true, NULL, NULL, 404},
        {"GET", "/quota?route=api&key=127.0.0.1&key=k2", true, NULL, NULL, 400},
        {"GET", "/quota?route=paid&consumer=nobody", true, NULL, NULL, 404},
        {"DELETE", "/quota?route=api&key=127.0.0.1", true, NULL, NULL, 200},
        {"DELETE", "/quota?route=api&key=127.0.0.1&limit=burst", true, NULL, NULL, 200},
        {"DELETE", "/quota?route=api&key=127.0.0.1&limit=open", true, NULL, NULL, 409},
        {"DELETE", "/quota?route=api&ip=nope&limit=by_user", true, NULL, NULL, 400},
        {"DELETE", "/quota?route=api&key=127.0.0.1", false, NULL, NULL, 401},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=daily&n=2", true, NULL, NULL, 200},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=daily", true, NULL, NULL, 400},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=nope&n=1", true, NULL, NULL, 404},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=open&n=1", true, NULL, NULL, 409},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=daily&n=1", false, NULL, NULL, 401},
        {"POST", "/quota/grant?route=api&key=127.0.0.1&limit=daily&n=1", true, NULL, "n=5", 413},
        {"GET", "/quota?route=nope&key=k1", true, "text/plain", NULL, 404},
    };

    for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
        long got = call(calls, gw->admin_port, script[i].method, script[i].target, script[i].token,
                        script[i].accept, script[i].body);

        check_case(got == script[i].want, script[i].target, "%s: got %ld, want %ld",
                   script[i].method, got, script[i].want);
    }
}

static void test_answers_match_the_description(void)
{
    struct proc gw;
    char path[64], command[256], out[8192];
    FILE *calls;

    snprintf(path, sizeof path, "/tmp/sluice-admin-calls-%d.jsonl", (int)getpid());
    calls = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(calls);
    if (start_sluice(&gw, config, upstream.port) != 0) {
        fclose(calls);
        CU_FAIL_FATAL("sluice did not start");
    }
    for (int i = 0; i < 3; i++) {
        const char *key[] = {"X-User: bob", NULL};
        struct reply r;

        CU_ASSERT_EQUAL(http(gw.port, "GET", "/api/x", key, NULL, &r), 0);
        CU_ASSERT_EQUAL(r.status, 200);
        reply_free(&r);
    }
    make_calls(calls, &gw);
    fclose(calls);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    snprintf(command, sizeof command,
             "/usr/bin/python3 tests/deploy/check_openapi.py docs/admin-openapi.yaml %s 2>&1",
             path);
    check_case(run_command(command, out, sizeof out) == 0, "check_openapi.py", "%s", out);
    unlink(path);
}

void register_admin_api_tests(void)
{
    CU_pSuite s = add_suite("admin_api");

    add_test(s, "the admin listener answers as docs/admin-openapi.yaml says",
             test_answers_match_the_description);
}
