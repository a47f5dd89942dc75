/* Edges of HTTP/1.1 parsing where a gateway and its upstream could read one request two
 * ways. Every case checks three things: what the client got, what reached the upstream (the
 * recorder, byte for byte), and whether the connection was closed. A refusal is an answer
 * with "Connection: close", then the close, and nothing of the refused request or of what
 * follows it on the connection reaches the upstream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define ANY_ERROR  -1   /* for `status`: any answer of 400 or more */
#define TIMEOUT_MS 3000 /* per exchange; a keep-alive answer ends sooner (see raw_session) */

/* What sluice forwards is libcurl's request line, the Host it was sent (libcurl puts it
 * first), the client's other end-to-end fields in the order they came, then these, for a
 * client on 127.0.0.1 that sent none of them itself (gateway/front/request.c, upstream_headers()),
 * then any Content-Length. */
#define FORWARDED_BY(host)                                                                         \
    "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: " host "\r\n"

/* A plain GET with Host: h, and what the upstream gets for it. */
#define GET(target)    "GET " target " HTTP/1.1\r\nHost: h\r\n\r\n"
#define GET_UP(target) "GET " target " HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n"

/* A complete, valid request sent right after a refused head, in the same write. Were the
 * refused head read as the upstream might read it, these bytes would be a request of their
 * own: 41 of them, the Content-Length the smuggling heads below announce. */
#define SMUGGLED "GET /smuggled HTTP/1.1\r\nHost: h\r\nX: 1\r\n\r\n"
_Static_assert(sizeof SMUGGLED - 1 == 41, "SMUGGLED must be as long as the heads announce");

struct edge_case {
    const char *label;
    const char *request; /* sent in one write */
    size_t len;
    int status;           /* of the first answer, or ANY_ERROR */
    const char *upstream; /* exactly what reaches the upstream; "" for nothing */
    bool closed;          /* whether sluice closes the connection after its answer */
};

/* `request` is a string literal: its length is taken whole, NULs included. */
// clang-format off
#define FORWARDED(label, request, upstream) {label, request, sizeof request - 1, 200, upstream, false}
#define FORWARDED_AND_CLOSED(label, request, upstream)                                             \
                                            {label, request, sizeof request - 1, 200, upstream, true}
#define LIMITED(label, request)             {label, request, sizeof request - 1, 429, "", false}
#define REFUSED(label, request, status)     {label, request, sizeof request - 1, status, "", true}
// clang-format on

static struct recorder rec;
static struct proc gw;

static int init(void)
{
    return recorder_start(&rec);
}

static int clean(void)
{
    recorder_stop(&rec);
    return 0;
}

/* Starts sluice on `yaml`, a printf format in which "%1$u" is the recorder's port. */
static bool start_gateway(const char *yaml)
{
    bool started = start_sluice(&gw, yaml, rec.port) == 0;

    CU_ASSERT_TRUE(started);
    return started;
}

