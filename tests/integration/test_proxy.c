/* Forwarding: what reaches the upstream and what comes back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static struct proc gw;

static const char config[] =
    "server:\n  listen: \"127.0.0.1:0\"\n  max_body: 4KiB\n"
    "routes:\n"
    "  - name: based\n    match: {path_prefix: /based/}\n"
    "    upstream: \"http://127.0.0.1:%1$u/base/\"\n"
    "  - name: slow\n    match: {path_prefix: /slow}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    timeout: 300ms\n"
    "  - name: dead\n    match: {path_prefix: /dead/}\n"
    "    upstream: \"http://127.0.0.1:1\"\n"
    "  - name: only-get\n    match: {path_prefix: /get-only/, methods: [GET]}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static void test_request_passes_byte_for_byte(void)
{
    const char *headers[] = {"X-Custom: one",
                             "X-Empty;",
                             "Connection: X-Drop",
                             "X-Drop: 1",
                             "Keep-Alive: 5",
                             "Content-Type: text/x-test",
                             NULL};
    struct reply r;
    char host[64];

    CU_ASSERT_EQUAL(http(gw.port, "PUT", "/a%2Cb/c.d/..e?q=%41&q=b+c&&x", headers, "hello", &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "method PUT\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "target /a%2Cb/c.d/..e?q=%41&q=b+c&&x\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header X-Custom: one\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header X-Empty:\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header Content-Type: text/x-test\n"));
    CU_ASSERT_PTR_NULL(strstr(r.body, "X-Drop"));
    CU_ASSERT_PTR_NULL(strstr(r.body, "Keep-Alive"));
    CU_ASSERT_PTR_NULL(strstr(r.body, "Expect"));
    snprintf(host, sizeof host, "header Host: 127.0.0.1:%u\n", gw.port);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, host));
    snprintf(host, sizeof host, "header X-Forwarded-Host: 127.0.0.1:%u\n", gw.port);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, host));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header X-Forwarded-For: 127.0.0.1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header X-Forwarded-Proto: http\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "body 5\nhello"));
    reply_free(&r);
}

static void test_forwarded_for_is_appended(void)
{
    const char *headers[] = {"X-Forwarded-For: 192.0.2.1", "Accept:", NULL};
    struct reply r;

    http(gw.port, "GET", "/echo", headers, NULL, &r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "header X-Forwarded-For: 192.0.2.1, 127.0.0.1\n"));
    CU_ASSERT_PTR_NULL(strstr(r.body, "Accept:")); /* libcurl added none of its own */
    reply_free(&r);
}

static void test_base_path_and_methods(void)
{
    struct reply r;

    http(gw.port, "GET", "/based/x?y", NULL, NULL, &r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "target /base/based/x?y\n"));
    reply_free(&r);
    http(gw.port, "POST", "/get-only/x", NULL, "", &r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "method POST\n")); /* fell through to main */
    reply_free(&r);
}

static void test_status_and_response_headers(void)
{
    struct reply r;

    http(gw.port, "GET", "/status/418", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 418);
    expect_header(&r, "X-Upstream", "test");
    CU_ASSERT_STRING_EQUAL(r.body, "status 418\n");
    CU_ASSERT_PTR_NULL(header(&r, "RateLimit")); /* no limit on this route */
    reply_free(&r);
    http(gw.port, "GET", "/hop", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header(&r, "X-Kept", "yes");
    CU_ASSERT_PTR_NULL(header(&r, "X-Secret"));
    CU_ASSERT_PTR_NULL(header(&r, "Keep-Alive"));
    CU_ASSERT_PTR_NULL(header(&r, "Proxy-Authenticate"));
    CU_ASSERT_PTR_NULL(header(&r, "Upgrade"));
    reply_free(&r);
    http(gw.port, "HEAD", "/bytes?n=1234", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header(&r, "Content-Length", "1234");
    reply_free(&r);
}

static void test_bodies_stream(void)
{
    struct reply r;

    CU_ASSERT_EQUAL(http(gw.port, "GET", "/bytes?n=30000000", NULL, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.body_len, 30000000);
    expect_header(&r, "Content-Length", "30000000");
    reply_free(&r);
    CU_ASSERT_EQUAL(http(gw.port, "GET", "/chunked?n=5000000", NULL, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.body_len, 5000000);
    reply_free(&r);
}

/* A cut upstream body reaches the client cut (an error for it), and the gateway goes on. */
static void test_truncated_upstream_body(void)
{
    struct reply r;

    CU_ASSERT_EQUAL(http(gw.port, "GET", "/cut?n=100000", NULL, NULL, &r), -1);
    CU_ASSERT_TRUE(r.body_len < 200000);
    reply_free(&r);
    CU_ASSERT_TRUE(wait_for_log(&gw, ": cut: the body stopped after", 1, 2000));
    CU_ASSERT_EQUAL(http(gw.port, "GET", "/status/200", NULL, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
}

/* An upstream slower than client_timeout (but within the route's timeout) is still waited
 * for: client_timeout bounds the client's sending, not the upstream's answer. */
static void test_slow_upstream_within_route_timeout(void)
{
    struct proc slow;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&slow,
                     "server: {listen: \"127.0.0.1:0\", client_timeout: 1s}\n"
                     "routes:\n  - name: r\n    match: {path_prefix: /}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n    timeout: 10s\n",
                     upstream.port),
        0);
    http(slow.port, "GET", "/slow?ms=2500", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_STRING_EQUAL(r.body, "slow\n");
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&slow, 5000), 0);
}

static void test_502_and_504(void)
{
    struct reply r;

    http(gw.port, "GET", "/dead/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 502);
    expect_header(&r, "Content-Type", "application/problem+json");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"status\":502"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"route\":\"dead\""));
    reply_free(&r);
    /* The route waits 300 ms, the upstream 3 s: a 504 (not its 200) shows the wait ended
     * first. How long it took is not asserted: a loaded machine is slow for reasons of its
     * own. */
    http(gw.port, "GET", "/slow?ms=3000", NULL, NULL, &r);
    check_case(r.status == 504 && r.body != NULL && strstr(r.body, "\"status\":504") != NULL,
               "past the route's timeout", "status %ld after %.3f s: %s", r.status, r.seconds,
               r.body ? r.body : "");
    reply_free(&r);
    http(gw.port, "GET", "/slow?ms=10", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
}

static void test_too_large_body(void)
{
    char *big = malloc(8193);
    unsigned long before, after, connections;
    struct reply r;

    memset(big, 'b', 8192);
    big[8192] = '\0';
    upstream_stats(&before, &connections);
    http(gw.port, "POST", "/echo", NULL, big, &r);
    CU_ASSERT_EQUAL(r.status, 413);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"status\":413"));
    reply_free(&r);
    upstream_stats(&after, &connections);
    CU_ASSERT_EQUAL(after, before);
    big[4096] = '\0'; /* exactly max_body passes */
    http(gw.port, "POST", "/echo", NULL, big, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "body 4096\n"));
    reply_free(&r);
    free(big);
}

