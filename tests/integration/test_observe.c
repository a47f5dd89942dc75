/* What operators watch: /metrics, /healthz, /readyz and the access log; and several limits
 * on one route. */
#include <curl/curl.h>
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct proc gw;

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: limited\n    match: {path_prefix: /limited/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: dry\n    match: {path_prefix: /dry/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    dry_run: true\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: exempt\n    match: {path_prefix: /exempt/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    exempt: [\"127.0.0.1\"]\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: dead\n    match: {path_prefix: /dead/}\n    upstream: \"http://127.0.0.1:1\"\n"
    "  - name: codes\n    match: {path_prefix: /status/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "  - name: slow\n    match: {path_prefix: /slow}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    timeout: 200ms\n"
    "  - name: layered\n    match: {path_prefix: /layered/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit:\n"
    "      - {name: burst, algorithm: token_bucket, requests: 2, per: 1s}\n"
    "      - {name: daily, algorithm: fixed_window, requests: 3, per: 1d}\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static void test_metrics_count(void)
{
    struct reply r;

    CU_ASSERT_EQUAL(get_status(gw.port, "/limited/a?secret=1", "key-one"), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/limited/a", "key-one"), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/dry/a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/dry/a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/exempt/a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/dead/a", NULL), 502);
    CU_ASSERT_EQUAL(get_status(gw.port, "/slow?ms=2000", NULL), 504);
    CU_ASSERT_EQUAL(get_status(gw.port, "/limited/a", "key-two"), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/status/503", NULL), 503);

    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"limited\",decision=\"allowed\"}"),
                    2);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"limited\",decision=\"denied\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"dry\",decision=\"allowed\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"dry\",decision=\"dry_run_denied\"}"),
                    1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_total{route=\"exempt\",decision=\"exempt\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_upstream_responses_total{route=\"limited\",code=\"200\"}"),
                    2);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_upstream_responses_total{route=\"codes\",code=\"503\"}"),
                    1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_upstream_errors_total{route=\"dead\",kind=\"connect\"}"),
                    1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_upstream_errors_total{route=\"slow\",kind=\"timeout\"}"),
                    1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_upstream_errors_total{route=\"slow\",kind=\"other\"}"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_request_duration_seconds_count{route=\"limited\"}"), 3);
    CU_ASSERT_EQUAL(
        metric(&gw, "sluice_request_duration_seconds_bucket{route=\"limited\",le=\"+Inf\"}"), 3);
    CU_ASSERT_TRUE(metric(&gw, "sluice_request_duration_seconds_sum{route=\"slow\"}") >= 0.2);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_limiter_clients{route=\"limited\"}"), 2);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_limiter_evictions_total{route=\"limited\"}"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 0);
    CU_ASSERT_TRUE(metric(&gw, "sluice_connections_active") >= 0);

    http(gw.admin_port, "GET", "/metrics", NULL, NULL, &r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "# TYPE sluice_request_duration_seconds histogram\n"));
    expect_header(&r, "Content-Type", "text/plain; version=0.0.4");
    reply_free(&r);
}

/* One route per outcome: what each request got, where it went, and the same word for it in
 * the access log and in sluice_requests_total. */
static const char outcomes_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "plans:\n  gold: {algorithm: token_bucket, requests: 100, per: 1m}\n"
    "consumers:\n  - {name: acme, key: acme-key, plan: gold}\n"
    "routes:\n"
    "  - name: lim\n    match: {path_prefix: /lim/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: dry\n    match: {path_prefix: /dry/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    dry_run: true\n    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: ex\n    match: {path_prefix: /ex/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    exempt: [\"127.0.0.1\"]\n    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: keyed\n    match: {path_prefix: /keyed/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: \"header:X-API-Key\"\n    plan: gold\n"
    "  - name: queried\n    match: {path_prefix: /q/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: \"query:api_key\"\n    plan: gold\n"
    "  - name: walled\n    match: {path_prefix: /walled/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    deny: [\"127.0.0.0/8\"]\n"
    "  - name: dead\n    match: {path_prefix: /dead/}\n    upstream: \"http://127.0.0.1:1\"\n";

struct outcome_case {
    const char *target, *route, *header, *header2; /* header2: a second X-API-Key, or NULL */
    long status;
    const char *decision;
    unsigned forwarded; /* requests the upstream receives for it */
};

