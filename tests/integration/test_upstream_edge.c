/* An upstream that misbehaves, and the proxy settings around it: answers nobody asked for on
 * an idle pooled connection, a connection closed after a request was read, response heads
 * too large for the client side, idle connections left open, proxies from the environment,
 * a second Connection field. Each case checks what the client got, what reached the upstream
 * (the recorder, byte for byte or by count) and whether a connection was closed, the way
 * test_edge.c does. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define TIMEOUT_MS 5000 /* per exchange; a keep-alive answer ends sooner (see raw_session) */
#define ANSWER_CAP (160 * 1024)

/* What sluice adds to what a client on 127.0.0.1 sends (gateway/front/request.c,
 * upstream_headers()), before any Content-Length. */
#define FORWARDED_BY(host)                                                                         \
    "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: " host "\r\n"

static struct recorder rec;   /* the route's upstream */
static struct recorder proxy; /* a forward proxy that nothing should reach unless configured */
static struct proc gw;

/* One route to the recorder; "%2$s" is more of the server mapping, "%3$s" more of the route. */
static const char config[] = "server: {listen: \"127.0.0.1:0\"%2$s}\nroutes:\n"
                             "  - name: all\n    match: {path_prefix: /}\n"
                             "    upstream: \"http://127.0.0.1:%1$u\"\n%3$s";

static int init(void)
{
    if (recorder_start(&rec) != 0)
        return -1;
    if (recorder_start(&proxy) != 0) {
        recorder_stop(&rec);
        return -1;
    }
    return 0;
}

static int clean(void)
{
    recorder_stop(&proxy);
    recorder_stop(&rec);
    return 0;
}

/* For the checks of upstream connection reuse: in event mode each loop keeps its own idle
 * upstream connections, and a client's next connection may land on another loop. */
#define ONE_LOOP ", workers: 1"

/* Starts sluice with `server` added to the server mapping and `route` to the route, the
 * recorder reset and set to `modes`. */
static bool start_gateway(unsigned modes, const char *server, const char *route)
{
    bool started;

    recorder_set_mode(&rec, modes);
    recorder_set_delay(&rec, 0);
    started = start_sluice(&gw, config, rec.port, server, route) == 0;
    recorder_reset(&rec);
    recorder_reset(&proxy);
    CU_ASSERT_TRUE(started);
    return started;
}

static void stop_gateway(void)
{
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    recorder_set_mode(&rec, RECORDER_NORMAL);
    recorder_set_delay(&rec, 0);
}

/* --- the checks ------------------------------------------------------------------------ */

struct exchange {
    const char *label;
    int status;
    bool closed;
    char *answer;     /* ANSWER_CAP bytes */
    const char *body; /* inside answer, after the first head; "" when none */
    char *upstream;   /* what the recorder got meanwhile */
    size_t upstream_len;
    unsigned long received; /* requests the recorder read whole meanwhile */
    long logged_status;     /* of sluice's access log line for it; -1 when none came */
};

/* How many lines sluice's access log has. */
static size_t access_lines(void)
{
    char *log = read_file(gw.access_path);
    size_t n = 0;

    for (const char *at = log; at != NULL && (at = strchr(at, '\n')) != NULL; at++)
        n++;
    free(log);
    return n;
}

/* The status of access log line `n` (from 0), waited for; -1 when it did not come. */
static long access_status(size_t n)
{
    for (int waited = 0; waited < 2000; waited += 20) {
        char *log = read_file(gw.access_path), *line = log;
        long status = -1;

        for (size_t i = 0; i < n && line != NULL; i++) {
            line = strchr(line, '\n');
            line = line ? line + 1 : NULL;
        }
        if (line != NULL && strchr(line, '\n') != NULL) {
            char *field = strstr(line, "\"status\":");

            if (field != NULL && field < strchr(line, '\n'))
                status = strtol(field + 9, NULL, 10);
            free(log);
            return status;
        }
        free(log);
        sleep_ms(20);
    }
    return -1;
}

/* Sends `len` bytes of `request` to sluice on a new connection, the recorder emptied first;
 * the access log line it wrote is read too. */
static void exchange(struct exchange *x, const char *label, const char *request, size_t len)
{
    size_t logged = access_lines();
    const char *end;

    x->label = label;
    x->upstream_len = 0;
    x->answer = malloc(ANSWER_CAP);
    recorder_reset(&rec);
    x->status = raw_session(gw.port, request, len, x->answer, ANSWER_CAP, TIMEOUT_MS, &x->closed);
    end = strstr(x->answer, "\r\n\r\n");
    x->body = end ? end + 4 : "";
    x->upstream = recorder_bytes(&rec, &x->upstream_len);
    recorder_strip_request_ids(x->upstream, &x->upstream_len);
    x->received = recorder_received(&rec);
    x->logged_status = access_status(logged);
}