static void test_no_route_is_404(void)
{
    struct proc narrow;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&narrow,
                                       "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                                       "  - name: api\n    match: {path_prefix: /api/}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port),
                          0);
    http(narrow.port, "GET", "/elsewhere", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 404);
    expect_header(&r, "Content-Type", "application/problem+json");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"status\":404"));
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&narrow, 5000), 0);
}

/* --- a failure's answer names no server ------------------------------------------------ */

#define NOWHERE "sluice-nowhere.invalid" /* a name that never resolves (RFC 6761) */

/* Routes whose upstream fails each its own way; every URL has a base path. "%2$u" and "%6$u"
 * refuse connections, "%3$u" is a TLS listener with a certificate nobody trusts, "%4$u" reads a
 * request and closes without an answer, "%5$u" answers garbage; test_upstream's /slow outlasts
 * the route's timeout. */
static const char failing_config[] =
    "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
    "  - {name: refused, match: {path_prefix: /refused/}, upstream: "
    "\"http://127.0.0.1:%2$u/svc/\"}\n"
    "  - {name: dns, match: {path_prefix: /dns/}, upstream: \"http://" NOWHERE ":8080/svc/\"}\n"
    "  - {name: tls, match: {path_prefix: /tls/}, upstream: \"https://127.0.0.1:%3$u/svc/\"}\n"
    "  - {name: reset, match: {path_prefix: /reset/}, upstream: \"http://127.0.0.1:%4$u/svc/\"}\n"
    "  - {name: invalid, match: {path_prefix: /invalid/},\n"
    "     upstream: \"http://127.0.0.1:%5$u/svc/\"}\n"
    "  - {name: servers, match: {path_prefix: /servers/},\n"
    "     upstream: {servers: [\"http://127.0.0.1:%2$u/a/\", \"http://127.0.0.1:%6$u/b/\"]}}\n"
    "  - {name: timeout, match: {path_prefix: /slow}, upstream: \"http://127.0.0.1:%1$u/\",\n"
    "     timeout: 300ms}\n";

/* What the client got for `target`: `status`, problem+json naming the fault `kind`, and
 * nowhere in its head or body any of `secrets` (NULL-terminated). */
static void expect_anonymous_failure(unsigned port, const char *target, long status,
                                     const char *kind, const char *const *secrets)
{
    struct reply r;
    char *whole = NULL;

    http(port, "POST", target, NULL, "order=1", &r);
    check_case(r.status == status, target, "status %ld, expected %ld", r.status, status);
    check_case(r.body != NULL && strstr(r.body, kind) != NULL &&
                   strstr(r.body, "\"detail\":\"") != NULL,
               target, "no detail naming %s: %s", kind, r.body ? r.body : "(none)");
    CU_ASSERT_FATAL(asprintf(&whole, "%s\n%s", r.head ? r.head : "", r.body ? r.body : "") > 0);
    for (char *at = whole; (at = strstr(at, "\\/")) != NULL;) /* JSON's escaped '/' */
        memmove(at, at + 1, strlen(at));
    for (const char *const *secret = secrets; *secret != NULL; secret++)
        check_case(strstr(whole, *secret) == NULL, target, "the answer names %s: %s", *secret,
                   whole);
    free(whole);
    reply_free(&r);
}

