/* Live reloads: SIGHUP, file edits and a Kubernetes ConfigMap's symlink swap change limits;
 * state survives; bad files change nothing; environment variables; a thousand reloads under
 * load; requests in flight finish on the config they started with. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define ONE_ROUTE(requests)                                                                        \
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", watch_config: %2$s}\n"       \
    "routes:\n  - name: r\n    match: {path_prefix: /}\n"                                          \
    "    upstream: \"http://127.0.0.1:%1$u\"\n"                                                    \
    "    limit: {algorithm: fixed_window, requests: " requests ", per: 1h}\n"

static void test_sighup_changes_a_limit(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("1"), upstream.port, "false"), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    rewrite_config(&gw, true, ONE_ROUTE("3"), upstream.port, "false");
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    /* The limit changed, so it starts afresh: the full new quota. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 1);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static void test_file_edits_reload(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("1"), upstream.port, "true"), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    /* As an editor saves: a new file renamed over the old one. */
    rewrite_config(&gw, false, ONE_ROUTE("2"), upstream.port, "true");
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    /* As `echo > file` does: written in place. */
    rewrite_config(&gw, true, ONE_ROUTE("1"), upstream.port, "true");
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 2, 3000));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* An invalid file changes nothing: every error is logged, the old config (and its clients'
 * state) serves on, the failure is counted. */
static void test_invalid_reload_changes_nothing(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("1"), upstream.port, "false"), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    rewrite_config(&gw, true,
                   "server: {listen: \"127.0.0.1:0\", watch_config: false, colour: red}\n"
                   "routes:\n  - name: r\n    match: {path_prefix: /}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n"
                   "    limit: {algorithm: fixed_window, requests: lots, per: 1h}\n",
                   upstream.port);
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reload rejected", 2, 3000));
    CU_ASSERT_TRUE(wait_for_log(&gw, ":1:54: server: unknown key \"colour\"", 1, 0));
    CU_ASSERT_TRUE(wait_for_log(&gw, ":6:48: requests: \"lots\"", 1, 0));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL),
                    429); /* the old limit, and the client's state */
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"failure\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A route whose limit is unchanged keeps every client's state across a reload that changes
 * other things; a removed route is gone; listen changes are logged as needing a restart. */
static void test_state_survives_reload(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("2"), upstream.port, "false"), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    rewrite_config(&gw, true,
                   "server: {listen: \"127.0.0.1:1\", admin_listen: \"127.0.0.1:0\", "
                   "watch_config: false}\n"
                   "routes:\n  - name: other\n    match: {path_prefix: /other/}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n"
                   "  - name: r\n    match: {path_prefix: /}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n"
                   "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n",
                   upstream.port);
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_TRUE(wait_for_log(&gw, "server.listen changed; it takes effect on restart", 1, 0));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);       /* still spent */
    CU_ASSERT_EQUAL(get_status(gw.port, "/other/x", NULL), 200); /* the new route, unlimited */
    /* Remove r: its requests now find no route. */
    rewrite_config(&gw, true,
                   "server: {listen: \"127.0.0.1:1\", admin_listen: \"127.0.0.1:0\", "
                   "watch_config: false}\n"
                   "routes:\n  - name: other\n    match: {path_prefix: /other/}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n",
                   upstream.port);
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 2, 3000));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 404);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static void test_environment_variables(void)
{
    struct proc gw;
    char upstream_url[64], out[1024], path[64];
    FILE *check;
    size_t n;

    snprintf(upstream_url, sizeof upstream_url, "http://127.0.0.1:%u", upstream.port);
    setenv("SLUICE_IT_UPSTREAM", upstream_url, 1);
    unsetenv("SLUICE_IT_REQUESTS");
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, "server: {listen: \"127.0.0.1:0\"}\nroutes:\n  - name: r\n"
                          "    match: {path_prefix: /}\n    upstream: \"${SLUICE_IT_UPSTREAM}\"\n"
                          "    limit: {algorithm: gcra, requests: \"${SLUICE_IT_REQUESTS:-2}\", "
                          "per: 1h}\n"),
        0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    /* Unset and without a default: an error at its place. */
    unsetenv("SLUICE_IT_UPSTREAM");
    check = fopen(scratch_path(path, sizeof path, "env.yaml"), "w");
    fputs("routes:\n  - name: r\n    match: {path_prefix: /}\n"
          "    upstream: \"${SLUICE_IT_UPSTREAM}\"\n",
          check);
    fclose(check);
    snprintf(out, sizeof out, "%s --check -c %s 2>&1", sluice_binary(), path);
    check = popen(out, "r");
    n = fread(out, 1, sizeof out - 1, check);
    out[n] = '\0';
    CU_ASSERT_NOT_EQUAL(pclose(check), 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "-env.yaml:4:15: ${SLUICE_IT_UPSTREAM} is not set and has no default"));
    remove(path);
}