static void exchange_free(struct exchange *x)
{
    free(x->answer);
    free(x->upstream);
    x->answer = x->upstream = NULL;
}

/* What the client got: `status`, one answer, which the access log reports as sent; an error
 * as problem+json. */
static void expect_answer(const struct exchange *x, int status)
{
    char shown[768];

    check_case(x->status == status, x->label, "status %d, expected %d; answer: %s", x->status,
               status, visible_bytes(x->answer, strlen(x->answer), shown, sizeof shown));
    check_case(count_responses(x->answer) == 1, x->label, "%d answers, expected one: %s",
               count_responses(x->answer),
               visible_bytes(x->answer, strlen(x->answer), shown, sizeof shown));
    check_case(x->logged_status == x->status, x->label,
               "the access log says %ld, the client got %d", x->logged_status, x->status);
    if (status >= 400)
        check_case(strcasestr(x->answer, "\r\nContent-Type: application/problem+json\r\n") != NULL,
                   x->label, "an error without Content-Type: application/problem+json");
}

static void expect_body(const struct exchange *x, const char *body)
{
    char got[256];

    check_case(strcmp(x->body, body) == 0, x->label, "body \"%s\", expected \"%s\"",
               visible_bytes(x->body, strlen(x->body), got, sizeof got), body);
}

/* What reached the upstream: exactly `expected`, `requests` times over. */
static void expect_upstream(const struct exchange *x, const char *expected, unsigned requests)
{
    char got[1024], want[1024];
    size_t len = strlen(expected);
    bool same = x->upstream != NULL && x->upstream_len == len * requests;

    for (unsigned i = 0; same && i < requests; i++)
        same = memcmp(x->upstream + i * len, expected, len) == 0;
    check_case(same, x->label, "the upstream got \"%s\", expected %u time(s) \"%s\"",
               visible_bytes(x->upstream, x->upstream_len, got, sizeof got), requests,
               visible_bytes(expected, len, want, sizeof want));
    check_case(x->received == requests, x->label, "the upstream read %lu request(s), expected %u",
               x->received, requests);
}

static void expect_closed(const struct exchange *x, bool closed)
{
    check_case(x->closed == closed, x->label, "the connection was %s, expected %s",
               x->closed ? "closed" : "left open", closed ? "closed" : "left open");
}

/* Waits up to `timeout_ms` for the recorder to hold `at_most` open connections or fewer;
 * the number it holds then. */
static unsigned long open_connections_within(unsigned long at_most, int timeout_ms)
{
    unsigned long open = recorder_open_connections(&rec);

    for (int waited = 0; open > at_most && waited < timeout_ms; waited += 20) {
        sleep_ms(20);
        open = recorder_open_connections(&rec);
    }
    return open;
}

/* --- the tests ------------------------------------------------------------------------- */

/* An upstream writes a whole response nobody asked for on a pooled connection while it is
 * idle. Whatever it is, it is no answer to the next request: were that connection reused,
 * the next client would get the stray, and each client after it the answer of the one
 * before. Every answer here echoes the client's Authorization, so each must get its own. */
static void test_stray_response_reaches_nobody(void)
{
    static const char *const clients[] = {"A", "B", "C"};

    if (!start_gateway(RECORDER_ECHO_AUTH | RECORDER_STRAY, ONE_LOOP, ""))
        return;
    for (int round = 1; round <= 3; round++)
        for (size_t i = 0; i < sizeof clients / sizeof clients[0]; i++) {
            char label[64], auth[32], request[256], upstream_request[512];
            struct exchange x;
            int len;

            snprintf(label, sizeof label, "round %d, client %s", round, clients[i]);
            snprintf(auth, sizeof auth, "Bearer %s-%d", clients[i], round);
            len = snprintf(request, sizeof request,
                           "GET /%s HTTP/1.1\r\nHost: h\r\nAuthorization: %s\r\n\r\n", clients[i],
                           auth);
            snprintf(
                upstream_request, sizeof upstream_request,
                "GET /%s HTTP/1.1\r\nHost: h\r\nAuthorization: %s\r\n" FORWARDED_BY("h") "\r\n",
                clients[i], auth);
            exchange(&x, label, request, (size_t)len);
            expect_answer(&x, 200);
            expect_body(&x, auth);
            check_case(strstr(x.answer, "stray") == NULL, label,
                       "the client got the stray response");
            expect_upstream(&x, upstream_request, 1);
            expect_closed(&x, false);
            exchange_free(&x);
            /* Past STRAY_MS: the stray is on the idle pooled connection before the next. */
            sleep_ms(150);
        }
    stop_gateway();
}

