/* Request bodies streamed upstream (gateway/upstream/body.h, README "Request bodies"): through
 * the real binary to test_upstream's /sink, which keeps only the bytes' count and SHA-256 and
 * counts in /stats the uploads that ended early (sinks_aborted):
 *   - 1 GiB goes through with the gateway's peak memory growing by less than 1 MiB, and the
 *     upstream hashes exactly what the client sent; a chunked body too, past a slow upstream;
 *   - max_body passed midway: 413, and the upstream never gets a whole request;
 *   - a client that stops midway: its connection ends at client_timeout, and so does the
 *     upstream's request;
 *   - Expect: 100-continue is answered only once the limits allowed the request;
 *   - an upstream that answers before the body's end (a 401) has its answer passed on, after
 *     the rest of the body is read and let go;
 *   - clients that go away midway (a reset, a plain close, half a head) are no failures of
 *     the upstream server: no error counted, never skipped, the next request answered 200;
 *   - nor is an attempt the gateway's stop cut short (503, no upstream_error). */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define KIB         1024ull
#define MIB         (1024 * KIB)
#define PATTERN_LEN 65537 /* prime: a piece sent twice or out of order changes the hash */

static struct proc gw;
static unsigned char pattern[PATTERN_LEN];

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", max_body: 2GiB, client_timeout: 1s}\n"
    "routes:\n"
    "  - name: once\n    match: {path_prefix: /once/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    strip_prefix: true\n"
    "    limit: {algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

/* max_body is the server's: a second gateway has a small one. */
static struct proc small;
static const char small_config[] = "server: {listen: \"127.0.0.1:0\", max_body: 1MiB}\n"
                                   "routes:\n  - name: main\n    match: {path_prefix: /}\n"
                                   "    upstream: \"http://127.0.0.1:%1$u\"\n";

static int init(void)
{
    for (size_t i = 0; i < PATTERN_LEN; i++)
        pattern[i] = (unsigned char)(i * 131 + (i >> 7));
    if (start_sluice(&gw, config, upstream.port) != 0)
        return -1;
    return start_sluice(&small, small_config, upstream.port);
}

static int clean(void)
{
    int rc = stop_sluice(&gw, 5000) == 0 ? 0 : -1;

    return stop_sluice(&small, 5000) == 0 ? rc : -1;
}

/* --- an uploading client (libcurl) ------------------------------------------------------- */

struct upload {
    uint64_t size, sent;
    crypto_hash_sha256_state hash;
    char answer[512];
    size_t answer_len;
};

static size_t read_pattern(char *buf, size_t size, size_t n, void *cls)
{
    struct upload *up = cls;
    size_t want = size * n, done = 0;

    if (want > up->size - up->sent)
        want = (size_t)(up->size - up->sent);
    while (done < want) {
        size_t at = (size_t)((up->sent + done) % PATTERN_LEN), k = PATTERN_LEN - at;

        if (k > want - done)
            k = want - done;
        memcpy(buf + done, pattern + at, k);
        done += k;
    }
    crypto_hash_sha256_update(&up->hash, (const unsigned char *)buf, done);
    up->sent += done;
    return done;
}

static size_t keep_answer(char *data, size_t size, size_t n, void *cls)
{
    struct upload *up = cls;
    size_t len = size * n, room = sizeof up->answer - 1 - up->answer_len;

    memcpy(up->answer + up->answer_len, data, len < room ? len : room);
    up->answer_len += len < room ? len : room;
    up->answer[up->answer_len] = '\0';
    return len;
}

/* POSTs `size` bytes of the pattern to `target`, with that Content-Length or chunked; the
 * status (0 when none came), the answer in up->answer, and in `expect` what /sink answers
 * for those bytes. */
static long upload(unsigned port, const char *target, uint64_t size, bool chunked,
                   struct upload *up, char expect[128])
{
    CURL *e = curl_easy_init();
    unsigned char digest[crypto_hash_sha256_BYTES];
    char url[256], hex[2 * crypto_hash_sha256_BYTES + 1];
    long status = 0;

    memset(up, 0, sizeof *up);
    up->size = size;
    crypto_hash_sha256_init(&up->hash);
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, target);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_pattern);
    curl_easy_setopt(e, CURLOPT_READDATA, up);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, chunked ? (curl_off_t)-1 : (curl_off_t)size);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, up);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 180L);
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    crypto_hash_sha256_final(&up->hash, digest);
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    snprintf(expect, 128, "bytes %llu\nsha256 %s\n", (unsigned long long)up->sent, hex);
    return status;
}

