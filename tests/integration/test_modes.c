/* The two serving modes (server.mode), told apart by what they do rather than by what they
 * log: idle connections cost a thread each in thread_per_connection mode and none in event
 * mode; in event mode a request waiting on a slow upstream holds up no other connection, and
 * every loop serves; max_connections refuses the connection past it, in both modes. Each
 * config here names its mode, so the suite tests the same whatever $SLUICE_MODE says. */
#include <errno.h>
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

#define THREAD_MODE "thread_per_connection"
#define EVENT_MODE  "event"

/* Routes to the shared test upstream for /status/ and /slow, and none for IDLE_TARGET, which
 * sluice answers itself (404): the one request each idle connection makes costs no upstream
 * work, so that what is counted is the connections. "%2$s" is the mode, "%3$d" the event
 * loops, "%4$s" more of the server mapping. */
static const char config[] = "server: {listen: \"127.0.0.1:0\", mode: %2$s, workers: %3$d%4$s}\n"
                             "routes:\n"
                             "  - name: status\n    match: {path_prefix: /status/}\n"
                             "    upstream: \"http://127.0.0.1:%1$u\"\n"
                             "  - name: slow\n    match: {path_prefix: /slow}\n"
                             "    upstream: \"http://127.0.0.1:%1$u\"\n";

#define IDLE_TARGET "/idle"

static bool start_mode(struct proc *gw, const char *mode, int workers, const char *server)
{
    bool started = start_sluice(gw, config, upstream.port, mode, workers, server) == 0;

    check_case(started, mode, "sluice did not start with workers: %d%s", workers, server);
    return started;
}

/* Stops it: SIGTERM must end it with exit code 0 within 5 s. */
static void expect_clean_exit(struct proc *gw, const char *mode)
{
    int status = stop_sluice(gw, 5000);

    check_case(status == 0, mode, "sluice exited %d on SIGTERM (-1: not within 5 s)", status);
}

/* Sends "GET `target`" on the open connection `fd`, keeping it alive, and reads the whole
 * answer (a Content-Length or chunked body), waiting at most `timeout_ms` for each read. The
 * answer's status, or 0 when none came whole: the connection was closed, or stalled. */