/* The upstream reads a request whole on a reused connection and closes it unanswered. It may
 * have acted on it: a POST or PATCH is not sent again (the client gets 502, the upstream saw
 * it once); a GET, PUT or DELETE may be, once (the client gets the answer of the retry). */
static void test_unanswered_request_is_retried_only_when_idempotent(void)
{
    static const struct {
        const char *method, *body;
        bool idempotent;
    } cases[] = {
        {"POST", "p=1", false}, {"PATCH", "p=1", false}, {"GET", NULL, true},
        {"PUT", "p=1", true},   {"DELETE", NULL, true},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *method = cases[i].method, *body = cases[i].body;
        char label[64], length[48] = "", first[256], first_up[512], second[256], second_up[512];
        struct exchange x;
        int len;

        if (body != NULL)
            snprintf(length, sizeof length, "Content-Length: %zu\r\n", strlen(body));
        recorder_set_close_at(&rec, 2); /* the second request on a connection */
        if (!start_gateway(RECORDER_CLOSE_AFTER_READ, ONE_LOOP, ""))
            return;

        snprintf(label, sizeof label, "%s, the first on its connection", method);
        len = snprintf(first, sizeof first, "%s /first HTTP/1.1\r\nHost: h\r\n%s\r\n%s", method,
                       length, body ? body : "");
        snprintf(first_up, sizeof first_up,
                 "%s /first HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "%s\r\n%s", method, length,
                 body ? body : "");
        exchange(&x, label, first, (size_t)len);
        expect_answer(&x, 200);
        expect_body(&x, "ok");
        expect_upstream(&x, first_up, 1);
        expect_closed(&x, false);
        exchange_free(&x);

        snprintf(label, sizeof label, "%s, read and left unanswered", method);
        len = snprintf(second, sizeof second, "%s /second HTTP/1.1\r\nHost: h\r\n%s\r\n%s", method,
                       length, body ? body : "");
        snprintf(second_up, sizeof second_up,
                 "%s /second HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "%s\r\n%s", method, length,
                 body ? body : "");
        exchange(&x, label, second, (size_t)len);
        if (cases[i].idempotent) {
            /* Once on the pooled connection, once more on a fresh one, which answers. */
            expect_answer(&x, 200);
            expect_body(&x, "ok");
            expect_upstream(&x, second_up, 2);
            expect_closed(&x, false);
        } else {
            expect_answer(&x, 502);
            /* Sluice may connect afresh and then send nothing: no new connection is asked
             * for, only that the request goes out once. */
            expect_upstream(&x, second_up, 1);
        }
        exchange_free(&x);
        stop_gateway();
    }
}

/* A GET of /`name` with a Cookie of `cookie` bytes, into `out`; its length. */
static size_t get_with_cookie(char *out, size_t cap, const char *name, size_t cookie)
{
    int n = snprintf(out, cap, "GET /%s HTTP/1.1\r\nHost: h\r\nCookie: c=", name);
    size_t len = (size_t)n;

    for (size_t i = 0; i < cookie && len + 8 < cap; i++)
        out[len++] = (char)('a' + i % 26);
    len += (size_t)snprintf(out + len, cap - len, "\r\n\r\n");
    return len;
}

/* Every X-Fill field of the recorder's last answer is in the client's answer. */
static void expect_fill_fields(const struct exchange *x)
{
    size_t len = 0, fields = 0, missing = 0;
    char *sent = recorder_last_answer(&rec, &len), *end = sent ? strstr(sent, "\r\n\r\n") : NULL;

    check_case(end != NULL, x->label, "the recorder sent no answer");
    for (char *line = sent; end != NULL && line < end;) {
        char *eol = strstr(line, "\r\n");

        if (strncmp(line, "X-Fill-", 7) == 0) {
            char field[256];

            fields++;
            snprintf(field, sizeof field, "\r\n%.*s\r\n", (int)(eol - line), line);
            missing += strstr(x->answer, field) == NULL;
        }
        line = eol + 2;
    }
    check_case(fields > 0 && missing == 0, x->label, "%zu of the upstream's %zu fields missing",
               missing, fields);
    free(sent);
}

/* A request head of about `size` bytes: one X-Big field. The caller frees it. */
static char *big_head(const char *path, size_t size, size_t *len)
{
    char *head = malloc(size + 128);
    int n = snprintf(head, size + 128, "GET %s HTTP/1.1\r\nHost: h\r\nX-Big: ", path);

    *len = (size_t)n;
    for (; *len < size; (*len)++)
        head[*len] = (char)('a' + *len % 26);
    *len += (size_t)snprintf(head + *len, 8, "\r\n\r\n");
    return head;
}