static void test_outcomes_named_alike(void)
{
    static const struct outcome_case cases[] = {
        {"/lim/first", "lim", NULL, NULL, 200, "allowed", 1},
        {"/lim/second", "lim", NULL, NULL, 429, "denied", 0},
        {"/dry/first", "dry", NULL, NULL, 200, "allowed", 1},
        {"/dry/second", "dry", NULL, NULL, 200, "dry_run_denied", 1},
        {"/ex/first", "ex", NULL, NULL, 200, "exempt", 1},
        {"/keyed/none", "keyed", NULL, NULL, 401, "unauthenticated", 0},
        {"/keyed/unknown", "keyed", "X-API-Key: nobody", NULL, 401, "unauthenticated", 0},
        {"/keyed/twice", "keyed", "X-API-Key: acme-key", "X-API-Key: acme-key", 400, "refused", 0},
        {"/q/none", "queried", NULL, NULL, 401, "unauthenticated", 0},
        {"/q/unknown?api_key=nobody", "queried", NULL, NULL, 401, "unauthenticated", 0},
        {"/walled/in", "walled", NULL, NULL, 403, "forbidden", 0},
        {"/dead/end", "dead", NULL, NULL, 502, "failed", 0},
    };
    struct proc p;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&p, outcomes_config, upstream.port), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct outcome_case *c = &cases[i];
        const char *headers[] = {c->header, c->header2, NULL};
        unsigned long before, after, connections;
        char want[64], path[64], *line;
        struct reply r;

        upstream_stats(&before, &connections);
        CU_ASSERT_EQUAL(http(p.port, "GET", c->target, headers, NULL, &r), 0);
        upstream_stats(&after, &connections);
        check_case(r.status == c->status, c->target, "status %ld, not %ld", r.status, c->status);
        check_case(after - before == c->forwarded, c->target, "the upstream got %lu requests",
                   after - before);
        /* A 401 names the credential the route expects (RFC 9110 11.6.1). */
        if (c->status == 401)
            expect_header(&r, "WWW-Authenticate",
                          strcmp(c->route, "keyed") == 0 ? "ApiKey header=\"X-API-Key\""
                                                         : "ApiKey query=\"api_key\"");
        else
            CU_ASSERT_PTR_NULL(header(&r, "WWW-Authenticate"));
        reply_free(&r);
        snprintf(want, sizeof want, "\"decision\":\"%s\"", c->decision);
        snprintf(path, sizeof path, "%.*s", (int)strcspn(c->target, "?"), c->target);
        line = access_log_line(&p, path);
        check_case(line != NULL && strstr(line, want) != NULL, c->target, "logged %s",
                   line ? line : "nothing");
        free(line);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char series[128];
        double n = 0;

        snprintf(series, sizeof series, "sluice_requests_total{route=\"%s\",decision=\"%s\"}",
                 cases[i].route, cases[i].decision);
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
            n += strcmp(cases[j].route, cases[i].route) == 0 &&
                 strcmp(cases[j].decision, cases[i].decision) == 0;
        check_case(metric(&p, series) == n, series, "%.0f, not %.0f", metric(&p, series), n);
    }
    /* A limit is a series only where it can count: a plan's on the route that names
     * consumers, never on one that does not; and not the consumer route's own limits, which
     * with unknown_key: reject decide nothing. */
    CU_ASSERT_EQUAL(metric(&p, "sluice_limit_denials_total{route=\"keyed\",limit=\"gold/gold\"}"),
                    0);
    CU_ASSERT_EQUAL(metric(&p, "sluice_limit_denials_total{route=\"keyed\",limit=\"gold\"}"), -1);
    CU_ASSERT_EQUAL(metric(&p, "sluice_limit_denials_total{route=\"lim\",limit=\"gold/gold\"}"),
                    -1);
    CU_ASSERT_EQUAL(metric(&p, "sluice_limit_denials_total{route=\"lim\",limit=\"lim\"}"), 1);
    /* The words of old are gone. */
    CU_ASSERT_EQUAL(metric(&p, "sluice_requests_total{route=\"walled\",decision=\"blocked\"}"), -1);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

/* The file descriptors `pid` has open, as /proc counts them. */
static long fds_of(pid_t pid)
{
    char path[64];
    DIR *dir;
    long n = 0;

    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    dir = opendir(path);
    for (struct dirent *e = dir ? readdir(dir) : NULL; e != NULL; e = readdir(dir))
        n += e->d_name[0] != '.';
    if (dir != NULL)
        closedir(dir);
    return dir != NULL ? n : -1;
}

/* sluice_build_info names the versions it runs with (libcurl's is the one this test links),
 * and the process_* series agree with what /proc says of the process. */
