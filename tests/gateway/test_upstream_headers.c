/* The header fields a request is sent upstream with (gateway/modules/forward/
 * upstream_headers.c), read off requests built in memory whose head the policy modules ran:
 * what of the client's goes on, what the gateway sets, and what only a trusted peer may say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/modules/forward/upstream_headers.h"
#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

#define UPSTREAM "    upstream: \"http://127.0.0.1:9000\"\n"

/* /api/ names consumers by X-API-Key (acme; anyone else counted by address), sets four fields
 * and removes two; /plain/ forwards as it is told by nothing but the server's settings. */
#define SERVER                                                                                     \
    "server:\n  access_log: \"off\"\n  trusted_proxies: [\"10.0.0.0/8\"]\n"                        \
    "  consumer_header: X-Consumer\n"
#define REST                                                                                       \
    "plans:\n  free: {algorithm: token_bucket, requests: 100, per: 1m}\n"                          \
    "consumers:\n  - {name: acme, key: acme-key, plan: free}\n"                                    \
    "routes:\n"                                                                                    \
    "  - name: api\n    match: {path_prefix: /api/}\n" UPSTREAM                                    \
    "    key: \"header:X-API-Key\"\n    plan: free\n    unknown_key: anonymous\n"                  \
    "    set_headers:\n"                                                                           \
    "      X-Client: \"${request.client_addr}\"\n"                                                 \
    "      X-Who: \"consumer=${request.consumer}\"\n"                                              \
    "      X-Name: \"${request.consumer}\"\n"                                                      \
    "      X-Trace: \"req-${request.id}\"\n"                                                       \
    "    remove_headers: [X-Debug, X-Forwarded-Proto]\n"                                           \
    "  - name: plain\n    match: {path_prefix: /plain/}\n" UPSTREAM

static const char headers_yaml[] = SERVER REST;
static const char underscores_yaml[] = SERVER "  underscores_in_headers: true\n" REST;

#define CLIENT "198.51.100.1"
#define PROXY  "10.0.0.1"

/* The lines for `rq`, its head run first, to a server whose Host is `host`. */
static struct gw_upstream_lines lines_of(struct gw_req *rq, const char *host)
{
    struct gw_upstream_lines lines;

    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->refusal, 0);
    CU_ASSERT_EQUAL_FATAL(gw_upstream_lines(rq, host, NULL, &lines), 0);
    return lines;
}

/* Whether `line` is a line of the field `name` ("Name: value", "Name;" or "Name:"). */
static bool names(const char *line, const char *name)
{
    size_t len = strlen(name);

    return strncasecmp(line, name, len) == 0 && (line[len] == ':' || line[len] == ';');
}

/* How many lines are of the field `name`; the first one into `*first` (NULL when none). */
static unsigned count(const struct gw_upstream_lines *l, const char *name, const char **first)
{
    const char *line = l->text;
    unsigned n = 0;

    *first = NULL;
    for (size_t i = 0; i < l->lines; i++, line += strlen(line) + 1)
        if (names(line, name) && n++ == 0)
            *first = line;
    return n;
}

/* The one line of the field `name`, or NULL when there is none, or more than one. */
static const char *line_of(const struct gw_upstream_lines *l, const char *name)
{
    const char *first;

    return count(l, name, &first) == 1 ? first : NULL;
}

static bool absent(const struct gw_upstream_lines *l, const char *name)
{
    const char *first;

    return count(l, name, &first) == 0;
}