/* What the upstream gets for big_head(). The caller frees it. */
static char *big_head_up(const char *head, size_t len)
{
    const char *end = strstr(head, "\r\n\r\n");
    size_t cap = len + 256;
    char *up = malloc(cap);

    snprintf(up, cap, "%.*s\r\n" FORWARDED_BY("h") "\r\n", (int)(end - head), head);
    return up;
}

/* A client always gets a status line, and the access log reports the one it got. Response
 * heads pass whole up to server.max_response_header_size (16 KiB by default) even after a
 * large request head, and are a 502 beyond it; a request head over server.max_header_size is
 * a 431 and the end of the connection. */
static void response_head(const char *label, size_t head_size, size_t cookie, unsigned status)
{
    static char request[20 * 1024];
    size_t len;
    struct exchange x;

    recorder_set_mode(&rec, RECORDER_HUGE_HEAD);
    recorder_set_head_size(&rec, head_size);
    len = get_with_cookie(request, sizeof request, "head", cookie);
    exchange(&x, label, request, len);
    expect_answer(&x, status);
    if (status == 200) {
        expect_body(&x, "ok");
        expect_fill_fields(&x);
        expect_closed(&x, false);
    } else {
        check_case(strstr(x.answer, "X-Fill-") == NULL, x.label,
                   "fields of the refused head passed");
    }
    check_case(x.received == 1, x.label, "the upstream read %lu requests, expected one",
               x.received);
    exchange_free(&x);
}

static void request_head(const char *label, const char *target, size_t size, unsigned status)
{
    size_t len;
    struct exchange x;
    char *head = big_head(target, size, &len), *up = big_head_up(head, len);

    recorder_set_mode(&rec, RECORDER_NORMAL);
    exchange(&x, label, head, len);
    expect_answer(&x, status);
    if (status == 431)
        check_case(strcasestr(x.answer, "\r\nConnection: close\r\n") != NULL, x.label,
                   "a refusal without \"Connection: close\"");
    expect_upstream(&x, status == 200 ? up : "", status == 200 ? 1 : 0);
    expect_closed(&x, status != 200);
    exchange_free(&x);
    free(up);
    free(head);
}

/* A head of "GET `target` HTTP/1.1", a Host field, the lines `fields` (each ending in CRLF)
 * and an empty line, small in bytes but costly to store: 431 when `refused`, and closed, none
 * of it forwarded; else 200, and the upstream gets it byte for byte. */
static void costly_head(const char *label, const char *target, const char *fields, bool refused)
{
    static char head[24 * 1024];
    size_t len =
        (size_t)snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: h\r\n%s\r\n", target, fields);
    char *up = big_head_up(head, len);
    struct exchange x;

    recorder_set_mode(&rec, RECORDER_NORMAL);
    exchange(&x, label, head, len);
    expect_answer(&x, refused ? 431 : 200);
    expect_upstream(&x, refused ? "" : up, refused ? 0 : 1);
    expect_closed(&x, refused);
    exchange_free(&x);
    free(up);
}

/* `n` fields "A<i>: b" */
static void tiny_fields(const char *label, unsigned n, bool refused)
{
    static char fields[16 * 1024];
    size_t len = 0;

    for (unsigned i = 0; i < n && len + 32 < sizeof fields; i++)
        len += (size_t)snprintf(fields + len, sizeof fields - len, "A%u: b\r\n", i);
    costly_head(label, "/tiny", fields, refused);
}

/* a Cookie field of `n` times `cookie` */
static void cookies(const char *label, const char *cookie, unsigned n, bool refused)
{
    static char field[16 * 1024];
    size_t len = (size_t)snprintf(field, sizeof field, "Cookie: ");

    for (unsigned i = 0; i < n && len + 16 < sizeof field; i++)
        len += (size_t)snprintf(field + len, sizeof field - len, "%s", cookie);
    while (field[len - 1] == ' ') /* trailing spaces are not passed on */
        len--;
    snprintf(field + len, sizeof field - len, "\r\n");
    costly_head(label, "/cookies", field, refused);
}

/* a target of `n` query arguments */
static void query_arguments(const char *label, unsigned n, bool refused)
{
    static char target[4 * 1024];
    size_t len = (size_t)snprintf(target, sizeof target, "/args?");

    for (unsigned i = 0; i < n && len + 16 < sizeof target; i++)
        len += (size_t)snprintf(target + len, sizeof target - len, "a&");
    costly_head(label, target, "", refused);
}

/* A chunked POST of 3 bytes with `n` trailer fields, which count toward max_header_size beside
 * the head: 200 within it, else 431, closed, and the upstream never gets a whole request. */