static void test_build_and_process_metrics(void)
{
    char version[64], series[256], *end;
    struct reply r;
    double rss, fds, started;
    long kib;

    CU_ASSERT_EQUAL_FATAL(run_sluice("--version", version, sizeof version), 0);
    end = strchr(version, '\n');
    if (end != NULL)
        *end = '\0';
    CU_ASSERT_EQUAL(http(gw.admin_port, "GET", "/metrics", NULL, NULL, &r), 0);
    snprintf(series, sizeof series, "\nsluice_build_info{version=\"%s\",libmicrohttpd=\"",
             strchr(version, ' ') + 1);
    check_case(strstr(r.body, series) != NULL, "sluice_build_info", "no %s in it", series + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"} 1\n# HELP process_cpu_seconds_total"));
    snprintf(series, sizeof series, ",libcurl=\"%s\",hiredis=\"",
             curl_version_info(CURLVERSION_NOW)->version);
    check_case(strstr(r.body, series) != NULL, "sluice_build_info", "no %s in it", series);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, ",libyaml=\"0."));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "# TYPE process_cpu_seconds_total counter\n"));
    reply_free(&r);

    fds = metric(&gw, "process_open_fds");
    check_case(fds > 3 && fds - fds_of(gw.pid) <= 2 && fds_of(gw.pid) - fds <= 2, "open fds",
               "%g, /proc counts %ld", fds, fds_of(gw.pid));
    rss = metric(&gw, "process_resident_memory_bytes");
    kib = proc_kib(gw.pid, "VmRSS");
    check_case(kib > 0 && rss > 0.8 * kib * 1024 && rss < 1.25 * kib * 1024, "resident memory",
               "%g bytes, VmRSS %ld kB", rss, kib);
    started = metric(&gw, "process_start_time_seconds");
    check_case(started > (double)time(NULL) - 3600 && started <= (double)time(NULL) + 1,
               "start time", "%f, now %ld", started, (long)time(NULL));
    CU_ASSERT_TRUE(metric(&gw, "process_cpu_seconds_total") >= 0);
    CU_ASSERT_TRUE(metric(&gw, "process_virtual_memory_bytes") >= rss);
    CU_ASSERT_TRUE(metric(&gw, "process_max_fds") >= fds);
}

/* The keys of the JSON object in `text`, in order, joined by commas into `out`. */
static void keys_of(const char *text, char *out, size_t cap)
{
    struct json_object *o = json_tokener_parse(text);
    size_t len = 0;

    out[0] = '\0';
    if (o == NULL)
        return;
    json_object_object_foreach(o, key, value)
    {
        (void)value;
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? "," : "", key);
    }
    json_object_put(o);
}

/* The README's access-log sample has the fields a real line has, in the same order. */
static void test_readme_access_log_sample(void)
{
    char *readme = read_file("README.md"), *sample, *real, want[1024], shown[1024];

    CU_ASSERT_EQUAL(get_status(gw.port, "/limited/sample", "key-sample"), 200);
    real = access_log_line(&gw, "/limited/sample");
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    CU_ASSERT_PTR_NOT_NULL_FATAL(real);
    sample = strstr(readme, "\n{\"time\":\"2026-11-30T10:00:00.123Z\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sample);
    *strchr(sample + 1, '\n') = '\0';
    keys_of(real, want, sizeof want);
    keys_of(sample + 1, shown, sizeof shown);
    check_case(strcmp(want, shown) == 0, "README's access log sample", "has %s, a line has %s",
               shown, want);
    free(readme);
    free(real);
}

/* A request waiting for its upstream is in flight until its answer has been sent. */
static void test_requests_in_flight(void)
{
    static const char request[] = "GET /slow?ms=2000 HTTP/1.1\r\nHost: t\r\n\r\n";
    char answer[512];
    int fd = raw_connect(gw.port);
    double seen = 0;
    ssize_t n;

    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_requests_in_flight"), 0);
    CU_ASSERT_EQUAL(write(fd, request, sizeof request - 1), (ssize_t)sizeof request - 1);
    for (int waited = 0; seen != 1 && waited < 1000; waited += 5) {
        seen = metric_now(&gw, "sluice_requests_in_flight");
        sleep_ms(5);
    }
    check_case(seen == 1, "waiting for the upstream", "in flight: %g, expected 1", seen);
    n = read(fd, answer, sizeof answer - 1); /* the route's 200 ms timeout: a 504 */
    answer[n > 0 ? n : 0] = '\0';
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "HTTP/1.1 504 "));
    close(fd);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_requests_in_flight"), 0);
}

