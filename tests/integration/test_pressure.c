/* Pressure from outside the gateway: a log reader that stops reading, too few file
 * descriptors, more clients than max_connections, a flood of failed TLS handshakes. Each may
 * cost log lines or make clients wait, counted in /metrics, but never stop the gateway or flood
 * its log. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

/* How a pressed sluice is started. */
struct pressure {
    bool stdout_stalled;             /* stdout on a FIFO the test holds open and never reads */
    bool stderr_stalled;             /* the same for stderr */
    rlim_t nofile_soft, nofile_hard; /* RLIMIT_NOFILE in the child; 0: inherited */
};

static int stalled_reader[2] = {-1, -1}; /* the test's ends of the FIFOs: stdout, stderr */

/* A FIFO at `path` with the test's end open for reading (never read), or -1. */
static int make_stalled_fifo(const char *path)
{
    unlink(path);
    if (mkfifo(path, 0600) != 0)
        return -1;
    /* Non-blocking so that opening does not wait for the writer; it is never read anyway. */
    return open(path, O_RDONLY | O_NONBLOCK);
}

/* Stops it (SIGTERM, up to `wait_ms`) and closes the test's ends of the FIFOs. */
static int stop_pressed(struct proc *p, int wait_ms)
{
    int status = stop_sluice(p, wait_ms);

    for (int i = 0; i < 2; i++)
        if (stalled_reader[i] >= 0) {
            close(stalled_reader[i]);
            stalled_reader[i] = -1;
        }
    return status;
}

/* Like start_sluice(), but as `how` says, and on ports picked here: "%1$u" in `yaml` is the
 * upstream's port, "%2$u" the proxy's, "%3$u" the admin port's (which it must listen on: the
 * start is seen by /healthz answering, since the log may be a FIFO). stderr and stdout are
 * p->log_path and p->access_path, regular files unless stalled. 0, or -1. */
static int start_pressed(struct proc *p, const struct pressure *how, const char *yaml)
{
    FILE *config;
    int fd;

    memset(p, 0, sizeof *p);
    p->port = free_port();
    do
        p->admin_port = free_port();
    while (p->admin_port == p->port);
    snprintf(p->config_path, sizeof p->config_path, "/tmp/sluice-pressure-XXXXXX");
    fd = mkstemp(p->config_path);
    if (fd < 0 || (config = fdopen(fd, "w")) == NULL)
        return -1;
    {
        /* In the serving mode the suite runs in (harness.h), like start_sluice()'s. */
        char *formatted = NULL, *text;
        size_t len = 0;
        FILE *out = open_memstream(&formatted, &len);

        fprintf(out, yaml, upstream.port, p->port, p->admin_port);
        fclose(out);
        text = serving_mode() != NULL ? with_serving_mode(formatted) : formatted;
        fputs(text, config);
        if (text != formatted)
            free(text);
        free(formatted);
    }
    fclose(config);
    snprintf(p->log_path, sizeof p->log_path, "%s.log", p->config_path);
    snprintf(p->access_path, sizeof p->access_path, "%s.access", p->config_path);
    if (how->stdout_stalled && (stalled_reader[0] = make_stalled_fifo(p->access_path)) < 0)
        return -1;
    if (how->stderr_stalled && (stalled_reader[1] = make_stalled_fifo(p->log_path)) < 0)
        return -1;

    p->pid = fork();
    if (p->pid == 0) {
        /* The test's ends stay open in the parent; O_WRONLY does not wait since they are. */
        int log = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int access = open(p->access_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        struct rlimit nofile = {how->nofile_soft, how->nofile_hard};

        dup2(log, STDERR_FILENO);
        dup2(access, STDOUT_FILENO);
        close(log);
        close(access);
        if (how->nofile_hard > 0 && setrlimit(RLIMIT_NOFILE, &nofile) != 0)
            _exit(126);
        execl(sluice_binary(), "sluice", "-c", p->config_path, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        struct reply r;
        int status;

        if (http(p->admin_port, "GET", "/healthz", NULL, NULL, &r) == 0 && r.status == 200) {
            reply_free(&r);
            return 0;
        }
        reply_free(&r);
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            p->pid = 0;
            break;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "sluice did not start\n");
    stop_pressed(p, 100);
    return -1;
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

/* `n` GETs of `target`, each on a connection of its own, one after the other; stops at the
 * first that is not answered `status` and ended (whole, or cut by the server) within 30 s.
 * Returns how many were. */
static int requests_answered(unsigned port, const char *target, int n, long status)
{
    CURL *curl = curl_easy_init();
    char url[256];
    int answered = 0;

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, target);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    for (int i = 0; i < n; i++) {
        CURLcode rc = curl_easy_perform(curl);
        long got = 0;

        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &got);
        if (got != status || (rc != CURLE_OK && rc != CURLE_PARTIAL_FILE))
            break;
        answered++;
    }
    curl_easy_cleanup(curl);
    return answered;
}

/* Lines of `text` holding `what`. */
static int lines_with(const char *text, const char *what)
{
    int n = 0;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);

        if (memmem(line, len, what, strlen(what)) != NULL)
            n++;
        line = end ? end + 1 : line + len;
    }
    return n;
}