static void trailer_fields(const char *label, unsigned n, bool refused)
{
    static char request[16 * 1024];
    size_t len = (size_t)snprintf(request, sizeof request,
                                  "POST /trailers HTTP/1.1\r\nHost: h\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n");
    struct exchange x;

    for (unsigned i = 0; i < n && len + 32 < sizeof request; i++)
        len += (size_t)snprintf(request + len, sizeof request - len, "T%u: b\r\n", i);
    len += (size_t)snprintf(request + len, sizeof request - len, "\r\n");
    recorder_set_mode(&rec, RECORDER_NORMAL);
    exchange(&x, label, request, len);
    expect_answer(&x, refused ? 431 : 200);
    expect_closed(&x, refused);
    check_case(x.received == (refused ? 0 : 1), x.label, "the upstream read %lu requests",
               x.received);
    exchange_free(&x);
}

/* Sends `len` bytes of `request` on a new connection in one go and reads what comes back into
 * `answer` (`cap` bytes, NUL-terminated) until `marker` has come `want` times, TIMEOUT_MS
 * pass with nothing new, or the connection ends (*closed). */
static void pipeline(const char *request, size_t len, char *answer, size_t cap, const char *marker,
                     int want, bool *closed)
{
    size_t got = 0, sent = 0;
    int fd = raw_connect(gw.port);

    *closed = false;
    answer[0] = '\0';
    CU_ASSERT_FATAL(fd >= 0);
    for (ssize_t n = 0; sent < len && n >= 0; sent += (size_t)(n > 0 ? n : 0))
        n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
    for (int waited = 0;
         occurrences(answer, marker) < want && waited < TIMEOUT_MS && got < cap - 1;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, 100) <= 0) {
            waited += 100;
            continue;
        }
        n = recv(fd, answer + got, cap - 1 - got, 0);
        *closed = n <= 0;
        if (*closed)
            break;
        got += (size_t)n;
        answer[got] = '\0';
    }
    close(fd);
}

/* A GET of `fields` tiny fields with a POST of `body` bytes (Content-Length, or `chunked`)
 * pipelined behind it, each answered with a 15 KiB head. What waits behind the GET while it is
 * answered is bounded (head.h): sluice reads no more of the POST than leaves room for the
 * answer's head, and the rest after it. Both are answered, and the upstream reads both. */
static void pipelined_behind(const char *label, unsigned fields, size_t body, bool chunked)
{
    static char request[64 * 1024], answer[64 * 1024];
    size_t len = (size_t)snprintf(request, sizeof request, "GET /a HTTP/1.1\r\nHost: h\r\n"),
           logged = access_lines();
    int answers;
    bool closed;
    const char *second;
    long statuses[2];

    for (unsigned i = 0; i < fields; i++)
        len += (size_t)snprintf(request + len, sizeof request - len, "A%u: b\r\n", i);
    if (chunked)
        len += (size_t)snprintf(request + len, sizeof request - len,
                                "\r\nPOST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                                "\r\n%zx\r\n",
                                body);
    else
        len += (size_t)snprintf(request + len, sizeof request - len,
                                "\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: %zu\r\n\r\n",
                                body);
    CU_ASSERT_FATAL(len + body + 16 < sizeof request);
    memset(request + len, 'x', body);
    len += body;
    if (chunked)
        len += (size_t)snprintf(request + len, sizeof request - len, "\r\n0\r\n\r\n");
    recorder_set_mode(&rec, RECORDER_HUGE_HEAD);
    recorder_set_head_size(&rec, 15 * 1024);
    recorder_reset(&rec);
    /* Both answers, each 200 ending in its body "ok". */
    pipeline(request, len, answer, sizeof answer, "\r\nContent-Length: 2\r\n\r\nok", 2, &closed);
    answers = occurrences(answer, "\r\nContent-Length: 2\r\n\r\nok");
    second = strstr(answer, "\r\n\r\nokHTTP/1.1 ");
    check_case(strncmp(answer, "HTTP/1.1 200 OK\r\n", 17) == 0 && second != NULL, label,
               "the GET's answer is not whole, or nothing follows it");
    check_case(answers == 2 && second != NULL && strncmp(second + 6, "HTTP/1.1 200 ", 13) == 0 &&
                   !closed,
               label, "%d whole answers, expected two of 200 after each other%s", answers,
               closed ? ", then the connection closed" : "");
    check_case(recorder_received(&rec) == 2u, label, "the upstream read %lu requests, expected 2",
               recorder_received(&rec));
    statuses[0] = access_status(logged);
    statuses[1] = access_status(logged + 1);
    check_case(statuses[0] == 200 && statuses[1] == 200, label, "the access log says %ld and %ld",
               statuses[0], statuses[1]);
}

