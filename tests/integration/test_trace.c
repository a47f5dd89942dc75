/* Request ids and W3C trace context (gateway/common/trace.h; README "Request ids and
 * tracing"), with raw clients and recording upstreams (recorder.h), so that what the client
 * got, what the upstream received and what the access log says are compared exactly.
 *   - an id is made per request (32 hex digits): the same in the client's X-Request-Id, the
 *     upstream's, ${request.id}, the access log's request_id and problem+json bodies (429,
 *     403, 404, 413, 502, 504, and heads the strict reader refused: 400, 431);
 *   - a route's set_headers or remove_headers naming X-Request-Id or traceparent decide them;
 *   - a client's X-Request-Id is kept only from a trusted peer, sent once and sane; the same
 *     id goes on a retried attempt and on an upgrade (and comes back on the 101);
 *   - a valid traceparent goes on with its trace-id and flags and sluice's own parent-id,
 *     tracestate untouched; an invalid one (and its tracestate) is not forwarded;
 *   - tracing.sample 1 starts a trace for every request, 0 for none, and a reload changes it. */
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define ANSWER_CAP (64 * 1024)
#define TIMEOUT_MS 5000
#define TRUSTED    ", trusted_proxies: [\"127.0.0.0/8\"]"
#define NO_WATCH   ", watch_config: false"
#define TRACE_ID   "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID  "00f067aa0ba902b7"
#define TRACESTATE "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

static struct recorder recs[3]; /* a answers; b and c, the retried route's two servers */
static struct proc gw;

/* %4$s: more of the server mapping; %5$s: a tracing section; %6$u: the upgrade route's
 * upstream; %7$u: a port nothing listens on. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", max_body: 16%4$s}\n"
    "%5$s"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    set_headers: {X-Req-Id: \"${request.id}\"}\n"
    "  - name: limited\n    match: {path_prefix: /limited}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: again\n    match: {path_prefix: /again}\n"
    "    upstream: {servers: [\"http://127.0.0.1:%2$u\", \"http://127.0.0.1:%3$u\"], "
    "max_fails: 0}\n"
    "    retries: {attempts: 2, on: [reset]}\n"
    "  - name: ws\n    match: {path_prefix: /ws}\n    upstream: \"http://127.0.0.1:%6$u\"\n"
    "  - name: down\n    match: {path_prefix: /down}\n    upstream: \"http://127.0.0.1:%7$u\"\n"
    "  - name: own\n    match: {path_prefix: /own}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    set_headers: {x-request-id: \"sluice-${request.id}\"}\n"
    "  - name: none\n    match: {path_prefix: /none}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    remove_headers: [X-Request-Id, Traceparent]\n"
    "  - name: walled\n    match: {path_prefix: /walled}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    deny: [\"127.0.0.0/8\"]\n"
    "  - name: slow\n    match: {path_prefix: /slow}\n    upstream: \"http://127.0.0.1:%3$u\"\n"
    "    timeout: 200ms\n";

static int init(void)
{
    for (int i = 0; i < 3; i++)
        if (recorder_start(&recs[i]) != 0) {
            while (i-- > 0)
                recorder_stop(&recs[i]);
            return -1;
        }
    return 0;
}

static int clean(void)
{
    for (int i = 0; i < 3; i++)
        recorder_stop(&recs[i]);
    return 0;
}

/* sluice with `server_more` in its server mapping and `tracing` (a section, or ""), the
 * upgrade route to `ws_port` (0: recorder a). False when it did not start. */
static bool start_gateway_with(const char *server_more, const char *tracing, unsigned ws_port)
{
    for (int i = 0; i < 3; i++) {
        recorder_set_mode(&recs[i], RECORDER_NORMAL);
        recorder_reset(&recs[i]);
    }
    if (start_sluice(&gw, config, recs[0].port, recs[1].port, recs[2].port, server_more, tracing,
                     ws_port ? ws_port : recs[0].port, free_port()) != 0) {
        CU_FAIL("sluice did not start");
        return false;
    }
    return true;
}

