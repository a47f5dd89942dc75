/* What clients are answered with: deny lists, the rate-limit fields each headers: mode sends,
 * and the counters behind them (config/config.h, gateway/common/respond.h).
 *
 *   deny:      a client whose address (after trusted_proxies) is on server.deny or the route's
 *              deny gets a 403 problem+json, the upstream never sees it, the connection stays
 *              open, and sluice_requests_total{decision="forbidden"} counts it; deny beats exempt.
 *   headers:   ietf (default) | x-ratelimit | both | none, per route or under server, on
 *              proxied answers and on sluice's own 429s; a family sluice sets is never also
 *              passed on from the upstream.
 *   quotas:    a bucket advertises its burst as q and its refill time as w; t is never over w.
 *   metrics:   sluice_limit_denials_total{route,limit}, a plan's limits as PLAN/LIMIT, and
 *              sluice_requests_total{route,plan,decision}.
 *
 * Most cases run against one gateway (`gw`, started by the suite); the server-wide settings
 * (deny, headers, consumers) and the upstream that sends rate-limit fields of its own get a
 * gateway each. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define ANSWER_CAP  (64 * 1024)
#define TIMEOUT_MS  5000
#define DENY_DETAIL "the client's address is not allowed here"

static struct proc gw;

/* The suite's gateway. Clients reach it from 127.0.0.1, a trusted proxy, so X-Forwarded-For
 * picks the client where a case needs another address. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\",\n"
    "         trusted_proxies: [\"127.0.0.1/32\"], deny: [\"198.51.100.0/24\"]}\n"
    "routes:\n"
    "  - name: walled\n    match: {path_prefix: /walled/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    deny: [\"127.0.0.0/8\"]\n"
    "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
    "  - name: both-lists\n    match: {path_prefix: /both-lists/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    deny: [\"127.0.0.1/32\"]\n    exempt: [\"127.0.0.0/8\"]\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: open\n    match: {path_prefix: /open/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    deny: [\"10.0.0.0/8\", \"192.168.0.0/16\", \"::1/128\"]\n"
    "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
    "  - name: xff\n    match: {path_prefix: /xff/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    deny: [\"10.0.0.0/8\"]\n"
    "  - name: ietf\n    match: {path_prefix: /ietf/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: xrl\n    match: {path_prefix: /xrl/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    headers: x-ratelimit\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: both\n    match: {path_prefix: /both/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    headers: both\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: none\n    match: {path_prefix: /none/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    headers: none\n"
    "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
    "  - name: bucket\n    match: {path_prefix: /bucket/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: token_bucket, requests: 10, per: 1s, burst: 5}\n"
    "  - name: bucket-minute\n    match: {path_prefix: /bucket-minute/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: token_bucket, requests: 100, per: 1m, burst: 20}\n"
    "  - name: gcra\n    match: {path_prefix: /gcra/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: gcra, requests: 2, per: 1s, burst: 3}\n"
    "  - name: counter\n    match: {path_prefix: /counter/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    headers: both\n"
    "    limit: {algorithm: sliding_window_counter, requests: 2, per: 1h}\n"
    "  - name: two\n    match: {path_prefix: /two/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit:\n"
    "      - {name: per_key, algorithm: fixed_window, requests: 5, per: 1h}\n"
    "      - {name: per_ip, algorithm: fixed_window, requests: 2, per: 1h, key: ip}\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

/* --- reading answers ------------------------------------------------------------------- */

/* How many fields `name` the head at `head` (lines ending in CRLF, up to an empty one) holds,
 * compared without case; the first one's value, spaces trimmed, into `value` (`cap` bytes, ""
 * when none). */
static int fields(const char *head, const char *name, char *value, size_t cap)
{
    size_t len = strlen(name);
    int n = 0;

    if (value != NULL)
        value[0] = '\0';
    for (const char *line = head; line != NULL && *line != '\0';) {
        const char *eol = strstr(line, "\r\n"), *v;

        if (eol == NULL || eol == line)
            break; /* the end of the head */
        if (strncasecmp(line, name, len) == 0 && line[len] == ':') {
            v = line + len + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (n++ == 0 && value != NULL)
                snprintf(value, cap, "%.*s", (int)(eol - v), v);
        }
        line = eol + 2;
    }
    return n;
}

/* Whether `text` is a whole number, into `*out`. */
static bool whole_number(const char *text, long *out)
{
    char *end;

    if (text == NULL || *text < '0' || *text > '9')
        return false;
    *out = strtol(text, &end, 10);
    return *end == '\0';
}

/* A RateLimit value "NAME";r=R;t=T, into `*r` and `*t`. */
static bool parse_ratelimit(const char *value, const char *name, long *r, long *t)
{
    char prefix[128];
    size_t len;
    int used = -1;

    len = (size_t)snprintf(prefix, sizeof prefix, "\"%s\";", name);
    if (strncmp(value, prefix, len) != 0)
        return false;
    return sscanf(value + len, "r=%ld;t=%ld%n", r, t, &used) == 2 && used >= 0 &&
           value[len + (size_t)used] == '\0';
}