/* `n` small GETs pipelined in one write, with heads and answers as small as the limits allow:
 * every one is answered 200, in order, and reaches the upstream. */
static void deep_pipelining(const char *label, int n)
{
    static char request[64 * 1024], answer[256 * 1024];
    size_t len = 0;
    int answers, others;
    bool closed;

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(request + len, sizeof request - len,
                                "GET /deep/%d HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n", i);
    CU_ASSERT_FATAL(len < sizeof request);
    recorder_set_mode(&rec, RECORDER_NORMAL);
    recorder_reset(&rec);
    pipeline(request, len, answer, sizeof answer, "HTTP/1.1 ", n, &closed);
    answers = occurrences(answer, "HTTP/1.1 200 ");
    others = occurrences(answer, "HTTP/1.1 ") - answers;
    check_case(answers == n && others == 0 && !closed, label,
               "%d answers of 200 and %d others, of %d%s", answers, others, n,
               closed ? "; the connection closed" : "");
    check_case(recorder_received(&rec) == (unsigned long)n, label,
               "the upstream read %lu requests, expected %d", recorder_received(&rec), n);
}

static void test_client_always_gets_a_status_line(void)
{
    if (!start_gateway(RECORDER_NORMAL, "", ""))
        return;
    response_head("a 12 KiB response head, a 4 KiB Cookie", 12 * 1024, 4096, 200);
    response_head("a 20 KiB response head, over the default 16 KiB", 20 * 1024, 16, 502);
    /* libmicrohttpd keeps a copy of the Cookie field in the same memory. */
    response_head("a 15 KiB response head, a 15 KB Cookie", 15 * 1024, 15000, 200);
    request_head("a 20 KiB request head, max_header_size by default", "/big", 20 * 1024, 431);
    /* What libmicrohttpd stores for each field, cookie and query argument counts. */
    tiny_fields("700 tiny request fields (6 KB)", 700, true);
    tiny_fields("100 tiny request fields", 100, false);
    cookies("1,000 cookies in 5 KB", "a=b; ", 1000, true);
    cookies("1,000 cookies split at commas", "a=b,", 1000, true);
    cookies("1,000 cookies without values", "a;", 1000, true);
    cookies("100 cookies", "a=b; ", 100, false);
    query_arguments("1,000 query arguments in 2 KB", 1000, true);
    query_arguments("100 query arguments", 100, false);
    pipelined_behind("150 fields, 20 KB pipelined behind, 15 KiB answer heads", 150, 20000, false);
    pipelined_behind("150 fields, 20 KB chunked behind", 150, 20000, true);
    pipelined_behind("200 fields, 30 KB pipelined behind, 15 KiB answer heads", 200, 30000, false);
    pipelined_behind("200 fields, 30 KB chunked behind", 200, 30000, true);
    deep_pipelining("1,000 small requests pipelined", 1000);
    trailer_fields("100 trailer fields", 100, false);
    trailer_fields("300 trailer fields (2.6 KB)", 300, true);
    trailer_fields("1,000 trailer fields (9 KB)", 1000, true);
    stop_gateway();

    if (!start_gateway(RECORDER_NORMAL, ", max_header_size: 32KiB, max_response_header_size: 64KiB",
                       ""))
        return;
    request_head("a 20 KiB request head, max_header_size: 32KiB", "/big", 20 * 1024, 200);
    request_head("a 40 KiB request head, max_header_size: 32KiB", "/bigger", 40 * 1024, 431);
    cookies("1,000 cookies in 5 KB, max_header_size: 32KiB", "a=b; ", 1000, true);
    cookies("400 cookies, max_header_size: 32KiB", "a=b; ", 400, false);
    response_head("a 60 KiB response head, a 4 KiB Cookie, 64 KiB allowed", 60 * 1024, 4096, 200);
    response_head("a 70 KiB response head, 64 KiB allowed", 70 * 1024, 16, 502);
    stop_gateway();

    /* The smallest memory: libmicrohttpd reads as much at once as may wait behind a request. */
    if (!start_gateway(RECORDER_NORMAL, ", max_header_size: 4KiB, max_response_header_size: 4KiB",
                       ""))
        return;
    deep_pipelining("1,000 small requests pipelined, 4 KiB heads", 1000);
    stop_gateway();
}

/* 20 requests at once, each held 200 ms by the upstream, so that each needs an upstream
 * connection of its own; true when all got 200. */
static bool burst(const char *label)
{
    int other = 0, ok;

    recorder_set_delay(&rec, 200);
    ok = race_requests(&gw.port, 1, 20, "/burst", NULL, &other);
    recorder_set_delay(&rec, 0);
    check_case(ok == 20, label, "%d of 20 requests got 200", ok);
    check_case(recorder_received(&rec) == 20, label, "the upstream read %lu requests, expected 20",
               recorder_received(&rec));
    return ok == 20;
}

