/* Parked connections (gateway/front/park.h): in event mode a keep-alive connection idle for
 * server.park_idle_after (1s here) after its answer leaves libmicrohttpd and its memory, and comes
 * back with the client's next bytes. What a client sees must not change: every request after a park
 * is answered as before, the upstream receives exactly what it would have, a hostile head is still
 * refused with the connection closed, the caps and client_timeout still hold, and the PROXY
 * protocol's address stays the client's. thread_per_connection never parks. Each config here names
 * its mode, so the suite tests the same whatever $SLUICE_MODE says. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static struct recorder rec;

/* "%2$s" is the mode, "%3$s" park_idle_after, "%4$s" more of the server mapping. */
static const char config[] = "server:\n"
                             "  listen: \"127.0.0.1:0\"\n"
                             "  admin_listen: \"127.0.0.1:0\"\n"
                             "  mode: %2$s\n"
                             "  workers: 2\n"
                             "  park_idle_after: %3$s\n"
                             "%4$s"
                             "routes:\n"
                             "  - name: api\n    match: {path_prefix: /}\n"
                             "    upstream: \"http://127.0.0.1:%1$u\"\n";

static bool start_parking(struct proc *gw, const char *mode, const char *server)
{
    bool started = start_sluice(gw, config, rec.port, mode, "1s", server) == 0;

    check_case(started, mode, "sluice did not start with %s", server);
    recorder_reset(&rec);
    return started;
}

static void expect_clean_exit(struct proc *gw, const char *mode)
{
    int status = stop_sluice(gw, 5000);

    check_case(status == 0, mode, "sluice exited %d on SIGTERM (-1: not within 5 s)", status);
}