/* A client connection that sends nothing, or -1. */
static int idle_connection(unsigned port)
{
    return raw_connect(port);
}

/* True when the server closes `fd` (EOF or a reset) within `timeout_ms`. */
static bool closed_by_server(int fd, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    char byte;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return recv(fd, &byte, 1, 0) == 0 || errno == ECONNRESET;
}

#define ROUTE                                                                                      \
    "routes:\n  - name: r\n    match: {path_prefix: /}\n"                                          \
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
#define LISTEN "listen: \"127.0.0.1:%2$u\", admin_listen: \"127.0.0.1:%3$u\""

/* stdout on a pipe whose reader stopped: before, the access log's blocking write() held each
 * request's thread once the pipe's 64 KiB were full, until max_connections were held and the
 * gateway stopped answering; and the stop waited on the pipe forever. */
static void test_stalled_access_log(void)
{
    const struct pressure how = {.stdout_stalled = true};
    enum { REQUESTS = 3000 };
    double dropped, start;
    struct proc p;

    CU_ASSERT_EQUAL_FATAL(
        start_pressed(&p, &how, "server: {" LISTEN ", max_connections: 256}\n" ROUTE), 0);
    CU_ASSERT_EQUAL(requests_answered(p.port, "/status/200", REQUESTS, 200), REQUESTS);
    /* 3,000 lines of ~200 bytes: more than the pipe and the 256 KiB queue hold. */
    dropped = metric(&p, "sluice_log_dropped_total{log=\"access\"}");
    CU_ASSERT_TRUE(dropped > 0);
    CU_ASSERT_EQUAL(metric(&p, "sluice_log_dropped_total{log=\"error\"}"), 0);
    /* Generous: the log gets at most 1 s of the stop. */
    start = seconds_now();
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
    fprintf(stderr, "(%.0f lines dropped, stopped in %.1f s) ", dropped, seconds_now() - start);
}

/* The same for stderr: a cut upstream body logs a warning on the request's thread. */
static void test_stalled_error_log(void)
{
    const struct pressure how = {.stderr_stalled = true};
    enum { REQUESTS = 2000 };
    struct proc p;

    CU_ASSERT_EQUAL_FATAL(start_pressed(&p, &how,
                                        "server: {" LISTEN ", max_connections: 256, "
                                        "access_log: \"off\"}\n" ROUTE),
                          0);
    CU_ASSERT_EQUAL(requests_answered(p.port, "/cut?n=10", REQUESTS, 200), REQUESTS);
    CU_ASSERT_EQUAL(requests_answered(p.port, "/status/200", 1, 200), 1);
    CU_ASSERT_TRUE(metric(&p, "sluice_log_dropped_total{log=\"error\"}") > 0);
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
}

/* The soft limit on open files is raised to the hard one, with a warning when max_connections
 * can need more. */
static void test_fd_limit_raised(void)
{
    const struct pressure how = {.nofile_soft = 64, .nofile_hard = 1000};
    char path[64], line[256];
    unsigned long long soft = 0;
    struct proc p;
    char *log;
    FILE *f;

    /* The default max_connections, 1024, can need more than 1000. */
    CU_ASSERT_EQUAL_FATAL(start_pressed(&p, &how, "server: {" LISTEN "}\n" ROUTE), 0);
    snprintf(path, sizeof path, "/proc/%d/limits", (int)p.pid);
    f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Max open files %llu", &soft) == 1)
            break;
    if (f != NULL)
        fclose(f);
    CU_ASSERT_EQUAL(soft, 1000);
    CU_ASSERT_TRUE(wait_for_log(&p, "open files: the limit is 1000", 1, 5000));
    log = read_log(&p);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "max_connections 1024"));
    free(log);
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
}