/* test_upstream's sink counters (/stats). */
static void sink_stats(unsigned long *done, unsigned long *aborted)
{
    struct reply r;
    const char *at;

    *done = *aborted = 0;
    http(upstream.port, "GET", "/stats", NULL, NULL, &r);
    if (r.body != NULL && (at = strstr(r.body, "sinks_done ")) != NULL)
        sscanf(at, "sinks_done %lu\nsinks_aborted %lu", done, aborted);
    reply_free(&r);
}

/* Waits up to 3 s for the sink's counters to read `done` and `aborted`. */
static bool sinks_reach(unsigned long done, unsigned long aborted)
{
    unsigned long d, a;

    for (int i = 0; i < 60; i++) {
        sink_stats(&d, &a);
        if (d == done && a == aborted)
            return true;
        sleep_ms(50);
    }
    fprintf(stderr, "\n    sinks: done %lu (want %lu), aborted %lu (want %lu)\n", d, done, a,
            aborted);
    return false;
}

/* --- the tests ---------------------------------------------------------------------------- */

static void test_gigabyte_in_flat_memory(void)
{
    struct upload up;
    char expect[128];
    long before, after;
    double started;

    /* A first upload allocates what every one needs; the peak after it is the baseline. */
    CU_ASSERT_EQUAL(upload(gw.port, "/sink", 8 * MIB, false, &up, expect), 200);
    CU_ASSERT_STRING_EQUAL(up.answer, expect);
    before = proc_kib(gw.pid, "VmHWM");
    started = seconds_now();
    CU_ASSERT_EQUAL(upload(gw.port, "/sink", 1024 * MIB, false, &up, expect), 200);
    after = proc_kib(gw.pid, "VmHWM");
    check_case(strcmp(up.answer, expect) == 0, "1 GiB by length", "the upstream hashed %s",
               up.answer);
    check_case(before > 0 && after - before < 1024, "1 GiB by length",
               "peak RSS %ld KiB before, %ld KiB after", before, after);
    fprintf(stderr, "(%.1f s, peak RSS %+ld KiB) ", seconds_now() - started, after - before);
}

/* Every small size, and either side of the window's edge, by length and chunked: a body's
 * last byte waits for its end, and must never wait for room that cannot come. */
static void test_sizes_at_the_edges(void)
{
    static const uint64_t sizes[] = {1, 2, 3, 100, 65535, 65536, 65537, 131072, 131073};
    struct upload up;
    char expect[128];

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int chunked = 0; chunked < 2; chunked++) {
            long status = upload(gw.port, "/sink", sizes[i], chunked, &up, expect);

            check_case(status == 200 && strcmp(up.answer, expect) == 0, "a body at an edge",
                       "%llu bytes%s: status %ld, the upstream hashed %s",
                       (unsigned long long)sizes[i], chunked ? " chunked" : "", status, up.answer);
        }
}

static void test_chunked_past_a_slow_upstream(void)
{
    struct upload up;
    char expect[128];
    unsigned long done0, aborted0, done, aborted;

    sink_stats(&done0, &aborted0);
    /* The sink waits 2 ms before each read: the window fills and the client is held back. */
    CU_ASSERT_EQUAL(upload(gw.port, "/sink?ms=2", 16 * MIB, true, &up, expect), 200);
    check_case(strcmp(up.answer, expect) == 0, "16 MiB chunked", "the upstream hashed %s",
               up.answer);
    /* A chunked body that fits the window goes with its length, and whole. */
    CU_ASSERT_EQUAL(upload(gw.port, "/sink", 1000, true, &up, expect), 200);
    CU_ASSERT_STRING_EQUAL(up.answer, expect);
    sink_stats(&done, &aborted);
    CU_ASSERT_EQUAL(done, done0 + 2);
    CU_ASSERT_EQUAL(aborted, aborted0);
}

/* A chunked head to port `port`, then `bytes` of body in 64 KiB chunks, sent as fast as the
 * gateway takes them; returns the connection (the answer unread), or -1. */