/* The status of the answer at `answer` (a raw response), 0 when none. */
static int raw_status(const char *answer)
{
    int status = 0;

    return sscanf(answer, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

static const char *raw_body(const char *answer)
{
    const char *end = strstr(answer, "\r\n\r\n");

    return end ? end + 4 : "";
}

/* Reads one response on `fd` into `answer`: its head, then Content-Length bytes of body. The
 * status, 0 when none came whole. */
static int read_response(int fd, char *answer, size_t cap)
{
    size_t got = 0, want = 0;
    char length[32];
    long body;

    answer[0] = '\0';
    for (;;) {
        const char *end = strstr(answer, "\r\n\r\n");
        ssize_t n;

        if (end != NULL && want == 0) {
            body = 0;
            if (fields(strstr(answer, "\r\n") + 2, "Content-Length", length, sizeof length) == 1)
                whole_number(length, &body);
            want = (size_t)(end + 4 - answer) + (size_t)body;
        }
        if (want != 0 && got >= want)
            return raw_status(answer);
        if (got + 1 >= cap)
            return 0;
        n = recv(fd, answer + got, cap - got - 1, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
        answer[got] = '\0';
    }
}

/* Sends `first` and reads its answer, then sends `second` on the same connection and reads
 * that: the two statuses (0 where none came). */
static void two_on_one(unsigned port, const char *first, char *first_answer, const char *second,
                       char *second_answer, int statuses[2])
{
    int fd = raw_connect(port);
    struct timeval tv = {TIMEOUT_MS / 1000, (TIMEOUT_MS % 1000) * 1000};

    statuses[0] = statuses[1] = 0;
    first_answer[0] = second_answer[0] = '\0';
    if (fd < 0)
        return;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(fd, first, strlen(first), MSG_NOSIGNAL) == (ssize_t)strlen(first))
        statuses[0] = read_response(fd, first_answer, ANSWER_CAP);
    if (statuses[0] != 0 &&
        send(fd, second, strlen(second), MSG_NOSIGNAL) == (ssize_t)strlen(second))
        statuses[1] = read_response(fd, second_answer, ANSWER_CAP);
    close(fd);
}

/* A GET of `path` with `key` as X-API-Key (none when NULL) and `forwarded` as
 * X-Forwarded-For (none when NULL). */
static void get(unsigned port, const char *path, const char *key, const char *forwarded,
                struct reply *r)
{
    char key_field[128], forwarded_field[256];
    const char *headers[3] = {NULL, NULL, NULL};
    int n = 0;

    if (key != NULL) {
        snprintf(key_field, sizeof key_field, "X-API-Key: %s", key);
        headers[n++] = key_field;
    }
    if (forwarded != NULL) {
        snprintf(forwarded_field, sizeof forwarded_field, "X-Forwarded-For: %s", forwarded);
        headers[n++] = forwarded_field;
    }
    http(port, "GET", path, headers, NULL, r);
}

static unsigned long upstream_requests(void)
{
    unsigned long requests, connections;

    upstream_stats(&requests, &connections);
    return requests;
}

static double requests_metric(const struct proc *p, const char *route, const char *decision)
{
    char series[256];

    snprintf(series, sizeof series, "sluice_requests_total{route=\"%s\",decision=\"%s\"}", route,
             decision);
    return metric(p, series);
}

static double denials_metric(const struct proc *p, const char *route, const char *limit)
{
    char series[256];

    snprintf(series, sizeof series, "sluice_limit_denials_total{route=\"%s\",limit=\"%s\"}", route,
             limit);
    return metric(p, series);
}

/* --- what a denied address gets ------------------------------------------------------- */

/* A 403 for `route`: problem+json, no rate-limit fields, the connection left open (or, with
 * `closes`, closed: as any refusal of a request with a body, which sluice answers without
 * reading the body). `head` starts at the status line. */
static void expect_forbidden(const char *label, long status, const char *head, const char *body,
                             const char *route, bool closes)
{
    const char *fields_at = head ? strstr(head, "\r\n") : NULL;
    char value[256], want[128];

    check_case(status == 403, label, "status %ld, expected 403; body %s", status,
               body ? body : "(none)");
    if (fields_at == NULL || body == NULL)
        return;
    fields_at += 2;
    fields(fields_at, "Content-Type", value, sizeof value);
    check_case(strcmp(value, "application/problem+json") == 0, label, "Content-Type \"%s\"", value);
    fields(fields_at, "Connection", value, sizeof value);
    check_case((strcasestr(value, "close") != NULL) == closes, label,
               "Connection: \"%s\" on a 403, expected %s", value,
               closes ? "close" : "the connection kept");
    check_case(fields(fields_at, "Retry-After", NULL, 0) == 0, label, "a 403 with Retry-After");
    check_case(fields(fields_at, "RateLimit", NULL, 0) == 0 &&
                   fields(fields_at, "X-RateLimit-Limit", NULL, 0) == 0,
               label, "a 403 with rate-limit fields");
    check_case(strstr(body, "\"title\":\"Forbidden\"") != NULL, label, "no title Forbidden: %s",
               body);
    check_case(strstr(body, "\"status\":403") != NULL, label, "no status 403: %s", body);
    check_case(strstr(body, "\"detail\":\"" DENY_DETAIL "\"") != NULL, label, "detail: %s", body);
    snprintf(want, sizeof want, "\"route\":\"%s\"", route);
    check_case(strstr(body, want) != NULL, label, "not route %s: %s", route, body);
}

static void expect_forbidden_reply(const char *label, const struct reply *r, const char *route)
{
    expect_forbidden(label, r->status, r->head, r->body, route, false);
}

static void expect_forbidden_raw(const char *label, const char *answer, const char *route,
                                 bool closes)
{
    expect_forbidden(label, raw_status(answer), answer, raw_body(answer), route, closes);
}

/* A route's deny list: 127.0.0.1 is refused, the upstream never asked, the connection kept
 * (closed after a refused request with a body, which is never read, as for any refusal), and
 * the refusal counted as forbidden. */
static void test_route_deny(void)
{
    static const char get_walled[] = "GET /walled/a HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char post_walled[] = "POST /walled/b HTTP/1.1\r\nHost: h\r\n"
                                      "Content-Type: application/x-www-form-urlencoded\r\n"
                                      "Content-Length: 20\r\n\r\nGET /open/smuggled/x";
    static const char get_open[] = "GET /open/after HTTP/1.1\r\nHost: h\r\n\r\n";
    double forbidden = requests_metric(&gw, "walled", "forbidden");
    double allowed = requests_metric(&gw, "walled", "allowed");
    double denied = requests_metric(&gw, "walled", "denied");
    char *first = malloc(ANSWER_CAP), *second = malloc(ANSWER_CAP);
    unsigned long before = upstream_requests();
    int statuses[2];
    struct reply r;

    CU_ASSERT_TRUE_FATAL(forbidden >= 0 && allowed >= 0 && denied >= 0);
    get(gw.port, "/walled/x", NULL, NULL, &r);
    expect_forbidden_reply("GET /walled/x from 127.0.0.1", &r, "walled");
    reply_free(&r);
    check_case(upstream_requests() == before, "GET /walled/x", "the upstream got %lu request(s)",
               upstream_requests() - before);

    two_on_one(gw.port, get_walled, first, get_open, second, statuses);
    expect_forbidden_raw("GET /walled/a, first on its connection", first, "walled", false);
    check_case(statuses[1] == 200, "GET /open/after, after a 403 on the same connection",
               "status %d, expected 200: %.300s", statuses[1], second);
    check_case(strstr(raw_body(second), "/open/after") != NULL, "GET /open/after",
               "the upstream's echo does not name /open/after: %.300s", raw_body(second));

    /* A body is not read: the connection ends after the 403, and nothing in the body is taken
     * for a request. */
    two_on_one(gw.port, post_walled, first, get_open, second, statuses);
    expect_forbidden_raw("POST /walled/b with a body", first, "walled", true);
    check_case(statuses[1] == 0, "after a refused POST with a body",
               "the connection still answered %d: %.300s", statuses[1], second);
    check_case(upstream_requests() == before + 1, "route deny",
               "the upstream got %lu request(s), expected 1 (the /open/after)",
               upstream_requests() - before);

    check_case(requests_metric(&gw, "walled", "forbidden") == forbidden + 3, "route deny",
               "forbidden went from %g to %g, expected +3", forbidden,
               requests_metric(&gw, "walled", "forbidden"));
    CU_ASSERT_EQUAL(requests_metric(&gw, "walled", "allowed"), allowed);
    CU_ASSERT_EQUAL(requests_metric(&gw, "walled", "denied"), denied);
    free(first);
    free(second);
}

/* "Content-Length: 0" is no body to leave unread (request.c, end_first_call(): answering
 * before the body closes the connection "unless the body is empty"): the connection stays. */
static void test_deny_empty_body_keeps_connection(void)
{
    static const char post_empty[] = "POST /walled/c HTTP/1.1\r\nHost: h\r\n"
                                     "Content-Length: 0\r\n\r\n";
    static const char get_open[] = "GET /open/after-empty HTTP/1.1\r\nHost: h\r\n\r\n";
    char *first = malloc(ANSWER_CAP), *second = malloc(ANSWER_CAP);
    int statuses[2];

    two_on_one(gw.port, post_empty, first, get_open, second, statuses);
    expect_forbidden_raw("POST /walled/c, Content-Length: 0", first, "walled", false);
    check_case(statuses[1] == 200, "GET /open/after-empty, after a refused empty POST",
               "status %d, expected 200: %.300s", statuses[1], second);
    free(first);
    free(second);
}

/* The count once it has stopped moving: the tests before may still have a request being
 * counted after its client read the answer. */
static double settled_requests_metric(const char *route, const char *decision)
{
    double value = requests_metric(&gw, route, decision), again;

    for (int i = 0; i < 20; i++) {
        sleep_ms(50);
        again = requests_metric(&gw, route, decision);
        if (again == value)
            break;
        value = again;
    }
    return value;
}

/* A deny list without the client's address changes nothing. */
static void test_route_deny_elsewhere_proxies(void)
{
    double allowed = settled_requests_metric("open", "allowed");
    double forbidden = settled_requests_metric("open", "forbidden");
    unsigned long before = upstream_requests();
    struct reply r;

    get(gw.port, "/open/x", NULL, NULL, &r);
    check_case(r.status == 200, "GET /open/x", "status %ld, expected 200: %s", r.status,
               r.body ? r.body : "");
    check_case(r.body != NULL && strstr(r.body, "/open/x") != NULL, "GET /open/x",
               "not the upstream's echo: %s", r.body ? r.body : "");
    CU_ASSERT_PTR_NOT_NULL(header(&r, "RateLimit"));
    reply_free(&r);
    CU_ASSERT_EQUAL(upstream_requests(), before + 1);
    CU_ASSERT_EQUAL(requests_metric(&gw, "open", "allowed"), allowed + 1);
    CU_ASSERT_EQUAL(requests_metric(&gw, "open", "forbidden"), forbidden);
}

/* Behind a trusted proxy the client is the X-Forwarded-For address: denied there whatever it
 * prepends, however it writes its address, and let through when it is another. */
static void test_deny_after_forwarded_for(void)
{
    static const struct {
        const char *path, *forwarded, *forwarded2; /* forwarded2: a second field, or NULL */
        int status;
        const char *route;
    } cases[] = {
        {"/xff/a", "10.1.2.3", NULL, 403, "xff"},
        {"/xff/b", "192.0.2.1", NULL, 200, NULL},
        {"/xff/c", NULL, NULL, 200, NULL}, /* 127.0.0.1 itself */
        /* The proxy appends what it saw: a client at 10.1.2.3 cannot hide behind a fake
         * entry of its own. */
        {"/xff/d", "192.0.2.1, 10.1.2.3", NULL, 403, "xff"},
        {"/xff/e", "10.1.2.3, 192.0.2.1", NULL, 200, NULL},
        {"/xff/f", "192.0.2.1", "10.1.2.3", 403, "xff"},
        {"/xff/g", "::ffff:10.1.2.3", NULL, 403, "xff"},
        {"/xff/h", "10.1.2.3:4711", NULL, 403, "xff"},
        {"/open/i", "192.168.7.7", NULL, 403, "open"},
        {"/open/j", "::1", NULL, 403, "open"},
        {"/open/k", "[::1]:443", NULL, 403, "open"},
        /* The route denies 127.0.0.0/8, but the client is the one the proxy names. */
        {"/walled/l", "192.0.2.1", NULL, 200, NULL},
        {"/walled/m", "127.0.0.9", NULL, 403, "walled"},
        /* server.deny, on every route. */
        {"/open/n", "198.51.100.7", NULL, 403, "open"},
        {"/ietf/o", "198.51.100.8", NULL, 403, "ietf"},
        {"/xff/p", "198.51.100.9", NULL, 403, "xff"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[160], first[256], second[256];
        const char *headers[3] = {NULL, NULL, NULL};
        unsigned long before = upstream_requests(), after;
        struct reply r;
        int n = 0;

        snprintf(label, sizeof label, "GET %s, X-Forwarded-For: %s%s%s", cases[i].path,
                 cases[i].forwarded ? cases[i].forwarded : "(none)",
                 cases[i].forwarded2 ? " and " : "",
                 cases[i].forwarded2 ? cases[i].forwarded2 : "");
        if (cases[i].forwarded != NULL) {
            snprintf(first, sizeof first, "X-Forwarded-For: %s", cases[i].forwarded);
            headers[n++] = first;
        }
        if (cases[i].forwarded2 != NULL) {
            snprintf(second, sizeof second, "X-Forwarded-For: %s", cases[i].forwarded2);
            headers[n++] = second;
        }
        http(gw.port, "GET", cases[i].path, headers, NULL, &r);
        after = upstream_requests();
        if (cases[i].status == 403) {
            expect_forbidden_reply(label, &r, cases[i].route);
            check_case(after == before, label, "the upstream got %lu request(s)", after - before);
        } else {
            check_case(r.status == cases[i].status, label, "status %ld, expected %d: %s", r.status,
                       cases[i].status, r.body ? r.body : "");
            check_case(after == before + 1, label, "the upstream got %lu request(s), expected 1",
                       after - before);
        }
        reply_free(&r);
    }
}

/* An address both denied and exempt is denied; one only exempt is exempt. */
static void test_deny_beats_exempt(void)
{
    double forbidden = requests_metric(&gw, "both-lists", "forbidden");
    double exempt = requests_metric(&gw, "both-lists", "exempt");
    unsigned long before = upstream_requests();
    struct reply r;

    for (int i = 0; i < 2; i++) {
        get(gw.port, "/both-lists/x", NULL, NULL, &r);
        expect_forbidden_reply("127.0.0.1, denied and exempt", &r, "both-lists");
        reply_free(&r);
    }
    CU_ASSERT_EQUAL(upstream_requests(), before);
    /* 127.0.0.2 is exempt (127.0.0.0/8) but not denied: never limited, though the quota is 1. */
    for (int i = 0; i < 2; i++) {
        get(gw.port, "/both-lists/y", NULL, "127.0.0.2", &r);
        check_case(r.status == 200, "127.0.0.2, exempt only", "status %ld, expected 200", r.status);
        check_case(header(&r, "RateLimit") == NULL, "127.0.0.2, exempt only",
                   "an exempt client got RateLimit: %s", header(&r, "RateLimit"));
        reply_free(&r);
    }
    CU_ASSERT_EQUAL(upstream_requests(), before + 2);
    CU_ASSERT_EQUAL(requests_metric(&gw, "both-lists", "forbidden"), forbidden + 2);
    CU_ASSERT_EQUAL(requests_metric(&gw, "both-lists", "exempt"), exempt + 2);
}

/* server.deny: every route refuses 127.0.0.1, exempt or not, and an X-Forwarded-For from an
 * untrusted peer changes nothing. */
static void test_server_deny(void)
{
    static const char cfg[] =
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
        "deny: [\"10.0.0.0/8\", \"127.0.0.0/8\"]}\n"
        "routes:\n"
        "  - name: first\n    match: {path_prefix: /first/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    exempt: [\"127.0.0.1/32\"]\n"
        "    limit: {algorithm: fixed_window, requests: 5, per: 1h}\n"
        "  - name: second\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const char get_first[] = "GET /first/a HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char get_second[] = "GET /second/b HTTP/1.1\r\nHost: h\r\n\r\n";
    char *first = malloc(ANSWER_CAP), *second = malloc(ANSWER_CAP);
    struct proc p;
    unsigned long before;
    int statuses[2];
    struct reply r;

    if (start_sluice(&p, cfg, upstream.port) != 0) {
        CU_FAIL("sluice did not start");
        free(first);
        free(second);
        return;
    }
    before = upstream_requests();
    get(p.port, "/first/x", NULL, NULL, &r);
    expect_forbidden_reply("server deny, exempt route", &r, "first");
    reply_free(&r);
    get(p.port, "/second/x", NULL, NULL, &r);
    expect_forbidden_reply("server deny, a route without lists", &r, "second");
    reply_free(&r);
    get(p.port, "/second/y", NULL, "192.0.2.1", &r); /* no trusted_proxies: the peer counts */
    expect_forbidden_reply("server deny, X-Forwarded-For from an untrusted peer", &r, "second");
    reply_free(&r);
    two_on_one(p.port, get_first, first, get_second, second, statuses);
    expect_forbidden_raw("server deny, first on a connection", first, "first", false);
    expect_forbidden_raw("server deny, second on the same connection", second, "second", false);
    check_case(upstream_requests() == before, "server deny", "the upstream got %lu request(s)",
               upstream_requests() - before);
    CU_ASSERT_EQUAL(requests_metric(&p, "first", "forbidden"), 2);
    CU_ASSERT_EQUAL(requests_metric(&p, "first", "exempt"), 0);
    CU_ASSERT_EQUAL(requests_metric(&p, "second", "forbidden"), 3);
    CU_ASSERT_EQUAL(requests_metric(&p, "second", "allowed"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
    free(first);
    free(second);
}

/* --- rate-limit fields ----------------------------------------------------------------- */

enum mode { IETF, X_RATELIMIT, BOTH, NONE };

static const char *const mode_names[] = {"ietf", "x-ratelimit", "both", "none"};

/* The rate-limit fields of `r` from route `name` (`limit` its binding limit) in `mode`:
 * quota `q` per `w` seconds, `remaining` left; a 429 with Retry-After. */
static void expect_limit_fields(const char *label, const struct reply *r, enum mode mode,
                                const char *limit, long q, long w, long remaining)
{
    const char *head = r->head ? strstr(r->head, "\r\n") : NULL;
    char value[256], want[256];
    long rem = -1, t = -1, x_limit = -1, x_remaining = -1, x_reset = -1, retry = -1;
    bool ietf = mode == IETF || mode == BOTH, x = mode == X_RATELIMIT || mode == BOTH;

    if (head == NULL) {
        check_case(false, label, "no answer");
        return;
    }
    head += 2;
    /* RateLimit-Policy and RateLimit */
    if (ietf) {
        snprintf(want, sizeof want, "\"%s\";q=%ld;w=%ld", limit, q, w);
        check_case(fields(head, "RateLimit-Policy", value, sizeof value) == 1 &&
                       strcmp(value, want) == 0,
                   label, "RateLimit-Policy \"%s\" (%d field(s)), expected \"%s\"", value,
                   fields(head, "RateLimit-Policy", NULL, 0), want);
        check_case(fields(head, "RateLimit", value, sizeof value) == 1 &&
                       parse_ratelimit(value, limit, &rem, &t),
                   label, "RateLimit \"%s\" (%d field(s)), expected \"%s\";r=%ld;t=...", value,
                   fields(head, "RateLimit", NULL, 0), limit, remaining);
        check_case(rem == remaining, label, "RateLimit r=%ld, expected %ld", rem, remaining);
        check_case(t >= 1 && t <= w, label, "RateLimit t=%ld, expected 1 to %ld (w)", t, w);
    } else {
        check_case(fields(head, "RateLimit-Policy", NULL, 0) == 0 &&
                       fields(head, "RateLimit", NULL, 0) == 0,
                   label, "RateLimit fields in headers: %s", mode_names[mode]);
    }
    /* X-RateLimit-* */
    if (x) {
        check_case(fields(head, "X-RateLimit-Limit", value, sizeof value) == 1 &&
                       whole_number(value, &x_limit) && x_limit == q,
                   label, "X-RateLimit-Limit \"%s\", expected %ld", value, q);
        check_case(fields(head, "X-RateLimit-Remaining", value, sizeof value) == 1 &&
                       whole_number(value, &x_remaining) && x_remaining == remaining,
                   label, "X-RateLimit-Remaining \"%s\", expected %ld", value, remaining);
        check_case(fields(head, "X-RateLimit-Reset", value, sizeof value) == 1 &&
                       whole_number(value, &x_reset) && x_reset >= 1 && x_reset <= w,
                   label, "X-RateLimit-Reset \"%s\", expected seconds, 1 to %ld", value, w);
    } else {
        check_case(fields(head, "X-RateLimit-Limit", NULL, 0) == 0 &&
                       fields(head, "X-RateLimit-Remaining", NULL, 0) == 0 &&
                       fields(head, "X-RateLimit-Reset", NULL, 0) == 0,
                   label, "X-RateLimit fields in headers: %s", mode_names[mode]);
    }
    if (mode == BOTH) /* the same figures, one decision */
        check_case(x_reset == t, label, "X-RateLimit-Reset %ld, RateLimit t=%ld", x_reset, t);
    if (r->status == 429) {
        check_case(fields(head, "Retry-After", value, sizeof value) == 1 &&
                       whole_number(value, &retry) && retry >= 1 && retry <= w,
                   label, "Retry-After \"%s\", expected 1 to %ld", value, w);
        check_case(r->body != NULL && strstr(r->body, "\"status\":429") != NULL, label,
                   "not a problem+json 429: %s", r->body ? r->body : "");
    }
}

/* Spends the `q` requests a key `key` has on `path` (route `limit`, `w` seconds), each
 * answered 200 with the fields of `mode`, then one more: a 429 with them, the upstream not
 * asked. The time it took into `*seconds`. */
static void drive(unsigned port, const char *path, enum mode mode, const char *limit, long q,
                  long w, const char *key, double *seconds)
{
    double start = seconds_now();
    unsigned long before;
    struct reply r;
    char label[160];

    for (long i = 0; i <= q; i++) {
        snprintf(label, sizeof label, "%s (headers: %s), request %ld of a quota of %ld", path,
                 mode_names[mode], i + 1, q);
        before = upstream_requests();
        get(port, path, key, NULL, &r);
        check_case(r.status == (i < q ? 200 : 429), label, "status %ld, expected %d", r.status,
                   i < q ? 200 : 429);
        if (i == q)
            check_case(upstream_requests() == before, label, "a 429 reached the upstream");
        expect_limit_fields(label, &r, mode, limit, q, w, i < q ? q - 1 - i : 0);
        reply_free(&r);
    }
    if (seconds != NULL)
        *seconds = seconds_now() - start;
}

/* Each route's headers: mode, on its 200s and its 429. */
static void test_header_modes(void)
{
    drive(gw.port, "/ietf/x", IETF, "ietf", 3, 3600, "modes", NULL); /* the default */
    drive(gw.port, "/xrl/x", X_RATELIMIT, "xrl", 3, 3600, "modes", NULL);
    drive(gw.port, "/both/x", BOTH, "both", 3, 3600, "modes", NULL);
    drive(gw.port, "/none/x", NONE, "none", 3, 3600, "modes", NULL);
}

/* server.headers is every route's default, and a route's own headers: wins. */
static void test_server_headers(void)
{
    static const char cfg[] =
        "server: {listen: \"127.0.0.1:0\", headers: x-ratelimit}\n"
        "routes:\n"
        "  - name: inherit\n    match: {path_prefix: /inherit/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n"
        "    limit: {algorithm: fixed_window, requests: 3, per: 1h}\n"
        "  - name: override\n    match: {path_prefix: /override/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    headers: ietf\n"
        "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n"
        "  - name: quiet\n    match: {path_prefix: /quiet/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    headers: none\n"
        "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
        "  - name: spoof\n    match: {path_prefix: /spoof/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    deny: [\"10.0.0.0/8\"]\n";
    struct proc p;
    struct reply r;

    if (start_sluice(&p, cfg, upstream.port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    drive(p.port, "/inherit/x", X_RATELIMIT, "inherit", 3, 3600, NULL, NULL);
    drive(p.port, "/override/x", IETF, "override", 2, 3600, NULL, NULL);
    drive(p.port, "/quiet/x", NONE, "quiet", 1, 3600, NULL, NULL);
    /* Without trusted_proxies a client's X-Forwarded-For is no address of its own. */
    get(p.port, "/spoof/x", NULL, "10.1.2.3", &r);
    check_case(r.status == 200, "untrusted X-Forwarded-For: 10.1.2.3",
               "status %ld, expected 200 (the peer is 127.0.0.1)", r.status);
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

/* Buckets: q is the burst, w the time to refill it; t never more than w. */
static void test_bucket_quotas(void)
{
    double seconds = 0;

    /* 10 a second, burst 5: five at once, the sixth refused (a token takes 100 ms). */
    drive(gw.port, "/bucket/x", IETF, "bucket", 5, 1, "burst", &seconds);
    if (seconds > 0.09)
        fprintf(stderr, "note: the bucket's 6 requests took %.0f ms; a token refills in 100 ms\n",
                seconds * 1000);
    /* 100 a minute, burst 20: w = 20 * 60 / 100 = 12. */
    drive(gw.port, "/bucket-minute/x", IETF, "bucket-minute", 20, 12, "minute", NULL);
    /* gcra, 2 a second, burst 3: w = 1.5 s, rounded up. */
    drive(gw.port, "/gcra/x", IETF, "gcra", 3, 2, "gcra", NULL);
}

/* A sliding window counter's state lasts two windows, but its t (and X-RateLimit-Reset) is
 * never more than one. */
static void test_counter_reset_within_window(void)
{
    drive(gw.port, "/counter/x", BOTH, "counter", 2, 3600, "counter", NULL);
}

/* --- an upstream that sends rate-limit fields of its own --------------------------------- */

#define FIXED_MAX_CONNS 64
#define FIXED_BUF       (16 * 1024)

/* Every answer: the upstream's own figures, one field written in lower case. */
static const char fixed_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                   "RateLimit-Policy: \"up\";q=999;w=1\r\n"
                                   "RateLimit: \"up\";r=5;t=1\r\n"
                                   "X-RateLimit-Limit: 999\r\n"
                                   "x-ratelimit-remaining: 998\r\n"
                                   "X-RateLimit-Reset: 86399\r\n"
                                   "\r\nok";

/* A raw-socket upstream in this process that answers every request with fixed_answer and
 * keeps the connection. */
struct fixed_upstream {
    unsigned port;
    int listen_fd, wake[2];
    pthread_t thread;
    atomic_ulong requests;
};

struct fixed_conn {
    int fd;
    size_t len;
    char buf[FIXED_BUF];
};

/* Answers every whole request in `c`'s buffer. False when the connection is to be closed. */
static bool fixed_answer_requests(struct fixed_upstream *u, struct fixed_conn *c)
{
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4), length[32];
        size_t head, whole;
        long body = 0;
        int n;

        if (end == NULL)
            return c->len < FIXED_BUF;
        end[2] = '\0'; /* the head as a string, its last line's CRLF kept */
        n = fields(strstr(c->buf, "\r\n") + 2, "Content-Length", length, sizeof length);
        end[2] = '\r';
        if (n > 0 && !whole_number(length, &body))
            return false;
        head = (size_t)(end + 4 - c->buf);
        whole = head + (size_t)body;
        if (whole > FIXED_BUF)
            return false;
        if (whole > c->len)
            return true;
        memmove(c->buf, c->buf + whole, c->len - whole);
        c->len -= whole;
        atomic_fetch_add(&u->requests, 1);
        if (send(c->fd, fixed_answer, sizeof fixed_answer - 1, MSG_NOSIGNAL) !=
            (ssize_t)(sizeof fixed_answer - 1))
            return false;
    }
}

static void *fixed_serve(void *arg)
{
    struct fixed_upstream *u = arg;
    struct fixed_conn *conns = calloc(FIXED_MAX_CONNS, sizeof *conns);
    size_t n = 0;

    while (conns != NULL) {
        struct pollfd p[FIXED_MAX_CONNS + 2];

        p[0] = (struct pollfd){.fd = u->wake[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = u->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < n; i++)
            p[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        if (poll(p, (nfds_t)(n + 2), -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents != 0)
            break;
        /* From the last, so that moving the last into a closed one's place skips nothing. */
        for (size_t i = n; i-- > 0;) {
            struct fixed_conn *c = &conns[i];
            ssize_t got;

            if (p[2 + i].revents == 0)
                continue;
            got = recv(c->fd, c->buf + c->len, FIXED_BUF - c->len, 0);
            if (got > 0)
                c->len += (size_t)got;
            if (got <= 0 || !fixed_answer_requests(u, c)) {
                close(c->fd);
                if (i != n - 1)
                    memcpy(c, &conns[n - 1], sizeof *c);
                n--;
            }
        }
        if ((p[1].revents & POLLIN) && n < FIXED_MAX_CONNS) {
            int fd = accept(u->listen_fd, NULL, NULL);

            if (fd >= 0) {
                conns[n].fd = fd;
                conns[n].len = 0;
                n++;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        close(conns[i].fd);
    free(conns);
    return NULL;
}

static int fixed_start(struct fixed_upstream *u)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int one = 1;

    memset(u, 0, sizeof *u);
    u->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (u->listen_fd < 0)
        return -1;
    setsockopt(u->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(u->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(u->listen_fd, 64) != 0 ||
        getsockname(u->listen_fd, (struct sockaddr *)&a, &len) != 0 || pipe(u->wake) != 0) {
        close(u->listen_fd);
        return -1;
    }
    u->port = ntohs(a.sin_port);
    if (pthread_create(&u->thread, NULL, fixed_serve, u) != 0) {
        close(u->listen_fd);
        close(u->wake[0]);
        close(u->wake[1]);
        return -1;
    }
    return 0;
}

static void fixed_stop(struct fixed_upstream *u)
{
    ssize_t ignored = write(u->wake[1], "x", 1);

    (void)ignored;
    pthread_join(u->thread, NULL);
    close(u->listen_fd);
    close(u->wake[0]);
    close(u->wake[1]);
}

/* One field of the answer at `answer`: exactly once, with value `want` (or, when `want` is
 * NULL, a value other than `not`). */
static void expect_one_field(const char *label, const char *answer, const char *name,
                             const char *want, const char * not )
{
    const char *head = strstr(answer, "\r\n");
    char value[256];
    int n = head ? fields(head + 2, name, value, sizeof value) : 0;

    if (want != NULL)
        check_case(n == 1 && strcmp(value, want) == 0, label,
                   "%d %s field(s), the first \"%s\"; expected one, \"%s\"", n, name, value, want);
    else
        check_case(n == 1 && strcmp(value, not ) != 0, label,
                   "%d %s field(s), the first \"%s\"; expected one of sluice's own", n, name,
                   value);
}

/* Where sluice sets a family of rate-limit fields, the client gets sluice's and none of the
 * upstream's; the other family, and both where sluice sets none, pass untouched. */
static void test_upstream_fields(void)
{
    static const char cfg[] =
        "server: {listen: \"127.0.0.1:0\"}\n"
        "routes:\n"
        "  - name: f-ietf\n    match: {path_prefix: /f-ietf/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    headers: ietf\n"
        "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "  - name: f-xrl\n    match: {path_prefix: /f-xrl/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    headers: x-ratelimit\n"
        "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "  - name: f-both\n    match: {path_prefix: /f-both/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    headers: both\n"
        "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "  - name: f-none\n    match: {path_prefix: /f-none/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    headers: none\n"
        "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n"
        "  - name: f-unlimited\n    match: {path_prefix: /f-unlimited/}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    headers: both\n";
    static const struct {
        const char *path;
        bool sluice_ietf, sluice_x; /* sluice sets that family */
        const char *policy;         /* sluice's RateLimit-Policy */
    } cases[] = {
        {"/f-ietf/x", true, false, "\"f-ietf\";q=100;w=3600"},
        {"/f-xrl/x", false, true, NULL},
        {"/f-both/x", true, true, "\"f-both\";q=100;w=3600"},
        {"/f-none/x", false, false, NULL},
        /* No limit, so sluice sets no fields: the upstream's are all there is. */
        {"/f-unlimited/x", false, false, NULL},
    };
    struct fixed_upstream u;
    struct proc p;
    char *answer = malloc(ANSWER_CAP);

    if (fixed_start(&u) != 0) {
        CU_FAIL("the fixed upstream did not start");
        free(answer);
        return;
    }
    if (start_sluice(&p, cfg, u.port) != 0) {
        CU_FAIL("sluice did not start");
        fixed_stop(&u);
        free(answer);
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char request[256], label[96], ratelimit[128];
        unsigned long before = atomic_load(&u.requests);
        const char *name = cases[i].path + 1;
        int status, len;

        snprintf(label, sizeof label, "upstream fields through %s", cases[i].path);
        len = snprintf(request, sizeof request,
                       "GET %s HTTP/1.1\r\nHost: h\r\nX-API-Key: fields-%zu\r\n"
                       "Connection: close\r\n\r\n",
                       cases[i].path, i);
        status = raw_exchange(p.port, request, (size_t)len, answer, ANSWER_CAP, TIMEOUT_MS);
        check_case(status == 200, label, "status %d, expected 200: %.400s", status, answer);
        check_case(strcmp(raw_body(answer), "ok") == 0, label, "body \"%.100s\", expected ok",
                   raw_body(answer));
        check_case(atomic_load(&u.requests) == before + 1, label,
                   "the upstream answered %lu request(s), expected 1",
                   atomic_load(&u.requests) - before);
        if (cases[i].sluice_ietf) {
            long r = -1, t = -1;
            char value[256];
            const char *head = strstr(answer, "\r\n");
            int n = head ? fields(head + 2, "RateLimit", value, sizeof value) : 0;

            snprintf(ratelimit, sizeof ratelimit, "%.*s", (int)(strchr(name, '/') - name), name);
            expect_one_field(label, answer, "RateLimit-Policy", cases[i].policy, NULL);
            check_case(n == 1 && parse_ratelimit(value, ratelimit, &r, &t) && r == 99, label,
                       "%d RateLimit field(s), the first \"%s\"; expected one, \"%s\";r=99;t=...",
                       n, value, ratelimit);
        } else {
            expect_one_field(label, answer, "RateLimit-Policy", "\"up\";q=999;w=1", NULL);
            expect_one_field(label, answer, "RateLimit", "\"up\";r=5;t=1", NULL);
        }
        if (cases[i].sluice_x) {
            expect_one_field(label, answer, "X-RateLimit-Limit", "100", NULL);
            expect_one_field(label, answer, "X-RateLimit-Remaining", "99", NULL);
            expect_one_field(label, answer, "X-RateLimit-Reset", NULL, "86399");
        } else {
            expect_one_field(label, answer, "X-RateLimit-Limit", "999", NULL);
            expect_one_field(label, answer, "X-RateLimit-Remaining", "998", NULL);
            expect_one_field(label, answer, "X-RateLimit-Reset", "86399", NULL);
        }
    }
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
    fixed_stop(&u);
    free(answer);
}

/* --- denials by limit ------------------------------------------------------------------ */

/* Two limits on one route: each denial is counted against the limit that made it. */
static void test_limit_denials(void)
{
    double per_key = denials_metric(&gw, "two", "per_key");
    double per_ip = denials_metric(&gw, "two", "per_ip");
    double denied = requests_metric(&gw, "two", "denied");
    static const char *const addresses[] = {"203.0.113.1", "203.0.113.1", "203.0.113.1",
                                            "203.0.113.2", "203.0.113.3", "203.0.113.4",
                                            "203.0.113.5"};
    struct reply r;

    CU_ASSERT_TRUE_FATAL(per_key >= 0 && per_ip >= 0 && denied >= 0);
    /* One key from one address: per_ip (2) binds on the third. */
    for (int i = 0; i < 3; i++) {
        get(gw.port, "/two/x", "two-key", addresses[i], &r);
        check_case(r.status == (i < 2 ? 200 : 429), "per_ip", "request %d: status %ld", i + 1,
                   r.status);
        if (i == 0)
            check_case(header(&r, "RateLimit-Policy") != NULL &&
                           strcmp(header(&r, "RateLimit-Policy"),
                                  "\"per_key\";q=5;w=3600, \"per_ip\";q=2;w=3600") == 0,
                       "per_ip", "RateLimit-Policy %s", header(&r, "RateLimit-Policy"));
        if (i == 2)
            check_case(header(&r, "RateLimit") != NULL &&
                           strncmp(header(&r, "RateLimit"), "\"per_ip\";r=0;", 13) == 0,
                       "per_ip", "the 429's RateLimit %s, expected per_ip's",
                       header(&r, "RateLimit"));
        reply_free(&r);
    }
    check_case(denials_metric(&gw, "two", "per_ip") == per_ip + 1, "per_ip denied",
               "per_ip's denials went from %g to %g, expected +1", per_ip,
               denials_metric(&gw, "two", "per_ip"));
    check_case(denials_metric(&gw, "two", "per_key") == per_key, "per_ip denied",
               "per_key's denials went from %g to %g, expected no change", per_key,
               denials_metric(&gw, "two", "per_key"));

    /* The same key from new addresses: per_key (5) binds on its sixth charged request (the
     * refused one above was charged to neither). */
    for (int i = 3; i < 7; i++) {
        get(gw.port, "/two/x", "two-key", addresses[i], &r);
        check_case(r.status == (i < 6 ? 200 : 429), "per_key", "request %d: status %ld", i + 1,
                   r.status);
        if (i == 6)
            check_case(header(&r, "RateLimit") != NULL &&
                           strncmp(header(&r, "RateLimit"), "\"per_key\";r=0;", 14) == 0,
                       "per_key", "the 429's RateLimit %s, expected per_key's",
                       header(&r, "RateLimit"));
        reply_free(&r);
    }
    check_case(denials_metric(&gw, "two", "per_key") == per_key + 1, "per_key denied",
               "per_key's denials went from %g to %g, expected +1", per_key,
               denials_metric(&gw, "two", "per_key"));
    check_case(denials_metric(&gw, "two", "per_ip") == per_ip + 1, "per_key denied",
               "per_ip's denials went from %g to %g, expected +1 in all", per_ip,
               denials_metric(&gw, "two", "per_ip"));
    CU_ASSERT_EQUAL(requests_metric(&gw, "two", "denied"), denied + 2);
}

/* A plan's limits are PLAN/LIMIT; requests held to a plan are counted under it. */
static void test_plan_metrics(void)
{
    static const char cfg[] =
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
        "plans:\n"
        "  gold: {algorithm: fixed_window, requests: 1, per: 1h}\n"
        "  silver:\n"
        "    - {name: minute, algorithm: fixed_window, requests: 1, per: 1h}\n"
        "    - {name: day, algorithm: fixed_window, requests: 5, per: 1d}\n"
        "consumers:\n"
        "  - {name: acme, key: k1, plan: gold}\n"
        "  - {name: beta, key: k2, plan: silver}\n"
        "routes:\n"
        "  - name: paid\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
        "    plan: gold\n";
    static const struct {
        const char *series;
        double want;
    } expected[] = {
        {"sluice_limit_denials_total{route=\"paid\",limit=\"gold/gold\"}", 1},
        {"sluice_limit_denials_total{route=\"paid\",limit=\"silver/minute\"}", 1},
        {"sluice_limit_denials_total{route=\"paid\",limit=\"silver/day\"}", 0},
        {"sluice_requests_total{route=\"paid\",plan=\"gold\",decision=\"allowed\"}", 1},
        {"sluice_requests_total{route=\"paid\",plan=\"gold\",decision=\"denied\"}", 1},
        {"sluice_requests_total{route=\"paid\",plan=\"silver\",decision=\"allowed\"}", 1},
        {"sluice_requests_total{route=\"paid\",plan=\"silver\",decision=\"denied\"}", 1},
        /* the series without plan count the rest: none here */
        {"sluice_requests_total{route=\"paid\",decision=\"allowed\"}", 0},
        {"sluice_requests_total{route=\"paid\",decision=\"denied\"}", 0},
    };
    struct proc p;
    struct reply r;

    if (start_sluice(&p, cfg, upstream.port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        check_case(metric(&p, expected[i].series) == 0, expected[i].series,
                   "%g before any request, expected 0", metric(&p, expected[i].series));
    for (int i = 0; i < 2; i++) {
        get(p.port, "/x", "k1", NULL, &r);
        check_case(r.status == (i == 0 ? 200 : 429), "acme (gold)", "request %d: status %ld", i + 1,
                   r.status);
        check_case(header(&r, "RateLimit-Policy") != NULL &&
                       strstr(header(&r, "RateLimit-Policy"), ";q=1;w=3600") != NULL,
                   "acme (gold)", "RateLimit-Policy %s", header(&r, "RateLimit-Policy"));
        reply_free(&r);
        get(p.port, "/x", "k2", NULL, &r);
        check_case(r.status == (i == 0 ? 200 : 429), "beta (silver)", "request %d: status %ld",
                   i + 1, r.status);
        reply_free(&r);
    }
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        check_case(metric(&p, expected[i].series) == expected[i].want, expected[i].series,
                   "%g, expected %g", metric(&p, expected[i].series), expected[i].want);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

void register_answers_tests(void)
{
    CU_pSuite s = add_suite_with("answers", init, clean);

    add_test(s, "a route's deny: 403, upstream untouched, connection kept, counted",
             test_route_deny);
    add_test(s, "a denied request with an empty body keeps the connection",
             test_deny_empty_body_keeps_connection);
    add_test(s, "a deny list without the client proxies", test_route_deny_elsewhere_proxies);
    add_test(s, "deny lists judge the client behind a trusted proxy",
             test_deny_after_forwarded_for);
    add_test(s, "deny beats exempt", test_deny_beats_exempt);
    add_test(s, "server.deny covers every route", test_server_deny);
    add_test(s, "headers: ietf, x-ratelimit, both, none on 200s and 429s", test_header_modes);
    add_test(s, "server.headers is the default, a route's own wins", test_server_headers);
    add_test(s, "the upstream's fields of a family sluice sets never reach the client",
             test_upstream_fields);
    add_test(s, "buckets advertise their burst and refill time", test_bucket_quotas);
    add_test(s, "a sliding window counter's t is never over its w",
             test_counter_reset_within_window);
    add_test(s, "denials are counted by the limit that made them", test_limit_denials);
    add_test(s, "a plan's limits and requests are labelled by plan", test_plan_metrics);
}