/* 64 open files and 80 clients: past the limit accept() fails. Before, libmicrohttpd retried it
 * at once, forever, with two log lines a time (74 MB in 5 s). Now accepting pauses and the log
 * says so once a second; the clients beyond the limit wait, and are served once others leave. */
static void test_out_of_fds(void)
{
    const struct pressure how = {.nofile_soft = 64, .nofile_hard = 64};
    enum { CLIENTS = 80 };
    int clients[CLIENTS];
    double errors;
    struct proc p;
    char *log;

    CU_ASSERT_EQUAL_FATAL(start_pressed(&p, &how, "server: {" LISTEN "}\n" ROUTE), 0);
    for (int i = 0; i < CLIENTS; i++)
        clients[i] = idle_connection(p.port); /* the kernel's backlog takes them all */
    sleep_ms(3000);
    for (int i = 0; i < CLIENTS; i++)
        if (clients[i] >= 0)
            close(clients[i]);
    /* Served again once the clients are gone (the listen backlog drains first). */
    CU_ASSERT_EQUAL(requests_answered(p.port, "/status/200", 1, 200), 1);
    errors = metric(&p, "sluice_accept_errors_total");
    CU_ASSERT_TRUE(errors > 0);
    log = read_log(&p);
    /* A pause of 100 ms and a line a second: about 4 lines; before, a hundred thousand. */
    CU_ASSERT_TRUE(lines_with(log, "accept") < 50);
    CU_ASSERT_TRUE(strlen(log) < 64 * 1024);
    fprintf(stderr, "(%.0f accept errors, %d lines) ", errors, lines_with(log, "accept"));
    free(log);
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
}

/* At max_connections libmicrohttpd closes each new connection at once, with a log line each;
 * a client retrying in a loop so wrote a line per try. Now counted, and logged once a second. */
static void test_max_connections_refusals(void)
{
    const struct pressure how = {0};
    enum { HELD = 4, REFUSED = 20 };
    int held[HELD], refused = 0;
    struct proc p;
    char *log;

    CU_ASSERT_EQUAL_FATAL(
        start_pressed(&p, &how, "server: {" LISTEN ", max_connections: 4}\n" ROUTE), 0);
    for (int i = 0; i < HELD; i++)
        held[i] = idle_connection(p.port);
    for (int i = 0; i < 500 && metric(&p, "sluice_connections_active") < HELD; i++)
        sleep_ms(10);
    CU_ASSERT_EQUAL(metric(&p, "sluice_connections_active"), HELD);
    for (int i = 0; i < REFUSED; i++) {
        int fd = idle_connection(p.port);

        refused += fd >= 0 && closed_by_server(fd, 10000);
        if (fd >= 0)
            close(fd);
    }
    CU_ASSERT_EQUAL(refused, REFUSED);
    CU_ASSERT_TRUE(metric(&p, "sluice_connections_rejected_total") >= REFUSED);
    for (int i = 0; i < HELD; i++)
        if (held[i] >= 0)
            close(held[i]);
    /* The error log is written by its own thread (log.h): the line comes soon, not at once. */
    CU_ASSERT_TRUE(wait_for_log(&p, "connection limit", 1, 5000));
    log = read_log(&p);
    /* Once a second: one line, or a few on a slow machine; before, one per refusal. */
    CU_ASSERT_TRUE(lines_with(log, "connection limit") <= 5);
    free(log);
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
}

/* Lines in the file at `path`. */
static int file_lines(const char *path)
{
    char *text = read_file(path);
    int n = lines_with(text, "{");

    free(text);
    return n;
}

/* Whether `pid` has `path` open. */
static bool has_open(pid_t pid, const char *path)
{
    char dir[64], link[128], target[256];
    bool found = false;

    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    for (int fd = 0; fd < 1024 && !found; fd++) {
        ssize_t n;

        snprintf(link, sizeof link, "%s/%d", dir, fd);
        n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strcmp(target, path) == 0;
        }
    }
    return found;
}