struct load {
    const struct proc *gw;
    atomic_bool stop;
    unsigned ok, denied, other;
};

static void *keep_requesting(void *arg)
{
    struct load *l = arg;

    while (!atomic_load(&l->stop)) {
        long status = get_status(l->gw->port, "/x", NULL);

        l->ok += status == 200;
        l->denied += status == 429;
        l->other += status != 200 && status != 429;
    }
    return NULL;
}

/* A thousand reloads, alternating two limits, while requests flow: every request is answered
 * 200 or 429, and (in the sanitizer run) nothing leaks. */
static void test_thousand_reloads_under_load(void)
{
    struct proc gw;
    struct load load = {&gw, false, 0, 0, 0};
    pthread_t threads[2];
    int reloads;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("1000000"), upstream.port, "false"), 0);
    for (int t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, keep_requesting, &load);
    for (reloads = 1; reloads <= 1000; reloads++) {
        rewrite_config(&gw, true, reloads % 2 ? ONE_ROUTE("999999") : ONE_ROUTE("1000000"),
                       upstream.port, "false");
        kill(gw.pid, SIGHUP);
        /* metric_now(): a reload is counted as it takes, not when requests finish, and
         * metric() would wait for a moment with none in flight. */
        for (int waited = 0; waited < 5000; waited++) {
            if (metric_now(&gw, "sluice_config_reloads_total{result=\"success\"}") >= reloads)
                break;
            sleep_ms(1);
        }
    }
    atomic_store(&load.stop, true);
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 1000);
    CU_ASSERT_TRUE(load.ok > 100);
    CU_ASSERT_EQUAL(load.other, 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 10000), 0);
}

/* A reload to a config that is valid but holds a route that can never match takes, and logs
 * the loader's warning at the route's place, naming the route that shadows it. */