static int exchange_on(int fd, const char *target, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    char request[256], answer[16384];
    size_t got = 0;
    int len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: modes\r\n\r\n", target);

    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(fd, request, (size_t)len, MSG_NOSIGNAL) != len)
        return 0;
    for (;;) {
        char *end;
        ssize_t n;

        answer[got] = '\0';
        end = strstr(answer, "\r\n\r\n");
        if (end != NULL) {
            size_t head = (size_t)(end - answer) + 4;
            const char *length = strcasestr(answer, "\r\nContent-Length:");
            const char *chunked = strcasestr(answer, "\r\nTransfer-Encoding: chunked");
            int status = 0;
            bool whole;

            if (length != NULL && length < end)
                whole = got >= head + strtoul(length + 17, NULL, 10);
            else if (chunked != NULL && chunked < end)
                whole = got >= head + 5 && strcmp(answer + got - 5, "0\r\n\r\n") == 0;
            else
                whole = true; /* a status without a body (204, 304) */
            if (whole)
                return sscanf(answer, "HTTP/1.1 %d", &status) == 1 ? status : 0;
        }
        if (got + 1 >= sizeof answer)
            return 0;
        n = recv(fd, answer + got, sizeof answer - 1 - got, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
}

/* --- idle connections and threads ------------------------------------------------------- */

enum {
    IDLE = 300, /* idle keep-alive connections held open at once */
    SLACK = 8   /* threads that may come or go besides: a helper event mode starts, the thread
                 * of a warm-up connection not yet ended in thread_per_connection mode */
};

/* 300 keep-alive connections, each served one request and then left idle, are 300 threads
 * more in thread_per_connection mode and none more in event mode (give or take SLACK, far
 * from one each); while they are open, a request on a new connection is served. */
static void idle_connections(const char *mode, int workers)
{
    bool event = strcmp(mode, EVENT_MODE) == 0;
    int fds[IDLE], answered = 0;
    long before, during;
    struct proc gw;

    if (!start_mode(&gw, mode, workers, ""))
        return;
    /* Threads that a first request may start (the log writer, the upstream pool) are started
     * before counting. */
    for (int i = 0; i < 3; i++)
        check_case(get_status(gw.port, "/status/200", NULL) == 200, mode, "warm-up request %d", i);
    before = proc_threads(gw.pid);
    /* One answer on each shows that sluice has taken the connection, not just the kernel. */
    for (int i = 0; i < IDLE; i++) {
        fds[i] = raw_connect(gw.port);
        answered += exchange_on(fds[i], IDLE_TARGET, 5000) == 404;
    }
    during = proc_threads(gw.pid);
    check_case(answered == IDLE, mode, "%d of %d connections got their 404 before going idle",
               answered, IDLE);
    check_case(get_status(gw.port, "/status/200", NULL) == 200, mode,
               "a new connection is not served while %d idle ones are open", IDLE);
    if (event)
        check_case(during <= before + SLACK, mode,
                   "threads went from %ld to %ld with %d idle connections on %d loops", before,
                   during, IDLE, workers);
    else
        check_case(during >= before + IDLE - SLACK, mode,
                   "threads went from %ld to %ld with %d idle connections, not one each", before,
                   during, IDLE);
    fprintf(stderr, "(%s: %ld threads, %ld with %d idle connections) ", mode, before, during, IDLE);
    for (int i = 0; i < IDLE; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    expect_clean_exit(&gw, mode);
}

static void test_idle_connections_event(void)
{
    idle_connections(EVENT_MODE, 2);
}

static void test_idle_connections_thread(void)
{
    idle_connections(THREAD_MODE, 2);
}

/* --- a slow upstream --------------------------------------------------------------------- */

struct call {
    unsigned port;
    const char *target;
    atomic_int *finished_count;
    long status;
    int finished; /* how many calls had finished before this one */
};

static void *run_call(void *arg)
{
    struct call *c = arg;
    struct reply r;

    http(c->port, "GET", c->target, NULL, NULL, &r);
    c->status = r.status;
    c->finished = atomic_fetch_add(c->finished_count, 1);
    reply_free(&r);
    return NULL;
}

/* While a request waits a second for its upstream, a request on another connection is
 * answered first. With one event loop, a loop that waited on the upstream would answer the
 * fast one only after the slow one. The order is compared, not durations. */
static void slow_upstream_holds_up_nothing(const char *mode)
{
    atomic_int finished_count = 0;
    struct call slow = {0, "/slow?ms=1000", &finished_count, 0, -1};
    struct call fast = {0, "/status/200", &finished_count, 0, -1};
    unsigned long requests_before, requests = 0, connections;
    pthread_t thread;
    struct proc gw;

    if (!start_mode(&gw, mode, 1, ""))
        return;
    slow.port = fast.port = gw.port;
    upstream_stats(&requests_before, &connections);
    pthread_create(&thread, NULL, run_call, &slow);
    /* Until the slow request is at the upstream, where it waits its second. */
    for (int i = 0; i < 1000 && requests <= requests_before; i++) {
        upstream_stats(&requests, &connections);
        if (requests <= requests_before)
            sleep_ms(2);
    }
    check_case(requests > requests_before, mode, "the slow request never reached the upstream");
    run_call(&fast);
    pthread_join(thread, NULL);
    check_case(slow.status == 200, mode, "the slow request got %ld", slow.status);
    check_case(fast.status == 200, mode, "the fast request got %ld", fast.status);
    check_case(fast.finished < slow.finished, mode,
               "the fast request finished after the slow one (%d, %d): it waited for it",
               fast.finished, slow.finished);
    expect_clean_exit(&gw, mode);
}

static void test_slow_upstream_event(void)
{
    slow_upstream_holds_up_nothing(EVENT_MODE);
}

static void test_slow_upstream_thread(void)
{
    slow_upstream_holds_up_nothing(THREAD_MODE);
}

/* --- every loop serves ------------------------------------------------------------------- */

/* 50 requests, each on a new connection, all at once, all proxied with 200: however the
 * loops share the listening port (SO_REUSEPORT spreads connections by their addresses), a
 * loop that did not serve would leave some of them unanswered. */
static void test_every_loop_serves(void)
{
    enum { CONNECTIONS = 50 };
    int served, other;
    struct proc gw;

    if (!start_mode(&gw, EVENT_MODE, 2, ""))
        return;
    served = race_requests(&gw.port, 1, CONNECTIONS, "/status/200", NULL, &other);
    check_case(served == CONNECTIONS, EVENT_MODE,
               "%d of %d new connections got 200 (%d another status, the rest none)", served,
               CONNECTIONS, other);
    expect_clean_exit(&gw, EVENT_MODE);
}

/* --- max_connections ---------------------------------------------------------------------- */

/* A new connection answered (IDLE_TARGET) and kept open, or -1 when none is within `tries`
 * attempts: at the cap, sluice may not have seen the close of one just let go. */
static int open_answered(unsigned port, int tries)
{
    for (int i = 0; i < tries; i++) {
        int fd = raw_connect(port);

        if (exchange_on(fd, IDLE_TARGET, 2000) == 404)
            return fd;
        if (fd >= 0)
            close(fd);
        sleep_ms(20);
    }
    return -1;
}

/* Whether a new connection is closed without an answer to its request: read to an end of
 * file or a reset, not kept waiting (a read that times out) nor answered. */
static bool refused(unsigned port, char *what, size_t cap)
{
    const char *request = "GET /status/200 HTTP/1.1\r\nHost: modes\r\n\r\n";
    struct timeval tv = {3, 0};
    int fd = raw_connect(port);
    ssize_t n;

    if (fd < 0) {
        snprintf(what, cap, "connect() refused");
        return true; /* no backlog at all: refused too */
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    send(fd, request, strlen(request), MSG_NOSIGNAL);
    errno = 0;
    n = recv(fd, what, cap - 1, 0);
    what[n > 0 ? n : 0] = '\0';
    if (n < 0 && errno != ECONNRESET)
        snprintf(what, cap, "kept waiting, neither answered nor closed");
    close(fd);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* With max_connections: 4 and four connections open (each answered once), a new connection
 * is closed without an answer; the four are still served; once they close, new connections
 * are served again. In rounds, each with new connections and several refusals: in event mode
 * the kernel spreads connections over the loops' listening sockets, and the cap must hold
 * however the four and the refused ones fall. */
static void max_connections_refuses_the_fifth(const char *mode)
{
    enum { CAP = 4, ROUNDS = 16, REFUSALS = 6 };
    int held[CAP], status, fd;
    char what[512];
    struct proc gw;
    bool ok = true;

    if (!start_mode(&gw, mode, 2, ", max_connections: 4"))
        return;
    for (int round = 0; round < ROUNDS && ok; round++) {
        for (int i = 0; i < CAP; i++) {
            held[i] = open_answered(gw.port, 100);
            check_case(held[i] >= 0, mode, "round %d: connection %d of %d was not served", round,
                       i + 1, CAP);
            ok = ok && held[i] >= 0;
        }
        for (int i = 0; i < REFUSALS && ok; i++) {
            ok = refused(gw.port, what, sizeof what);
            check_case(ok, mode,
                       "round %d: connection %d past the cap was not closed unanswered: %s", round,
                       i + 1, what);
        }
        status = exchange_on(held[0], "/status/200", 5000);
        check_case(status == 200, mode, "round %d: a held connection got %d at the cap", round,
                   status);
        for (int i = 0; i < CAP; i++)
            if (held[i] >= 0)
                close(held[i]);
    }
    /* Room again once sluice has seen the closes. */
    fd = open_answered(gw.port, 100);
    check_case(fd >= 0, mode, "no new connection was served after the held ones closed");
    if (fd >= 0)
        close(fd);
    expect_clean_exit(&gw, mode);
}

static void test_max_connections_event(void)
{
    max_connections_refuses_the_fifth(EVENT_MODE);
}

static void test_max_connections_thread(void)
{
    max_connections_refuses_the_fifth(THREAD_MODE);
}

void register_modes_tests(void)
{
    CU_pSuite s = add_suite("modes");

    add_test(s, "event: 300 idle connections take no thread each", test_idle_connections_event);
    add_test(s, "thread_per_connection: 300 idle connections take a thread each",
             test_idle_connections_thread);
    add_test(s, "event: a slow upstream holds up no other connection", test_slow_upstream_event);
    add_test(s, "thread_per_connection: a slow upstream holds up no other connection",
             test_slow_upstream_thread);
    add_test(s, "event: 50 new connections over two loops are all served", test_every_loop_serves);
    add_test(s, "event: max_connections refuses the fifth of 4", test_max_connections_event);
    add_test(s, "thread_per_connection: max_connections refuses the fifth of 4",
             test_max_connections_thread);
}