/* The queue writes an access-log file through a duplicate of its own, since the runtime that
 * opened the file closes it when its last request ends, maybe before the line is written:
 * after a reload to another file each line still goes to the file of the config that served
 * it, and the old file is let go once its lines are written. */
static void test_access_log_file_across_reload(void)
{
    const struct pressure how = {0};
    char before[64] = "/tmp/sluice-pressure-before-XXXXXX";
    char after[64] = "/tmp/sluice-pressure-after-XXXXXX";
    char yaml[512];
    struct proc p;
    int wait;

    close(mkstemp(before));
    close(mkstemp(after));
    snprintf(yaml, sizeof yaml, "server: {%s, access_log: \"%s\"}\n%s", LISTEN, before, ROUTE);
    CU_ASSERT_EQUAL_FATAL(start_pressed(&p, &how, yaml), 0);
    CU_ASSERT_EQUAL(requests_answered(p.port, "/status/200", 10, 200), 10);
    for (wait = 0; wait < 500 && file_lines(before) < 10; wait++)
        sleep_ms(10);
    CU_ASSERT_EQUAL(file_lines(before), 10);

    snprintf(yaml, sizeof yaml, "server: {%s, access_log: \"%s\"}\n%s", LISTEN, after, ROUTE);
    rewrite_config(&p, false, yaml, upstream.port, p.port, p.admin_port);
    for (wait = 0; wait < 500 && metric(&p, "sluice_config_reloads_total{result=\"success\"}") < 1;
         wait++)
        sleep_ms(10);
    CU_ASSERT_EQUAL(requests_answered(p.port, "/status/200", 5, 200), 5);
    for (wait = 0; wait < 500 && file_lines(after) < 5; wait++)
        sleep_ms(10);
    CU_ASSERT_EQUAL(file_lines(after), 5);
    CU_ASSERT_EQUAL(file_lines(before), 10);
    /* Let go a second after its last line (log.c, SINK_IDLE_NS); 5 s is generous. */
    for (wait = 0; wait < 500 && has_open(p.pid, before); wait++)
        sleep_ms(10);
    CU_ASSERT_FALSE(has_open(p.pid, before));
    CU_ASSERT_TRUE(has_open(p.pid, after));
    CU_ASSERT_EQUAL(metric(&p, "sluice_log_dropped_total{log=\"access\"}"), 0);
    CU_ASSERT_EQUAL(stop_pressed(&p, 5000), 0);
    unlink(before);
    unlink(after);
}

/* --- failed TLS handshakes -------------------------------------------------------------- */

#define HANDSHAKE_FAILED "tls: a handshake failed"

/* One failed handshake of kind `kind` (of four): plain HTTP, a TLS record of garbage, a
 * ClientHello cut short, or nothing; each then the client's FIN. True when the server closed
 * the connection, unanswered, within 10 s. */