static bool send_text(int fd, const char *text)
{
    size_t len = strlen(text);

    return fd >= 0 && send(fd, text, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* Reads from `fd` until `want` whole answers (each with a Content-Length body) have come, the
 * server closes, or `timeout_ms` passes without a byte. The answers read, into `out` (`cap`
 * bytes, NUL-terminated); *closed says whether the server closed. */
static int read_answers(int fd, int want, char *out, size_t cap, int timeout_ms, bool *closed)
{
    size_t got = 0;
    int whole = 0;

    *closed = false;
    out[0] = '\0';
    while (whole < want && got + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        const char *at = out;
        ssize_t n;

        if (poll(&p, 1, timeout_ms) != 1)
            break;
        n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0) {
            *closed = n == 0 || errno == ECONNRESET;
            break;
        }
        got += (size_t)n;
        out[got] = '\0';
        whole = 0;
        for (;;) { /* count the answers that are whole so far */
            const char *end = strstr(at, "\r\n\r\n"),
                       *length = strcasestr(at, "\r\nContent-Length:");

            if (end == NULL || length == NULL || length > end)
                break;
            at = end + 4 + strtoul(length + 17, NULL, 10);
            if (at > out + got)
                break;
            whole++;
        }
    }
    return whole;
}

/* One GET `target` on `fd`, kept alive: its status, or 0 when no whole answer came. */
static int get_on(int fd, const char *target)
{
    char request[256], answer[8192];
    bool closed;
    int status = 0;

    snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: park.test\r\n\r\n", target);
    if (!send_text(fd, request) || read_answers(fd, 1, answer, sizeof answer, 3000, &closed) != 1)
        return 0;
    return sscanf(answer, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

/* Waits up to 5 s for `series` to read `want`; the last value read. */
static double wait_metric(const struct proc *gw, const char *series, double want)
{
    double value = -1;

    for (int i = 0; i < 50; i++) {
        value = metric_now(gw, series);
        if (value == want)
            break;
        sleep_ms(100);
    }
    return value;
}

static double wait_parked(const struct proc *gw, double want)
{
    return wait_metric(gw, "sluice_connections_parked", want);
}

/* How many times the upstream received `text`. */
static int upstream_saw(const char *text)
{
    size_t len;
    char *bytes = recorder_bytes(&rec, &len);
    int n = 0;

    for (const char *at = strstr(bytes, text); at != NULL; at = strstr(at + 1, text))
        n++;
    free(bytes);
    return n;
}

/* --- parking and coming back --------------------------------------------------------------- */

enum { MANY = 200 };

/* 200 connections, one request each, are all parked within a few seconds, still counted as
 * open, and sluice's memory falls by at least half of libmicrohttpd's pools (52 KiB each with
 * the default head limits); each then serves its next request, and parks again. */
static void test_parks_and_comes_back(void)
{
    int fds[MANY], served = 0, again = 0;
    long before, after;
    double parked, active;
    struct proc gw;
    char target[64];

    if (!start_parking(&gw, "event", ""))
        return;
    for (int i = 0; i < MANY; i++) {
        snprintf(target, sizeof target, "/first/%d", i);
        fds[i] = raw_connect(gw.port);
        served += get_on(fds[i], target) == 200;
    }
    check_case(served == MANY, "first requests", "%d of %d answered 200", served, MANY);
    before = proc_kib(gw.pid, "VmRSS");
    parked = wait_parked(&gw, MANY);
    after = proc_kib(gw.pid, "VmRSS");
    check_case(parked == MANY, "parked", "%.0f of %d idle connections parked", parked, MANY);
    check_case(metric_now(&gw, "sluice_connections_active") == MANY, "active",
               "parked connections are not counted as open: %.0f",
               metric_now(&gw, "sluice_connections_active"));
    check_case(before - after >= MANY * 26, "memory",
               "RSS went from %ld to %ld KiB as %d connections parked (expected -%d KiB at least)",
               before, after, MANY, MANY * 26);
    fprintf(stderr, "(RSS %ld -> %ld KiB) ", before, after);
    for (int i = 0; i < MANY; i++) {
        snprintf(target, sizeof target, "/second/%d", i);
        again += get_on(fds[i], target) == 200;
    }
    check_case(again == MANY, "second requests", "%d of %d parked connections answered 200", again,
               MANY);
    check_case(metric_now(&gw, "sluice_connections_parked") == 0, "unparked",
               "%.0f still parked after each sent a request",
               metric_now(&gw, "sluice_connections_parked"));
    check_case(upstream_saw("GET /second/") == MANY && upstream_saw("GET /second/17 ") == 1,
               "upstream", "the upstream saw %d second requests, /second/17 %d times",
               upstream_saw("GET /second/"), upstream_saw("GET /second/17 "));
    parked = wait_parked(&gw, MANY);
    check_case(parked == MANY, "parked again", "%.0f of %d parked again", parked, MANY);
    for (int i = 0; i < MANY; i++)
        close(fds[i]);
    parked = wait_parked(&gw, 0);
    active = wait_metric(&gw, "sluice_connections_active", 0);
    check_case(parked == 0 && active == 0, "closed",
               "after the clients closed: %.0f parked, %.0f active", parked, active);
    expect_clean_exit(&gw, "event");
}

/* What a parked connection's client sends next, each on a connection of its own parked
 * first: two pipelined requests, a head in two pieces, a request with a body, a head the
 * strict reader refuses (two Content-Lengths: 400, closed, nothing upstream), and a close. */
static void test_what_comes_after_a_park(void)
{
    enum { PIPELINED, PIECES, BODY, HOSTILE, CLOSE, CASES };
    int fds[CASES], whole;
    char answer[8192];
    bool closed;
    struct proc gw;
    double parked;

    if (!start_parking(&gw, "event", ""))
        return;
    for (int i = 0; i < CASES; i++) {
        fds[i] = raw_connect(gw.port);
        check_case(get_on(fds[i], "/warm") == 200, "warm", "connection %d was not served", i);
    }
    parked = wait_parked(&gw, CASES);
    check_case(parked == CASES, "parked", "%.0f of %d parked", parked, CASES);

    send_text(fds[PIPELINED], "GET /p1 HTTP/1.1\r\nHost: park.test\r\n\r\n"
                              "GET /p2 HTTP/1.1\r\nHost: park.test\r\n\r\n");
    whole = read_answers(fds[PIPELINED], 2, answer, sizeof answer, 3000, &closed);
    check_case(whole == 2 && !closed && upstream_saw("GET /p1 ") == 1 &&
                   upstream_saw("GET /p2 ") == 1 && strstr(answer, "GET /p1") == NULL,
               "pipelined", "%d answers, closed %d; upstream saw /p1 %d, /p2 %d times", whole,
               closed, upstream_saw("GET /p1 "), upstream_saw("GET /p2 "));

    send_text(fds[PIECES], "GET /pieces HT");
    sleep_ms(300);
    send_text(fds[PIECES], "TP/1.1\r\nHost: park.test\r\n\r\n");
    whole = read_answers(fds[PIECES], 1, answer, sizeof answer, 3000, &closed);
    check_case(whole == 1 && strncmp(answer, "HTTP/1.1 200", 12) == 0 &&
                   upstream_saw("GET /pieces HTTP/1.1\r\n") == 1,
               "pieces", "answer \"%.40s\", upstream saw it %d times", answer,
               upstream_saw("GET /pieces HTTP/1.1\r\n"));

    send_text(fds[BODY], "POST /body HTTP/1.1\r\nHost: park.test\r\nContent-Length: 11\r\n\r\n"
                         "hello there");
    whole = read_answers(fds[BODY], 1, answer, sizeof answer, 3000, &closed);
    check_case(whole == 1 && strncmp(answer, "HTTP/1.1 200", 12) == 0 &&
                   upstream_saw("\r\n\r\nhello there") == 1,
               "body", "answer \"%.40s\", the body reached the upstream %d times", answer,
               upstream_saw("\r\n\r\nhello there"));

    send_text(fds[HOSTILE], "POST /smuggle HTTP/1.1\r\nHost: park.test\r\nContent-Length: 1\r\n"
                            "Content-Length: 2\r\n\r\nab");
    whole = read_answers(fds[HOSTILE], 2, answer, sizeof answer, 3000, &closed);
    check_case(whole == 1 && strncmp(answer, "HTTP/1.1 400", 12) == 0 && closed &&
                   upstream_saw("/smuggle") == 0 && upstream_saw("refused.invalid") == 0,
               "hostile", "answer \"%.40s\" (%d whole), closed %d; upstream saw it %d times",
               answer, whole, closed, upstream_saw("/smuggle"));

    close(fds[CLOSE]);
    parked = wait_parked(&gw, 0);
    check_case(parked == 0, "close", "%.0f still parked after its client closed", parked);
    for (int i = 0; i < CASES; i++)
        if (i != CLOSE)
            close(fds[i]);
    expect_clean_exit(&gw, "event");
}

/* A parked connection keeps its deadline: with client_timeout 3s, one parked a second or so
 * after its answer is closed by sluice about 3 s after it, and counted out. */
static void test_client_timeout_holds(void)
{
    struct proc gw;
    char answer[256];
    bool closed;
    int fd;
    double parked, active, took;

    if (!start_parking(&gw, "event", "  client_timeout: 3s\n"))
        return;
    fd = raw_connect(gw.port);
    check_case(get_on(fd, "/warm") == 200, "warm", "not served");
    took = seconds_now();
    parked = wait_parked(&gw, 1);
    check_case(parked == 1, "parked", "%.0f parked", parked);
    read_answers(fd, 1, answer, sizeof answer, 5000, &closed);
    took = seconds_now() - took;
    check_case(closed && took > 2.0 && took < 4.5, "closed",
               "closed %d after %.1f s (client_timeout 3s)", closed, took);
    parked = wait_parked(&gw, 0);
    active = wait_metric(&gw, "sluice_connections_active", 0);
    check_case(parked == 0 && active == 0, "counted out", "%.0f parked, %.0f active", parked,
               active);
    close(fd);
    expect_clean_exit(&gw, "event");
}

/* Parked connections still count: with max_connections 2, both parked, a third connection is
 * closed unanswered; a parked one is still served; once one closes, a new one is served. */
static void test_parked_connections_count(void)
{
    struct proc gw;
    char answer[256];
    bool closed;
    int held[2], extra, status;
    double parked;

    if (!start_parking(&gw, "event", "  max_connections: 2\n"))
        return;
    for (int i = 0; i < 2; i++) {
        held[i] = raw_connect(gw.port);
        check_case(get_on(held[i], "/warm") == 200, "warm", "connection %d not served", i);
    }
    parked = wait_parked(&gw, 2);
    check_case(parked == 2, "parked", "%.0f parked", parked);
    extra = raw_connect(gw.port);
    send_text(extra, "GET /third HTTP/1.1\r\nHost: park.test\r\n\r\n");
    check_case(read_answers(extra, 1, answer, sizeof answer, 3000, &closed) == 0 && closed, "third",
               "a third connection at max_connections 2 was not refused: \"%.40s\"", answer);
    close(extra);
    status = get_on(held[0], "/parked");
    check_case(status == 200, "held", "a parked connection got %d", status);
    close(held[1]);
    wait_metric(&gw, "sluice_connections_active", 1);
    extra = raw_connect(gw.port);
    status = get_on(extra, "/after");
    check_case(status == 200, "after", "a new connection got %d after a parked one closed", status);
    close(extra);
    close(held[0]);
    expect_clean_exit(&gw, "event");
}

/* With the PROXY protocol the address a connection's header gave is the client's for its
 * requests after a park too (X-Forwarded-For upstream). */
static void test_proxy_protocol_address_kept(void)
{
    struct proc gw;
    int fd, status;
    double parked;

    if (!start_parking(&gw, "event",
                       "  proxy_protocol: v1\n  proxy_protocol_from: [127.0.0.0/8]\n"))
        return;
    fd = raw_connect(gw.port);
    send_text(fd, "PROXY TCP4 203.0.113.7 192.0.2.1 51234 80\r\n");
    check_case(get_on(fd, "/before") == 200, "warm", "not served");
    parked = wait_parked(&gw, 1);
    check_case(parked == 1, "parked", "%.0f parked", parked);
    status = get_on(fd, "/after");
    check_case(status == 200 && upstream_saw("X-Forwarded-For: 203.0.113.7\r\n") == 2, "address",
               "status %d; the upstream saw the header's address on %d of 2 requests", status,
               upstream_saw("X-Forwarded-For: 203.0.113.7\r\n"));
    close(fd);
    expect_clean_exit(&gw, "event");
}

/* thread_per_connection keeps every connection in libmicrohttpd, as event mode does with
 * park_idle_after: 0; a reload to 1s then parks the idle connection. */
static void test_when_nothing_parks(void)
{
    static const struct {
        const char *mode, *after;
    } cases[] = {{"thread_per_connection", "1s"}, {"event", "0"}};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct proc gw;
        int fd, status;
        double parked;

        if (start_sluice(&gw, config, rec.port, cases[i].mode, cases[i].after, "") != 0) {
            check_case(false, cases[i].mode, "sluice did not start");
            continue;
        }
        fd = raw_connect(gw.port);
        check_case(get_on(fd, "/warm") == 200, cases[i].mode, "not served");
        sleep_ms(2000);
        parked = metric_now(&gw, "sluice_connections_parked");
        check_case(parked == 0, cases[i].mode, "%.0f parked", parked);
        status = get_on(fd, "/again");
        check_case(status == 200, cases[i].mode, "got %d", status);
        if (strcmp(cases[i].mode, "event") == 0) {
            rewrite_config(&gw, false, config, rec.port, cases[i].mode, "1s", "");
            check_case(wait_for_log(&gw, "reloaded", 1, 5000), "reload", "no reload logged");
            parked = wait_parked(&gw, 1);
            check_case(parked == 1, "reload", "%.0f parked after a reload to 1s", parked);
        }
        close(fd);
        expect_clean_exit(&gw, cases[i].mode);
    }
}

static int init(void)
{
    return recorder_start(&rec);
}

static int clean(void)
{
    recorder_stop(&rec);
    return 0;
}

void register_park_tests(void)
{
    CU_pSuite s = add_suite_with("park", init, clean);

    add_test(s, "event: 200 idle connections park, free their pools, and come back",
             test_parks_and_comes_back);
    add_test(s, "event: pipelined, split, body, hostile and closing clients after a park",
             test_what_comes_after_a_park);
    add_test(s, "event: a parked connection is closed at client_timeout",
             test_client_timeout_holds);
    add_test(s, "event: parked connections count against max_connections",
             test_parked_connections_count);
    add_test(s, "event: the PROXY protocol's address survives a park",
             test_proxy_protocol_address_kept);
    add_test(s, "thread_per_connection, and event mode with park_idle_after 0, park nothing",
             test_when_nothing_parks);
}