static int send_chunked(unsigned port, const char *target, uint64_t bytes)
{
    char head[256], chunk[64 * KIB + 16];
    int fd = raw_connect(port);
    uint64_t sent = 0;

    if (fd < 0)
        return -1;
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
             target);
    if (send(fd, head, strlen(head), MSG_NOSIGNAL) != (ssize_t)strlen(head)) {
        close(fd);
        return -1;
    }
    while (sent < bytes) {
        int len = snprintf(chunk, 16, "%x\r\n", (unsigned)(64 * KIB));

        memcpy(chunk + len, pattern, 64 * KIB);
        memcpy(chunk + len + 64 * KIB, "\r\n", 2);
        if (send(fd, chunk, (size_t)len + 64 * KIB + 2, MSG_NOSIGNAL) < 0)
            break;
        sent += 64 * KIB;
    }
    return fd;
}

/* Reads what comes back on `fd` for up to `timeout_ms`, until the server closes; true when
 * it did close. */
static bool read_until_close(int fd, char *answer, size_t cap, int timeout_ms)
{
    size_t len = 0;
    double end = seconds_now() + timeout_ms / 1000.0;
    struct timeval slice = {0, 100000};

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice);
    answer[0] = '\0';
    while (seconds_now() < end) {
        ssize_t n = recv(fd, answer + len, cap - 1 - len, 0);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return true;
        if (n > 0) {
            len += (size_t)n;
            answer[len] = '\0';
            if (len == cap - 1)
                len = 0; /* keep reading; only the close matters past here */
        }
    }
    return false;
}

static void test_max_body_passed_midway(void)
{
    unsigned long done0, aborted0;
    char answer[4096];
    bool closed;
    int fd;

    sink_stats(&done0, &aborted0);
    /* 1.5 MiB chunked against max_body 1 MiB, then the last chunk: 413 at the end, and the
     * upstream's request was cut off before its end. */
    fd = send_chunked(small.port, "/sink", 3 * MIB / 2);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL), 5);
    closed = read_until_close(fd, answer, sizeof answer, 5000);
    close(fd);
    check_case(strncmp(answer, "HTTP/1.1 413 ", 13) == 0, "over max_body", "the client got %.80s",
               answer);
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "application/problem+json"));
    CU_ASSERT(closed);
    CU_ASSERT(sinks_reach(done0, aborted0 + 1));

    /* Past twice max_body the gateway stops reading: the connection ends, unanswered. */
    fd = send_chunked(small.port, "/sink", 3 * MIB);
    CU_ASSERT_FATAL(fd >= 0);
    closed = read_until_close(fd, answer, sizeof answer, 5000);
    close(fd);
    CU_ASSERT(closed);
    CU_ASSERT(sinks_reach(done0, aborted0 + 2));
}

static void test_client_stops_midway(void)
{
    static const char head[] = "POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n";
    unsigned long done0, aborted0;
    char answer[1024];
    double started;
    bool closed;
    int fd;

    sink_stats(&done0, &aborted0);
    fd = raw_connect(gw.port);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    CU_ASSERT_EQUAL(send(fd, pattern, 100 * KIB, MSG_NOSIGNAL), (ssize_t)(100 * KIB));
    started = seconds_now();
    /* Then silence: client_timeout (1 s) ends the client's connection, and the upstream's
     * request with it (the upstream saw the start of the body, never its end). */
    closed = read_until_close(fd, answer, sizeof answer, 5000);
    close(fd);
    check_case(closed, "a client gone quiet", "not closed after %.1f s", seconds_now() - started);
    CU_ASSERT(sinks_reach(done0, aborted0 + 1));
}