static bool failed_handshake(unsigned port, int kind)
{
    static const char plain[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char garbage[] = "\x16\x03\x01\x00\x05hello";
    static const char cut_hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                                    "0123456789abcdef0123456789abcdef";
    static const struct {
        const char *bytes;
        size_t len;
    } kinds[] = {{plain, sizeof plain - 1},
                 {garbage, sizeof garbage - 1},
                 {cut_hello, sizeof cut_hello - 1},
                 {"", 0}};
    struct timeval tv = {10, 0};
    char answer[512];
    size_t got = 0;
    ssize_t n;
    int fd = raw_connect(port);

    if (fd < 0)
        return false;
    /* The server may close (even reset) before the client is done: sending and shutting down
     * then fail, and the reads below see the close. */
    send(fd, kinds[kind].bytes, kinds[kind].len, MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while ((n = recv(fd, answer + got, sizeof answer - 1 - got, 0)) > 0 &&
           got + (size_t)n < sizeof answer - 1)
        got += (size_t)n;
    answer[got] = '\0';
    close(fd);
    return (n == 0 || (n < 0 && errno == ECONNRESET)) && strstr(answer, "HTTP/") == NULL;
}

/* The time of a text log line ("2026-01-31T12:00:00.123Z warn ...") in ms since the epoch, or
 * -1. */
static int64_t line_ms(const char *line)
{
    struct tm tm = {0};
    int ms;

    if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* The handshake lines of `log`: how many, the least time between two in a row (ms), and the
 * failures they account for (each itself and "and N more since the last such line"). */
static void handshake_lines(const char *log, int *lines, int64_t *least_gap_ms,
                            unsigned long *accounted)
{
    int64_t last = -1;

    *lines = 0;
    *least_gap_ms = INT64_MAX;
    *accounted = 0;
    for (const char *at = log; (at = strstr(at, HANDSHAKE_FAILED)) != NULL; at++) {
        const char *line = at, *more = strstr(at, "(and ");
        int64_t ms;

        while (line > log && line[-1] != '\n')
            line--;
        ms = line_ms(line);
        if (last >= 0 && ms - last < *least_gap_ms)
            *least_gap_ms = ms - last;
        last = ms;
        (*lines)++;
        *accounted += 1 + (more != NULL ? strtoul(more + 5, NULL, 10) : 0);
    }
}

/* docs/security.md: against "a TLS handshake flood ... to fill the log", "failed handshakes are
 * logged at most once a second". For 2.5 s, failed handshakes one after another (four kinds);
 * each is closed unanswered; the log grows by handshake lines alone, at least 0.8 s apart (the
 * gateway stamps a line as it allows it; the margin is for a thread descheduled between the
 * two), about one per second of the flood; and their counts of the lines left out add up to
 * every failure. */
static void test_tls_handshake_flood(void)
{
    char key[64], cert[64], *log;
    unsigned long failures = 0, unclosed = 0, accounted;
    int lines, lines_before;
    int64_t least_gap;
    double started, lasted;
    struct proc p;

    CU_ASSERT_EQUAL_FATAL(make_self_signed("flood", key, cert), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&p,
                                       "server: {listen: \"127.0.0.1:0\", tls: {cert: %2$s, "
                                       "key: %3$s}}\n" ROUTE,
                                       upstream.port, cert, key),
                          0);
    log = read_log(&p);
    lines_before = lines_with(log, "");
    free(log);
    started = seconds_now();
    while ((lasted = seconds_now() - started) < 2.5) {
        unclosed += !failed_handshake(p.port, (int)(failures % 4));
        failures++;
    }
    /* The lines left out since the last one are told on the next: one more, past the second. */
    sleep_ms(1200);
    unclosed += !failed_handshake(p.port, 0);
    failures++;
    CU_ASSERT_TRUE(wait_for_log(&p, HANDSHAKE_FAILED, 2, 5000));
    for (int waited = 0; waited < 5000; waited += 50) { /* until the last line tells it all */
        log = read_log(&p);
        handshake_lines(log, &lines, &least_gap, &accounted);
        if (accounted >= failures)
            break;
        free(log);
        log = NULL;
        sleep_ms(50);
    }
    if (log == NULL)
        log = read_log(&p);
    fprintf(stderr, "(%lu failed handshakes in %.1f s, %d lines) ", failures, lasted, lines);
    CU_ASSERT_TRUE(failures >= 20);
    check_case(unclosed == 0, "failed handshakes", "%lu of %lu not closed unanswered", unclosed,
               failures);
    check_case(lines >= 2 && lines <= (int)lasted + 3, "handshake lines",
               "%d lines for %lu failures over %.1f s", lines, failures, lasted);
    check_case(least_gap >= 800, "handshake lines", "two lines %lld ms apart",
               (long long)least_gap);
    check_case(accounted == failures, "handshake lines", "they account for %lu of %lu failures",
               accounted, failures);
    check_case(lines_with(log, "") == lines_before + lines, "the log",
               "%d lines more, %d of them handshake lines: %s", lines_with(log, "") - lines_before,
               lines, log);
    free(log);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
    remove(key);
    remove(cert);
}

void register_pressure_tests(void)
{
    CU_pSuite s = add_suite("pressure");

    add_test(s, "a stalled access-log reader costs log lines, not answers",
             test_stalled_access_log);
    add_test(s, "a stalled error-log reader costs log lines, not answers", test_stalled_error_log);
    add_test(s, "an access-log file is written whole across a reload, then let go",
             test_access_log_file_across_reload);
    add_test(s, "the soft fd limit is raised, with a warning when it is short",
             test_fd_limit_raised);
    add_test(s, "out of fds: accepting pauses, the log stays small, service resumes",
             test_out_of_fds);
    add_test(s, "refusals at max_connections are counted and logged once a second",
             test_max_connections_refusals);
    add_test(s, "failed TLS handshakes are logged once a second", test_tls_handshake_flood);
}