/* After the burst, one request more: pruned connections are not reused. */
static void expect_one_more_request(const char *label)
{
    struct exchange x;

    exchange(&x, label, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n",
             sizeof "GET /after HTTP/1.1\r\nHost: h\r\n\r\n" - 1);
    expect_answer(&x, 200);
    expect_body(&x, "ok");
    expect_upstream(&x, "GET /after HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n", 1);
    exchange_free(&x);
}

/* Idle upstream connections are closed after server.upstream_idle_timeout, and no more than
 * server.upstream_max_idle of them are kept once a burst is over. */
static void test_idle_upstream_connections_are_pruned(void)
{
    unsigned long open;

    if (!start_gateway(RECORDER_NORMAL, ONE_LOOP ", upstream_idle_timeout: 1s", ""))
        return;
    if (burst("upstream_idle_timeout: 1s")) {
        open = recorder_open_connections(&rec);
        check_case(open > 0, "upstream_idle_timeout: 1s",
                   "no upstream connection open after the burst: nothing to prune");
        sleep_ms(3000);
        open = recorder_open_connections(&rec);
        check_case(open == 0, "upstream_idle_timeout: 1s",
                   "%lu upstream connections still open 3 s after the burst, expected 0", open);
        expect_one_more_request("a request after the idle ones were closed");
    }
    stop_gateway();

    if (!start_gateway(RECORDER_NORMAL, ONE_LOOP ", upstream_max_idle: 2", ""))
        return;
    if (burst("upstream_max_idle: 2")) {
        check_case(recorder_connections(&rec) > 2, "upstream_max_idle: 2",
                   "the burst took %lu upstream connections: too few to tell",
                   recorder_connections(&rec));
        open = open_connections_within(2, 1000);
        check_case(open <= 2, "upstream_max_idle: 2",
                   "%lu upstream connections open a second after the burst, expected 2 at most",
                   open);
        expect_one_more_request("a request after the burst, upstream_max_idle: 2");
    }
    stop_gateway();
}

/* The proxy variables in the environment: set while sluice starts (which inherits them),
 * then put back as they were. The proxy ones to `url` and no_proxy/NO_PROXY to `no_proxy`, each
 * taken away meanwhile when NULL. */
static const char *const proxy_variables[] = {"http_proxy", "HTTP_PROXY", "ALL_PROXY",
                                              "all_proxy",  "no_proxy",   "NO_PROXY"};
#define N_PROXY_VARIABLES (sizeof proxy_variables / sizeof proxy_variables[0])

static void set_proxy_environment(const char *url, const char *no_proxy,
                                  char *saved[N_PROXY_VARIABLES])
{
    for (size_t i = 0; i < N_PROXY_VARIABLES; i++) {
        const char *value = getenv(proxy_variables[i]);
        const char *wanted = strcasecmp(proxy_variables[i], "no_proxy") == 0 ? no_proxy : url;

        saved[i] = value ? strdup(value) : NULL;
        if (wanted == NULL)
            unsetenv(proxy_variables[i]);
        else
            setenv(proxy_variables[i], wanted, 1);
    }
}

static void restore_environment(char *saved[N_PROXY_VARIABLES])
{
    for (size_t i = 0; i < N_PROXY_VARIABLES; i++) {
        if (saved[i] != NULL)
            setenv(proxy_variables[i], saved[i], 1);
        else
            unsetenv(proxy_variables[i]);
        free(saved[i]);
    }
}

/* A forward proxy is used when a route names one, never because the environment does: what
 * sluice's environment says (a container's http_proxy meant for something else) must not
 * send client requests, their credentials, elsewhere. */
