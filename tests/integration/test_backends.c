/* Upstreams as real backends (issue 15): a route's several servers seen from outside. Which
 * server each request goes to by balance; a server killed under load skipped and, once back,
 * let in again by one probe; which methods are retried, on which server, for which outcomes,
 * within what budget, and never charged to the limiter twice; active health checks flipping a
 * server; panic mode and /readyz; what reaches the wire under strip_prefix, host:,
 * set_headers and remove_headers; and every upstream_error code made to happen on purpose.
 *
 * The servers are recorders in this process (recorder.h): a, b and c, started once for the
 * suite and put back to plain 200 answers before each case. The dead servers are loopback
 * ports held, for the whole suite, by sockets bound but never listening: a connection to one
 * is refused, and no other process can come to listen there meanwhile. Each case checks what
 * the client got, what each server received (the recorder's bytes and counts), and the access
 * log and metrics where the behaviour shows there. Sequential requests make round_robin's
 * choices exact (one step of its schedule per choice, backends.h), so most counts below are
 * exact; the random balances are held to wide bounds, and time enters only as generous bounds
 * or as what sluice's own log stamps say: a check that needs "within fail_timeout" counts from
 * the event it follows, so that a slow machine makes it allow more, never skip. */
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define N_RECS     3
#define ANSWER_CAP (64 * 1024)
#define TIMEOUT_MS 5000
#define NOT_READY  "a route has no upstream server believed healthy\n"

/* What sluice adds to what a client on 127.0.0.1 sends (as in test_upstream_edge.c). */
#define FORWARDED_BY(host)                                                                         \
    "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: " host "\r\n"

static struct recorder recs[N_RECS]; /* a, b, c */
static int dead_fds[2] = {-1, -1};
static unsigned dead[2]; /* their ports */
static struct proc gw;

/* Every config's server mapping: both ports picked by the kernel. */
#define SERVER "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"

/* A loopback port bound by `*fd`, which does not listen: connections to it are refused. */
static unsigned dead_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;

    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd >= 0 && bind(*fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(*fd, (struct sockaddr *)&a, &len) == 0)
        return ntohs(a.sin_port);
    return 0;
}

static int clean(void)
{
    for (int i = 0; i < N_RECS; i++)
        recorder_stop(&recs[i]);
    for (int i = 0; i < 2; i++)
        if (dead_fds[i] >= 0)
            close(dead_fds[i]);
    dead_fds[0] = dead_fds[1] = -1;
    return 0;
}

static int init(void)
{
    for (int i = 0; i < N_RECS; i++)
        if (recorder_start(&recs[i]) != 0) {
            clean();
            return -1;
        }
    for (int i = 0; i < 2; i++)
        if ((dead[i] = dead_port(&dead_fds[i])) == 0) {
            clean();
            return -1;
        }
    return 0;
}

/* Each recorder back to plain "200 ok" answers at once, its bytes and counts forgotten. */
static void recorders_plain(void)
{
    for (int i = 0; i < N_RECS; i++) {
        recorder_set_mode(&recs[i], RECORDER_NORMAL);
        recorder_set_close_at(&recs[i], 2);
        recorder_set_head_size(&recs[i], 20 * 1024);
        recorder_set_delay(&recs[i], 0);
        recorder_set_status(&recs[i], 200);
        recorder_set_path_status(&recs[i], NULL, 0);
        recorder_reset(&recs[i]);
    }
}

static void stop_gateway(void)
{
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A server's URL as sluice names it in logs and labels: http://127.0.0.1:PORT plus `base`. */
struct url {
    char text[96];
};

static struct url url_of(unsigned port, const char *base)
{
    struct url u;

    snprintf(u.text, sizeof u.text, "http://127.0.0.1:%u%s", port, base);
    return u;
}

/* --- clients --------------------------------------------------------------------------- */

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

/* A run of GETs, one after another, on one kept-alive connection (or, `fresh`, each on a new
 * one); another thread may watch `done` grow. */
struct load {
    unsigned port;
    const char *target;
    int n;
    bool fresh;
    atomic_int done; /* requests answered (or failed) so far */
    int ok;          /* answered 200 */
    long other;      /* the first other status; -1 for no answer; 0 when none */
};

static void run_load(struct load *l)
{
    CURL *curl = curl_easy_init();
    char url[512];

    l->ok = 0;
    l->other = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", l->port, l->target);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, l->fresh ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, l->fresh ? 1L : 0L);
    for (int i = 0; i < l->n; i++) {
        long status = 0;

        if (curl_easy_perform(curl) == CURLE_OK)
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200)
            l->ok++;
        else if (l->other == 0)
            l->other = status != 0 ? status : -1;
        atomic_fetch_add(&l->done, 1);
    }
    curl_easy_cleanup(curl);
}

static void *load_thread(void *arg)
{
    run_load(arg);
    return NULL;
}

/* `n` GETs of `target` on one connection; how many got 200 (*other as struct load says). */
static int get_many(const char *target, int n, long *other)
{
    struct load l = {.port = gw.port, .target = target, .n = n};

    run_load(&l);
    *other = l.other;
    return l.ok;
}

/* All `n` GETs of `target` answered 200, or a failure naming `label`. */
static void expect_all_ok(const char *label, const char *target, int n)
{
    long other;
    int ok = get_many(target, n, &other);

    check_case(ok == n, label, "%d of %d GET %s got 200; the first other status: %ld", ok, n,
               target, other);
}

/* --- what sluice reports --------------------------------------------------------------- */

/* A per-server sample, family{route,server} or with status_class when it is not NULL. */
static double server_metric(const char *family, const char *route, const char *server,
                            const char *status_class)
{
    char series[512];

    if (status_class != NULL)
        snprintf(series, sizeof series, "%s{route=\"%s\",server=\"%s\",status_class=\"%s\"}",
                 family, route, server, status_class);
    else
        snprintf(series, sizeof series, "%s{route=\"%s\",server=\"%s\"}", family, route, server);
    return metric(&gw, series);
}

static double healthy(const char *route, const char *server)
{
    return server_metric("sluice_upstream_healthy", route, server, NULL);
}

static double attempts(const char *route, const char *server, const char *status_class)
{
    return server_metric("sluice_upstream_requests_total", route, server, status_class);
}

/* Waits up to 3 s for sluice_upstream_healthy of `server` to be `want`. */
static bool wait_healthy(const char *route, const char *server, double want)
{
    for (int waited = 0; waited < 3000; waited += 20) {
        if (healthy(route, server) == want)
            return true;
        sleep_ms(20);
    }
    return false;
}

/* Nothing is left counted in flight on `server` once every request is answered. */
static void expect_idle(const char *label, const char *route, const char *server)
{
    double n = server_metric("sluice_upstream_inflight", route, server, NULL);

    check_case(n == 0, label, "sluice_upstream_inflight for %s is %g with nothing in flight",
               server, n);
}

static double retries(const char *route, const char *result)
{
    char series[256];

    snprintf(series, sizeof series, "sluice_upstream_retries_total{route=\"%s\",result=\"%s\"}",
             route, result);
    return metric(&gw, series);
}