static void test_reload_warns(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, ONE_ROUTE("5"), upstream.port, "false"), 0);
    rewrite_config(&gw, true,
                   ONE_ROUTE("1") "  - name: copy\n    match: {path_prefix: /, methods: [GET]}\n"
                                  "    upstream: \"http://127.0.0.1:%1$u\"\n",
                   upstream.port, "false");
    kill(gw.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_TRUE(wait_for_log(&gw,
                                ":8:12: warning: route \"copy\" can never match: route \"r\" "
                                "(line 4) comes first with the same path_prefix /",
                                1, 0));
    /* Route r takes the GETs, as the warning says. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* --- requests in flight across a reload ------------------------------------------------- */

/* Config A or B: "%1$u" the upstream's port, "%2$s" the route's (and its limit's) name, which
 * is also the base path and the X-Config value sent upstream, "%3$s" the limit's requests. */
#define IN_FLIGHT_CONFIG                                                                           \
    "server: {listen: \"127.0.0.1:0\", watch_config: false}\n"                                     \
    "routes:\n  - name: %2$s\n    match: {path_prefix: /}\n"                                       \
    "    upstream: \"http://127.0.0.1:%1$u/%2$s\"\n    set_headers: {X-Config: %2$s}\n"            \
    "    limit: {name: %2$s, algorithm: fixed_window, requests: %3$s, per: 1h}\n"

static struct recorder rec_a, rec_b; /* config A's upstream, and B's */

/* Starts the recorders and sluice on config A. */
static bool start_config_a(struct proc *gw)
{
    if (recorder_start(&rec_a) != 0 || recorder_start(&rec_b) != 0 ||
        start_sluice(gw, IN_FLIGHT_CONFIG, rec_a.port, "alpha", "5") != 0) {
        CU_FAIL("the recorders or sluice did not start");
        return false;
    }
    return true;
}

static void stop_both(struct proc *gw)
{
    CU_ASSERT_EQUAL(stop_sluice(gw, 5000), 0);
    recorder_stop(&rec_a);
    recorder_stop(&rec_b);
}

static bool reload_to_b(struct proc *gw)
{
    rewrite_config(gw, true, IN_FLIGHT_CONFIG, rec_b.port, "beta", "7");
    kill(gw->pid, SIGHUP);
    return wait_for_log(gw, "reloaded", 1, 10000);
}

/* The answer `answer` (its head and body) is config `name`'s: 200 from the recorder, and the
 * RateLimit fields of its limit of `quota`, first charged. */
static void expect_answer_of(const char *label, const char *answer, const char *name, int quota)
{
    char policy[64], remaining[64], shown[1024];

    snprintf(policy, sizeof policy, "\r\nRateLimit-Policy: \"%s\";q=%d;w=3600\r\n", name, quota);
    snprintf(remaining, sizeof remaining, "\r\nRateLimit: \"%s\";r=%d;", name, quota - 1);
    visible_bytes(answer, strlen(answer), shown, sizeof shown);
    check_case(strncmp(answer, "HTTP/1.1 200 ", 13) == 0 && strstr(answer, "\r\n\r\nok") != NULL,
               label, "not the upstream's 200: %s", shown);
    check_case(strstr(answer, policy) != NULL && strstr(answer, remaining) != NULL, label,
               "not config %s's limit: %s", name, shown);
}

/* What `rec` received is one request for `target` with config `name`'s X-Config, and `body`
 * after its head; or, with `target` NULL, nothing. */
static void expect_received(const char *label, struct recorder *rec, const char *target,
                            const char *name, const char *body)
{
    char request_line[96], field[64], shown[1024];
    size_t len;
    char *got = recorder_bytes(rec, &len);
    const char *end = strstr(got, "\r\n\r\n");

    visible_bytes(got, len, shown, sizeof shown);
    if (target == NULL) {
        check_case(len == 0, label, "the other config's upstream received %s", shown);
    } else {
        snprintf(request_line, sizeof request_line, "%s HTTP/1.1\r\n", target);
        snprintf(field, sizeof field, "\r\nX-Config: %s\r\n", name);
        check_case(strncmp(got, request_line, strlen(request_line)) == 0 &&
                       strstr(got, field) != NULL && end != NULL && strcmp(end + 4, body) == 0,
                   label, "config %s's upstream received %s", name, shown);
    }
    free(got);
}

/* The access log line for `path` names route `name`. */
static void expect_logged_route(const struct proc *gw, const char *path, const char *name)
{
    char needle[64], want[64];
    char *log = NULL;
    const char *line = NULL;

    snprintf(needle, sizeof needle, "\"path\":\"%s\"", path);
    snprintf(want, sizeof want, "\"route\":\"%s\"", name);
    for (int waited = 0; waited < 5000 && line == NULL; waited += 20) {
        free(log);
        log = read_file(gw->access_path);
        line = log ? strstr(log, needle) : NULL;
        if (line == NULL)
            sleep_ms(20);
    }
    while (line != NULL && line > log && line[-1] != '\n')
        line--;
    check_case(line != NULL && strstr(line, want) != NULL &&
                   (strchr(line, '\n') == NULL || strstr(line, want) < strchr(line, '\n')),
               path, "its access log line is not route %s's: %.300s", name, line ? line : "none");
    free(log);
}

struct in_flight_get {
    unsigned port;
    char answer[4096];
    atomic_bool done;
};

static void *get_in_flight(void *arg)
{
    static const char request[] = "GET /inflight HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    struct in_flight_get *f = arg;
    bool closed;

    raw_session(f->port, request, sizeof request - 1, f->answer, sizeof f->answer, 20000, &closed);
    atomic_store(&f->done, true);
    return NULL;
}

/* The next request, after the reload: config B's, all of it. */
static void expect_next_on_b(struct proc *gw)
{
    static const char request[] = "GET /after HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    char answer[4096];
    bool closed;

    raw_session(gw->port, request, sizeof request - 1, answer, sizeof answer, 10000, &closed);
    expect_answer_of("the request after the reload", answer, "beta", 7);
    expect_received("the request after the reload", &rec_b, "GET /beta/after", "beta", "");
    expect_logged_route(gw, "/after", "beta");
}

/* README "Requests already running finish on the config they started with; no request sees
 * parts of two." A request waits on config A's slow upstream (3 s) while the config is
 * reloaded to B (another upstream, base path, X-Config field, limit and route name): its
 * answer is A's in full, upstream, fields and access log; the next request is B's. */
static void test_in_flight_keeps_its_config(void)
{
    struct in_flight_get f = {.done = false};
    pthread_t thread;
    struct proc gw;
    bool reloaded;

    if (!start_config_a(&gw))
        return;
    recorder_set_delay(&rec_a, 3000);
    f.port = gw.port;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, get_in_flight, &f), 0);
    for (int waited = 0; waited < 10000 && recorder_received(&rec_a) == 0; waited += 5)
        sleep_ms(5);
    CU_ASSERT_EQUAL(recorder_received(&rec_a), 1); /* A's upstream holds it */
    reloaded = reload_to_b(&gw);
    /* Only a request still waiting when the reload took says anything. */
    check_case(reloaded && !atomic_load(&f.done), "the reload",
               "%s while the request was in flight", reloaded ? "took, but not" : "did not take");
    pthread_join(thread, NULL);
    expect_answer_of("the request in flight", f.answer, "alpha", 5);
    expect_received("the request in flight", &rec_a, "GET /alpha/inflight", "alpha", "");
    expect_received("the request in flight", &rec_b, NULL, NULL, NULL);
    expect_logged_route(&gw, "/inflight", "alpha");
    expect_next_on_b(&gw);
    stop_both(&gw);
}