static void test_hop_by_hop_dropped(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;
    static const char *const gone[] = {
        "Connection", "X-Secret", "X-Also",           "Keep-Alive",         "TE",
        "Trailer",    "Upgrade",  "Proxy-Connection", "Proxy-Authorization"};

    fixture_start(&fx, headers_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "Host", "api.example.com", "Connection",
                         "close, X-Secret", "Connection", "x-also", "X-Secret", "s3cret", "X-Also",
                         "also", "Keep-Alive", "timeout=5", "TE", "trailers", "Trailer", "X-Sum",
                         "Upgrade", "websocket", "Proxy-Connection", "keep-alive",
                         "Proxy-Authorization", "Basic eDp5", "Expect", "100-continue", "Accept",
                         "text/plain", "X-Kept", "kept", "X-Empty", "", NULL);
    l = lines_of(rq, "backend.internal:9000");
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        if (!absent(&l, gone[i]))
            fprintf(stderr, "\n%s was forwarded\n", gone[i]);
        CU_ASSERT_TRUE(absent(&l, gone[i]));
    }
    /* End-to-end fields go on as they came; an empty one in libcurl's spelling. */
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Kept"), "X-Kept: kept"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Accept"), "Accept: text/plain"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Empty"), "X-Empty;"));
    /* The server's Host; the client's Expect is not sent, and libcurl is kept from adding
     * one, or a Content-Type. */
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Host"), "Host: backend.internal:9000"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Expect"), "Expect:"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Content-Type"), "Content-Type:"));
    CU_ASSERT_EQUAL(l.dropped, 0);
    free(l.text);
    /* Without a Host to set, none: the client's is not copied. */
    CU_ASSERT_EQUAL_FATAL(gw_upstream_lines(rq, NULL, NULL, &l), 0);
    CU_ASSERT_TRUE(absent(&l, "Host"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Accept"), "Accept: text/plain"));
    free(l.text);
    /* An upgrade's own Connection and Upgrade go on (for this hop), and only those. */
    CU_ASSERT_EQUAL_FATAL(gw_upstream_lines(rq, NULL, "websocket", &l), 0);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Connection"), "Connection: Upgrade"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "Upgrade"), "Upgrade: websocket"));
    CU_ASSERT_TRUE(absent(&l, "X-Secret"));
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

static void test_forwarded_for_appended(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;

    fixture_start(&fx, headers_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "Host", "api.example.com", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-For"), "X-Forwarded-For: 198.51.100.1"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-Proto"), "X-Forwarded-Proto: http"));
    CU_ASSERT_TRUE(
        fixture_is(line_of(&l, "X-Forwarded-Host"), "X-Forwarded-Host: api.example.com"));
    free(l.text);
    gw_req_free(rq);
    /* An untrusted client's list goes on with its address last, where upstreams look; its
     * X-Forwarded-Proto and -Host are replaced by what sluice saw. */
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "Host", "api.example.com",
                         "X-Forwarded-For", "192.0.2.1", "X-Forwarded-Proto", "https",
                         "X-Forwarded-Host", "admin.example.com", NULL);
    rq->tls = true; /* as the adapter says of a TLS connection */
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(
        fixture_is(line_of(&l, "X-Forwarded-For"), "X-Forwarded-For: 192.0.2.1, 198.51.100.1"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-Proto"), "X-Forwarded-Proto: https"));
    CU_ASSERT_TRUE(
        fixture_is(line_of(&l, "X-Forwarded-Host"), "X-Forwarded-Host: api.example.com"));
    free(l.text);
    gw_req_free(rq);
    /* A trusted proxy's fields describe the client's side of it, and are kept. */
    rq = fixture_request(&fx, PROXY, "GET", "/plain/x", "Host", "api.internal", "X-Forwarded-For",
                         "203.0.113.7", "X-Forwarded-For", "10.0.0.2", "X-Forwarded-Proto", "https",
                         "X-Forwarded-Host", "api.example.com", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-For"),
                              "X-Forwarded-For: 203.0.113.7,10.0.0.2, 10.0.0.1"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-Proto"), "X-Forwarded-Proto: https"));
    CU_ASSERT_TRUE(
        fixture_is(line_of(&l, "X-Forwarded-Host"), "X-Forwarded-Host: api.example.com"));
    free(l.text);
    gw_req_free(rq);
    /* No IP peer. */
    rq = fixture_request(&fx, NULL, "GET", "/plain/x", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-For"), "X-Forwarded-For: unknown"));
    CU_ASSERT_TRUE(absent(&l, "X-Forwarded-Host")); /* no Host to tell */
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

static void test_underscores(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;

    fixture_start(&fx, headers_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "X_API_Key", "other", "X-Real_IP",
                         "192.0.2.1", "X-API-Key", "mine", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(absent(&l, "X_API_Key"));
    CU_ASSERT_TRUE(absent(&l, "X-Real_IP"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-API-Key"), "X-API-Key: mine"));
    CU_ASSERT_EQUAL(l.dropped, 2);
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
    /* server.underscores_in_headers: true forwards them. */
    fixture_start(&fx, underscores_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "X_API_Key", "other", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X_API_Key"), "X_API_Key: other"));
    CU_ASSERT_EQUAL(l.dropped, 0);
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

static void test_set_headers(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;
    char want[256];

    fixture_start(&fx, headers_yaml);
    /* A consumer behind a trusted proxy: the client as its keys see it, and its name. */
    rq = fixture_request(&fx, PROXY, "GET", "/api/items", "X-Forwarded-For", "203.0.113.7",
                         "X-API-Key", "acme-key", "X-Client", "forged", "x-who", "forged", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Client"), "X-Client: 203.0.113.7"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Who"), "X-Who: consumer=acme"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Name"), "X-Name: acme"));
    snprintf(want, sizeof want, "X-Trace: req-%s", rq->request_id);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Trace"), want));
    free(l.text);
    gw_req_free(rq);
    /* No consumer: ${request.consumer} is empty, and a field left empty is sent empty. */
    rq = fixture_request(&fx, CLIENT, "GET", "/api/items", "X-API-Key", "nobody's", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_PTR_NULL(rq->consumer);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Client"), "X-Client: 198.51.100.1"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Who"), "X-Who: consumer="));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Name"), "X-Name;"));
    free(l.text);
    gw_req_free(rq);
    /* Another route sets none of them, and forwards the client's. */
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "X-Client", "mine", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Client"), "X-Client: mine"));
    CU_ASSERT_TRUE(absent(&l, "X-Who"));
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

static void test_remove_headers(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;

    fixture_start(&fx, headers_yaml);
    /* Neither the client's copy nor the gateway's own. */
    rq = fixture_request(&fx, PROXY, "GET", "/api/items", "Host", "api.example.com", "X-Debug", "1",
                         "x-debug", "2", "X-Forwarded-Proto", "https", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(absent(&l, "X-Debug"));
    CU_ASSERT_TRUE(absent(&l, "X-Forwarded-Proto"));
    CU_ASSERT_TRUE(
        fixture_is(line_of(&l, "X-Forwarded-Host"), "X-Forwarded-Host: api.example.com"));
    free(l.text);
    gw_req_free(rq);
    rq = fixture_request(&fx, CLIENT, "GET", "/plain/x", "X-Debug", "1", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Debug"), "X-Debug: 1"));
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Forwarded-Proto"), "X-Forwarded-Proto: http"));
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

/* The id a request from `peer` with the X-Request-Id fields `first` and `second` (NULL: one
 * field only) is sent upstream with, into `id`; the answer carries the same. */
static void id_sent(struct fixture *fx, const char *peer, const char *first, const char *second,
                    char id[GW_REQUEST_ID_LEN])
{
    struct gw_req *rq =
        second != NULL ? fixture_request(fx, peer, "GET", "/plain/x", "X-Request-Id", first,
                                         "X-Request-Id", second, NULL)
                       : fixture_request(fx, peer, "GET", "/plain/x", "X-Request-Id", first, NULL);
    struct gw_upstream_lines l = lines_of(rq, NULL);
    char want[GW_REQUEST_ID_LEN + 16];

    snprintf(id, GW_REQUEST_ID_LEN, "%s", rq->request_id);
    snprintf(want, sizeof want, "X-Request-Id: %s", rq->request_id);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Request-Id"), want));
    rq->answer.status = 200;
    gw_pipeline_answer(rq);
    CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "X-Request-Id"), id));
    free(l.text);
    gw_req_free(rq);
}

static void test_request_id(void)
{
    struct fixture fx;
    char id[GW_REQUEST_ID_LEN];

    fixture_start(&fx, headers_yaml);
    id_sent(&fx, PROXY, "abc-123", NULL, id);
    CU_ASSERT_TRUE(fixture_is(id, "abc-123"));
    /* Anyone else's is replaced by a new one: 32 hex digits. */
    id_sent(&fx, CLIENT, "abc-123", NULL, id);
    CU_ASSERT_EQUAL(strlen(id), 32);
    CU_ASSERT_EQUAL(strspn(id, "0123456789abcdef"), 32);
    /* A trusted peer's given twice, or not sane, likewise. */
    id_sent(&fx, PROXY, "abc-123", "def-456", id);
    CU_ASSERT_EQUAL(strspn(id, "0123456789abcdef"), 32);
    id_sent(&fx, PROXY, "abc 123", NULL, id);
    CU_ASSERT_EQUAL(strspn(id, "0123456789abcdef"), 32);
    fixture_stop(&fx);
}

/* server.consumer_header is the gateway's to set: never the client's, not even a trusted
 * proxy's. */
static void test_consumer_header(void)
{
    struct fixture fx;
    struct gw_req *rq;
    struct gw_upstream_lines l;

    fixture_start(&fx, headers_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/api/items", "X-Consumer", "admin", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(absent(&l, "X-Consumer"));
    free(l.text);
    gw_req_free(rq);
    rq = fixture_request(&fx, PROXY, "GET", "/api/items", "x-consumer", "admin", "X-API-Key",
                         "acme-key", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(fixture_is(line_of(&l, "X-Consumer"), "X-Consumer: acme"));
    free(l.text);
    gw_req_free(rq);
    /* A route that names no consumers: the client's field is dropped all the same. */
    rq = fixture_request(&fx, PROXY, "GET", "/plain/x", "X-Consumer", "admin", NULL);
    l = lines_of(rq, NULL);
    CU_ASSERT_TRUE(absent(&l, "X-Consumer"));
    free(l.text);
    gw_req_free(rq);
    fixture_stop(&fx);
}

void register_upstream_headers_tests(void)
{
    CU_pSuite s = add_suite_with("gateway_upstream_headers", fixture_register_pipeline, NULL);

    add_test(s, "hop-by-hop fields and those Connection names are dropped",
             test_hop_by_hop_dropped);
    add_test(s, "X-Forwarded-For appended; -Proto and -Host from a trusted peer only",
             test_forwarded_for_appended);
    add_test(s, "names with '_' dropped and counted, unless underscores_in_headers",
             test_underscores);
    add_test(s, "set_headers with ${request.*} filled in", test_set_headers);
    add_test(s, "remove_headers", test_remove_headers);
    add_test(s, "X-Request-Id believed from a trusted peer only", test_request_id);
    add_test(s, "the consumer header is the gateway's alone", test_consumer_header);
}