static void stop_gateway(void)
{
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- the three checks ------------------------------------------------------------------ */

struct exchange {
    const char *label;
    int status;
    bool closed;
    char answer[16384];
    char *upstream; /* what the recorder got meanwhile */
    size_t upstream_len;
    unsigned long upstream_requests; /* how many of them it answered */
};

/* Sends `len` bytes of `request` to sluice on a new connection, the recorder emptied first. */
static void exchange(struct exchange *x, const char *label, const char *request, size_t len)
{
    x->label = label;
    x->upstream_len = 0;
    recorder_reset(&rec);
    x->status =
        raw_session(gw.port, request, len, x->answer, sizeof x->answer, TIMEOUT_MS, &x->closed);
    x->upstream = recorder_bytes(&rec, &x->upstream_len);
    recorder_strip_request_ids(x->upstream, &x->upstream_len);
    x->upstream_requests = recorder_requests(&rec);
}

static void exchange_free(struct exchange *x)
{
    free(x->upstream);
    x->upstream = NULL;
}

/* What the client got: `status` (or any error), one answer only; a 429 with its fields, a
 * refusal with "Connection: close". */
static void expect_answer(const struct exchange *x, int status)
{
    char shown[512];
    bool error = x->status >= 400;

    check_case(status == ANY_ERROR ? error : x->status == status, x->label,
               "status %d, expected %d%s; answer: %s", x->status, status,
               status == ANY_ERROR ? " (any error)" : "",
               visible_bytes(x->answer, strlen(x->answer), shown, sizeof shown));
    check_case(count_responses(x->answer) == 1, x->label, "%d answers, expected one: %s",
               count_responses(x->answer),
               visible_bytes(x->answer, strlen(x->answer), shown, sizeof shown));
    if (status == 429)
        check_case(strcasestr(x->answer, "\r\nRetry-After: ") != NULL &&
                       strcasestr(x->answer, "\r\nRateLimit: ") != NULL &&
                       strcasestr(x->answer, "\r\nRateLimit-Policy: ") != NULL,
                   x->label, "a 429 without Retry-After, RateLimit and RateLimit-Policy");
    else if (status == ANY_ERROR || status >= 400)
        check_case(strcasestr(x->answer, "\r\nConnection: close\r\n") != NULL, x->label,
                   "a refusal without \"Connection: close\"");
}

/* What reached the upstream: exactly `expected`, one request or none. */
static void expect_upstream(const struct exchange *x, const char *expected)
{
    char got[1024], want[1024];
    size_t len = strlen(expected);

    check_case(x->upstream != NULL && x->upstream_len == len &&
                   memcmp(x->upstream, expected, len) == 0,
               x->label, "the upstream got \"%s\", expected \"%s\"",
               visible_bytes(x->upstream, x->upstream_len, got, sizeof got),
               visible_bytes(expected, len, want, sizeof want));
    check_case(x->upstream_requests == (len > 0), x->label,
               "the upstream answered %lu request(s), expected %d", x->upstream_requests, len > 0);
}

static void expect_closed(const struct exchange *x, bool closed)
{
    check_case(x->closed == closed, x->label, "the connection was %s, expected %s",
               x->closed ? "closed" : "left open", closed ? "closed" : "left open");
}

static void run_case(const struct edge_case *c)
{
    struct exchange x;

    exchange(&x, c->label, c->request, c->len);
    expect_answer(&x, c->status);
    expect_upstream(&x, c->upstream);
    expect_closed(&x, c->closed);
    exchange_free(&x);
}

static void run_cases(const struct edge_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i]);
}

#define RUN_CASES(cases) run_cases(cases, sizeof cases / sizeof cases[0])

/* --- the tests ------------------------------------------------------------------------- */