/* The same for a request whose head came under config A and whose body ends after the reload
 * to B: the upstream exchange it started under A (a body of known length goes upstream from
 * its first byte) is the one it finishes. */
static void test_body_across_reload_keeps_its_config(void)
{
    static const char head[] = "POST /inflight HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                               "Content-Length: 10\r\n\r\n0123";
    char answer[4096];
    size_t got = 0;
    struct proc gw;
    int fd;

    if (!start_config_a(&gw))
        return;
    fd = raw_connect(gw.port);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(send(fd, head, sizeof head - 1, MSG_NOSIGNAL), (ssize_t)sizeof head - 1);
    for (int waited = 0; waited < 10000; waited += 5) { /* A's upstream has the head */
        size_t len;
        char *bytes = recorder_bytes(&rec_a, &len);
        bool started = strstr(bytes, "\r\n\r\n") != NULL;

        free(bytes);
        if (started)
            break;
        sleep_ms(5);
    }
    CU_ASSERT_TRUE(reload_to_b(&gw));
    CU_ASSERT_EQUAL(send(fd, "456789", 6, MSG_NOSIGNAL), 6);
    for (;;) { /* until the gateway closes: the request said Connection: close */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, 10000) <= 0)
            break;
        n = recv(fd, answer + got, sizeof answer - 1 - got, 0);
        if (n <= 0 || (got += (size_t)n) + 1 >= sizeof answer)
            break;
    }
    answer[got] = '\0';
    close(fd);
    expect_answer_of("a body ending after the reload", answer, "alpha", 5);
    expect_received("a body ending after the reload", &rec_a, "POST /alpha/inflight", "alpha",
                    "0123456789");
    expect_received("a body ending after the reload", &rec_b, NULL, NULL, NULL);
    expect_logged_route(&gw, "/inflight", "alpha");
    expect_next_on_b(&gw);
    stop_both(&gw);
}

/* --- a Kubernetes ConfigMap ------------------------------------------------------------- */

/* Writes `yaml` (ONE_ROUTE's format, watching the file), in the serving mode, as the kubelet
 * writes a ConfigMap's version: DIR/VERSION/sluice.yaml. */
static void write_configmap_version(const char *dir, const char *version, const char *yaml)
{
    char path[160], *formatted = NULL, *text;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, version);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/%s/sluice.yaml", dir, version);
    CU_ASSERT_FATAL(asprintf(&formatted, yaml, upstream.port, "true") > 0);
    text = with_serving_mode(formatted);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    free(text);
    free(formatted);
}

/* The kubelet's update (atomic_writer.go): the new version beside the old, a symlink
 * ..data_tmp to it renamed over ..data, then the old version removed. */
