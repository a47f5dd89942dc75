/* What the internet sends: malformed and ambiguous requests, slow and greedy clients, broken
 * upstreams. The gateway answers or closes, never forwards ambiguously, and keeps serving. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct proc gw;

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", max_body: 1KiB}\n"
    "routes:\n"
    "  - name: spoof\n    match: {path_prefix: /spoof/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static int init(void)
{
    return start_sluice(&gw, config, upstream.port);
}

static int clean(void)
{
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

static int exchange(const char *request, char *answer, size_t cap)
{
    return raw_exchange(gw.port, request, strlen(request), answer, cap, 3000);
}

static void assert_still_serving(void)
{
    struct reply r;

    http(gw.port, "GET", "/status/200", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
}

static unsigned long upstream_requests(void)
{
    unsigned long requests, connections;

    upstream_stats(&requests, &connections);
    return requests;
}

/* Each is answered by sluice itself, never forwarded, and the next client is served. */
static void test_malformed_and_ambiguous_heads(void)
{
    static const struct {
        const char *request;
        int status;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\n Folded: y\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},                       /* HTTP/1.1 without Host */
        {"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400}, /* two Hosts */
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
        /* smuggling: both lengths, two lengths, an unknown coding */
        {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
         "\r\n5\r\nhello\r\n0\r\n\r\n",
         400},
        {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
         400},
        {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        /* a bare CR inside a value would end the line at some upstreams */
        {"GET /echo HTTP/1.1\r\nHost: x\r\nX-A: a\rX-Injected: 1\r\n\r\n", 400},
        /* not a path: absolute-form, CONNECT, OPTIONS * */
        {"GET http://169.254.169.254/latest HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"CONNECT internal:443 HTTP/1.1\r\nHost: internal:443\r\n\r\n", 400},
        {"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        /* dot segments: one route here, another once the upstream resolves them */
        {"GET /public/../admin HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET /a/%2e%2e/admin HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET /./x HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    };
    char answer[4096];
    unsigned long before = upstream_requests();

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = exchange(cases[i].request, answer, sizeof answer);

        if (status != cases[i].status)
            fprintf(stderr, "\ncase %zu: expected %d, got %d: %.80s\n", i, cases[i].status, status,
                    answer);
        CU_ASSERT_EQUAL(status, cases[i].status);
    }
    CU_ASSERT_EQUAL(upstream_requests(), before);
    /* Garbage for a request line: closed without an answer, or 400. */
    CU_ASSERT_TRUE(exchange("\x16\x03\x01 not http\r\n\r\n", answer, sizeof answer) % 400 == 0);
    assert_still_serving();
}

/* A 64 KiB header does not fit: 431, and nothing reaches the upstream. */
static void test_huge_header(void)
{
    size_t len = 70 * 1024;
    char *request = malloc(len + 64), answer[4096];

    memcpy(request, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ", 36);
    memset(request + 36, 'a', 64 * 1024);
    memcpy(request + 36 + 64 * 1024, "\r\n\r\n", 5);
    CU_ASSERT_EQUAL(raw_exchange(gw.port, request, strlen(request), answer, sizeof answer, 3000),
                    431);
    free(request);
    assert_still_serving();
}

/* A client behind no trusted proxy cannot pick its key with X-Forwarded-For. */
static void test_spoofed_forwarded_for(void)
{
    const char *first[] = {"X-Forwarded-For: 198.51.100.1", NULL};
    const char *second[] = {"X-Forwarded-For: 198.51.100.2", NULL};
    struct reply r;

    http(gw.port, "GET", "/spoof/x", first, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    http(gw.port, "GET", "/spoof/x", second, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 429); /* the same client: 127.0.0.1 */
    reply_free(&r);
}

/* Broken upstreams: garbage is a 502, and a client that leaves mid-body costs nothing. */
static void test_broken_upstreams_and_clients(void)
{
    unsigned long long bytes;
    char request[] = "GET /bytes?n=100000000 HTTP/1.1\r\nHost: x\r\n\r\n", buf[65536];
    int fd;

    CU_ASSERT_EQUAL(http_count(gw.port, "/garbage", &bytes), 502);
    /* A client reads a little of a 100 MB answer and hangs up: the gateway's next write finds
     * the socket closed (EPIPE, with SIGPIPE ignored), and it goes on. */
    fd = raw_connect(gw.port);
    CU_ASSERT_FATAL(fd >= 0);
    send(fd, request, strlen(request), MSG_NOSIGNAL);
    CU_ASSERT_TRUE(recv(fd, buf, sizeof buf, MSG_WAITALL) > 0);
    close(fd);
    sleep_ms(200);
    CU_ASSERT_EQUAL(kill(gw.pid, 0), 0);
    assert_still_serving();
}

/* 1 GiB through the gateway, whole. */
static void test_one_gibibyte(void)
{
    unsigned long long bytes;

    CU_ASSERT_EQUAL(http_count(gw.port, "/bytes?n=1073741824", &bytes), 200);
    CU_ASSERT_EQUAL(bytes, 1073741824ULL);
}

static int thread_count(pid_t pid)
{
    char path[64];
    struct dirent *e;
    int n = 0;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    d = opendir(path);
    while (d != NULL && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

/* Sends a GET on `fd` and reads the answer's head, waiting up to 10 s: "served" when it is a
 * 200, else what came instead ("closed", "reset", "no answer in 10 s", the status line). */
static const char *ask(int fd, char *answer, size_t cap)
{
    static const char request[] = "GET /status/200 HTTP/1.1\r\nHost: x\r\n\r\n";
    struct timeval tv = {10, 0};
    size_t got = 0;
    ssize_t n = 0;

    answer[0] = '\0';
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(fd, request, sizeof request - 1, MSG_NOSIGNAL) != (ssize_t)sizeof request - 1)
        return errno == EPIPE || errno == ECONNRESET ? "reset" : "not sent";
    while (strstr(answer, "\r\n\r\n") == NULL && got + 1 < cap &&
           (n = recv(fd, answer + got, cap - got - 1, 0)) > 0) {
        got += (size_t)n;
        answer[got] = '\0';
    }
    if (strncmp(answer, "HTTP/1.1 200 ", 13) == 0)
        return "served";
    if (got > 0)
        return answer;
    if (n == 0)
        return "closed";
    return errno == ECONNRESET ? "reset" : "no answer in 10 s";
}

/* Slowloris: clients that send a header a byte at a time cannot take more than
 * max_connections threads nor keep one past client_timeout; at the cap, new connections are
 * turned away at once while an established client keeps being served. */
static void test_slowloris(void)
{
    enum { CAP = 8 };
    struct proc slow;
    int loris[CAP], keep, extra, baseline;
    char answer[1024];
    const char *keepalive = "GET /status/200 HTTP/1.1\r\nHost: x\r\n\r\n", *seen;
    ssize_t n;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&slow,
                                       "server: {listen: \"127.0.0.1:0\", max_connections: %2$d, "
                                       "client_timeout: 2s}\nroutes:\n  - name: r\n"
                                       "    match: {path_prefix: /}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port, CAP),
                          0);
    baseline = thread_count(slow.pid);
    keep = raw_connect(slow.port);
    send(keep, keepalive, strlen(keepalive), MSG_NOSIGNAL);
    CU_ASSERT_TRUE(recv(keep, answer, sizeof answer, 0) > 0);
    for (int i = 0; i < CAP - 1; i++) {
        loris[i] = raw_connect(slow.port);
        send(loris[i], "G", 1, MSG_NOSIGNAL);
    }
    sleep_ms(300);
    CU_ASSERT_TRUE(thread_count(slow.pid) <= baseline + CAP);
    /* At the cap: the next connection is closed, not queued: a read ends (EOF or reset), it
     * does not time out; or it is refused outright. */
    extra = raw_connect(slow.port);
    seen = extra >= 0 ? ask(extra, answer, sizeof answer) : "refused";
    check_case(strcmp(seen, "closed") == 0 || strcmp(seen, "reset") == 0 ||
                   strcmp(seen, "refused") == 0,
               "past max_connections", "a new connection: %s; expected it turned away", seen);
    if (extra >= 0)
        close(extra);
    /* The established client is still served meanwhile. */
    send(keep, keepalive, strlen(keepalive), MSG_NOSIGNAL);
    n = recv(keep, answer, sizeof answer - 1, 0);
    CU_ASSERT_TRUE(n > 0 && strncmp(answer, "HTTP/1.1 200", 12) == 0);
    /* Trickling a byte at a time, the slow ones are dropped after client_timeout. */
    for (int second = 0; second < 4; second++) {
        for (int i = 0; i < CAP - 1; i++)
            send(loris[i], "E", 1, MSG_NOSIGNAL);
        sleep_ms(1000);
    }
    for (int i = 0; i < CAP - 1; i++) {
        struct timeval tv = {1, 0};

        setsockopt(loris[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        errno = 0;
        n = recv(loris[i], answer, sizeof answer, 0);
        /* Closed by the server (an end of file or a reset), not still waiting. */
        CU_ASSERT_TRUE(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                       (n > 0 && strncmp(answer, "HTTP/1.1 4", 10) == 0));
        close(loris[i]);
    }
    close(keep);
    sleep_ms(200);
    CU_ASSERT_TRUE(thread_count(slow.pid) <= baseline + 1);
    CU_ASSERT_EQUAL(stop_sluice(&slow, 5000), 0);
}

/* server.max_connections_per_ip: 3. Three connections from one address are each served; the
 * fourth is closed unanswered, at once (an end of file or a reset, not a wait); once one of
 * the three has gone, a new one is served again. */
static void test_connections_per_ip(void)
{
    enum { CAP = 3 };
    struct proc capped;
    int fds[CAP], extra;
    char answer[1024];
    const char *seen = "not tried";

    CU_ASSERT_EQUAL_FATAL(start_sluice(&capped,
                                       "server: {listen: \"127.0.0.1:0\", "
                                       "max_connections_per_ip: %2$d}\nroutes:\n  - name: r\n"
                                       "    match: {path_prefix: /}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port, CAP),
                          0);
    for (int i = 0; i < CAP; i++) {
        fds[i] = raw_connect(capped.port);
        seen = fds[i] >= 0 ? ask(fds[i], answer, sizeof answer) : "refused";
        check_case(strcmp(seen, "served") == 0, "within the cap", "connection %d of %d: %s", i + 1,
                   CAP, seen);
    }
    extra = raw_connect(capped.port);
    seen = extra >= 0 ? ask(extra, answer, sizeof answer) : "refused";
    check_case(strcmp(seen, "closed") == 0 || strcmp(seen, "reset") == 0, "past the cap",
               "connection %d: %s; expected it closed unanswered", CAP + 1, seen);
    if (extra >= 0)
        close(extra);
    /* One of the three leaves: its slot comes back once the gateway has seen it go. */
    close(fds[0]);
    for (int waited = 0; waited < 5000; waited += 50) {
        fds[0] = raw_connect(capped.port);
        seen = fds[0] >= 0 ? ask(fds[0], answer, sizeof answer) : "refused";
        if (strcmp(seen, "served") == 0)
            break;
        if (fds[0] >= 0)
            close(fds[0]);
        fds[0] = -1;
        sleep_ms(50);
    }
    check_case(strcmp(seen, "served") == 0, "a slot given back", "a new connection: %s", seen);
    for (int i = 0; i < CAP; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    CU_ASSERT_EQUAL(stop_sluice(&capped, 5000), 0);
}

struct key_flood {
    unsigned port;
    int first, count; /* keys [first, first + count) */
    int answered;
};

/* Pipelines requests with distinct keys on one connection, 200 at a time. */
static void *flood_keys(void *arg)
{
    struct key_flood *f = arg;
    enum { BATCH = 200 };
    static _Thread_local char out[BATCH * 96], in[1 << 16];
    int fd = raw_connect(f->port);

    for (int done = 0; fd >= 0 && done < f->count; done += BATCH) {
        size_t len = 0;
        int want = f->count - done < BATCH ? f->count - done : BATCH, got = 0;

        for (int i = 0; i < want; i++)
            len += (size_t)snprintf(out + len, sizeof out - len,
                                    "GET /status/204 HTTP/1.1\r\nHost: x\r\nX-API-Key: k%d\r\n\r\n",
                                    f->first + done + i);
        if (send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len)
            break;
        while (got < want) { /* every answer is a 204: count their status lines */
            ssize_t n = recv(fd, in, sizeof in - 1, 0);

            if (n <= 0)
                break;
            in[n] = '\0';
            for (char *at = in; (at = strstr(at, "HTTP/1.1 204")) != NULL; at += 12)
                got++;
        }
        f->answered += got;
        if (got < want)
            break;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* How many keys test_many_keys() sends, against what max_clients, within how much memory. */
struct key_scale {
    int keys, max_clients;
    long rss_bound_kib;
};

/* 300,000 distinct keys, 30 times max_clients: memory stays bounded by max_clients, the table
 * evicts (counted) rather than grows, and every request is answered. A token bucket, whose
 * states stay busy for 12 minutes after one request: a fixed window's all fall idle together
 * at the top of the hour, and a run across it would see them reclaimed rather than evicted.
 * (A million took 30 s a run, and the suites run in both serving modes.) A sanitizer build
 * answers ten times slower (49 s for 300,000), so it gets a tenth of the keys and of
 * max_clients, and runs without ASan's quarantine (start_sluice_measured()). How long it
 * takes is printed, not asserted: a shared machine can be slow for reasons of its own. */
static void test_many_keys(void)
{
    enum { THREADS = 4 };
    /* 10,000 states are under 1 MiB; the rest is the process (1.2 to 1.5 MiB more measured).
     * Unbounded, 300,000 would take 21 MiB or more. */
    static const struct key_scale plain = {300000, 10000, 12 * 1024},
                                  sanitized = {60000, 1000, 4 * 1024};
    const struct key_scale *scale = sluice_sanitized() ? &sanitized : &plain;
    struct proc keyed;
    struct key_flood floods[THREADS];
    pthread_t threads[THREADS];
    double start;
    int answered = 0, per_thread = scale->keys / THREADS;
    long rss_before, rss_after;

    CU_ASSERT_EQUAL_FATAL(start_sluice_measured(&keyed,
                                                "server: {listen: \"127.0.0.1:0\", "
                                                "admin_listen: \"127.0.0.1:0\", "
                                                "access_log: \"off\"}\n"
                                                "limiter: {max_clients: %2$d}\nroutes:\n"
                                                "  - name: r\n    match: {path_prefix: /}\n"
                                                "    upstream: \"http://127.0.0.1:%1$u\"\n"
                                                "    key: \"header:X-API-Key\"\n"
                                                "    limit: {algorithm: token_bucket, "
                                                "requests: 5, per: 1h}\n",
                                                upstream.port, scale->max_clients),
                          0);
    rss_before = proc_kib(keyed.pid, "VmRSS");
    start = seconds_now();
    for (int t = 0; t < THREADS; t++) {
        floods[t] = (struct key_flood){keyed.port, t * per_thread, per_thread, 0};
        pthread_create(&threads[t], NULL, flood_keys, &floods[t]);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        answered += floods[t].answered;
    }
    rss_after = proc_kib(keyed.pid, "VmRSS");
    fprintf(stderr, "(%d keys in %.1f s, RSS %ld -> %ld KiB) ", scale->keys, seconds_now() - start,
            rss_before, rss_after);
    CU_ASSERT_EQUAL(answered, scale->keys);
    CU_ASSERT_TRUE(metric(&keyed, "sluice_limiter_clients{route=\"r\"}") <= scale->max_clients);
    CU_ASSERT_TRUE(metric(&keyed, "sluice_limiter_evictions_total{route=\"r\"}") >=
                   scale->keys - scale->max_clients);
    CU_ASSERT_TRUE(rss_after - rss_before < scale->rss_bound_kib);
    CU_ASSERT_EQUAL(stop_sluice(&keyed, 5000), 0);
}

void register_hostile_tests(void)
{
    CU_pSuite s = add_suite_with("hostile", init, clean);

    add_test(s, "malformed and ambiguous heads are refused", test_malformed_and_ambiguous_heads);
    add_test(s, "a 64 KiB header gets 431", test_huge_header);
    add_test(s, "X-Forwarded-For from an untrusted peer is ignored", test_spoofed_forwarded_for);
    add_test(s, "broken upstreams and clients that leave", test_broken_upstreams_and_clients);
    add_test(s, "1 GiB passes whole", test_one_gibibyte);
    add_test(s, "slowloris is bounded and timed out", test_slowloris);
    add_test(s, "max_connections_per_ip: the cap served, the next closed", test_connections_per_ip);
    add_test(s, "300,000 keys (60,000 under a sanitizer) stay within max_clients", test_many_keys);
}