static void test_proxy_only_from_the_config(void)
{
    char proxy_url[64], route_proxy[96], *saved[N_PROXY_VARIABLES], *bytes, expected[128];
    struct exchange x;
    size_t len;
    bool started;

    snprintf(proxy_url, sizeof proxy_url, "http://127.0.0.1:%u", proxy.port);
    set_proxy_environment(proxy_url, NULL, saved);
    started = start_gateway(RECORDER_NORMAL, "", "");
    restore_environment(saved);
    if (!started)
        return;
    exchange(&x, "http_proxy, HTTP_PROXY and ALL_PROXY set", "GET /env HTTP/1.1\r\nHost: h\r\n\r\n",
             sizeof "GET /env HTTP/1.1\r\nHost: h\r\n\r\n" - 1);
    expect_answer(&x, 200);
    expect_body(&x, "ok");
    expect_upstream(&x, "GET /env HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n", 1);
    bytes = recorder_bytes(&proxy, &len);
    {
        char shown[512];

        check_case(len == 0, x.label, "the proxy from the environment got \"%s\"",
                   visible_bytes(bytes, len, shown, sizeof shown));
    }
    free(bytes);
    exchange_free(&x);
    stop_gateway();

    /* no_proxy in the environment exempts nothing from the route's proxy either. */
    snprintf(route_proxy, sizeof route_proxy, "    proxy: \"%s\"\n", proxy_url);
    set_proxy_environment(NULL, "*", saved);
    started = start_gateway(RECORDER_NORMAL, "", route_proxy);
    restore_environment(saved);
    if (!started)
        return;
    exchange(&x, "the route's proxy, no_proxy and NO_PROXY \"*\"",
             "GET /viaproxy HTTP/1.1\r\nHost: h\r\n\r\n",
             sizeof "GET /viaproxy HTTP/1.1\r\nHost: h\r\n\r\n" - 1);
    expect_answer(&x, 200);
    expect_body(&x, "ok");
    expect_upstream(&x, "", 0);
    bytes = recorder_bytes(&proxy, &len);
    snprintf(expected, sizeof expected, "GET http://127.0.0.1:%u/viaproxy HTTP/1.1\r\n", rec.port);
    {
        char shown[512], want[192];

        check_case(strncmp(bytes, expected, strlen(expected)) == 0 &&
                       recorder_received(&proxy) == 1,
                   x.label, "the proxy got \"%s\", expected one request starting \"%s\"",
                   visible_bytes(bytes, len, shown, sizeof shown),
                   visible_bytes(expected, strlen(expected), want, sizeof want));
    }
    free(bytes);
    exchange_free(&x);
    stop_gateway();

    /* Nor from its health checks: they go through the route's proxy too. */
    set_proxy_environment(NULL, "*", saved);
    recorder_reset(&proxy);
    started = start_sluice(&gw,
                           "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                           "  - name: all\n    match: {path_prefix: /}\n"
                           "    proxy: \"%2$s\"\n    upstream:\n"
                           "      servers: [\"http://127.0.0.1:%1$u\"]\n"
                           "      health_check: {path: /health, interval: 200ms, timeout: 200ms}\n",
                           rec.port, proxy_url) == 0;
    restore_environment(saved);
    CU_ASSERT_TRUE_FATAL(started);
    snprintf(expected, sizeof expected, "GET http://127.0.0.1:%u/health HTTP/1.1\r\n", rec.port);
    for (int i = 0; i < 100 && recorder_received(&proxy) == 0; i++)
        sleep_ms(20);
    bytes = recorder_bytes(&proxy, &len);
    {
        char shown[512];

        check_case(len > 0 && strncmp(bytes, expected, strlen(expected)) == 0,
                   "health checks with no_proxy \"*\"", "the proxy got \"%s\"",
                   visible_bytes(bytes, len, shown, sizeof shown));
    }
    free(bytes);
    stop_gateway();
}

/* Every Connection field of the response names fields that stop at sluice, not only the
 * first: a second "Connection: X-Secret" keeps X-Secret from the client. */
static void test_every_response_connection_field_counts(void)
{
    struct exchange x;

    if (!start_gateway(RECORDER_TWO_CONNECTION_FIELDS, "", ""))
        return;
    exchange(&x, "Connection: keep-alive, then Connection: X-Secret",
             "GET /conn HTTP/1.1\r\nHost: h\r\n\r\n",
             sizeof "GET /conn HTTP/1.1\r\nHost: h\r\n\r\n" - 1);
    expect_answer(&x, 200);
    expect_body(&x, "ok");
    check_case(strcasestr(x.answer, "\r\nX-Secret:") == NULL && strstr(x.answer, "leaked") == NULL,
               x.label, "the client got X-Secret");
    expect_upstream(&x, "GET /conn HTTP/1.1\r\nHost: h\r\n" FORWARDED_BY("h") "\r\n", 1);
    expect_closed(&x, false);
    exchange_free(&x);
    stop_gateway();
}

void register_upstream_edge_tests(void)
{
    CU_pSuite s = add_suite_with("upstream_edge", init, clean);

    add_test(s, "a stray response on an idle upstream connection reaches nobody",
             test_stray_response_reaches_nobody);
    add_test(s, "an unanswered request is retried only when idempotent",
             test_unanswered_request_is_retried_only_when_idempotent);
    add_test(s, "a client always gets a status line", test_client_always_gets_a_status_line);
    add_test(s, "idle upstream connections are pruned", test_idle_upstream_connections_are_pruned);
    add_test(s, "a forward proxy only from the config", test_proxy_only_from_the_config);
    add_test(s, "every response Connection field counts",
             test_every_response_connection_field_counts);
}