static bool start_gateway(const char *server_more, const char *tracing)
{
    return start_gateway_with(server_more, tracing, 0);
}

static void stop_gateway(void)
{
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static bool is_hex(const char *text, size_t len)
{
    return strlen(text) == len && strspn(text, "0123456789abcdef") == len;
}

/* How many fields named `name` the head at the start of `message` has (any case), the first
 * one's value into `first` ("" when none). */
static int fields(const char *message, const char *name, char *first, size_t cap)
{
    const char *line = message ? strstr(message, "\r\n") : NULL;
    size_t name_len = strlen(name);
    int n = 0;

    first[0] = '\0';
    while (line != NULL && strncmp(line, "\r\n\r\n", 4) != 0) {
        const char *end;

        line += 2;
        end = strstr(line, "\r\n");
        if (end == NULL)
            break;
        if (strncasecmp(line, name, name_len) == 0 && line[name_len] == ':') {
            const char *value = line + name_len + 1;

            while (*value == ' ')
                value++;
            if (n++ == 0)
                snprintf(first, cap, "%.*s", (int)(end - value), value);
        }
        line = end;
    }
    return n;
}

/* What one exchange showed: the client's answer, what recorder `r` received, the ids in each. */
struct exchange {
    const char *label;
    int status;
    char answer[ANSWER_CAP];
    char *sent; /* what the upstream received (NULL when not asked) */
    size_t sent_len;
    char answer_id[256], sent_id[256], set_id[256]; /* X-Request-Id both ways; X-Req-Id */
    int answer_ids, sent_ids;
    char traceparent[128], tracestate[256];
    int traceparents, tracestates;
};

static void exchange(struct exchange *x, const char *label, struct recorder *r, const char *request)
{
    bool closed;

    x->label = label;
    recorder_reset(r);
    x->status = raw_session(gw.port, request, strlen(request), x->answer, sizeof x->answer,
                            TIMEOUT_MS, &closed);
    x->sent = recorder_bytes(r, &x->sent_len);
    x->answer_ids = fields(x->answer, "X-Request-Id", x->answer_id, sizeof x->answer_id);
    x->sent_ids = fields(x->sent, "X-Request-Id", x->sent_id, sizeof x->sent_id);
    fields(x->sent, "X-Req-Id", x->set_id, sizeof x->set_id);
    x->traceparents = fields(x->sent, "traceparent", x->traceparent, sizeof x->traceparent);
    x->tracestates = fields(x->sent, "tracestate", x->tracestate, sizeof x->tracestate);
}

static void exchange_free(struct exchange *x)
{
    free(x->sent);
    x->sent = NULL;
}

/* The access log's line for the request whose id is `id` (waited for up to 2 s: lines are
 * written after the answer, by another thread), or NULL. The caller frees it. */
static char *log_line(const char *id)
{
    char field[192], *log = NULL, *line = NULL;

    snprintf(field, sizeof field, "\"request_id\":\"%s\"", id);
    for (int waited = 0; waited < 2000 && line == NULL; waited += 20) {
        char *at;

        free(log);
        log = read_file(gw.access_path);
        at = log ? strstr(log, field) : NULL;
        if (at != NULL) {
            char *start = at, *end = strchr(at, '\n');

            while (start > log && start[-1] != '\n')
                start--;
            line = strndup(start, end ? (size_t)(end - start) : strlen(start));
        } else {
            sleep_ms(20);
        }
    }
    free(log);
    return line;
}

/* The string member `name` of the JSON object `text` into `out` ("" when absent). */
static void json_member(const char *text, const char *name, char *out, size_t cap)
{
    struct json_object *o = text ? json_tokener_parse(text) : NULL, *v;

    out[0] = '\0';
    if (o != NULL && json_object_object_get_ex(o, name, &v))
        snprintf(out, cap, "%s", json_object_get_string(v));
    json_object_put(o);
}

/* The access log has the request of id `id`, answered `status`, with trace_id `trace_id`. */
static void expect_logged(const char *label, const char *id, int status, const char *trace_id)
{
    char *line = log_line(id), logged_trace[64] = "", logged_status[16] = "", want[16];

    json_member(line, "trace_id", logged_trace, sizeof logged_trace);
    json_member(line, "status", logged_status, sizeof logged_status);
    snprintf(want, sizeof want, "%d", status);
    check_case(line != NULL && strcmp(logged_status, want) == 0 &&
                   strcmp(logged_trace, trace_id) == 0,
               label, "the access log line for %s is \"%s\"; expected status %d, trace_id \"%s\"",
               id, line ? line : "(none)", status, trace_id);
    free(line);
}

/* A made id: 32 hex digits, once in the answer, and (when forwarded) once upstream, in
 * ${request.id} and nowhere else the same. */
static void expect_made_id(const struct exchange *x, bool forwarded)
{
    check_case(x->answer_ids == 1 && is_hex(x->answer_id, 32), x->label,
               "the answer has %d X-Request-Id, the first \"%s\"", x->answer_ids, x->answer_id);
    if (forwarded)
        check_case(x->sent_ids == 1 && strcmp(x->sent_id, x->answer_id) == 0 &&
                       strcmp(x->set_id, x->answer_id) == 0,
                   x->label, "upstream: %d X-Request-Id \"%s\", X-Req-Id \"%s\"; the client got %s",
                   x->sent_ids, x->sent_id, x->set_id, x->answer_id);
    else
        check_case(x->sent_len == 0, x->label, "the upstream received %zu bytes", x->sent_len);
}

/* A problem+json answer `status` whose body carries the answer's id. */
static void expect_problem(const struct exchange *x, int status)
{
    const char *body = strstr(x->answer, "\r\n\r\n");
    char id[256];

    json_member(body ? body + 4 : NULL, "request_id", id, sizeof id);
    check_case(x->status == status && strcmp(id, x->answer_id) == 0, x->label,
               "status %d (expected %d), the body's request_id \"%s\", the header's \"%s\"",
               x->status, status, id, x->answer_id);
}

/* --- ids ---------------------------------------------------------------------------------- */

static void test_made_ids(void)
{
    struct exchange *x = malloc(sizeof *x);
    char first[256];

    if (!start_gateway("", ""))
        goto out;
    exchange(x, "forwarded", &recs[0], "GET /api/x HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(x->status, 200);
    expect_made_id(x, true);
    check_case(x->traceparents == 0 && x->tracestates == 0, x->label, "a trace went upstream");
    expect_logged(x->label, x->answer_id, 200, "");
    snprintf(first, sizeof first, "%s", x->answer_id);
    exchange_free(x);

    exchange(x, "allowed", &recs[0], "GET /limited/1 HTTP/1.1\r\nHost: h\r\n\r\n");
    /* No set_headers on that route: the id alone goes, another than the first request's. */
    check_case(x->answer_ids == 1 && is_hex(x->answer_id, 32) && x->sent_ids == 1 &&
                   strcmp(x->sent_id, x->answer_id) == 0 && strcmp(x->answer_id, first) != 0,
               x->label, "upstream id \"%s\", answer's \"%s\", the first request's \"%s\"",
               x->sent_id, x->answer_id, first);
    exchange_free(x);

    exchange(x, "429", &recs[0], "GET /limited/1 HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_made_id(x, false);
    expect_problem(x, 429);
    expect_logged(x->label, x->answer_id, 429, "");
    exchange_free(x);

    exchange(x, "404", &recs[0], "GET /nothing HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_made_id(x, false);
    expect_problem(x, 404);
    expect_logged(x->label, x->answer_id, 404, "");
    exchange_free(x);

    exchange(x, "413", &recs[0],
             "POST /api/x HTTP/1.1\r\nHost: h\r\nContent-Length: 17\r\n\r\n12345678901234567");
    expect_made_id(x, false);
    expect_problem(x, 413);
    exchange_free(x);

    exchange(x, "502", &recs[0], "GET /down HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_made_id(x, false);
    expect_problem(x, 502);
    expect_logged(x->label, x->answer_id, 502, "");
    exchange_free(x);

    exchange(x, "403", &recs[0], "GET /walled HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_made_id(x, false);
    expect_problem(x, 403);
    exchange_free(x);

    recorder_set_delay(&recs[2], 1000);
    exchange(x, "504", &recs[0], "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
    recorder_set_delay(&recs[2], 0);
    expect_made_id(x, false);
    expect_problem(x, 504);
    exchange_free(x);

    /* A head over max_header_size (16 KiB), refused by the strict reader: 431. */
    {
        char *big = malloc(24 * 1024);

        snprintf(big, 24 * 1024, "GET /api/x HTTP/1.1\r\nHost: h\r\nX-Big: %0*d\r\n\r\n", 20 * 1024,
                 0);
        exchange(x, "431", &recs[0], big);
        free(big);
        expect_made_id(x, false);
        expect_problem(x, 431);
        exchange_free(x);
    }

    /* Refused by the strict reader: libmicrohttpd sees a stand-in head (wire.h), so the
     * client's own X-Request-Id is never read, but the answer has an id of its own. */
    exchange(x, "a folded field", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\nX-Request-Id: folded-1\r\nX-A: 1\r\n b\r\n\r\n");
    expect_made_id(x, false);
    expect_problem(x, 400);
    expect_logged(x->label, x->answer_id, 400, "");
    exchange_free(x);
    stop_gateway();
out:
    free(x);
}

/* A route's set_headers or remove_headers naming X-Request-Id or traceparent decides those
 * fields upstream; the client still gets the id. */
static void test_route_decides(void)
{
    struct exchange *x = malloc(sizeof *x);
    char want[300];

    if (!start_gateway("", "tracing: {sample: 1}\n"))
        goto out;
    exchange(x, "set_headers", &recs[0], "GET /own HTTP/1.1\r\nHost: h\r\n\r\n");
    snprintf(want, sizeof want, "sluice-%s", x->answer_id);
    check_case(x->status == 200 && x->answer_ids == 1 && is_hex(x->answer_id, 32) &&
                   x->sent_ids == 1 && strcmp(x->sent_id, want) == 0 && x->traceparents == 1,
               x->label, "the client got \"%s\", the upstream %d X-Request-Id, the first \"%s\"",
               x->answer_id, x->sent_ids, x->sent_id);
    exchange_free(x);
    exchange(x, "remove_headers", &recs[0],
             "GET /none HTTP/1.1\r\nHost: h\r\nX-Request-Id: wrong\r\ntraceparent: 00-" TRACE_ID
             "-" PARENT_ID "-01\r\n\r\n");
    check_case(x->status == 200 && x->answer_ids == 1 && is_hex(x->answer_id, 32) &&
                   x->sent_ids == 0 && x->traceparents == 0,
               x->label, "the client got \"%s\", the upstream %d X-Request-Id, %d traceparent",
               x->answer_id, x->sent_ids, x->traceparents);
    expect_logged(x->label, x->answer_id, 200, TRACE_ID);
    exchange_free(x);
    stop_gateway();
out:
    free(x);
}

/* X-Request-Id values a trusted peer sends, and whether each is kept. */
static void test_client_ids(void)
{
    char long_id[160], too_long[160], request[512];
    struct {
        const char *label, *fields, *kept; /* kept: the id, or NULL when replaced */
    } cases[] = {
        {"sane", "X-Request-Id: abc-123:x/y+z=_.A\r\n", "abc-123:x/y+z=_.A"},
        {"any case of the name", "x-request-id: f47ac10b-58cc-4372-a567-0e02b2c3d479\r\n",
         "f47ac10b-58cc-4372-a567-0e02b2c3d479"},
        {"128 bytes", NULL, long_id},
        {"129 bytes", NULL, NULL},
        {"a space", "X-Request-Id: wrong value\r\n", NULL},
        {"a semicolon", "X-Request-Id: wrong;value\r\n", NULL},
        {"quotes", "X-Request-Id: \"wrongvalue\"\r\n", NULL},
        {"non-ASCII", "X-Request-Id: wrongvalu\xc3\xa9\r\n", NULL},
        {"empty", "X-Request-Id:\r\n", NULL},
        {"two fields", "X-Request-Id: first-of-two\r\nX-Request-Id: second-of-two\r\n", NULL},
    };
    struct exchange *x = malloc(sizeof *x);

    memset(long_id, 'i', 128);
    long_id[128] = '\0';
    memset(too_long, 'j', 129);
    too_long[129] = '\0';
    if (!start_gateway(TRUSTED, ""))
        goto out;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char field[200];

        if (cases[i].fields == NULL) {
            snprintf(field, sizeof field, "X-Request-Id: %s\r\n",
                     cases[i].kept ? long_id : too_long);
            cases[i].fields = field;
        }
        snprintf(request, sizeof request, "GET /api/%zu HTTP/1.1\r\nHost: h\r\n%s\r\n", i,
                 cases[i].fields);
        exchange(x, cases[i].label, &recs[0], request);
        CU_ASSERT_EQUAL(x->status, 200);
        if (cases[i].kept != NULL) {
            check_case(x->answer_ids == 1 && strcmp(x->answer_id, cases[i].kept) == 0 &&
                           x->sent_ids == 1 && strcmp(x->sent_id, cases[i].kept) == 0 &&
                           strcmp(x->set_id, cases[i].kept) == 0,
                       x->label, "answer \"%s\", upstream \"%s\" (%d), X-Req-Id \"%s\"",
                       x->answer_id, x->sent_id, x->sent_ids, x->set_id);
        } else {
            expect_made_id(x, true);
            /* None of the client's value reaches the upstream (no hex digit in its marks). */
            check_case(strstr(x->sent, "wrong") == NULL && strstr(x->sent, "of-two") == NULL &&
                           strstr(x->sent, "jjjj") == NULL,
                       x->label, "the client's value went upstream: %s", x->sent);
        }
        if (i == 0)
            expect_logged(x->label, cases[i].kept, 200, "");
        exchange_free(x);
    }
    stop_gateway();

    /* From a peer that is no trusted proxy, even a sane id is the client's word only. */
    if (!start_gateway("", ""))
        goto out;
    exchange(x, "untrusted", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\nX-Request-Id: abc-123\r\n\r\n");
    expect_made_id(x, true);
    check_case(strstr(x->sent, "abc-123") == NULL, x->label, "the client's id went upstream");
    exchange_free(x);
    stop_gateway();
out:
    free(x);
}

/* A retried attempt carries the same id and the same traceparent: b reads the request and
 * closes (a reset), c answers. */
static void test_retry_keeps_id(void)
{
    char *first, *second, id1[256], id2[256], parent1[128], parent2[128], answer_id[256];
    struct exchange *x = malloc(sizeof *x);
    size_t len;

    if (!start_gateway("", "tracing: {sample: 1}\n"))
        goto out;
    recorder_set_mode(&recs[1], RECORDER_CLOSE_AFTER_READ);
    recorder_set_close_at(&recs[1], 1);
    recorder_reset(&recs[1]);
    exchange(x, "a retried attempt", &recs[2], "GET /again/x HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(x->status, 200);
    snprintf(answer_id, sizeof answer_id, "%s", x->answer_id);
    first = recorder_bytes(&recs[1], &len);
    second = recorder_bytes(&recs[2], &len);
    check_case(recorder_received(&recs[1]) == 1 && recorder_received(&recs[2]) == 1, x->label,
               "b read %lu requests and c %lu; expected one each", recorder_received(&recs[1]),
               recorder_received(&recs[2]));
    check_case(fields(first, "X-Request-Id", id1, sizeof id1) == 1 &&
                   fields(second, "X-Request-Id", id2, sizeof id2) == 1 && is_hex(id1, 32) &&
                   strcmp(id1, id2) == 0 && strcmp(id1, answer_id) == 0,
               x->label, "X-Request-Id \"%s\", then \"%s\"; the client got \"%s\"", id1, id2,
               answer_id);
    check_case(fields(first, "traceparent", parent1, sizeof parent1) == 1 &&
                   fields(second, "traceparent", parent2, sizeof parent2) == 1 &&
                   strcmp(parent1, parent2) == 0,
               x->label, "traceparent \"%s\", then \"%s\"", parent1, parent2);
    free(first);
    free(second);
    exchange_free(x);
    recorder_set_mode(&recs[1], RECORDER_NORMAL);
    stop_gateway();
out:
    free(x);
}

/* An upgrade request carries the id and the trace upstream, and the 101 brings the id back
 * (the upstream's own X-Request-Id is not passed on). */
static void test_upgrade_ids(void)
{
    static const char switched[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nX-Request-Id: upstream-own\r\n\r\n";
    struct exchange *x = malloc(sizeof *x);
    struct canned up;
    char sent_id[64], parent[128];

    CU_ASSERT_FATAL(start_canned(&up, switched) == 0);
    if (!start_gateway_with("", "", up.port)) {
        stop_canned(&up);
        free(x);
        return;
    }
    exchange(x, "an upgrade", &recs[0],
             "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
             "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "X-Request-Id: from-client\r\n"
             "traceparent: 00-" TRACE_ID "-" PARENT_ID "-01\r\n\r\n");
    stop_canned(&up);
    check_case(x->status == 101 && x->answer_ids == 1 && is_hex(x->answer_id, 32), x->label,
               "the client got %.200s", x->answer);
    check_case(fields(up.received, "X-Request-Id", sent_id, sizeof sent_id) == 1 &&
                   strcmp(sent_id, x->answer_id) == 0,
               x->label, "the upstream got \"%s\", the client \"%s\"", sent_id, x->answer_id);
    check_case(fields(up.received, "traceparent", parent, sizeof parent) == 1 &&
                   strncmp(parent, "00-" TRACE_ID "-", 36) == 0 &&
                   strcmp(parent + 52, "-01") == 0 && strncmp(parent + 36, PARENT_ID, 16) != 0,
               x->label, "the upstream got traceparent \"%s\"", parent);
    exchange_free(x);
    stop_gateway();
    free(x);
}

/* --- trace context ------------------------------------------------------------------------ */

/* What went upstream is a traceparent continuing TRACE_ID with `flags` and a parent-id of
 * sluice's own (16 hex digits, not the client's), and tracestate once as `tracestate` (NULL:
 * not checked here); the access log has the trace. */
static void expect_continued(const struct exchange *x, const char *flags, const char *tracestate)
{
    const char *t = x->traceparent;

    check_case(x->traceparents == 1 && strlen(t) == 55 && strncmp(t, "00-" TRACE_ID "-", 36) == 0 &&
                   t[52] == '-' && strcmp(t + 53, flags) == 0 &&
                   strncmp(t + 36, PARENT_ID, 16) != 0 && strspn(t + 36, "0123456789abcdef") == 16,
               x->label, "%d traceparent, the first \"%s\"", x->traceparents, t);
    if (tracestate != NULL)
        check_case(x->tracestates == 1 && strcmp(x->tracestate, tracestate) == 0, x->label,
                   "%d tracestate, the first \"%s\"", x->tracestates, x->tracestate);
    expect_logged(x->label, x->answer_id, x->status, TRACE_ID);
}

static void test_traceparent_continued(void)
{
    struct exchange *x = malloc(sizeof *x);
    char span[17] = "";

    if (!start_gateway("", ""))
        goto out;
    exchange(x, "sampled, with tracestate", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\ntraceparent: 00-" TRACE_ID "-" PARENT_ID
             "-01\r\ntracestate: " TRACESTATE "\r\n\r\n");
    expect_continued(x, "01", TRACESTATE);
    memcpy(span, x->traceparent + 36, 16);
    exchange_free(x);

    /* Each request has a span of its own. */
    exchange(x, "not sampled", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\nTraceParent: 00-" TRACE_ID "-" PARENT_ID
             "-00\r\n\r\n");
    expect_continued(x, "00", NULL);
    check_case(x->tracestates == 0, x->label, "a tracestate went upstream");
    check_case(strncmp(x->traceparent + 36, span, 16) != 0, x->label,
               "the same parent-id %s on two requests", span);
    exchange_free(x);

    /* Several tracestate fields go on as they came, in their order. */
    exchange(x, "two tracestate fields", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\ntraceparent: 00-" TRACE_ID "-" PARENT_ID
             "-01\r\ntracestate: a=1\r\ntracestate: b=2 , c=3\r\n\r\n");
    expect_continued(x, "01", NULL);
    check_case(x->tracestates == 2 && strstr(x->sent, "\r\ntracestate: a=1\r\ntracestate: b=2 , "
                                                      "c=3\r\n") != NULL,
               x->label, "%d tracestate fields", x->tracestates);
    exchange_free(x);

    /* A later version is read by its first four fields and goes on as version 00. */
    exchange(x, "version cc", &recs[0],
             "GET /api/x HTTP/1.1\r\nHost: h\r\ntraceparent: cc-" TRACE_ID "-" PARENT_ID
             "-01-later\r\ntracestate: " TRACESTATE "\r\n\r\n");
    expect_continued(x, "01", TRACESTATE);
    exchange_free(x);
    stop_gateway();
out:
    free(x);
}

static const struct {
    const char *label, *fields;
} invalid_parents[] = {
    {"upper-case hex", "traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT_ID "-01\r\n"},
    {"an all-zero trace-id",
     "traceparent: 00-00000000000000000000000000000000-" PARENT_ID "-01\r\n"},
    {"an all-zero parent-id", "traceparent: 00-" TRACE_ID "-0000000000000000-01\r\n"},
    {"version ff", "traceparent: ff-" TRACE_ID "-" PARENT_ID "-01\r\n"},
    {"54 characters", "traceparent: 00-" TRACE_ID "-" PARENT_ID "-1\r\n"},
    {"version 00 with more", "traceparent: 00-" TRACE_ID "-" PARENT_ID "-01-more\r\n"},
    {"a later version too short", "traceparent: 01-" TRACE_ID "-" PARENT_ID "-0\r\n"},
    {"no dashes", "traceparent: 00" TRACE_ID PARENT_ID "01\r\n"},
    {"two fields", "traceparent: 00-" TRACE_ID "-" PARENT_ID "-01\r\n"
                   "traceparent: 00-" TRACE_ID "-" PARENT_ID "-01\r\n"},
};

/* An invalid traceparent is not forwarded, nor its tracestate; with sample 1 a new trace
 * takes its place. */
static void run_invalid_parents(bool sampled)
{
    struct exchange *x = malloc(sizeof *x);
    char request[512];

    if (!start_gateway("", sampled ? "tracing: {sample: 1}\n" : "tracing:\n  sample: 0\n"))
        goto out;
    for (size_t i = 0; i < sizeof invalid_parents / sizeof invalid_parents[0]; i++) {
        snprintf(request, sizeof request,
                 "GET /api/x HTTP/1.1\r\nHost: h\r\n%stracestate: vendor=secret\r\n\r\n",
                 invalid_parents[i].fields);
        exchange(x, invalid_parents[i].label, &recs[0], request);
        CU_ASSERT_EQUAL(x->status, 200);
        check_case(x->tracestates == 0 && strstr(x->sent, "vendor=secret") == NULL, x->label,
                   "its tracestate went upstream");
        if (sampled) {
            check_case(x->traceparents == 1 && strlen(x->traceparent) == 55 &&
                           strncmp(x->traceparent, "00-", 3) == 0 &&
                           strcasestr(x->traceparent, TRACE_ID) == NULL &&
                           strcmp(x->traceparent + 52, "-01") == 0,
                       x->label, "%d traceparent, the first \"%s\"", x->traceparents,
                       x->traceparent);
        } else {
            check_case(x->traceparents == 0 && strcasestr(x->sent, PARENT_ID) == NULL, x->label,
                       "a traceparent went upstream: \"%s\"", x->traceparent);
            expect_logged(x->label, x->answer_id, 200, "");
        }
        exchange_free(x);
    }
    stop_gateway();
out:
    free(x);
}

static void test_invalid_traceparents(void)
{
    run_invalid_parents(false);
}

static void test_invalid_traceparents_sampled(void)
{
    run_invalid_parents(true);
}

/* The trace started for `x`: a version 00 traceparent, sampled, logged; its trace-id into
 * `trace_id`. */
static void expect_started(const struct exchange *x, char trace_id[33])
{
    const char *t = x->traceparent;

    snprintf(trace_id, 33, "%.32s", strlen(t) > 3 ? t + 3 : "");
    check_case(x->traceparents == 1 && strlen(t) == 55 && strncmp(t, "00-", 3) == 0 &&
                   is_hex(trace_id, 32) && t[35] == '-' && t[52] == '-' &&
                   strspn(t + 36, "0123456789abcdef") == 16 && strcmp(t + 53, "01") == 0,
               x->label, "%d traceparent, the first \"%s\"", x->traceparents, t);
    expect_logged(x->label, x->answer_id, x->status, trace_id);
}

static void test_sampling(void)
{
    struct exchange *x = malloc(sizeof *x);
    char trace_ids[5][33];

    /* Reloads by SIGHUP alone, so that each is counted once. */
    if (!start_gateway(NO_WATCH, "tracing: {sample: 1}\n"))
        goto out;
    for (int i = 0; i < 5; i++) {
        exchange(x, "sample 1", &recs[0], "GET /api/x HTTP/1.1\r\nHost: h\r\n\r\n");
        expect_started(x, trace_ids[i]);
        for (int j = 0; j < i; j++)
            check_case(strcmp(trace_ids[i], trace_ids[j]) != 0, x->label, "trace-id %s twice",
                       trace_ids[i]);
        exchange_free(x);
    }
    /* A reload to sample 0 starts none from the next request on. */
    rewrite_config(&gw, false, config, recs[0].port, recs[1].port, recs[2].port, NO_WATCH,
                   "tracing: {sample: 0}\n", recs[0].port, free_port());
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 5000));
    for (int i = 0; i < 5; i++) {
        exchange(x, "sample 0 after a reload", &recs[0], "GET /api/x HTTP/1.1\r\nHost: h\r\n\r\n");
        check_case(x->status == 200 && x->traceparents == 0, x->label, "status %d, %d traceparent",
                   x->status, x->traceparents);
        expect_logged(x->label, x->answer_id, 200, "");
        exchange_free(x);
    }
    /* And back to 1. */
    rewrite_config(&gw, false, config, recs[0].port, recs[1].port, recs[2].port, NO_WATCH,
                   "tracing: {sample: 1}\n", recs[0].port, free_port());
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 2, 5000));
    exchange(x, "sample 1 after a reload", &recs[0], "GET /api/x HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_started(x, trace_ids[0]);
    exchange_free(x);
    stop_gateway();
out:
    free(x);
}

void register_trace_tests(void)
{
    CU_pSuite s = add_suite_with("trace", init, clean);

    add_test(s, "made ids: answer, upstream, ${request.id}, access log, problem+json",
             test_made_ids);
    add_test(s, "a client's X-Request-Id: kept from a trusted peer when sane", test_client_ids);
    add_test(s, "a route's set_headers or remove_headers decide the fields upstream",
             test_route_decides);
    add_test(s, "a retried attempt: the same id and traceparent", test_retry_keeps_id);
    add_test(s, "an upgrade: the id both ways, the trace upstream", test_upgrade_ids);
    add_test(s, "a valid traceparent is continued, tracestate untouched",
             test_traceparent_continued);
    add_test(s, "invalid traceparents are not forwarded, nor their tracestate",
             test_invalid_traceparents);
    add_test(s, "invalid traceparents with sample 1: a new trace",
             test_invalid_traceparents_sampled);
    add_test(s, "tracing.sample 1 and 0, changed by a reload", test_sampling);
}
