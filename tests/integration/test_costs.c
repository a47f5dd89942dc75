/* Costs per method, custom denials and the consumers file, through the real binary (config.h,
 * README "What clients see" and "Consumers and plans"):
 *   - cost: a request of a method takes that many units of a limit, all or none across the
 *     route's limits, in memory and in Redis; a denial charges nothing;
 *   - a cost above what the limit lets through at once is refused when the config loads;
 *   - on_limit: the denial's status, body (the file's bytes, read when the config loads) and
 *     Content-Type;
 *   - consumers_file: watched like the config; a change to it alone reloads, consumers keep
 *     their counts, and an invalid one is rejected with the old consumers serving on.
 * The files these configs name live in a directory of this suite's own under /tmp, named by a
 * path relative to the config's directory, which is /tmp (harness.c writes its configs to
 * /tmp/sluice-it-XXXXXX). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct redis redis;
static char dir[64];       /* /tmp/sluice-costs-XXXXXX */
static const char *subdir; /* its name, the path relative to /tmp: sluice-costs-XXXXXX */

static int init(void)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-costs-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    subdir = dir + strlen("/tmp/");
    return start_redis(&redis);
}

static int clean(void)
{
    char command[128];
    const char *keep = getenv("SLUICE_IT_KEEP");

    stop_redis(&redis);
    if (keep == NULL || keep[0] == '\0') {
        snprintf(command, sizeof command, "rm -rf '%s'", dir);
        if (system(command) != 0)
            fprintf(stderr, "cannot remove %s\n", dir);
    }
    return 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

/* `len` bytes of `data` into the file `name` of the suite's directory, in place. */
static void write_bytes(const char *name, const char *data, size_t len)
{
    char path[128];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* As an editor saves: a new file renamed over `name`. */
static void replace_file(const char *name, const char *text)
{
    char temporary[128], path[128];

    snprintf(temporary, sizeof temporary, "%s.new", name);
    write_bytes(temporary, text, strlen(text));
    snprintf(temporary, sizeof temporary, "%s/%s.new", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CU_ASSERT_EQUAL(rename(temporary, path), 0);
}

static unsigned long upstream_requests(void)
{
    unsigned long requests, connections;

    upstream_stats(&requests, &connections);
    return requests;
}

/* One request: `method` for `target`, from the client address `from` (X-Forwarded-For, none
 * when NULL) with X-API-Key `key` (none when NULL). Checks that it is answered `status`,
 * reaches the upstream exactly when allowed (200), and, when `ratelimit` is not NULL, that its
 * RateLimit field starts with it (`"name";r=N;t=`). */
static void expect(unsigned port, const char *method, const char *target, const char *from,
                   const char *key, long status, const char *ratelimit, const char *label)
{
    char key_field[128], from_field[128];
    const char *headers[3] = {NULL, NULL, NULL}, *seen;
    unsigned long before, after;
    struct reply r;
    int n = 0;

    if (key != NULL) {
        snprintf(key_field, sizeof key_field, "X-API-Key: %s", key);
        headers[n++] = key_field;
    }
    if (from != NULL) {
        snprintf(from_field, sizeof from_field, "X-Forwarded-For: %s", from);
        headers[n++] = from_field;
    }
    before = upstream_requests();
    http(port, method, target, headers, strcmp(method, "POST") == 0 ? "x=1" : NULL, &r);
    after = upstream_requests();
    check_case(r.status == status, label, "%s %s (key %s, from %s): status %ld, expected %ld",
               method, target, key ? key : "-", from ? from : "-", r.status, status);
    check_case(after - before == (status == 200 ? 1u : 0u), label,
               "%s %s answered %ld: the upstream got %lu requests", method, target, r.status,
               after - before);
    if (ratelimit != NULL) {
        seen = header(&r, "RateLimit");
        check_case(seen != NULL && strncmp(seen, ratelimit, strlen(ratelimit)) == 0, label,
                   "%s %s answered %ld: RateLimit %s, expected it to start with %s", method, target,
                   r.status, seen ? seen : "(none)", ratelimit);
    }
    reply_free(&r);
}

/* The RateLimit-Policy of a GET for `target` with X-API-Key `key` (none when NULL), checked
 * to be `policy`; the request counts as any other. */
static void expect_policy(unsigned port, const char *target, const char *key, const char *policy,
                          const char *label)
{
    char field[128];
    const char *headers[] = {field, NULL}, *seen;
    struct reply r;

    snprintf(field, sizeof field, "X-API-Key: %s", key ? key : "");
    http(port, "GET", target, key ? headers : NULL, NULL, &r);
    seen = header(&r, "RateLimit-Policy");
    check_case(seen != NULL && strcmp(seen, policy) == 0, label,
               "GET %s: RateLimit-Policy %s, expected %s (status %ld)", target,
               seen ? seen : "(none)", policy, r.status);
    reply_free(&r);
}

/* --- cost: ------------------------------------------------------------------------------- */

/* Every algorithm with cost {POST: 4, default: 1} on a quota of 10 (a window's requests, a
 * bucket's burst), in memory (/m/) and in Redis (/r/). The windows run per 1d, so that a
 * window boundary is unlikely to fall within the test. Then two limits on one route, each
 * POST costing 3: small per API key (5) and big per address (8), the address taken from
 * X-Forwarded-For (127.0.0.0/8 is trusted). */
#define COST_ROUTE(st, store, name, limit)                                                         \
    "  - name: " st "-" name "\n    match: {path_prefix: /" st "/" name "/}\n"                     \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: " store "\n"                              \
    "    limit: {" limit ", cost: {POST: 4, default: 1}}\n"
#define COST_ROUTES(st, store)                                                                     \
    COST_ROUTE(st, store, "fixed", "algorithm: fixed_window, requests: 10, per: 1d")               \
    COST_ROUTE(st, store, "log", "algorithm: sliding_window_log, requests: 10, per: 1d")           \
    COST_ROUTE(st, store, "counter", "algorithm: sliding_window_counter, requests: 10, per: 1d")   \
    COST_ROUTE(st, store, "bucket", "algorithm: token_bucket, requests: 100, per: 1h, burst: 10")  \
    COST_ROUTE(st, store, "gcra", "algorithm: gcra, requests: 100, per: 1h, burst: 10")            \
    "  - name: " st "-pair\n    match: {path_prefix: /" st "/pair/}\n"                             \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: " store "\n"                              \
    "    key: \"header:X-API-Key\"\n    limit:\n"                                                  \
    "      - {name: small, algorithm: fixed_window, requests: 5, per: 1d, cost: {POST: 3}}\n"      \
    "      - {name: big, algorithm: fixed_window, requests: 8, per: 1d, key: ip, "                 \
    "cost: {POST: 3}}\n"

static const char cost_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
    "trusted_proxies: [\"127.0.0.0/8\"]}\n"
    "limiter:\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s, prefix: \"%3$s\"}\n"
    "routes:\n" COST_ROUTES("m", "memory") COST_ROUTES("r", "redis");

/* Starts a gateway on cost_config whose Redis keys start with `prefix`, so that each test
 * starts afresh in the one Redis. */
static int start_cost_gateway(struct proc *gw, const char *prefix)
{
    return start_sluice(gw, cost_config, upstream.port, redis.port, prefix);
}

/* POST, POST, then a POST that needs 4 of the 2 left (denied, charging nothing), and GETs at
 * 1 each spending those 2. */
static void cost_sequence(unsigned port, const char *store, const char *name, const char *policy)
{
    char target[64], route[32], label[64], ratelimit[64];
    static const struct {
        const char *method;
        long status;
        int remaining;
    } steps[] = {
        {"POST", 200, 6}, {"POST", 200, 2}, {"POST", 429, 2},
        {"GET", 200, 1},  {"GET", 200, 0},  {"GET", 429, 0},
    };

    snprintf(route, sizeof route, "%s-%s", store, name);
    snprintf(target, sizeof target, "/%s/%s/x", store, name);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        snprintf(label, sizeof label, "%s, step %zu", route, i + 1);
        snprintf(ratelimit, sizeof ratelimit, "\"%s\";r=%d;t=", route, steps[i].remaining);
        expect(port, steps[i].method, target, NULL, NULL, steps[i].status, ratelimit, label);
    }
    /* The policy is the limit's, whatever a request costs. */
    snprintf(label, sizeof label, "%s, policy", route);
    expect_policy(port, target, NULL, policy, label);
}

static void test_cost_per_method(void)
{
    static const char *const stores[] = {"m", "r"};
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_cost_gateway(&gw, "cost_per_method:"), 0);
    for (int s = 0; s < 2; s++) {
        const char *st = stores[s];
        char policy[64];

        snprintf(policy, sizeof policy, "\"%s-fixed\";q=10;w=86400", st);
        cost_sequence(gw.port, st, "fixed", policy);
        snprintf(policy, sizeof policy, "\"%s-log\";q=10;w=86400", st);
        cost_sequence(gw.port, st, "log", policy);
        snprintf(policy, sizeof policy, "\"%s-counter\";q=10;w=86400", st);
        cost_sequence(gw.port, st, "counter", policy);
        /* A bucket's quota is its burst, refilled in burst * per / requests = 360 s. */
        snprintf(policy, sizeof policy, "\"%s-bucket\";q=10;w=360", st);
        cost_sequence(gw.port, st, "bucket", policy);
        snprintf(policy, sizeof policy, "\"%s-gcra\";q=10;w=360", st);
        cost_sequence(gw.port, st, "gcra", policy);
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A denied POST waits for its own cost: a bucket 2 units short of a POST's 4 (a unit back
 * every 36 s) says about 72 s, where a GET's one unit would be there now. */
static void test_retry_after_speaks_of_units(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_cost_gateway(&gw, "retry_after_speaks_of_units:"), 0);
    for (int s = 0; s < 2; s++) {
        char target[64], label[96];
        struct reply r;
        long wait_s;

        snprintf(target, sizeof target, "/%s/bucket/x", s == 0 ? "m" : "r");
        snprintf(label, sizeof label, "Retry-After of %s", target);
        expect(gw.port, "POST", target, NULL, NULL, 200, NULL, label);
        expect(gw.port, "POST", target, NULL, NULL, 200, NULL, label);
        http(gw.port, "POST", target, NULL, "x=1", &r);
        wait_s = header_number(&r, "Retry-After");
        check_case(r.status == 429 && wait_s >= 71 && wait_s <= 72, label,
                   "a POST 2 units short: status %ld, Retry-After %ld, expected 429 and 71-72",
                   r.status, wait_s);
        reply_free(&r);
        expect(gw.port, "GET", target, NULL, NULL, 200, NULL, label);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Two limits, each POST costing 3: a POST one of them denies is charged to neither. */
static void test_cost_all_or_none(void)
{
    static const char *const stores[] = {"m", "r"};
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_cost_gateway(&gw, "cost_all_or_none:"), 0);
    for (int s = 0; s < 2; s++) {
        const char *st = stores[s];
        char target[64], series[128], label[64];

        snprintf(target, sizeof target, "/%s/pair/x", st);
        snprintf(label, sizeof label, "%s-pair", st);
        /* small denies: key a has 2 of its 5 left, the address 10.0.0.1 5 of its 8. */
        expect(gw.port, "POST", target, "10.0.0.1", "a", 200, "\"small\";r=2;t=", label);
        expect(gw.port, "POST", target, "10.0.0.1", "a", 429, "\"small\";r=2;t=", label);
        /* Key b from the same address: small 4 left, big 4 had the denied POST cost it
         * nothing (else 1, and big would be named). */
        expect(gw.port, "GET", target, "10.0.0.1", "b", 200, "\"small\";r=4;t=", label);
        snprintf(series, sizeof series,
                 "sluice_limit_denials_total{route=\"%s-pair\",limit=\"small\"}", st);
        check_case(metric(&gw, series) == 1, label, "%s: %g, expected 1", series,
                   metric(&gw, series));
        snprintf(series, sizeof series,
                 "sluice_limit_denials_total{route=\"%s-pair\",limit=\"big\"}", st);
        check_case(metric(&gw, series) == 0, label, "%s: %g, expected 0", series,
                   metric(&gw, series));

        /* big denies: three keys from 10.0.0.2; the third POST finds 2 of big's 8 left. */
        expect(gw.port, "POST", target, "10.0.0.2", "c", 200, "\"small\";r=2;t=", label);
        expect(gw.port, "POST", target, "10.0.0.2", "d", 200, "\"small\";r=2;t=", label);
        expect(gw.port, "POST", target, "10.0.0.2", "e", 429, "\"big\";r=2;t=", label);
        /* Key e from another address: small has all 5 (4 after this GET) had the denied POST
         * cost it nothing (else 1 after this GET). */
        expect(gw.port, "GET", target, "10.0.0.3", "e", 200, "\"small\";r=4;t=", label);
        check_case(metric(&gw, series) == 1, label, "%s: %g, expected 1", series,
                   metric(&gw, series));
        expect_policy(gw.port, target, "f", "\"small\";q=5;w=86400, \"big\";q=8;w=86400", label);
    }
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A cost above what the limit lets through at once (requests for a window, burst for a
 * bucket) is refused when the config loads, at its place; one equal to it is accepted. */
static void test_cost_above_quota_refused(void)
{
    static const char bad[] =
        "server: {listen: \"127.0.0.1:0\"}\n"
        "routes:\n"
        "  - name: window\n    match: {path_prefix: /w/}\n    upstream: \"http://127.0.0.1:1\"\n"
        "    limit: {algorithm: fixed_window, requests: 10, per: 1h, cost: {POST: 11}}\n"
        "  - name: bucket\n    match: {path_prefix: /b/}\n    upstream: \"http://127.0.0.1:1\"\n"
        "    limit:\n"
        "      - {name: burst, algorithm: token_bucket, requests: 100, per: 1h, burst: 5,\n"
        "         cost: {GET: 2, default: 6}}\n";
    static const char good[] =
        "server: {listen: \"127.0.0.1:0\"}\n"
        "routes:\n"
        "  - name: window\n    match: {path_prefix: /w/}\n    upstream: \"http://127.0.0.1:1\"\n"
        "    limit: {algorithm: fixed_window, requests: 10, per: 1h, cost: {POST: 10}}\n"
        "  - name: bucket\n    match: {path_prefix: /b/}\n    upstream: \"http://127.0.0.1:1\"\n"
        "    limit:\n"
        "      - {name: burst, algorithm: token_bucket, requests: 100, per: 1h, burst: 5,\n"
        "         cost: {GET: 2, default: 5}}\n";
    char path[128], args[192], out[4096], expected[256];

    snprintf(path, sizeof path, "%s/cost.yaml", dir);
    write_bytes("cost.yaml", bad, sizeof bad - 1);
    for (int running = 0; running < 2; running++) {
        const char *how = running ? "running" : "--check";
        int rc;

        snprintf(args, sizeof args, "%s-c %s", running ? "" : "--check ", path);
        rc = run_sluice(args, out, sizeof out);
        check_case(rc == 1, how, "exit code %d, expected 1; it said: %s", rc, out);
        snprintf(expected, sizeof expected,
                 "%s:6:67: cost: 11 units is more than this limit lets through at once (10)", path);
        check_case(strstr(out, expected) != NULL, how, "expected \"%s\" in: %s", expected, out);
        snprintf(expected, sizeof expected,
                 "%s:12:16: cost: 6 units is more than this limit lets through at once (5)", path);
        check_case(strstr(out, expected) != NULL, how, "expected \"%s\" in: %s", expected, out);
        check_case(strstr(out, "listening on") == NULL, how, "it started listening: %s", out);
    }
    write_bytes("cost.yaml", good, sizeof good - 1);
    snprintf(args, sizeof args, "--check -c %s", path);
    check_case(run_sluice(args, out, sizeof out) == 0 && strstr(out, "OK") != NULL, "cost = quota",
               "a cost equal to the quota: %s", out);
}

/* --- on_limit ---------------------------------------------------------------------------- */

/* Bytes a text body might hold: UTF-8, CRLF, a NUL, no newline at the end. */
static const char busy_text[] = "Überlastet.\r\n\r\nBitte später noch einmal.\0(NUL above)\tend";
static const char busy_json[] = "{\"error\": \"slow down\", \"code\": 42}\n";

static const char on_limit_config[] =
    "server: {listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: busy\n    match: {path_prefix: /busy/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1d}\n"
    "    on_limit: {status: 503, body_file: %2$s/busy.txt,\n"
    "               content_type: \"text/plain; charset=utf-8\"}\n"
    "  - name: json\n    match: {path_prefix: /json/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: token_bucket, requests: 1, per: 1h}\n"
    "    on_limit: {status: 429, body_file: \"%2$s/slow.json\", content_type: application/json}\n"
    "  - name: shed\n    match: {path_prefix: /shed/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1d}\n"
    "    on_limit: {status: 503}\n";

/* A denied GET for `target` is answered `status` with `type` and exactly `len` bytes of
 * `body`, Retry-After and the RateLimit fields, keeps its connection, and never reaches the
 * upstream. */
static void expect_denial(unsigned port, const char *target, long status, const char *type,
                          const char *body, size_t len, const char *label)
{
    unsigned long before = upstream_requests();
    const char *seen;
    struct reply r;

    http(port, "GET", target, NULL, NULL, &r);
    check_case(r.status == status, label, "status %ld, expected %ld", r.status, status);
    seen = header(&r, "Content-Type");
    check_case(seen != NULL && strcmp(seen, type) == 0, label, "Content-Type %s, expected %s",
               seen ? seen : "(none)", type);
    check_case(r.body_len == len && memcmp(r.body, body, len) == 0, label,
               "body of %zu bytes \"%.*s\", expected the file's %zu bytes \"%.*s\"", r.body_len,
               (int)r.body_len, r.body, len, (int)len, body);
    seen = header(&r, "Content-Length");
    check_case(seen != NULL && strtoul(seen, NULL, 10) == len, label,
               "Content-Length %s, expected %zu", seen ? seen : "(none)", len);
    seen = header(&r, "Retry-After");
    check_case(header_number(&r, "Retry-After") >= 1, label, "Retry-After %s",
               seen ? seen : "(none)");
    check_case(header(&r, "RateLimit") != NULL && header(&r, "RateLimit-Policy") != NULL, label,
               "the RateLimit fields are gone: %s", r.head);
    check_case(header(&r, "Connection") == NULL, label, "Connection: %s",
               header(&r, "Connection") ? header(&r, "Connection") : "");
    check_case(upstream_requests() == before, label, "the upstream got the denied request");
    reply_free(&r);
}

/* Two denied requests on one connection, the second closing it: both answered `status`, the
 * first with exactly `len` bytes of `body` and nothing between it and the second answer. */
static void expect_denials_on_one_connection(unsigned port, const char *target, long status,
                                             const char *body, size_t len, const char *label)
{
    char request[256], answer[8192], status_line[32], *end;
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: t\r\n\r\n"
                     "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                     target, target);

    memset(answer, 0, sizeof answer);
    snprintf(status_line, sizeof status_line, "HTTP/1.1 %ld ", status);
    raw_exchange(port, request, (size_t)n, answer, sizeof answer, 5000);
    check_case(strncmp(answer, status_line, strlen(status_line)) == 0, label,
               "the first answer: %.300s", answer);
    end = strstr(answer, "\r\n\r\n");
    if (end == NULL) {
        check_case(false, label, "no whole answer: %.300s", answer);
        return;
    }
    end += 4;
    check_case(end + len + strlen(status_line) < answer + sizeof answer &&
                   memcmp(end, body, len) == 0 &&
                   strncmp(end + len, status_line, strlen(status_line)) == 0,
               label, "the first body then the second answer on the same connection: %.600s", end);
}

static void test_on_limit_answers(void)
{
    static const char busy_text_2[] = "Wartungsfenster: zurück um 14:00.\n";
    struct proc gw;

    write_bytes("busy.txt", busy_text, sizeof busy_text - 1);
    write_bytes("slow.json", busy_json, sizeof busy_json - 1);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, on_limit_config, upstream.port, subdir), 0);

    expect(gw.port, "GET", "/busy/x", NULL, NULL, 200, "\"busy\";r=0;t=", "503 text");
    expect_denial(gw.port, "/busy/x", 503, "text/plain; charset=utf-8", busy_text,
                  sizeof busy_text - 1, "503 text");
    expect_denials_on_one_connection(gw.port, "/busy/x", 503, busy_text, sizeof busy_text - 1,
                                     "503 text, one connection");

    expect(gw.port, "GET", "/json/x", NULL, NULL, 200, "\"json\";r=0;t=", "429 json");
    expect_denial(gw.port, "/json/x", 429, "application/json", busy_json, sizeof busy_json - 1,
                  "429 json");
    expect_denials_on_one_connection(gw.port, "/json/x", 429, busy_json, sizeof busy_json - 1,
                                     "429 json, one connection");

    /* Without a body file, the problem+json body says the status sent. */
    {
        struct reply r;

        expect(gw.port, "GET", "/shed/x", NULL, NULL, 200, "\"shed\";r=0;t=", "503 problem");
        http(gw.port, "GET", "/shed/x", NULL, NULL, &r);
        CU_ASSERT_EQUAL(r.status, 503);
        CU_ASSERT(r.body != NULL && strstr(r.body, "\"status\":503") != NULL &&
                  strstr(r.body, "\"title\":\"Service Unavailable\"") != NULL);
        CU_ASSERT(header(&r, "Retry-After") != NULL);
        reply_free(&r);
    }

    /* The body is read when the config loads: an edit alone changes nothing... */
    write_bytes("busy.txt", busy_text_2, sizeof busy_text_2 - 1);
    expect_denial(gw.port, "/busy/x", 503, "text/plain; charset=utf-8", busy_text,
                  sizeof busy_text - 1, "body file edited, config not");
    /* ...until the config, unchanged, is saved again: the new body, and the client's state
     * kept (the limit is unchanged), so still denied. */
    rewrite_config(&gw, false, on_limit_config, upstream.port, subdir);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    expect_denial(gw.port, "/busy/x", 503, "text/plain; charset=utf-8", busy_text_2,
                  sizeof busy_text_2 - 1, "after the reload");
    expect_denial(gw.port, "/json/x", 429, "application/json", busy_json, sizeof busy_json - 1,
                  "429 json after the reload");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- consumers_file ---------------------------------------------------------------------- */

static const char consumers_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "plans:\n"
    "  free: {algorithm: fixed_window, requests: 2, per: 1d}\n"
    "consumers_file: %2$s/consumers.yaml\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    plan: free\n";

static void test_consumers_file(void)
{
    char expected[256];
    struct proc gw;

    replace_file("consumers.yaml", "consumers:\n"
                                   "  - {name: bob, key: bob-key, plan: free}\n");
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, consumers_config, upstream.port, subdir), 0);
    expect(gw.port, "GET", "/api/x", NULL, "bob-key", 200, "\"free\";r=1;t=", "bob");
    expect(gw.port, "GET", "/api/x", NULL, "unknown-key", 401, NULL, "an unknown key");
    expect(gw.port, "GET", "/api/x", NULL, NULL, 401, NULL, "no key");
    expect(gw.port, "GET", "/api/x", NULL, "carol-key", 401, NULL, "carol, not yet a consumer");
    expect(gw.port, "GET", "/api/x", NULL, "bob-key", 200, "\"free\";r=0;t=", "bob");

    /* Only the consumers file changes, as an editor saves it. */
    replace_file("consumers.yaml", "consumers:\n"
                                   "  - {name: bob, key: bob-key, plan: free}\n"
                                   "  - {name: carol, key: carol-key, plan: free}\n");
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    expect(gw.port, "GET", "/api/x", NULL, "carol-key", 200, "\"free\";r=1;t=", "carol added");
    expect(gw.port, "GET", "/api/x", NULL, "bob-key", 429,
           "\"free\";r=0;t=", "bob's count kept across the reload");
    expect(gw.port, "GET", "/api/x", NULL, "unknown-key", 401, NULL, "still unknown");

    /* A consumer without a plan: the reload is rejected, at its place in that file. */
    replace_file("consumers.yaml", "consumers:\n"
                                   "  - {name: bob, key: bob-key, plan: free}\n"
                                   "  - {name: carol, key: carol-key, plan: free}\n"
                                   "  - {name: dave, key: dave-key}\n");
    CU_ASSERT_TRUE(wait_for_log(&gw, "reload rejected", 1, 3000));
    snprintf(expected, sizeof expected,
             "reload rejected: %s/consumers.yaml:4:5: consumer: name, key and plan are all "
             "required",
             dir);
    check_case(wait_for_log(&gw, expected, 1, 0), "an invalid consumers file",
               "expected \"%s\" in the log", expected);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"failure\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 1);
    expect(gw.port, "GET", "/api/x", NULL, "carol-key", 200,
           "\"free\";r=0;t=", "carol after the rejected reload");
    expect(gw.port, "GET", "/api/x", NULL, "carol-key", 429, NULL, "carol spent");
    expect(gw.port, "GET", "/api/x", NULL, "bob-key", 429, NULL, "bob after the rejected reload");
    expect(gw.port, "GET", "/api/x", NULL, "dave-key", 401, NULL, "dave was never added");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_costs_tests(void)
{
    CU_pSuite s = add_suite_with("costs", init, clean);

    add_test(s, "cost per method, every algorithm, memory and Redis", test_cost_per_method);
    add_test(s, "a denied request waits for its cost", test_retry_after_speaks_of_units);
    add_test(s, "two limits with costs: all or none", test_cost_all_or_none);
    add_test(s, "a cost above the quota is refused at load", test_cost_above_quota_refused);
    add_test(s, "on_limit: status, body file, content type", test_on_limit_answers);
    add_test(s, "consumers_file: watched, counts kept, errors rejected", test_consumers_file);
}