/* README: a 502's "detail names the kind: (dns), (refused), (connect_timeout), (tls), (reset),
 * (invalid), never the server's address". For each kind, and for a route of several servers,
 * nothing the client gets (head or body) names the server: not its host, its port, its URL,
 * nor libcurl's words about it. */
static void test_failures_name_no_server(void)
{
    unsigned dead = free_port(), dead2 = free_port();
    struct recorder closer;
    struct canned garbage;
    struct proc tls, failing;
    char key[64], cert[64], ports[6][24], hosts[6][40];
    const char *secrets[16];
    size_t n = 0;

    CU_ASSERT_EQUAL_FATAL(make_self_signed("untrusted", key, cert), 0);
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&tls,
                     "server: {listen: \"127.0.0.1:0\", tls: {cert: %2$s, "
                     "key: %3$s}}\nroutes:\n  - name: r\n    match: "
                     "{path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n",
                     upstream.port, cert, key),
        0);
    CU_ASSERT_EQUAL_FATAL(recorder_start(&closer), 0);
    recorder_set_mode(&closer, RECORDER_CLOSE_AFTER_READ);
    recorder_set_close_at(&closer, 1);
    CU_ASSERT_EQUAL_FATAL(start_canned(&garbage, "garbage\r\n\r\n"), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&failing, failing_config, upstream.port, dead, tls.port,
                                       closer.port, garbage.port, dead2),
                          0);

    {
        const unsigned all[] = {dead, tls.port, closer.port, garbage.port, dead2, upstream.port};

        for (size_t i = 0; i < 6; i++) {
            snprintf(ports[i], sizeof ports[i], ":%u", all[i]);
            snprintf(hosts[i], sizeof hosts[i], "127.0.0.1:%u", all[i]);
            secrets[n++] = ports[i];
            secrets[n++] = hosts[i];
        }
    }
    secrets[n++] = "127.0.0.1";
    secrets[n++] = NOWHERE;
    secrets[n++] = "/svc";
    secrets[n] = NULL;

    expect_anonymous_failure(failing.port, "/refused/x", 502, "(refused)", secrets);
    expect_anonymous_failure(failing.port, "/dns/x", 502, "(dns)", secrets);
    expect_anonymous_failure(failing.port, "/tls/x", 502, "(tls)", secrets);
    expect_anonymous_failure(failing.port, "/reset/x", 502, "(reset)", secrets);
    expect_anonymous_failure(failing.port, "/invalid/x", 502, "(invalid)", secrets);
    expect_anonymous_failure(failing.port, "/servers/x", 502, "(refused)", secrets);
    expect_anonymous_failure(failing.port, "/slow?ms=3000", 504, "(timeout)", secrets);
    /* The process log does name the server, for whoever runs it. */
    CU_ASSERT_TRUE(wait_for_log(&failing, hosts[0], 1, 2000));

    CU_ASSERT_EQUAL(stop_sluice(&failing, 5000), 0);
    stop_canned(&garbage);
    recorder_stop(&closer);
    CU_ASSERT_EQUAL(stop_sluice(&tls, 5000), 0);
    remove(key);
    remove(cert);
}

/* Keep-alive clients, and new clients, reuse upstream connections. */
static void test_upstream_connections_are_reused(void)
{
    unsigned long requests0, conns0, requests1, conns1;
    struct reply r;

    upstream_stats(&requests0, &conns0);
    for (int i = 0; i < 20; i++) {
        http(gw.port, "GET", "/status/204", NULL, NULL, &r); /* a new client connection each */
        CU_ASSERT_EQUAL(r.status, 204);
        reply_free(&r);
    }
    upstream_stats(&requests1, &conns1);
    CU_ASSERT_EQUAL(requests1 - requests0, 20);
    CU_ASSERT_TRUE(conns1 - conns0 <= 3); /* the stats lookups themselves take 2 */
}

void register_proxy_tests(void)
{
    CU_pSuite s = add_suite_with("proxy", init, clean);

    add_test(s, "method, path, query, body and headers pass", test_request_passes_byte_for_byte);
    add_test(s, "X-Forwarded-For is appended to", test_forwarded_for_is_appended);
    add_test(s, "base path and methods", test_base_path_and_methods);
    add_test(s, "status and response headers, hop-by-hop dropped",
             test_status_and_response_headers);
    add_test(s, "large and chunked bodies stream through", test_bodies_stream);
    add_test(s, "a cut upstream body is cut for the client", test_truncated_upstream_body);
    add_test(s, "502 when unreachable, 504 past timeout", test_502_and_504);
    add_test(s, "a failure's answer names no server", test_failures_name_no_server);
    add_test(s, "an upstream slower than client_timeout is waited for",
             test_slow_upstream_within_route_timeout);
    add_test(s, "bodies over max_body get 413, unforwarded", test_too_large_body);
    add_test(s, "no route is 404", test_no_route_is_404);
    add_test(s, "upstream connections are reused", test_upstream_connections_are_reused);
}