static void swap_configmap(const char *dir, const char *old_version, const char *new_version,
                           const char *yaml)
{
    char link[160], target[160];

    write_configmap_version(dir, new_version, yaml);
    snprintf(link, sizeof link, "%s/..data_tmp", dir);
    CU_ASSERT_EQUAL(symlink(new_version, link), 0);
    snprintf(target, sizeof target, "%s/..data", dir);
    CU_ASSERT_EQUAL(rename(link, target), 0);
    snprintf(target, sizeof target, "%s/%s/sluice.yaml", dir, old_version);
    CU_ASSERT_EQUAL(unlink(target), 0);
    snprintf(target, sizeof target, "%s/%s", dir, old_version);
    CU_ASSERT_EQUAL(rmdir(target), 0);
}

/* README "sluice watches the file's directory with inotify, so saving in place, an editor's
 * write-and-rename, and a Kubernetes ConfigMap's symlink swap are all seen", and for the
 * deploy: "the kubelet writes the new files beside the old and swaps the `..data` symlink
 * ..., sluice's watcher sees the swap and reloads; an invalid edit is logged and changes
 * nothing". sluice runs on DIR/sluice.yaml -> ..data/sluice.yaml, ..data -> ..VERSION: the
 * file it was given never changes, only ..data does. */
static void test_configmap_swap_reloads(void)
{
    static const char *const versions[] = {"..2026_01_01_00_00_00.000000001",
                                           "..2026_01_01_00_01_00.000000002",
                                           "..2026_01_01_00_02_00.000000003"};
    char dir[64], path[160], link[160], reloaded[192];
    struct proc gw;

    scratch_path(dir, sizeof dir, "configmap");
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    write_configmap_version(dir, versions[0], ONE_ROUTE("1"));
    snprintf(link, sizeof link, "%s/..data", dir);
    CU_ASSERT_EQUAL(symlink(versions[0], link), 0);
    snprintf(path, sizeof path, "%s/sluice.yaml", dir);
    CU_ASSERT_EQUAL(symlink("..data/sluice.yaml", path), 0);
    if (start_sluice_on(&gw, path) != 0) {
        CU_FAIL("sluice did not start on the ConfigMap's file");
        return;
    }
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);

    swap_configmap(dir, versions[0], versions[1], ONE_ROUTE("3"));
    snprintf(reloaded, sizeof reloaded, "reloaded %s", path);
    check_case(wait_for_log(&gw, reloaded, 1, 10000), "the ..data swap", "no \"%s\" in the log",
               reloaded);
    /* The limit changed, so it starts afresh: the full new quota. */
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);

    /* An invalid version: logged, and the running config serves on. */
    swap_configmap(dir, versions[1], versions[2], ONE_ROUTE("lots"));
    check_case(wait_for_log(&gw, "reload rejected", 1, 10000), "an invalid version",
               "no \"reload rejected\" in the log");
    CU_ASSERT_TRUE(wait_for_log(&gw, "requests: \"lots\"", 1, 0));
    CU_ASSERT_EQUAL(get_status(gw.port, "/x", NULL), 429);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"success\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_config_reloads_total{result=\"failure\"}"), 1);

    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0); /* removes DIR/sluice.yaml and the logs */
    unlink(link);
    snprintf(path, sizeof path, "%s/%s/sluice.yaml", dir, versions[2]);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", dir, versions[2]);
    rmdir(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

void register_reload_tests(void)
{
    CU_pSuite s = add_suite_with("reload", NULL, NULL);

    add_test(s, "SIGHUP changes a limit", test_sighup_changes_a_limit);
    add_test(s, "saving the file reloads it", test_file_edits_reload);
    add_test(s, "an invalid file changes nothing", test_invalid_reload_changes_nothing);
    add_test(s, "clients keep their state across reloads", test_state_survives_reload);
    add_test(s, "${VAR} and ${VAR:-default}", test_environment_variables);
    add_test(s, "a thousand reloads under load", test_thousand_reloads_under_load);
    add_test(s, "a reload logs the loader's warnings", test_reload_warns);
    add_test(s, "a ConfigMap's ..data swap reloads", test_configmap_swap_reloads);
    add_test(s, "a request in flight finishes on its config", test_in_flight_keeps_its_config);
    add_test(s, "a body ending after a reload finishes on its config",
             test_body_across_reload_keeps_its_config);
}