/* Header values lose SP and HTAB at both ends, everywhere they are read. */
static void test_trailing_whitespace(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: hosted\n    match: {path_prefix: /, host: h.example}\n"
        "    upstream: \"http://127.0.0.1:%1$u/hosted\"\n"
        "  - name: keyed\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
        "    key: \"header:X-API-Key\"\n"
        "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n";
    /* The chunked body goes upstream with its decoded length. */
    // clang-format off
    static const char chunked_up[] = "POST /x HTTP/1.1\r\nHost: h\r\nX-API-Key: chunky\r\n"
                                     FORWARDED_BY("h") "Content-Length: 5\r\n\r\nhello";
    // clang-format on
    static const struct edge_case cases[] = {
        FORWARDED("X-API-Key: alice", "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: alice\r\n\r\n",
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: alice\r\n" FORWARDED_BY("h") "\r\n"),
        FORWARDED("X-API-Key: alice + SP",
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: alice \r\n\r\n",
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: alice\r\n" FORWARDED_BY("h") "\r\n"),
        LIMITED("X-API-Key: alice + HTAB is alice's third",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: alice\t\r\n\r\n"),
        FORWARDED("Transfer-Encoding: chunked + SP",
                  "POST /x HTTP/1.1\r\nHost: h\r\nX-API-Key: chunky\r\n"
                  "Transfer-Encoding: chunked \r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                  chunked_up),
        FORWARDED("Host: h.example + SP matches host h.example",
                  "GET /x HTTP/1.1\r\nHost: h.example \r\n\r\n",
                  "GET /hosted/x HTTP/1.1\r\nHost: h.example\r\n" FORWARDED_BY("h.example") "\r\n"),
        FORWARDED_AND_CLOSED(
            "Connection: close + SP still closes",
            "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: closer\r\nConnection: close \r\n\r\n",
            "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: closer\r\n" FORWARDED_BY("h") "\r\n"),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* query:key reads the parameter named exactly "key", given once, with a clean value. */
static void test_query_keys(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: q\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
        "    key: \"query:key\"\n"
        "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n";
    static const struct edge_case cases[] = {
        FORWARDED("?key=bob", GET("/x?key=bob"), GET_UP("/x?key=bob")),
        FORWARDED("?key=bob&other=1", GET("/x?key=bob&other=1"), GET_UP("/x?key=bob&other=1")),
        LIMITED("?key=bob a third time", GET("/x?key=bob")),
        FORWARDED("?key=carol is another client", GET("/x?key=carol"), GET_UP("/x?key=carol")),
        /* the key more than once, under spellings that can decode to it */
        REFUSED("?KEY=junk&key=eve", GET("/x?KEY=junk&key=eve"), 400),
        REFUSED("?k%65y=junk&key=eve", GET("/x?k%65y=junk&key=eve"), 400),
        REFUSED("?key=a&key=b", GET("/x?key=a&key=b"), 400),
        REFUSED("?key=a;key=b", GET("/x?key=a;key=b"), 400),
        /* a spelling of the name other than the exact one */
        REFUSED("?k%65y=eve", GET("/x?k%65y=eve"), 400),
        REFUSED("?KEY=eve", GET("/x?KEY=eve"), 400),
        /* a control character once decoded */
        REFUSED("?key=al%00ice", GET("/x?key=al%00ice"), 400),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* The key header given twice is refused; names with '_' are dropped (and counted in the
 * access log) unless server.underscores_in_headers allows them. */
static void test_key_header_twice_and_underscores(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"%2$s}\nroutes:\n"
        "  - name: keyed\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
        "    key: \"header:X-API-Key\"\n"
        "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n";
    static const struct edge_case dropping[] = {
        REFUSED("X-API-Key twice",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: a\r\nX-API-Key: b\r\n\r\n" SMUGGLED, 400),
        /* The key would be counted here and dropped before the upstream: a bucket of the
         * client's choosing for a request the upstream serves as anonymous. */
        REFUSED("Connection names X-API-Key",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: rnd1\r\nConnection: "
                "x-api-key\r\n\r\n" SMUGGLED,
                400),
        FORWARDED("X_API_Key is dropped",
                  "GET /dropped HTTP/1.1\r\nHost: h\r\nX_API_Key: x\r\nX-Other: y\r\n\r\n",
                  "GET /dropped HTTP/1.1\r\nHost: h\r\nX-Other: y\r\n" FORWARDED_BY("h") "\r\n"),
    };
    static const struct edge_case keeping[] = {
        FORWARDED("X_API_Key is kept with underscores_in_headers",
                  "GET /kept HTTP/1.1\r\nHost: h\r\nX_API_Key: x\r\nX-Other: y\r\n\r\n",
                  "GET /kept HTTP/1.1\r\nHost: h\r\nX_API_Key: x\r\nX-Other: y\r\n" FORWARDED_BY(
                      "h") "\r\n"),
    };
    char *line;

    if (start_sluice(&gw, config, rec.port, "") != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    RUN_CASES(dropping);
    line = access_log_line(&gw, "/dropped");
    check_case(line != NULL && strstr(line, "\"dropped_headers\":1") != NULL,
               "X_API_Key is dropped", "the access log line lacks \"dropped_headers\":1: %s",
               line ? line : "(no line)");
    free(line);
    stop_gateway();

    if (start_sluice(&gw, config, rec.port, ", underscores_in_headers: true") != 0) {
        CU_FAIL("sluice did not start with server.underscores_in_headers");
        return;
    }
    RUN_CASES(keeping);
    stop_gateway();
}

/* A refused head ends the connection: the valid request written right behind it is neither
 * answered nor forwarded. */
static void test_refusal_closes_before_smuggled_bytes(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\", max_body: 1KiB}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const struct edge_case cases[] = {
        REFUSED("SP before the colon of Content-Length",
                "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length : 41\r\n\r\n" SMUGGLED, 400),
        REFUSED("HTAB before the colon of Content-Length",
                "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length\t: 41\r\n\r\n" SMUGGLED, 400),
        REFUSED("a bare CR inside a value",
                "POST /x HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\nContent-Length: 41\r\n\r\n" SMUGGLED,
                400),
        REFUSED("two Host fields",
                "POST /x HTTP/1.1\r\nHost: h\r\nHost: h\r\nContent-Length: 41\r\n\r\n" SMUGGLED,
                400),
        REFUSED("a body over max_body",
                "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n" SMUGGLED, 413),
        REFUSED("Transfer-Encoding: gzip",
                "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n" SMUGGLED, 501),
        REFUSED("HTTP/1.2", "GET /x HTTP/1.2\r\nHost: h\r\n\r\n" SMUGGLED, ANY_ERROR),
        REFUSED("two spaces in the request line", "GET  /x HTTP/1.1\r\nHost: h\r\n\r\n" SMUGGLED,
                ANY_ERROR),
        REFUSED("bare LF line endings", "GET /x HTTP/1.1\nHost: h\n\n" SMUGGLED, ANY_ERROR),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* Bytes of the client's that already wait in the socket are read, though the reader handed
 * libmicrohttpd less than a full read (a head rewritten shorter, or kept back until whole):
 * in event mode libmicrohttpd takes such a read as the end of what there is (wire.h), and the
 * body behind would wait for client_timeout. Each body is larger than libmicrohttpd's read
 * buffer (26 KiB by default). */
#define WAITING_BODY (100 * 1000)

static void test_bytes_already_waiting(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    // clang-format off
    static const char upstream_head[] = "POST /b HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h")
                                        "Content-Length: 100000\r\n\r\n";
    // clang-format on
    static const struct {
        const char *label, *head; /* sent with the body behind it */
        int pause_ms;             /* between the head's first 10 bytes and the rest */
    } cases[] = {
        {"a head rewritten, its body in the same write",
         "POST /b HTTP/1.1\r\nHost: h \r\nContent-Length: 100000\r\n\r\n", 0},
        {"a head in two writes, its body in the second",
         "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n", 200},
    };
    static char request[WAITING_BODY + 256], expected[WAITING_BODY + 512], answer[16384];

    if (!start_gateway(config))
        return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = (size_t)snprintf(request, sizeof request, "%s", cases[i].head),
               expected_len = (size_t)snprintf(expected, sizeof expected, "%s", upstream_head),
               upstream_len;
        char *upstream, shown[256];
        bool closed;
        int status;

        for (size_t at = 0; at < WAITING_BODY; at++) {
            request[len + at] = (char)('a' + at % 26);
            expected[expected_len + at] = (char)('a' + at % 26);
        }
        len += WAITING_BODY;
        expected_len += WAITING_BODY;
        recorder_reset(&rec);
        status = raw_session_paused(gw.port, request, len, cases[i].pause_ms > 0 ? 10 : len,
                                    cases[i].pause_ms, answer, sizeof answer, TIMEOUT_MS, &closed);
        upstream = recorder_bytes(&rec, &upstream_len);
        recorder_strip_request_ids(upstream, &upstream_len);
        check_case(status == 200 && count_responses(answer) == 1, cases[i].label,
                   "status %d, %d answers: %s", status, count_responses(answer),
                   visible_bytes(answer, strlen(answer), shown, sizeof shown));
        check_case(
            upstream != NULL && upstream_len == expected_len &&
                memcmp(upstream, expected, expected_len) == 0,
            cases[i].label, "the upstream got %zu bytes, expected %zu: %s", upstream_len,
            expected_len,
            visible_bytes(upstream, upstream_len < 200 ? upstream_len : 200, shown, sizeof shown));
        check_case(!closed, cases[i].label, "the connection was closed");
        free(upstream);
    }
    stop_gateway();
}

/* Obsolete line folding, with or without what looks like a field on the continuation. */
static void test_obs_fold(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const struct edge_case cases[] = {
        REFUSED("Content-Length folded",
                "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n 41\r\n\r\n" SMUGGLED, 400),
        REFUSED("a continuation without a colon",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n" SMUGGLED, 400),
        REFUSED("a continuation with a colon",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\r\n\tX-B: b\r\n\r\n" SMUGGLED, 400),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* A control character, percent-encoded, in the path. */
static void test_encoded_controls_in_path(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const struct edge_case cases[] = {
        REFUSED("%00 before a dot segment", GET("/x%00/../api/x") SMUGGLED, 400),
        REFUSED("%0a", GET("/api/%0a") SMUGGLED, 400),
        REFUSED("%7f", GET("/api/%7f") SMUGGLED, 400),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* /api/ takes GET (and so HEAD), one request per client; everything else goes to a catch-all
 * whose upstream base path (/other) shows in what the recorder gets. */
static const char paths_config[] =
    "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
    "  - name: api\n    match: {path_prefix: /api/, methods: [GET]}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: ip\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: rest\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u/other\"\n";

/* Spellings of the /api/ route: the first request is forwarded as sent and spends the quota,
 * so the second, plain, one gets 429. A fresh sluice each, for a fresh quota. */
static void test_path_and_method_spellings(void)
{
    static const struct {
        struct edge_case first, second;
    } pairs[] = {
        {FORWARDED("GET /api/x", GET("/api/x"), GET_UP("/api/x")),
         LIMITED("HEAD /api/x is counted as a GET", "HEAD /api/x HTTP/1.1\r\nHost: h\r\n\r\n")},
        {FORWARDED("//api/x", GET("//api/x"), GET_UP("//api/x")),
         LIMITED("GET /api/x after //api/x", GET("/api/x"))},
        {FORWARDED("/api//x", GET("/api//x"), GET_UP("/api//x")),
         LIMITED("GET /api/x after /api//x", GET("/api/x"))},
        {FORWARDED("/%61pi/x", GET("/%61pi/x"), GET_UP("/%61pi/x")),
         LIMITED("GET /api/x after /%61pi/x", GET("/api/x"))},
    };
    static const struct edge_case refused[] = {
        REFUSED("an encoded slash", GET("/api%2Fx") SMUGGLED, 400),
        REFUSED("a backslash", GET("/api\\x") SMUGGLED, 400),
        REFUSED("an encoded backslash", GET("/api%5Cx") SMUGGLED, 400),
        REFUSED("a fragment", GET("/api/x#frag") SMUGGLED, 400),
        REFUSED("invalid percent-encoding", GET("/api/%zz") SMUGGLED, 400),
        REFUSED("a lowercase method", "get /api/x HTTP/1.1\r\nHost: h\r\n\r\n" SMUGGLED, 400),
        /* Upstreams that fold the path's case, or drop path parameters, serve these as
         * /api/x: they would dodge /api/ by the catch-all. */
        REFUSED("/API/x", GET("/API/x") SMUGGLED, 400),
        REFUSED("/api;v=1/x", GET("/api;v=1/x") SMUGGLED, 400),
        REFUSED("/api%3Bv=1/x", GET("/api%3Bv=1/x") SMUGGLED, 400),
    };
    /* Other case or parameters that pick the same route either way pass as sent. */
    static const struct edge_case same_route[] = {
        FORWARDED("/Other/x", GET("/Other/x"), GET_UP("/other/Other/x")),
        FORWARDED("/x;v=1", GET("/x;v=1"), GET_UP("/other/x;v=1")),
    };

    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (!start_gateway(paths_config))
            return;
        run_case(&pairs[i].first);
        run_case(&pairs[i].second);
        stop_gateway();
    }
    if (!start_gateway(paths_config))
        return;
    RUN_CASES(refused);
    RUN_CASES(same_route);
    stop_gateway();
}

/* Spellings of a route's host: a trailing dot, case and a port, a trailing space. The host
 * route allows one request; the catch-all forwards under /other. */
static void test_host_spellings(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: api\n    match: {path_prefix: /, host: api.example.com}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: ip\n"
        "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
        "  - name: rest\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u/other\"\n";
    static const struct edge_case cases[] = {
        FORWARDED("Host: api.example.com.", "GET /x HTTP/1.1\r\nHost: api.example.com.\r\n\r\n",
                  "GET /x HTTP/1.1\r\nHost: api.example.com.\r\n" FORWARDED_BY(
                      "api.example.com.") "\r\n"),
        LIMITED("Host: API.example.com:8080",
                "GET /x HTTP/1.1\r\nHost: API.example.com:8080\r\n\r\n"),
        LIMITED("Host: api.example.com + SP", "GET /x HTTP/1.1\r\nHost: api.example.com \r\n\r\n"),
        REFUSED("Host: a@b", "GET /x HTTP/1.1\r\nHost: a@b\r\n\r\n" SMUGGLED, 400),
        REFUSED("Host: a b", "GET /x HTTP/1.1\r\nHost: a b\r\n\r\n" SMUGGLED, 400),
        REFUSED("Host: api..example.com",
                "GET /x HTTP/1.1\r\nHost: api..example.com\r\n\r\n" SMUGGLED, 400),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* A request from the trusted proxy (the test, on 127.0.0.1) for the client `xff`, and what
 * the upstream gets for it: the proxy's list with the proxy appended. */
#define FROM(xff) "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: " xff "\r\n\r\n"
#define FROM_UP(xff)                                                                               \
    "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: " xff ", 127.0.0.1\r\n"                        \
    "X-Forwarded-Proto: http\r\nX-Forwarded-Host: h\r\n\r\n"

/* X-Forwarded-For from a trusted proxy: IPv4-mapped addresses are IPv4, ports are not part
 * of the address. */
static void test_forwarded_for_spellings(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\", trusted_proxies: [\"127.0.0.0/8\"]}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
        "    key: ip\n    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
        "    exempt: [\"198.51.100.0/24\"]\n";
    static const struct edge_case cases[] = {
        FORWARDED("::ffff:203.0.113.3", FROM("::ffff:203.0.113.3"), FROM_UP("::ffff:203.0.113.3")),
        LIMITED("203.0.113.3 is the same client", FROM("203.0.113.3")),
        FORWARDED("::ffff:198.51.100.9 is exempt", FROM("::ffff:198.51.100.9"),
                  FROM_UP("::ffff:198.51.100.9")),
        FORWARDED("::ffff:198.51.100.9 is exempt again", FROM("::ffff:198.51.100.9"),
                  FROM_UP("::ffff:198.51.100.9")),
        FORWARDED("203.0.113.7:4711", FROM("203.0.113.7:4711"), FROM_UP("203.0.113.7:4711")),
        LIMITED("203.0.113.7:4711 again", FROM("203.0.113.7:4711")),
        FORWARDED("203.0.113.8:4711 is another client", FROM("203.0.113.8:4711"),
                  FROM_UP("203.0.113.8:4711")),
        FORWARDED("[2001:db8::1]:443", FROM("[2001:db8::1]:443"), FROM_UP("[2001:db8::1]:443")),
        LIMITED("[2001:db8::1]:443 again", FROM("[2001:db8::1]:443")),
        FORWARDED("[2001:db8:1::1]:443 is another client", FROM("[2001:db8:1::1]:443"),
                  FROM_UP("[2001:db8:1::1]:443")),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

/* X-Forwarded-Proto and -Host pass from a trusted peer, where the client put them, and are
 * replaced for anyone else. */
static void test_forwarded_proto_and_host(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"%2$s}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
#define CLAIMS                                                                                     \
    "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: https\r\n"                                   \
    "X-Forwarded-Host: public.example\r\n\r\n"
    static const struct edge_case trusted[] = {
        FORWARDED("from a trusted peer", CLAIMS,
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: https\r\n"
                  "X-Forwarded-Host: public.example\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n"),
    };
    static const struct edge_case untrusted[] = {
        FORWARDED("from an untrusted peer", CLAIMS, GET_UP("/x")),
    };
#undef CLAIMS
    /* With a host route, a trusted X-Forwarded-Host must pick the route Host picks: frameworks
     * told to believe it would act on another host than sluice routed. */
    static const char host_routes[] =
        "server: {listen: \"127.0.0.1:0\", trusted_proxies: [\"127.0.0.0/8\"]}\nroutes:\n"
        "  - name: admin\n    match: {path_prefix: /, host: admin.example}\n"
        "    upstream: \"http://127.0.0.1:%1$u/admin\"\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const struct edge_case host_readings[] = {
        REFUSED("X-Forwarded-Host picks another route",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: admin.example\r\n\r\n" SMUGGLED,
                400),
        REFUSED("X-Forwarded-Host is no host",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: a@b\r\n\r\n" SMUGGLED, 400),
        FORWARDED("X-Forwarded-Host on the same route",
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: public.example\r\n\r\n",
                  "GET /x HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: public.example\r\n"
                  "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n"),
    };

    if (start_sluice(&gw, config, rec.port, ", trusted_proxies: [\"127.0.0.0/8\"]") != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    RUN_CASES(trusted);
    stop_gateway();
    if (start_sluice(&gw, config, rec.port, "") != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    RUN_CASES(untrusted);
    stop_gateway();
    if (!start_gateway(host_routes))
        return;
    RUN_CASES(host_readings);
    stop_gateway();
}

/* A NUL inside a header value is refused, not cut short. */
static void test_nul_in_a_value(void)
{
    static const char config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
        "  - name: all\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const struct edge_case cases[] = {
        REFUSED("a NUL in a value",
                "GET /x HTTP/1.1\r\nHost: h\r\nX-A: before\0after\r\n\r\n" SMUGGLED, 400),
    };

    if (!start_gateway(config))
        return;
    RUN_CASES(cases);
    stop_gateway();
}

void register_edge_tests(void)
{
    CU_pSuite s = add_suite_with("edge", init, clean);

    add_test(s, "header values are trimmed of SP and HTAB", test_trailing_whitespace);
    add_test(s, "query keys: the exact name, once, a clean value", test_query_keys);
    add_test(s, "the key header twice; names with '_'", test_key_header_twice_and_underscores);
    add_test(s, "a refusal closes before smuggled bytes",
             test_refusal_closes_before_smuggled_bytes);
    add_test(s, "bytes already waiting behind a short read are read", test_bytes_already_waiting);
    add_test(s, "obs-fold is refused", test_obs_fold);
    add_test(s, "encoded controls in the path are refused", test_encoded_controls_in_path);
    add_test(s, "spellings of a path and a method", test_path_and_method_spellings);
    add_test(s, "spellings of a Host", test_host_spellings);
    add_test(s, "X-Forwarded-For spellings from a trusted proxy", test_forwarded_for_spellings);
    add_test(s, "X-Forwarded-Proto and -Host by trust", test_forwarded_proto_and_host);
    add_test(s, "a NUL in a value is refused", test_nul_in_a_value);
}