static void test_health_endpoints(void)
{
    struct reply r;

    http(gw.admin_port, "GET", "/healthz", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    http(gw.admin_port, "GET", "/readyz", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    http(gw.admin_port, "GET", "/elsewhere", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 404);
    reply_free(&r);
    /* The proxied port never serves them: there /metrics is just a path with no route. */
    http(gw.port, "GET", "/metrics", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 404);
    CU_ASSERT_PTR_NULL(strstr(r.body, "sluice_requests_total"));
    reply_free(&r);
}

/* The string `name` of `o`, or "" when it is missing or not a string: a check then fails
 * rather than the run crash. */
static const char *string_field(struct json_object *o, const char *name)
{
    struct json_object *v;

    if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_string))
        return "";
    return json_object_get_string(v);
}

/* Every line is a JSON object with the promised fields; no API key and no query in it. */
static void test_access_log_is_json(void)
{
    char *log, *line, *save = NULL;
    int lines = 0, denied = 0;

    /* Lines are written by the log's own thread: wait for the last request's. */
    for (int i = 0; i < 100; i++) {
        log = read_file(gw.access_path);
        if (log != NULL && strstr(log, "/limited/a") != NULL)
            break;
        free(log);
        log = NULL;
        sleep_ms(20);
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_PTR_NULL(strstr(log, "key-one"));
    CU_ASSERT_PTR_NULL(strstr(log, "secret"));
    for (line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        enum json_tokener_error error;
        struct json_object *o = json_tokener_parse_verbose(line, &error), *v;
        const char *fields[] = {"time",        "route",    "method",          "path",
                                "status",      "decision", "upstream_status", "upstream_ms",
                                "duration_ms", "bytes",    "client",          "limit",
                                "user_agent",  "host",     "decided_ns",      "keys"};

        CU_ASSERT_PTR_NOT_NULL(o);
        if (o == NULL) {
            fprintf(stderr, "not JSON: %s\n", line);
            continue;
        }
        lines++;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            CU_ASSERT_TRUE(json_object_object_get_ex(o, fields[i], NULL));
        if (strcmp(string_field(o, "decision"), "denied") == 0) {
            denied++;
            json_object_object_get_ex(o, "status", &v);
            CU_ASSERT_EQUAL(json_object_get_int(v), 429);
            CU_ASSERT_STRING_EQUAL(string_field(o, "path"), "/limited/a");
            /* by default, the address */
            CU_ASSERT_STRING_EQUAL(string_field(o, "client"), "127.0.0.1");
            json_object_object_get_ex(o, "upstream_status", &v);
            CU_ASSERT_EQUAL(json_object_get_int(v), 0);
        }
        json_object_put(o);
    }
    CU_ASSERT_TRUE(lines >= 8);
    CU_ASSERT_TRUE(denied >= 1);
    free(log);
}

/* A burst limit and a daily one: both policies advertised, the binding one reported, and a
 * request refused by one is charged to neither. */
static void test_several_limits(void)
{
    struct reply r;

    http(gw.port, "GET", "/layered/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    expect_header(&r, "RateLimit-Policy", "\"burst\";q=2;w=1, \"daily\";q=3;w=86400");
    expect_header_has(&r, "RateLimit", "\"burst\";r=1;");
    reply_free(&r);
    CU_ASSERT_EQUAL(get_status(gw.port, "/layered/x", NULL), 200);
    http(gw.port, "GET", "/layered/x", NULL, NULL, &r); /* the burst is spent */
    CU_ASSERT_EQUAL(r.status, 429);
    expect_header_has(&r, "RateLimit", "\"burst\";r=0;");
    expect_header(&r, "Retry-After", "1");
    reply_free(&r);
    sleep_ms(1000);
    /* The day allows one more; had the refused request been charged to it, none. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/layered/x", NULL), 200);
    http(gw.port, "GET", "/layered/x", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 429);
    expect_header_has(&r, "RateLimit", "\"daily\";r=0;");
    CU_ASSERT_TRUE(header_number(&r, "Retry-After") > 1);
    reply_free(&r);
}

void register_observe_tests(void)
{
    CU_pSuite s = add_suite_with("observe", init, clean);

    add_test(s, "every metric is there and counts", test_metrics_count);
    add_test(s, "a request waiting upstream is in flight", test_requests_in_flight);
    add_test(s, "/healthz, /readyz, and only on the admin port", test_health_endpoints);
    add_test(s, "access log lines are JSON without secrets", test_access_log_is_json);
    add_test(s, "several limits on one route", test_several_limits);
    add_test(s, "the README's access log sample has every field", test_readme_access_log_sample);
    add_test(s, "sluice_build_info and process_* tell the truth", test_build_and_process_metrics);
    add_test(s, "every outcome named alike in the access log and the metrics",
             test_outcomes_named_alike);
}