/* The times of sluice's log lines that hold `needle`, in seconds from their own
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" stamps, into `at` (up to `cap`); how many lines hold it. */
static int log_times(const char *needle, double *at, int cap)
{
    char *log = read_log(&gw);
    int n = 0;

    for (char *line = log; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');
        struct tm tm = {0};
        int ms = 0;

        if (end != NULL)
            *end = '\0';
        if (strstr(line, needle) != NULL) {
            if (n < cap && sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) == 7) {
                tm.tm_year -= 1900;
                tm.tm_mon -= 1;
                at[n] = (double)timegm(&tm) + ms / 1000.0;
            } else if (n < cap) {
                at[n] = 0; /* no stamp: reads as far from any other */
            }
            n++;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    free(log);
    return n;
}

/* The access log's lines for requests whose path (the log's "path" field, without the
 * query) is `path`, once there are `count` of them (waited for up to 2 s: lines are written
 * after the answer, by another thread, and those of requests on different connections need not
 * come in order): each says the request was answered `status`, its last attempt on `server`
 * failing with `error` ("" for none). */
static void expect_access(const char *label, const char *path, int count, long status,
                          const char *error, const char *server)
{
    char field[160], want_status[32], want_error[64], want_server[160], *log = NULL;
    int seen = 0;

    snprintf(field, sizeof field, "\"path\":\"%s\"", path);
    snprintf(want_status, sizeof want_status, "\"status\":%ld,", status);
    snprintf(want_error, sizeof want_error, "\"upstream_error\":\"%s\"", error);
    snprintf(want_server, sizeof want_server, "\"upstream_server\":\"%s\"", server);
    for (int waited = 0; waited < 2000; waited += 20) {
        free(log);
        log = read_file(gw.access_path);
        if ((seen = occurrences(log, field)) >= count)
            break;
        sleep_ms(20);
    }
    check_case(seen == count, label, "%d access log lines for %s; expected %d", seen, path, count);
    for (char *line = log; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');

        if (end == NULL)
            break;
        *end = '\0';
        if (strstr(line, field) != NULL)
            check_case(strstr(line, want_status) != NULL && strstr(line, want_error) != NULL &&
                           strstr(line, want_server) != NULL,
                       label, "the access log says %s; expected %s %s %s", line, want_status,
                       want_error, want_server);
        line = end + 1;
    }
    free(log);
}

/* --- 1. balance --------------------------------------------------------------------------- */

static const char balance_config[] = SERVER
    "routes:\n"
    "  - name: rr\n    match: {path_prefix: /rr}\n"
    "    upstream:\n"
    "      servers: [\"http://127.0.0.1:%1$u\", {url: \"http://127.0.0.1:%2$u\", weight: 2},\n"
    "                \"http://127.0.0.1:%3$u\"]\n"
    "  - name: lr\n    match: {path_prefix: /lr}\n"
    "    upstream:\n"
    "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\",\n"
    "                \"http://127.0.0.1:%3$u\"]\n"
    "      balance: least_request\n"
    "  - name: r2\n    match: {path_prefix: /r2/}\n"
    "    upstream:\n"
    "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\",\n"
    "                \"http://127.0.0.1:%3$u\"]\n"
    "      balance: random_two\n"
    "  - name: r2w\n    match: {path_prefix: /r2w/}\n"
    "    upstream:\n"
    "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\",\n"
    "                {url: \"http://127.0.0.1:%3$u\", weight: 4}]\n"
    "      balance: random_two\n";

/* `n` requests for `target` (on one connection, or each on its own), all answered 200; what
 * each of a, b and c received into counts[]. */
static void spread(const char *label, const char *target, int n, bool fresh,
                   unsigned long counts[3])
{
    struct load l = {.port = gw.port, .target = target, .n = n, .fresh = fresh};

    recorders_plain();
    run_load(&l);
    check_case(l.ok == n, label, "%d of %d got 200; the first other status: %ld", l.ok, n, l.other);
    for (int i = 0; i < 3; i++)
        counts[i] = recorder_requests(&recs[i]);
}

/* Each of the three got between `low` and `high` requests. */
static void expect_within(const char *label, const unsigned long counts[3], unsigned long low,
                          unsigned long high)
{
    check_case(counts[0] >= low && counts[0] <= high && counts[1] >= low && counts[1] <= high &&
                   counts[2] >= low && counts[2] <= high,
               label, "a, b and c got %lu, %lu and %lu requests; each should get %lu to %lu",
               counts[0], counts[1], counts[2], low, high);
}

static void test_balance(void)
{
    unsigned long counts[3];

    recorders_plain();
    if (start_sluice(&gw, balance_config, recs[0].port, recs[1].port, recs[2].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    /* round_robin, weights 1, 2, 1: the schedule b a c b, exactly, whatever the start. */
    spread("round_robin 1,2,1", "/rr/x", 400, false, counts);
    check_case(counts[0] == 100 && counts[1] == 200 && counts[2] == 100, "round_robin 1,2,1",
               "a, b and c got %lu, %lu and %lu of 400; expected 100, 200, 100", counts[0],
               counts[1], counts[2]);
    check_case(attempts("rr", url_of(recs[1].port, "").text, "2xx") == 200, "round_robin 1,2,1",
               "sluice_upstream_requests_total for b says %g 2xx, b got 200",
               attempts("rr", url_of(recs[1].port, "").text, "2xx"));
    /* Sequential requests leave nothing in flight: both random balances come down to their
     * draws, uniform here. 600 requests: 200 each, standard deviation 11.5; 150 to 252 is
     * more than four of them either way. */
    spread("least_request, one connection", "/lr/x", 600, false, counts);
    expect_within("least_request, one connection", counts, 150, 252);
    spread("random_two, one connection", "/r2/x", 600, false, counts);
    expect_within("random_two, one connection", counts, 150, 252);
    /* Weights 1, 1, 4: the first draw is by weight, so c gets about two thirds. */
    spread("random_two 1,1,4", "/r2w/x", 600, false, counts);
    check_case(counts[2] > 300 && counts[0] >= 40 && counts[1] >= 40, "random_two 1,1,4",
               "a, b and c got %lu, %lu and %lu of 600; expected c more than half, a and b "
               "about 100 each",
               counts[0], counts[1], counts[2]);
    /* The same over a new connection per request, as most clients behind a load balancer
     * come (in thread_per_connection mode each is served by a new thread, whose random
     * draws must not all start alike). 300 requests: 100 each, deviation 8.2; 60 to 140. */
    spread("least_request, a connection per request", "/lr/x", 300, true, counts);
    expect_within("least_request, a connection per request", counts, 60, 140);
    spread("random_two, a connection per request", "/r2/x", 300, true, counts);
    expect_within("random_two, a connection per request", counts, 60, 140);
    stop_gateway();
}

/* --- 2. a server killed, and back ------------------------------------------------------ */

static const char kill_config[] =
    SERVER "routes:\n"
           "  - name: kill\n    match: {path_prefix: /k}\n"
           "    upstream:\n"
           "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\", "
           "\"http://127.0.0.1:%3$u\"]\n"
           "      max_fails: 3\n      fail_timeout: 1s\n"
           "    retries: {attempts: 3, on: [connect_failure, reset]}\n";

#define FAIL_TIMEOUT 1.0 /* kill_config's, in seconds */

/* b dead and due its probe: requests one at a time until one has tried b, the probe. Read
 * at once after it, b is unhealthy; the requests after it, made within fail_timeout of it,
 * never try b (the tries allowed are counted from the probe's time, so that on a slow machine
 * a later probe that is due is allowed rather than failed); and the log says b is skipped
 * again. */
static void expect_one_failed_probe(const char *b, const char *skipped)
{
    enum { BEFORE_PROBE = 12, AFTER_PROBE = 9 };
    const char *label = "b probed, still dead";
    double errors = attempts("kill", b, "error"), probed_at = 0, tries, since;
    int skips = log_count(&gw, skipped), allowed;

    for (int i = 0; i < BEFORE_PROBE && probed_at == 0; i++) {
        expect_all_ok(label, "/k/x", 1);
        if (attempts("kill", b, "error") > errors) {
            probed_at = seconds_now();
            check_case(healthy("kill", b) == 0, label,
                       "sluice_upstream_healthy is %g right after the failed probe",
                       healthy("kill", b));
        }
    }
    if (probed_at == 0) {
        check_case(false, label, "none of %d requests tried b", BEFORE_PROBE);
        return;
    }
    /* Some at once and some half a fail_timeout on: a skip after the probe shorter than
     * fail_timeout shows too. */
    expect_all_ok(label, "/k/x", AFTER_PROBE / 2);
    sleep_ms((int)(FAIL_TIMEOUT * 500));
    expect_all_ok(label, "/k/x", AFTER_PROBE - AFTER_PROBE / 2);
    tries = attempts("kill", b, "error") - errors;
    since = seconds_now() - probed_at;
    allowed = 1 + (int)(since / FAIL_TIMEOUT);
    check_case(tries >= 1 && tries <= allowed, label,
               "b was tried %g times; expected the probe alone (%d allowed %.2f s after it)", tries,
               allowed, since);
    check_case(wait_for_log(&gw, skipped, skips + 1, 2000), label, "no second \"%s\"", skipped);
}

static void test_killed_server(void)
{
    struct load l = {.target = "/k/x", .n = 300};
    pthread_t thread;
    unsigned b_port = recs[1].port;
    struct url b = url_of(b_port, "");
    char skipped[256];

    recorders_plain();
    if (start_sluice(&gw, kill_config, recs[0].port, recs[1].port, recs[2].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    snprintf(skipped, sizeof skipped, "route kill: server %s is skipped for fail_timeout", b.text);
    /* b is stopped while a loop of GETs runs: retried elsewhere, no client sees it. */
    l.port = gw.port;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, load_thread, &l), 0);
    while (atomic_load(&l.done) < 60 && atomic_load(&l.done) < l.n)
        sleep_ms(1);
    recorder_stop(&recs[1]);
    pthread_join(thread, NULL);
    check_case(l.ok == l.n, "b killed mid-load", "%d of %d got 200; the first other: %ld", l.ok,
               l.n, l.other);
    check_case(wait_for_log(&gw, skipped, 1, 2000), "b killed mid-load", "no log line \"%s\"",
               skipped);
    check_case(retries("kill", "retried") >= 3, "b killed mid-load",
               "%g retries made; b's failures should have been retried",
               retries("kill", "retried"));

    /* Once fail_timeout has passed b is due its probe; b still dead, one request tries b
     * (the probe, failing: b is skipped for another fail_timeout) and none after it. */
    check_case(wait_healthy("kill", b.text, 1), "b due its probe",
               "sluice_upstream_healthy is not 1 after fail_timeout");
    expect_one_failed_probe(b.text, skipped);

    /* b back on its port: once due, its probe passes and it is in the rotation again. */
    if (recorder_start_on(&recs[1], b_port) != 0) {
        CU_FAIL("b could not listen on its port again");
        stop_gateway();
        return;
    }
    check_case(wait_healthy("kill", b.text, 1), "b back",
               "sluice_upstream_healthy is not 1 after fail_timeout");
    recorders_plain();
    expect_all_ok("b back", "/k/x", 30);
    check_case(recorder_requests(&recs[1]) >= 9, "b back",
               "b answered %lu of 30 requests once back; expected about 10",
               recorder_requests(&recs[1]));
    check_case(healthy("kill", b.text) == 1, "b back", "sluice_upstream_healthy is %g",
               healthy("kill", b.text));
    check_case(attempts("kill", b.text, "2xx") >= 9, "b back", "%g 2xx attempts counted for b",
               attempts("kill", b.text, "2xx"));
    for (int i = 0; i < 3; i++)
        expect_idle("after it all", "kill", url_of(i == 1 ? b_port : recs[i].port, "").text);
    stop_gateway();
}

/* --- 2b. which methods are retried ----------------------------------------------------- */

static const char methods_config[] =
    SERVER "routes:\n"
           "  - name: methods\n    match: {path_prefix: /p}\n"
           "    upstream:\n"
           "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
           "      max_fails: 0\n"
           "    retries: {attempts: 3, on: [connect_failure, reset]}\n";

/* Servers dead and a, in turn (round_robin; every choice, a retry's too, is one step, and
 * max_fails 0 never skips dead). A POST or PATCH that lands on dead is answered 502 and a
 * never sees it; PUT, DELETE and OPTIONS go on to a. */
static void test_methods_retried(void)
{
    static const struct {
        const char *method, *target, *body;
        long status;
        bool on_dead;   /* the first attempt went to the dead server */
        bool reaches_a; /* a got the request */
    } cases[] = {
        {"POST", "/p/1", "one", 502, true, false},    {"POST", "/p/2", "two", 200, false, true},
        {"PATCH", "/p/3", "three", 502, true, false}, {"GET", "/p/4", NULL, 200, false, true},
        {"PUT", "/p/5", "five", 200, true, true},     {"DELETE", "/p/6", NULL, 200, true, true},
        {"OPTIONS", "/p/7", NULL, 200, true, true},   {"POST", "/p/8", "eight", 502, true, false},
    };
    struct url dead_url = url_of(dead[0], ""), a_url = url_of(recs[0].port, "");
    int retried = 0;

    recorders_plain();
    if (start_sluice(&gw, methods_config, dead[0], recs[0].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reply r;
        char label[64], line[64];

        snprintf(label, sizeof label, "%s %s", cases[i].method, cases[i].target);
        snprintf(line, sizeof line, "%s %s HTTP/1.1\r\n", cases[i].method, cases[i].target);
        http(gw.port, cases[i].method, cases[i].target, NULL, cases[i].body, &r);
        check_case(r.status == cases[i].status, label, "status %ld, expected %ld", r.status,
                   cases[i].status);
        if (cases[i].status == 502)
            check_case(r.body != NULL && strstr(r.body, "(refused)") != NULL, label,
                       "the 502's detail does not say (refused): %s", r.body ? r.body : "");
        check_case(recorder_count(&recs[0], line) == (cases[i].reaches_a ? 1 : 0), label,
                   "a received it %d times", recorder_count(&recs[0], line));
        expect_access(label, cases[i].target, 1, cases[i].status,
                      cases[i].status == 502 ? "refused" : "",
                      cases[i].status == 502 ? dead_url.text : a_url.text);
        retried += cases[i].on_dead && cases[i].reaches_a;
        reply_free(&r);
    }
    check_case(recorder_received(&recs[0]) == 5, "every method",
               "a read %lu requests; expected 5 (POST two, GET, PUT, DELETE, OPTIONS)",
               recorder_received(&recs[0]));
    check_case(recorder_count(&recs[0], "\r\n\r\none") + recorder_count(&recs[0], "three") +
                       recorder_count(&recs[0], "eight") ==
                   0,
               "every method", "a received the body of a POST or PATCH sent to the dead server");
    check_case(retries("methods", "retried") == retried, "every method",
               "%g retries counted; expected %d", retries("methods", "retried"), retried);
    expect_idle("every method", "methods", dead_url.text);
    expect_idle("every method", "methods", a_url.text);
    stop_gateway();
}

/* --- 2c. a status as a failure ---------------------------------------------------------- */

static const char status_config[] =
    SERVER "routes:\n"
           "  - name: five\n    match: {path_prefix: /five}\n"
           "    upstream:\n"
           "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
           "      fail_on: [503]\n      max_fails: 2\n"
           "    retries: {attempts: 2, on: [503]}\n";

/* a answers 503 to everything. A GET it answers so goes on to b; a POST gets a's 503 as it
 * is (an answer, not a failure of sluice's: no upstream_error); the second 503 within
 * fail_window makes a skipped, and b takes everything. */
static void test_status_outcomes(void)
{
    struct url a = url_of(recs[0].port, ""), b = url_of(recs[1].port, "");
    char skipped[256];
    struct reply r;

    recorders_plain();
    recorder_set_status(&recs[0], 503);
    if (start_sluice(&gw, status_config, recs[0].port, recs[1].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    snprintf(skipped, sizeof skipped, "route five: server %s is skipped for fail_timeout", a.text);
    http(gw.port, "GET", "/five/1", NULL, NULL, &r);
    check_case(r.status == 200, "GET, a 503 retried", "status %ld, expected 200", r.status);
    reply_free(&r);
    expect_access("GET, a 503 retried", "/five/1", 1, 200, "", b.text);
    http(gw.port, "POST", "/five/2", NULL, "body", &r);
    check_case(r.status == 503 && r.body != NULL && strcmp(r.body, "ok") == 0,
               "POST, a 503 passed on", "status %ld, body \"%s\"; expected a's 503 \"ok\"",
               r.status, r.body ? r.body : "");
    reply_free(&r);
    expect_access("POST, a 503 passed on", "/five/2", 1, 503, "", a.text);
    check_case(wait_for_log(&gw, skipped, 1, 2000), "two 503s", "no log line \"%s\"", skipped);
    expect_all_ok("a skipped", "/five/3", 6);
    check_case(recorder_received(&recs[0]) == 2 && recorder_received(&recs[1]) == 7, "a skipped",
               "a read %lu requests and b %lu; expected 2 and 7", recorder_received(&recs[0]),
               recorder_received(&recs[1]));
    check_case(attempts("five", a.text, "5xx") == 2 && attempts("five", b.text, "2xx") == 7 &&
                   retries("five", "retried") == 1,
               "a skipped", "a 5xx %g, b 2xx %g, retries %g; expected 2, 7, 1",
               attempts("five", a.text, "5xx"), attempts("five", b.text, "2xx"),
               retries("five", "retried"));
    check_case(healthy("five", a.text) == 0, "a skipped", "sluice_upstream_healthy for a is %g",
               healthy("five", a.text));
    stop_gateway();
}

/* --- 3. the retry budget ----------------------------------------------------------------- */

static const char budget_config[] =
    SERVER "routes:\n"
           "  - name: none\n    match: {path_prefix: /none}\n"
           "    upstream: {servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"], "
           "max_fails: 0}\n"
           "    retries: {attempts: 2, budget: 0%%}\n"
           "  - name: some\n    match: {path_prefix: /some}\n"
           "    upstream: {servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"], "
           "max_fails: 0}\n"
           "    retries: {attempts: 2, budget: 10%%}\n";

/* The retry budget's window (backends.h): limiter_now_ns(), wall-clock nanoseconds, divided
 * into GW_BUDGET_WINDOW_NS (10 s). */
static long budget_window(void)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return (long)(now.tv_sec / 10);
}

/* Waits, when need be, until the current budget window has `seconds` left. */
static void wait_for_budget_window(int seconds)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    if (10 - now.tv_sec % 10 <= seconds)
        sleep_ms((int)(10 - now.tv_sec % 10) * 1000 - (int)(now.tv_nsec / 1000000) + 50);
}

/* Every server dead. budget 0%: no retry at all, each refused one counted over_budget.
 * budget 10% of 40 requests in one window: a retry fits while retries < requests/10 + 3, so
 * requests 1, 2, 3, 10, 20, 30 and 40 are retried (7) and the other 33 are not. */
static void test_retry_budget(void)
{
    unsigned dead1 = dead[0], dead2 = dead[1];
    long window, other;
    int ok;
    double tries;

    recorders_plain();
    if (start_sluice(&gw, budget_config, dead1, dead2) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    ok = get_many("/none/x", 20, &other);
    check_case(ok == 0 && other == 502, "budget 0%", "%d got 200; the first other: %ld", ok, other);
    check_case(retries("none", "retried") == 0 && retries("none", "over_budget") == 20, "budget 0%",
               "retried %g, over_budget %g; expected 0 and 20", retries("none", "retried"),
               retries("none", "over_budget"));
    tries = attempts("none", url_of(dead1, "").text, "error") +
            attempts("none", url_of(dead2, "").text, "error");
    check_case(tries == 20, "budget 0%", "%g attempts for 20 requests", tries);

    wait_for_budget_window(3);
    window = budget_window();
    ok = get_many("/some/x", 40, &other);
    check_case(ok == 0 && other == 502, "budget 10%", "%d got 200; the first other: %ld", ok,
               other);
    if (budget_window() == window) {
        check_case(retries("some", "retried") == 7 && retries("some", "over_budget") == 33,
                   "budget 10%", "retried %g, over_budget %g; expected 7 and 33",
                   retries("some", "retried"), retries("some", "over_budget"));
        tries = attempts("some", url_of(dead1, "").text, "error") +
                attempts("some", url_of(dead2, "").text, "error");
        check_case(tries == 47, "budget 10%", "%g attempts for 40 requests; expected 47", tries);
    } else {
        fprintf(stderr, "(budget 10%%: a budget window ended during the run) ");
    }
    stop_gateway();
}

/* --- 4. a retry is not charged again ------------------------------------------------------ */

static const char charge_config[] =
    SERVER "routes:\n"
           "  - name: charged\n    match: {path_prefix: /lim}\n"
           "    upstream: {servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"], "
           "max_fails: 0}\n"
           "    retries: {attempts: 2, on: [connect_failure], budget: 100%%}\n"
           "    limit: {algorithm: fixed_window, requests: 5, per: 1h}\n";

/* Servers dead and a in turn, each request's two choices two steps of the schedule: every
 * request goes to dead first and is retried on a. Five requests pass the limit of five,
 * although each was attempted twice; the sixth is refused before any attempt. */
static void test_retry_not_charged(void)
{
    struct url dead_url = url_of(dead[0], "");
    long other;
    int ok;
    struct reply r;

    recorders_plain();
    if (start_sluice(&gw, charge_config, dead[0], recs[0].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    ok = get_many("/lim/x", 5, &other);
    check_case(ok == 5, "limit 5, every request retried", "%d of 5 got 200; the first other: %ld",
               ok, other);
    check_case(retries("charged", "retried") == 5 &&
                   attempts("charged", dead_url.text, "error") == 5,
               "limit 5, every request retried",
               "%g retries, %g attempts on the dead server; expected 5 and 5",
               retries("charged", "retried"), attempts("charged", dead_url.text, "error"));
    http(gw.port, "GET", "/lim/x", NULL, NULL, &r);
    check_case(r.status == 429, "the sixth", "status %ld, expected 429", r.status);
    reply_free(&r);
    check_case(recorder_received(&recs[0]) == 5, "the sixth", "a read %lu requests; expected 5",
               recorder_received(&recs[0]));
    stop_gateway();
}

/* --- 5. active health checks ------------------------------------------------------------ */

static const char checked_config[] =
    SERVER "routes:\n"
           "  - name: checked\n    match: {path_prefix: /c}\n"
           "    upstream:\n"
           "      servers: [\"http://127.0.0.1:%1$u/api\", \"http://127.0.0.1:%2$u/api\"]\n"
           "      health_check: {path: /health, interval: 100ms, timeout: 100ms, healthy: 2, "
           "unhealthy: 2}\n";

/* a fails its checks (503 to GET /health, while it would answer anything else): after two it
 * is down and gets no requests; passing two again brings it back. */
static void test_active_checks(void)
{
    struct url a = url_of(recs[0].port, "/api"), b = url_of(recs[1].port, "/api");
    char down[256], b_down[256], up[256];
    struct reply r;

    recorders_plain();
    if (start_sluice(&gw, checked_config, recs[0].port, recs[1].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    /* Only now: a log line right after "listening on" can keep the harness from reading the
     * port off that line (start() in harness.c takes the last ':' of the log after it). */
    recorder_set_path_status(&recs[0], "/health", 503);
    snprintf(down, sizeof down,
             "route checked: server %s is unhealthy: 2 checks failed, the last: status 503",
             a.text);
    snprintf(b_down, sizeof b_down, "route checked: server %s is unhealthy", b.text);
    snprintf(up, sizeof up, "route checked: server %s is healthy again: 2 checks passed", a.text);
    check_case(wait_for_log(&gw, down, 1, 3000), "a fails its checks", "no log line \"%s\"", down);
    check_case(healthy("checked", a.text) == 0 && healthy("checked", b.text) == 1,
               "a fails its checks", "sluice_upstream_healthy: a %g, b %g; expected 0 and 1",
               healthy("checked", a.text), healthy("checked", b.text));
    check_case(recorder_count(&recs[0], "GET /health HTTP/1.1\r\n") >= 2, "a fails its checks",
               "a did not receive GET /health (the check's path, without the base path)");
    check_case(log_count(&gw, b_down) == 0, "a fails its checks", "b was logged unhealthy too");
    recorder_reset(&recs[0]);
    recorder_reset(&recs[1]);
    expect_all_ok("a down", "/c/x", 20);
    check_case(recorder_count(&recs[0], "GET /api/c/x ") == 0 &&
                   recorder_count(&recs[1], "GET /api/c/x ") == 20,
               "a down", "a got %d requests and b %d; expected 0 and 20",
               recorder_count(&recs[0], "GET /api/c/x "),
               recorder_count(&recs[1], "GET /api/c/x "));
    http(gw.admin_port, "GET", "/readyz", NULL, NULL, &r);
    check_case(r.status == 200, "a down", "/readyz %ld with b healthy", r.status);
    reply_free(&r);

    recorder_set_path_status(&recs[0], "/health", 200);
    check_case(wait_for_log(&gw, up, 1, 3000), "a passes again", "no log line \"%s\"", up);
    check_case(healthy("checked", a.text) == 1, "a passes again",
               "sluice_upstream_healthy for a is %g", healthy("checked", a.text));
    recorder_reset(&recs[0]);
    recorder_reset(&recs[1]);
    expect_all_ok("a back", "/c/x", 20);
    check_case(recorder_count(&recs[0], "GET /api/c/x ") == 10 &&
                   recorder_count(&recs[1], "GET /api/c/x ") == 10,
               "a back", "a got %d requests and b %d; expected 10 and 10",
               recorder_count(&recs[0], "GET /api/c/x "),
               recorder_count(&recs[1], "GET /api/c/x "));
    stop_gateway();
}

/* --- 6. panic mode and /readyz --------------------------------------------------------- */

static const char panic_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"%3$s}\n"
    "routes:\n"
    "  - name: panic\n    match: {path_prefix: /panic}\n"
    "    upstream:\n"
    "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
    "      health_check: {path: /health, interval: 100ms, timeout: 100ms, healthy: 1, "
    "unhealthy: 1}\n";

static const char dead_config[] =
    SERVER "routes:\n"
           "  - name: dead\n    match: {path_prefix: /dead}\n"
           "    upstream:\n"
           "      servers: [\"http://127.0.0.1:%1$u\", \"http://127.0.0.1:%2$u\"]\n"
           "      max_fails: 1\n      fail_timeout: 1h\n";

static void expect_ready(const char *label, long status, const char *body)
{
    struct reply r;

    http(gw.admin_port, "GET", "/readyz", NULL, NULL, &r);
    check_case(r.status == status && r.body != NULL && strcmp(r.body, body) == 0, label,
               "/readyz answered %ld \"%s\"; expected %ld \"%s\"", r.status, r.body ? r.body : "",
               status, body);
    reply_free(&r);
}

/* Waits until both a and b of the panic route have been logged unhealthy. */
static bool both_unhealthy(void)
{
    char a[160], b[160];

    snprintf(a, sizeof a, "route panic: server %s is unhealthy", url_of(recs[0].port, "").text);
    snprintf(b, sizeof b, "route panic: server %s is unhealthy", url_of(recs[1].port, "").text);
    return wait_for_log(&gw, a, 1, 3000) && wait_for_log(&gw, b, 1, 3000);
}

static void test_panic(void)
{
    unsigned dead1 = dead[0], dead2 = dead[1];
    char b_up[160];
    long other;
    int ok;

    /* Every check failing, every server answering: requests still get through. */
    recorders_plain();
    if (start_sluice(&gw, panic_config, recs[0].port, recs[1].port, "") != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    recorder_set_path_status(&recs[0], "/health", 503); /* after start: see test_active_checks */
    recorder_set_path_status(&recs[1], "/health", 503);
    check_case(both_unhealthy(), "checks all failing", "a and b were not both logged unhealthy");
    recorder_reset(&recs[0]);
    recorder_reset(&recs[1]);
    expect_all_ok("checks all failing", "/panic/x", 10);
    check_case(
        recorder_count(&recs[0], "GET /panic/x ") + recorder_count(&recs[1], "GET /panic/x ") == 10,
        "checks all failing", "a and b got %d and %d of 10 requests",
        recorder_count(&recs[0], "GET /panic/x "), recorder_count(&recs[1], "GET /panic/x "));
    expect_ready("checks all failing", 503, NOT_READY);
    /* b passing again ends the panic: it takes every request, and the gateway is ready. */
    recorder_set_path_status(&recs[1], "/health", 200);
    snprintf(b_up, sizeof b_up, "route panic: server %s is healthy again",
             url_of(recs[1].port, "").text);
    check_case(wait_for_log(&gw, b_up, 1, 3000), "b passes again", "no log line \"%s\"", b_up);
    recorder_reset(&recs[0]);
    recorder_reset(&recs[1]);
    expect_all_ok("b passes again", "/panic/x", 10);
    check_case(recorder_count(&recs[1], "GET /panic/x ") == 10, "b passes again",
               "b got %d of 10 requests, a %d", recorder_count(&recs[1], "GET /panic/x "),
               recorder_count(&recs[0], "GET /panic/x "));
    expect_ready("b passes again", 200, "ready\n");
    stop_gateway();

    /* The same, with readiness not tied to upstreams. */
    recorders_plain();
    if (start_sluice(&gw, panic_config, recs[0].port, recs[1].port,
                     ", ready_needs_upstreams: false") != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    recorder_set_path_status(&recs[0], "/health", 503);
    recorder_set_path_status(&recs[1], "/health", 503);
    check_case(both_unhealthy(), "ready_needs_upstreams: false",
               "a and b were not both logged unhealthy");
    expect_all_ok("ready_needs_upstreams: false", "/panic/x", 5);
    expect_ready("ready_needs_upstreams: false", 200, "ready\n");
    stop_gateway();

    /* Every server dead and skipped (passive health): each request still tries one, the
     * one that failed longest ago, so they take turns; the client gets the real failure. */
    recorders_plain();
    if (start_sluice(&gw, dead_config, dead1, dead2) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    ok = get_many("/dead/x", 2, &other);
    check_case(ok == 0 && other == 502, "both skipped", "%d got 200; the first other: %ld", ok,
               other);
    check_case(healthy("dead", url_of(dead1, "").text) == 0 &&
                   healthy("dead", url_of(dead2, "").text) == 0,
               "both skipped", "sluice_upstream_healthy: %g and %g",
               healthy("dead", url_of(dead1, "").text), healthy("dead", url_of(dead2, "").text));
    expect_ready("both skipped", 503, NOT_READY);
    for (int i = 0; i < 4; i++) {
        char target[32];
        struct reply r;

        snprintf(target, sizeof target, "/dead/%d", i);
        http(gw.port, "GET", target, NULL, NULL, &r);
        check_case(r.status == 502 && r.body != NULL && strstr(r.body, "(refused)") != NULL,
                   "panic: a dead server is still tried", "status %ld, body %s", r.status,
                   r.body ? r.body : "");
        reply_free(&r);
        expect_access("panic: a dead server is still tried", target, 1, 502, "refused",
                      url_of(i % 2 == 0 ? dead1 : dead2, "").text);
    }
    check_case(attempts("dead", url_of(dead1, "").text, "error") == 3 &&
                   attempts("dead", url_of(dead2, "").text, "error") == 3,
               "panic: the least recently failed first", "attempts %g and %g; expected 3 and 3",
               attempts("dead", url_of(dead1, "").text, "error"),
               attempts("dead", url_of(dead2, "").text, "error"));
    stop_gateway();
}

/* --- 7. strip_prefix ------------------------------------------------------------------------ */

static const char strip_config[] =
    SERVER "routes:\n"
           "  - name: v1\n    match: {path_prefix: /v1}\n"
           "    upstream: \"http://127.0.0.1:%1$u/api\"\n    strip_prefix: true\n"
           "  - name: v2\n    match: {path_prefix: /v2/}\n"
           "    upstream: \"http://127.0.0.1:%1$u/api/\"\n    strip_prefix: true\n"
           "  - name: v3\n    match: {path_prefix: /v3}\n"
           "    upstream: \"http://127.0.0.1:%1$u/api\"\n"
           "  - name: v4\n    match: {path_prefix: /v4}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n    strip_prefix: true\n";

/* Sends `request` to sluice on a new connection with recorder `r` emptied first: what the
 * client got into `answer` (ANSWER_CAP bytes), the status returned; what `r` got in *sent
 * (the caller frees it). */
static int exchange(struct recorder *r, const char *request, char *answer, char **sent,
                    size_t *sent_len)
{
    bool closed;
    int status;

    recorder_reset(r);
    status =
        raw_session(gw.port, request, strlen(request), answer, ANSWER_CAP, TIMEOUT_MS, &closed);
    *sent = recorder_bytes(r, sent_len);
    recorder_strip_request_ids(*sent, sent_len);
    return status;
}

/* What `r` got is exactly `want`. */
static void expect_sent(const char *label, const char *sent, size_t sent_len, const char *want)
{
    char got[1024], wanted[1024];

    check_case(sent != NULL && sent_len == strlen(want) && memcmp(sent, want, sent_len) == 0, label,
               "the upstream got \"%s\", expected \"%s\"",
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "",
               visible_bytes(want, strlen(want), wanted, sizeof wanted));
}

static void test_strip_prefix(void)
{
    static const struct {
        const char *target, *upstream; /* NULL: refused with `status`, nothing sent */
        int status;
    } cases[] = {
        {"/v1/users/7?x=1", "/api/users/7?x=1", 200},
        {"/v1", "/api", 200},
        {"/v1?q=1", "/api?q=1", 200},
        {"/v1/", "/api/", 200},
        {"/v1/a%20b/%7Euser?q=%2F&r", "/api/a%20b/%7Euser?q=%2F&r", 200},
        {"/v%31/x", "/api/x", 200},
        {"/%76%31/users/7?x=1", "/api/users/7?x=1", 200},
        {"//v1//x", "/api//x", 200},
        {"/v1//x", "/api//x", 200},
        {"/v2/x", "/api/x", 200},
        {"/v2/x/y?z", "/api/x/y?z", 200},
        {"/v2//x", "/api/x", 200}, /* the run of slashes that ends the prefix is taken whole */
        {"/v2%2fx", NULL, 400},    /* an encoded slash is refused before routing */
        {"/v3/users/7?x=1", "/api/v3/users/7?x=1", 200},
        {"/v4", "/", 200},
        {"/v4?q=1", "/?q=1", 200},
        {"/v4/x", "/x", 200},
        /* A stripped prefix matches whole segments: the rest of one is no path of its own. */
        {"/v1x", NULL, 404},
        {"/v1../secret", NULL, 404},
        {"/v4admin/x", NULL, 404},
        {"/v3x", "/api/v3x", 200}, /* a route that does not strip matches as before */
        /* A dot segment with path parameters: `..` to servlet containers. */
        {"/v1/..;x/secret", NULL, 400},
        {"/v2/..;/secret", NULL, 400},
    };
    char *answer = malloc(ANSWER_CAP);

    recorders_plain();
    if (start_sluice(&gw, strip_config, recs[0].port) != 0) {
        CU_FAIL("sluice did not start");
        free(answer);
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char request[256], want[512], *sent;
        size_t sent_len;
        int status;

        snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", cases[i].target);
        status = exchange(&recs[0], request, answer, &sent, &sent_len);
        if (cases[i].upstream == NULL) {
            check_case(status == cases[i].status && sent_len == 0, cases[i].target,
                       "status %d and %zu bytes upstream; expected %d and none", status, sent_len,
                       cases[i].status);
        } else {
            snprintf(want, sizeof want, "GET %s HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n",
                     cases[i].upstream);
            check_case(status == 200, cases[i].target, "status %d", status);
            expect_sent(cases[i].target, sent, sent_len, want);
        }
        free(sent);
    }
    free(answer);
    stop_gateway();
}

/* --- 8. host: ---------------------------------------------------------------------------- */

static const char host_config[] =
    SERVER "routes:\n"
           "  - name: preserve\n    match: {path_prefix: /hp}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n"
           "  - name: preserve-said\n    match: {path_prefix: /hs}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n    host: preserve\n"
           "  - name: upstream\n    match: {path_prefix: /hu}\n"
           "    upstream: \"http://127.0.0.1:%1$u/base\"\n    host: upstream\n"
           "  - name: named\n    match: {path_prefix: /hn}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n    host: \"API.Internal:8443\"\n"
           "  - name: default-port\n    match: {path_prefix: /hd}\n"
           "    upstream: \"http://backend.example:80\"\n    host: upstream\n"
           "    proxy: \"http://127.0.0.1:%2$u\"\n";

static void test_host_modes(void)
{
    static const struct {
        const char *label, *request, *sent; /* what the recorder must receive */
    } modes[] = {
        {"host: preserve (default)", "GET /hp HTTP/1.1\r\nHost: Client.Example:8080\r\n\r\n",
         "GET /hp HTTP/1.1\r\nHost: Client.Example:8080\r\n" FORWARDED_BY(
             "Client.Example:8080") "\r\n"},
        {"host: preserve", "GET /hs HTTP/1.1\r\nHost: client.example\r\n\r\n",
         "GET /hs HTTP/1.1\r\nHost: client.example\r\n" FORWARDED_BY("client.example") "\r\n"},
        {"host: upstream", "GET /hu/x HTTP/1.1\r\nHost: client.example\r\n\r\n",
         "GET /base/hu/x HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n" FORWARDED_BY("client.example") "\r\n"},
        {"host: a name", "GET /hn HTTP/1.1\r\nHost: client.example\r\n\r\n",
         "GET /hn HTTP/1.1\r\nHost: api.internal:8443\r\n" FORWARDED_BY("client.example") "\r\n"},
    };
    char *answer = malloc(ANSWER_CAP), want[512], *sent, got[1024];
    size_t sent_len;
    int status;

    recorders_plain();
    if (start_sluice(&gw, host_config, recs[0].port, recs[1].port) != 0) {
        CU_FAIL("sluice did not start");
        free(answer);
        return;
    }
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        status = exchange(&recs[0], modes[i].request, answer, &sent, &sent_len);
        check_case(status == 200, modes[i].label, "status %d", status);
        /* The host: upstream expectation names the recorder's port ("%u"). */
        snprintf(want, sizeof want, modes[i].sent, recs[0].port);
        expect_sent(modes[i].label, sent, sent_len, want);
        free(sent);
    }
    /* http://backend.example:80 through a forward proxy (b), which gets the request in
     * absolute form and does the resolving: the Host field leaves out the scheme's port. */
    status = exchange(&recs[1], "GET /hd HTTP/1.1\r\nHost: client.example\r\n\r\n", answer, &sent,
                      &sent_len);
    check_case(status == 200, "host: upstream, default port", "status %d", status);
    check_case(
        sent != NULL && strncmp(sent, "GET http://backend.example/hd HTTP/1.1\r\n", 40) == 0 &&
            strstr(sent, "\r\nHost: backend.example\r\n") != NULL &&
            strstr(sent, "\r\nX-Forwarded-Host: client.example\r\n") != NULL &&
            occurrences(sent, "Host:") == 2,
        "host: upstream, default port", "the proxy got \"%s\"; expected Host: backend.example",
        sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    free(sent);
    free(answer);
    stop_gateway();
}

/* --- 9. set_headers and remove_headers --------------------------------------------------- */

static const char headers_config[] =
    SERVER "routes:\n"
           "  - name: set\n    match: {path_prefix: /s}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n"
           "    set_headers: {X-Client: \"${request.client_addr}\", X-Req-Id: \"${request.id}\",\n"
           "                  X-Who: \"${request.consumer}\",\n"
           "                  X-Mixed: \"id=${request.id} from=${request.client_addr}!\"}\n"
           "    remove_headers: [X-Secret, x-other-secret]\n"
           "  - name: again\n    match: {path_prefix: /again}\n"
           "    upstream: {servers: [\"http://127.0.0.1:%2$u\", \"http://127.0.0.1:%3$u\"], "
           "max_fails: 0}\n"
           "    retries: {attempts: 2, on: [reset]}\n"
           "    set_headers: {X-Req-Id: \"${request.id}\"}\n";

/* The value of field `name` in the request head `sent` (first occurrence, case-insensitive)
 * into `out`; false when it has none. */
static bool sent_field(const char *sent, const char *name, char *out, size_t cap)
{
    char pattern[128];
    const char *at, *end;

    snprintf(pattern, sizeof pattern, "\r\n%s:", name);
    at = sent ? strcasestr(sent, pattern) : NULL;
    if (at == NULL)
        return false;
    at += strlen(pattern);
    while (*at == ' ')
        at++;
    end = strstr(at, "\r\n");
    snprintf(out, cap, "%.*s", end ? (int)(end - at) : 0, at);
    return true;
}

static bool is_hex32(const char *text)
{
    if (strlen(text) != 32)
        return false;
    for (const char *p = text; *p != '\0'; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static void test_set_and_remove_headers(void)
{
    char *answer = malloc(ANSWER_CAP), *sent, id[128], mixed[512], got[1024];
    size_t sent_len;
    int status;

    recorders_plain();
    if (start_sluice(&gw, headers_config, recs[0].port, recs[1].port, recs[2].port) != 0) {
        CU_FAIL("sluice did not start");
        free(answer);
        return;
    }
    /* An untrusted client's X-Request-Id is not the id (the trace suite says more); its
     * copies of the set fields are replaced, whatever their case; the removed ones never go,
     * whatever theirs. */
    status = exchange(&recs[0],
                      "GET /s/1 HTTP/1.1\r\nHost: h\r\nX-Request-Id: client-id-1\r\n"
                      "X-Client: 203.0.113.9\r\nx-client: evil\r\nX-REQ-ID: forged\r\n"
                      "X-Who: mallory\r\nX-Secret: s1\r\nx-secret: s2\r\nX-SECRET: s3\r\n"
                      "X-Other-Secret: s4\r\nX-Kept: yes\r\n\r\n",
                      answer, &sent, &sent_len);
    check_case(status == 200, "a client's id and copies", "status %d", status);
    check_case(sent_field(sent, "X-Req-Id", id, sizeof id) && is_hex32(id),
               "a client's id and copies", "X-Req-Id is not 32 hex digits: \"%s\"",
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    snprintf(mixed, sizeof mixed,
             "GET /s/1 HTTP/1.1\r\nHost: h\r\nX-Kept: yes\r\n"
             "X-Client: 127.0.0.1\r\nX-Req-Id: %s\r\nX-Who:\r\n"
             "X-Mixed: id=%s from=127.0.0.1!\r\n" FORWARDED_BY("h") "\r\n",
             id, id);
    expect_sent("a client's id and copies", sent, sent_len, mixed);
    check_case(sent != NULL && strcasestr(sent, "secret") == NULL && strstr(sent, "evil") == NULL &&
                   strstr(sent, "mallory") == NULL && strstr(sent, "forged") == NULL &&
                   strstr(sent, "client-id-1") == NULL && strstr(sent, "203.0.113.9") == NULL,
               "a client's id and copies", "the upstream got a client's copy: \"%s\"",
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    free(sent);

    /* Without one, the id is 32 hex digits, the same wherever the request names it. */
    status = exchange(&recs[0], "GET /s/2 HTTP/1.1\r\nHost: h\r\n\r\n", answer, &sent, &sent_len);
    check_case(status == 200, "no client id", "status %d", status);
    check_case(sent_field(sent, "X-Req-Id", id, sizeof id) && is_hex32(id), "no client id",
               "X-Req-Id is not 32 hex digits: \"%s\"",
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    check_case(sent_field(sent, "X-Mixed", mixed, sizeof mixed) && strncmp(mixed, "id=", 3) == 0 &&
                   strncmp(mixed + 3, id, strlen(id)) == 0 &&
                   strcmp(mixed + 3 + strlen(id), " from=127.0.0.1!") == 0,
               "no client id", "X-Mixed is \"%s\", X-Req-Id \"%s\"", mixed, id);
    check_case(occurrences(sent, "X-Client: 127.0.0.1\r\n") == 1 &&
                   occurrences(sent, "X-Who:\r\n") == 1,
               "no client id", "X-Client or X-Who not once: \"%s\"",
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    free(sent);

    /* A retried attempt carries the same id: b closes without answering (reset), c answers. */
    recorder_set_mode(&recs[1], RECORDER_CLOSE_AFTER_READ);
    recorder_set_close_at(&recs[1], 1);
    recorder_reset(&recs[1]);
    recorder_reset(&recs[2]);
    {
        struct reply r;
        char *first, *second, id1[128] = "", id2[128] = "";
        size_t first_len, second_len;

        http(gw.port, "GET", "/again/x", NULL, NULL, &r);
        check_case(r.status == 200, "a retried attempt", "status %ld", r.status);
        reply_free(&r);
        first = recorder_bytes(&recs[1], &first_len);
        second = recorder_bytes(&recs[2], &second_len);
        check_case(recorder_received(&recs[1]) == 1 && recorder_received(&recs[2]) == 1,
                   "a retried attempt", "b read %lu requests and c %lu; expected one each",
                   recorder_received(&recs[1]), recorder_received(&recs[2]));
        check_case(sent_field(first, "X-Req-Id", id1, sizeof id1) &&
                       sent_field(second, "X-Req-Id", id2, sizeof id2) && is_hex32(id1) &&
                       strcmp(id1, id2) == 0,
                   "a retried attempt", "X-Req-Id \"%s\" on the first attempt, \"%s\" on the retry",
                   id1, id2);
        free(first);
        free(second);
    }
    free(answer);
    stop_gateway();
}

static const char forwarded_config[] =
    SERVER "routes:\n"
           "  - name: fwd\n    match: {path_prefix: /fwd}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n"
           "    remove_headers: [X-Forwarded-For, x-forwarded-proto, X-FORWARDED-HOST]\n";

static const char trusted_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\",\n"
    "         trusted_proxies: [\"127.0.0.0/8\"]}\n"
    "routes:\n"
    "  - name: behind\n    match: {path_prefix: /b}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    set_headers: {X-Client: \"${request.client_addr}\"}\n";

/* ${request.client_addr} is the client as its keys see it: behind a trusted proxy, the
 * address its X-Forwarded-For gives; from anyone else, the peer, whatever it claims. */
static void test_client_addr_behind_trusted_proxy(void)
{
    char *answer = malloc(ANSWER_CAP), *sent, got[1024];
    size_t sent_len;
    int status;

    recorders_plain();
    if (start_sluice(&gw, trusted_config, recs[0].port) != 0) {
        CU_FAIL("sluice did not start");
        free(answer);
        return;
    }
    status =
        exchange(&recs[0], "GET /b/1 HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n",
                 answer, &sent, &sent_len);
    check_case(status == 200 && occurrences(sent, "X-Client: 203.0.113.9\r\n") == 1 &&
                   occurrences(sent, "X-Client:") == 1,
               "behind a trusted proxy", "status %d; the upstream got \"%s\"", status,
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    free(sent);
    stop_gateway();

    if (start_sluice(&gw, headers_config, recs[0].port, recs[1].port, recs[2].port) != 0) {
        CU_FAIL("sluice did not start");
        free(answer);
        return;
    }
    status =
        exchange(&recs[0], "GET /s/1 HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n",
                 answer, &sent, &sent_len);
    check_case(status == 200 && occurrences(sent, "X-Client: 127.0.0.1\r\n") == 1,
               "from an untrusted peer", "status %d; the upstream got \"%s\"", status,
               sent ? visible_bytes(sent, sent_len, got, sizeof got) : "");
    free(sent);
    free(answer);
    stop_gateway();
}

/* remove_headers may name the X-Forwarded- fields the gateway itself adds: then neither the
 * client's copies nor the gateway's own reach the upstream (keeping the client's address from
 * it, say). */
static void test_remove_forwarded_fields(void)
{
    char *answer, *sent;
    size_t sent_len;
    int status;

    recorders_plain();
    if (start_sluice(&gw, forwarded_config, recs[0].port) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    answer = malloc(ANSWER_CAP);
    status = exchange(&recs[0],
                      "GET /fwd HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 198.51.100.7\r\n"
                      "X-Forwarded-Proto: https\r\nX-Forwarded-Host: elsewhere\r\n\r\n",
                      answer, &sent, &sent_len);
    check_case(status == 200, "remove_headers: [X-Forwarded-...]", "status %d", status);
    expect_sent("remove_headers: [X-Forwarded-...] accepted", sent, sent_len,
                "GET /fwd HTTP/1.1\r\nHost: h\r\n\r\n");
    free(sent);
    free(answer);
    stop_gateway();
}

/* --- 10. each upstream_error ------------------------------------------------------------- */

/* A listening socket whose accept queue is full (backlog 0 holds one; `fillers` connections
 * nobody accepts are made first), so that the kernel drops further SYNs and a connect to it
 * waits until it times out. The listening fd, or -1; its port in *port. */
static int full_listener(unsigned *port, int *fillers, int n_fillers)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0 || listen(fd, 0) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    for (int i = 0; i < n_fillers; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fillers[i] >= 0)
            connect(fillers[i], (struct sockaddr *)&a, sizeof a); /* EINPROGRESS: fine */
    }
    sleep_ms(50); /* the handshakes that can complete, complete */
    return fd;
}

/* openssl s_server on 127.0.0.1:*port with a certificate made now, self-signed for
 * localhost, in `dir`. Its pid, or -1. */
static pid_t start_tls_server(const char *dir, unsigned *port)
{
    char command[512], accept_at[32], cert[128], key[128];
    pid_t pid;
    int fd = -1;

    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(command, sizeof command,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
             "-subj /CN=localhost -keyout %s -out %s >/dev/null 2>&1",
             key, cert);
    if (system(command) != 0)
        return -1;
    *port = free_port();
    snprintf(accept_at, sizeof accept_at, "127.0.0.1:%u", *port);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);

        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("openssl", "openssl", "s_server", "-quiet", "-www", "-accept", accept_at, "-cert",
               cert, "-key", key, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 200 && fd < 0; i++) { /* until it listens */
        fd = raw_connect(*port);
        if (fd < 0)
            sleep_ms(25);
    }
    if (fd >= 0)
        close(fd);
    return pid;
}

static void stop_tls_server(pid_t pid, const char *dir)
{
    char path[128];

    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    snprintf(path, sizeof path, "%s/cert.pem", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/key.pem", dir);
    unlink(path);
    rmdir(dir);
}

/* Every route has one server and no retries; %1$u is the shared test upstream. */
static const char errors_config[] =
    SERVER "routes:\n"
           "  - name: dns\n    match: {path_prefix: /dns}\n"
           "    upstream: \"http://nosuch.invalid:80\"\n    timeout: 2s\n"
           "  - name: refused\n    match: {path_prefix: /refused}\n"
           "    upstream: \"http://127.0.0.1:%2$u\"\n"
           "  - name: connect-timeout\n    match: {path_prefix: /ctimeout}\n"
           "    upstream: \"http://127.0.0.1:%3$u\"\n    connect_timeout: 300ms\n"
           "  - name: tls\n    match: {path_prefix: /tls/}\n"
           "    upstream: \"https://127.0.0.1:%4$u\"\n    tls_verify: true\n"
           "  - name: tls-unchecked\n    match: {path_prefix: /tlsok/}\n"
           "    upstream: \"https://127.0.0.1:%4$u\"\n    tls_verify: false\n"
           "  - name: reset\n    match: {path_prefix: /reset}\n"
           "    upstream: \"http://127.0.0.1:%5$u\"\n"
           "  - name: timeout\n    match: {path_prefix: /timeout}\n"
           "    upstream: \"http://127.0.0.1:%6$u\"\n    timeout: 300ms\n"
           "  - name: too-large\n    match: {path_prefix: /huge}\n"
           "    upstream: \"http://127.0.0.1:%7$u\"\n"
           "  - name: cut\n    match: {path_prefix: /cut}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n"
           "  - name: invalid\n    match: {path_prefix: /garbage}\n"
           "    upstream: \"http://127.0.0.1:%1$u\"\n";

struct fault_case {
    const char *kind, *route, *target, *path; /* path: the target without its query */
    long status;                              /* what the client gets */
    struct url server;
    bool quick; /* fails at once: five in a row are cheap to make */
};

/* Five failures of one kind at one server are logged at most once a second: however long
 * they took, no two of their lines are less than a second apart, by the lines' own stamps.
 * (0.8 s: the stamp is taken just after the decision to log, and a loaded machine may pause
 * a thread between the two; five quick failures without the rule log within milliseconds.) */
static void expect_logged_once_a_second(const char *label, const char *logged_line)
{
    double at[8], closest = 1e9;
    int n = log_times(logged_line, at, 8);

    for (int i = 1; i < n && i < 8; i++)
        if (at[i] - at[i - 1] < closest)
            closest = at[i] - at[i - 1];
    check_case(n >= 1 && n <= 5 && closest >= 0.8, label,
               "%d log lines \"%s\" for five failures, the closest two %.3f s apart; expected "
               "at most one a second",
               n, logged_line, n > 1 ? closest : 0);
}

static void check_fault(const struct fault_case *c)
{
    char label[64], detail[64], logged_line[256];
    struct reply r;
    long status;
    int failed;

    snprintf(label, sizeof label, "upstream_error %s", c->kind);
    snprintf(detail, sizeof detail, "(%s)", c->kind);
    snprintf(logged_line, sizeof logged_line, "route %s: server %s: %s:", c->route, c->server.text,
             c->kind);
    failed = http(gw.port, "GET", c->target, NULL, NULL, &r);
    status = r.status;
    check_case(r.status == c->status, label, "status %ld, expected %ld", r.status, c->status);
    if (c->status >= 500)
        check_case(failed == 0 && r.body != NULL && strstr(r.body, detail) != NULL &&
                       header(&r, "Content-Type") != NULL &&
                       strcmp(header(&r, "Content-Type"), "application/problem+json") == 0,
                   label, "the problem+json detail does not say %s: %s", detail,
                   r.body ? r.body : "");
    else
        check_case(failed != 0, label, "the client got a whole body of %zu bytes", r.body_len);
    reply_free(&r);
    expect_access(label, c->path, 1, c->status, c->kind, c->server.text);
    expect_idle(label, c->route, c->server.text);
    check_case(wait_for_log(&gw, logged_line, 1, 2000), label, "no log line \"%s\"", logged_line);
    if (!c->quick || status != c->status)
        return; /* five slow failures would take seconds */
    for (int i = 0; i < 4; i++) {
        http(gw.port, "GET", c->target, NULL, NULL, &r);
        reply_free(&r);
    }
    expect_access(label, c->path, 5, c->status, c->kind, c->server.text);
    expect_logged_once_a_second(label, logged_line);
}

static void test_each_upstream_error(void)
{
    char dir[] = "/tmp/sluice-it-tls-XXXXXX";
    unsigned refused = dead[0], full_port = 0, tls_port = 0;
    int fillers[4] = {-1, -1, -1, -1}, full;
    pid_t tls = -1;

    recorders_plain();
    full = full_listener(&full_port, fillers, 4);
    CU_ASSERT_TRUE(full >= 0);
    if (mkdtemp(dir) != NULL)
        tls = start_tls_server(dir, &tls_port);
    CU_ASSERT_TRUE(tls > 0);
    recorder_set_mode(&recs[0], RECORDER_CLOSE_AFTER_READ);
    recorder_set_close_at(&recs[0], 1);
    recorder_set_delay(&recs[1], 1500);
    recorder_set_mode(&recs[2], RECORDER_HUGE_HEAD);
    if (start_sluice(&gw, errors_config, upstream.port, refused, full_port, tls_port, recs[0].port,
                     recs[1].port, recs[2].port) != 0) {
        CU_FAIL("sluice did not start");
    } else {
        const struct fault_case cases[] = {
            {"dns", "dns", "/dns/x", "/dns/x", 502, {"http://nosuch.invalid:80"}, true},
            {"refused", "refused", "/refused/x", "/refused/x", 502, url_of(refused, ""), true},
            {"connect_timeout", "connect-timeout", "/ctimeout/x", "/ctimeout/x", 502,
             url_of(full_port, ""), false},
            {"tls", "tls", "/tls/x", "/tls/x", 502, {""}, true},
            {"reset", "reset", "/reset/x", "/reset/x", 502, url_of(recs[0].port, ""), true},
            {"timeout", "timeout", "/timeout/x", "/timeout/x", 504, url_of(recs[1].port, ""),
             false},
            {"too_large", "too-large", "/huge/x", "/huge/x", 502, url_of(recs[2].port, ""), true},
            {"cut", "cut", "/cut?n=1000", "/cut", 200, url_of(upstream.port, ""), false},
            {"invalid", "invalid", "/garbage", "/garbage", 502, url_of(upstream.port, ""), true},
        };
        struct reply r;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            struct fault_case c = cases[i];

            if (strcmp(c.kind, "tls") == 0)
                snprintf(c.server.text, sizeof c.server.text, "https://127.0.0.1:%u", tls_port);
            if (strcmp(c.kind, "tls") != 0 || tls > 0)
                check_fault(&c);
        }
        /* The TLS server itself is fine: without verification it answers. */
        http(gw.port, "GET", "/tlsok/x", NULL, NULL, &r);
        check_case(r.status == 200, "tls_verify false", "status %ld", r.status);
        reply_free(&r);
        stop_gateway();
    }
    for (int i = 0; i < 4; i++)
        if (fillers[i] >= 0)
            close(fillers[i]);
    if (full >= 0)
        close(full);
    stop_tls_server(tls, dir);
    recorders_plain();
}

/* sluice --check accepts a config whose upstream host does not resolve (it may later), and
 * says so. */
static void test_check_warns_unresolvable(void)
{
    char path[] = "/tmp/sluice-it-dns-XXXXXX", args[128], out[4096];
    const char yaml[] = "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                        "  - name: nowhere\n    match: {path_prefix: /}\n"
                        "    upstream: {servers: [\"http://127.0.0.1:9\", "
                        "\"http://nosuch.invalid:8080/x\"]}\n";
    int fd = mkstemp(path), rc;

    CU_ASSERT_TRUE_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, yaml, sizeof yaml - 1), (ssize_t)(sizeof yaml - 1));
    close(fd);
    snprintf(args, sizeof args, "--check -c %s", path);
    rc = run_sluice(args, out, sizeof out);
    check_case(rc == 0, "--check, unresolvable host", "exit %d: %s", rc, out);
    check_case(strstr(out, "route nowhere: the upstream host nosuch.invalid does not resolve") !=
                   NULL,
               "--check, unresolvable host", "no warning in: %s", out);
    unlink(path);
}

void register_backends_tests(void)
{
    CU_pSuite s = add_suite_with("backends", init, clean);

    add_test(s, "balance: round_robin by weight, least_request, random_two", test_balance);
    add_test(s, "a server killed under load is skipped, probed, and let back", test_killed_server);
    add_test(s, "only GET HEAD PUT DELETE OPTIONS are retried", test_methods_retried);
    add_test(s, "503 in fail_on and retries.on", test_status_outcomes);
    add_test(s, "retries stay within the retry budget", test_retry_budget);
    add_test(s, "a retry is not charged to the limiter again", test_retry_not_charged);
    add_test(s, "active health checks flip a server down and up", test_active_checks);
    add_test(s, "panic mode: every server down still serves; /readyz", test_panic);
    add_test(s, "strip_prefix: the rest of the target byte for byte", test_strip_prefix);
    add_test(s, "host: preserve, upstream, a name", test_host_modes);
    add_test(s, "set_headers and remove_headers on the wire", test_set_and_remove_headers);
    add_test(s, "${request.client_addr} behind a trusted proxy and not",
             test_client_addr_behind_trusted_proxy);
    add_test(s, "remove_headers of the X-Forwarded- fields removes the gateway's too",
             test_remove_forwarded_fields);
    add_test(s, "each upstream_error: answer, access log, one log line a second",
             test_each_upstream_error);
    add_test(s, "--check warns of an upstream host that does not resolve",
             test_check_warns_unresolvable);
}