static void test_continue_only_when_allowed(void)
{
    static const char head[] = "POST /once/sink HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                               "Expect: 100-continue\r\n\r\n";
    unsigned long done0, aborted0, done, aborted;
    char answer[2048];
    int fd;

    sink_stats(&done0, &aborted0);
    for (int round = 0; round < 2; round++) {
        ssize_t n;

        fd = raw_connect(gw.port);
        CU_ASSERT_FATAL(fd >= 0);
        CU_ASSERT_EQUAL(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
        /* The head alone: the gateway answers before the client sends its body. */
        n = recv(fd, answer, sizeof answer - 1, 0);
        answer[n > 0 ? n : 0] = '\0';
        if (round == 0) {
            check_case(strncmp(answer, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0,
                       "allowed with Expect", "the client first got %.60s", answer);
            CU_ASSERT_EQUAL(send(fd, "hello", 5, MSG_NOSIGNAL), 5);
            read_until_close(fd, answer, sizeof answer, 3000);
            CU_ASSERT_PTR_NOT_NULL(strstr(answer, "HTTP/1.1 200 "));
            CU_ASSERT_PTR_NOT_NULL(strstr(answer, "bytes 5\n"));
        } else {
            /* Denied: the 429 comes instead of 100 Continue, and the body is never asked for. */
            check_case(strncmp(answer, "HTTP/1.1 429 ", 13) == 0, "denied with Expect",
                       "the client first got %.60s", answer);
            CU_ASSERT_PTR_NULL(strstr(answer, "100 Continue"));
        }
        close(fd);
    }
    sink_stats(&done, &aborted);
    CU_ASSERT_EQUAL(done, done0 + 1); /* the denied request never reached the upstream */
    CU_ASSERT_EQUAL(aborted, aborted0);
}

static void test_upstream_answers_early(void)
{
    struct upload up;
    char expect[128];

    for (int chunked = 0; chunked < 2; chunked++) {
        CU_ASSERT_EQUAL(upload(gw.port, "/early", 4 * MIB, chunked, &up, expect), 401);
        CU_ASSERT_STRING_EQUAL(up.answer, "early\n");
        CU_ASSERT_EQUAL(up.sent, 4 * MIB); /* the client sent it all, and was answered */
    }
}

/* How a client goes away midway. */
enum departure { RESET_IN_BODY, CLOSE_IN_BODY, RESET_IN_HEAD, LATE_BODY_RESET };

/* A client that sends a head (or half of one) and a piece of a 100-byte body, and goes. With
 * LATE_BODY_RESET the body's piece comes 50 ms after the head, by when the upstream has its
 * request; otherwise it comes with the head, and in thread_per_connection the upstream's
 * connect is still being made when the client goes. */
static void go_away_midway(unsigned port, enum departure how)
{
    static const char head[] = "POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n";
    static const char with_body[] =
        "POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc";
    const struct linger reset = {1, 0};
    int fd = raw_connect(port);

    CU_ASSERT_FATAL(fd >= 0);
    if (how == RESET_IN_HEAD) {
        CU_ASSERT_EQUAL(send(fd, head, 20, MSG_NOSIGNAL), 20);
    } else if (how == LATE_BODY_RESET) {
        CU_ASSERT_EQUAL(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
        sleep_ms(50);
        CU_ASSERT_EQUAL(send(fd, "abc", 3, MSG_NOSIGNAL), 3);
    } else {
        CU_ASSERT_EQUAL(send(fd, with_body, strlen(with_body), MSG_NOSIGNAL),
                        (ssize_t)strlen(with_body));
    }
    sleep_ms(50);
    if (how != CLOSE_IN_BODY)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
}

/* Waits up to 3 s for every /sink request the upstream got since `requests0` (besides the
 * four GET /echo) to have ended early; `*reached` says how many there were. */
static bool aborted_sinks_end(unsigned long requests0, unsigned long done0, unsigned long aborted0,
                              unsigned long *reached)
{
    unsigned long requests, connections, done, aborted;

    for (int i = 0; i < 60; i++) {
        upstream_stats(&requests, &connections);
        sink_stats(&done, &aborted);
        *reached = aborted - aborted0;
        if (done == done0 && requests - requests0 == 4 + *reached)
            return true;
        sleep_ms(50);
    }
    fprintf(stderr, "\n    upstream: requests +%lu, sinks done +%lu, aborted +%lu\n",
            requests - requests0, done - done0, aborted - aborted0);
    return false;
}

/* Clients going away midway leave the upstream server healthy: each attempt they abandon is
 * no failure of it (not counted, not logged, not in upstream_error), so it is never skipped
 * and the next request gets the upstream's 200. (libcurl closes a connection still being
 * made without sluice's close-socket callback; the handle once kept its number and, after
 * four, refused to connect at all: "refused" in 0 ms, and 502 for everyone.) */
static void test_clients_gone_midway(void)
{
    static const char aborts_config[] =
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
        "routes:\n  - name: all\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const char *const names[] = {"a reset mid-body", "a close mid-body", "a reset mid-head",
                                        "a reset after the body's start"};
    char server[64], series[160];
    unsigned long done0, aborted0, requests0, connections0, reached = 0;
    struct proc p;
    char *log, *access;

    snprintf(server, sizeof server, "route=\"all\",server=\"http://127.0.0.1:%u\"", upstream.port);
    CU_ASSERT_FATAL(start_sluice(&p, aborts_config, upstream.port) == 0);
    sink_stats(&done0, &aborted0);
    upstream_stats(&requests0, &connections0);
    for (int how = RESET_IN_BODY; how <= LATE_BODY_RESET; how++) {
        for (int i = 0; i < 10; i++)
            go_away_midway(p.port, (enum departure)how);
        check_case(get_status(p.port, "/echo", NULL) == 200, names[how],
                   "the next request did not get the upstream's 200");
    }
    /* Every aborted request that reached the upstream ended there early, none whole (in
     * thread_per_connection most never reach it: the client goes before the connect is
     * driven on; in event mode the late bodies all do). */
    CU_ASSERT(aborted_sinks_end(requests0, done0, aborted0, &reached));
    if (serving_mode() != NULL && strcmp(serving_mode(), "event") == 0)
        CU_ASSERT(reached >= 10);
    snprintf(series, sizeof series, "sluice_upstream_requests_total{%s,status_class=\"error\"}",
             server);
    CU_ASSERT_EQUAL(metric(&p, series), 0);
    snprintf(series, sizeof series, "sluice_upstream_requests_total{%s,status_class=\"2xx\"}",
             server);
    CU_ASSERT_EQUAL(metric(&p, series), 4);
    snprintf(series, sizeof series, "sluice_upstream_healthy{%s}", server);
    CU_ASSERT_EQUAL(metric(&p, series), 1);
    CU_ASSERT_EQUAL(metric(&p, "sluice_upstream_errors_total{route=\"all\",kind=\"connect\"}"), 0);
    CU_ASSERT_EQUAL(metric(&p, "sluice_upstream_errors_total{route=\"all\",kind=\"other\"}"), 0);
    log = read_log(&p);
    access = read_file(p.access_path);
    CU_ASSERT_PTR_NULL(log != NULL ? strstr(log, "is skipped") : "no log");
    CU_ASSERT_PTR_NULL(log != NULL ? strstr(log, ": refused: ") : "no log");
    CU_ASSERT_PTR_NOT_NULL(access != NULL ? strstr(access, "\"path\":\"/sink\",\"status\":0,")
                                          : NULL);
    CU_ASSERT_PTR_NULL(access != NULL ? strstr(access, "\"upstream_error\":\"r") : "no log");
    free(log);
    free(access);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

/* A stop that cuts an attempt short (past drain_timeout) is the gateway's doing: the access
 * log says 503 and no upstream_error, where it said 504 and "timeout". */
static void test_stop_blames_no_upstream(void)
{
    static const char stop_config[] = "server: {listen: \"127.0.0.1:0\", drain_timeout: 200ms}\n"
                                      "routes:\n  - name: all\n    match: {path_prefix: /}\n"
                                      "    upstream: \"http://127.0.0.1:%1$u\"\n";
    static const char request[] = "GET /slow?ms=3000 HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char stopped[] = "\"path\":\"/slow\",\"status\":503,";
    struct proc p;
    char *access = NULL, *line = NULL;
    int fd;

    CU_ASSERT_FATAL(start_sluice(&p, stop_config, upstream.port) == 0);
    fd = raw_connect(p.port);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(send(fd, request, strlen(request), MSG_NOSIGNAL), (ssize_t)strlen(request));
    sleep_ms(300);
    kill(p.pid, SIGTERM);
    for (int i = 0; i < 60 && line == NULL; i++) {
        free(access);
        sleep_ms(50);
        access = read_file(p.access_path);
        line = access != NULL ? strstr(access, "\"path\":\"/slow\"") : NULL;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    CU_ASSERT_EQUAL(strncmp(line, stopped, strlen(stopped)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"upstream_error\":\"\","));
    free(access);
    close(fd);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

void register_streams_tests(void)
{
    CU_pSuite s = add_suite_with("streams", init, clean);

    add_test(s, "1 GiB uploaded in flat memory, hashed upstream", test_gigabyte_in_flat_memory);
    add_test(s, "bodies of small sizes and at the window's edge", test_sizes_at_the_edges);
    add_test(s, "chunked past a slow upstream, and within the window",
             test_chunked_past_a_slow_upstream);
    add_test(s, "max_body passed midway: 413, upstream cut off", test_max_body_passed_midway);
    add_test(s, "a client that stops midway: both sides end", test_client_stops_midway);
    add_test(s, "100-continue only once the limits allowed", test_continue_only_when_allowed);
    add_test(s, "an upstream answering before the body's end", test_upstream_answers_early);
    add_test(s, "clients gone midway leave the upstream server healthy", test_clients_gone_midway);
    add_test(s, "a stop cutting an attempt short blames no upstream", test_stop_blames_no_upstream);
}
