#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/front/head.h"
#include "tests/unit.h"

/* What a reader makes of a whole stream fed in pieces of `piece` bytes (0: at once), the way
 * wire.c feeds it: kept bytes go in again, in front of the next piece. */
struct reading {
    char out[GW_HEAD_MAX * 4];
    size_t out_len;
    struct gw_head head;
};

static void read_stream(const char *stream, size_t len, size_t piece, struct reading *r)
{
    char *buf = malloc(len + 1);
    size_t kept = 0, pos = 0;

    memset(r, 0, sizeof *r);
    gw_head_init(&r->head, GW_HEAD_MAX, 2 * GW_HEAD_MAX);
    while (pos < len && r->head.fault == 0) {
        size_t n = piece == 0 || len - pos < piece ? len - pos : piece;
        struct gw_head_step step;

        memcpy(buf + kept, stream + pos, n);
        pos += n;
        step = gw_head_feed(&r->head, buf, kept + n);
        CU_ASSERT_TRUE(step.ready <= step.keep_from && step.keep_from <= kept + n);
        CU_ASSERT_FATAL(r->out_len + step.ready < sizeof r->out);
        memcpy(r->out + r->out_len, buf, step.ready);
        r->out_len += step.ready;
        kept = kept + n - step.keep_from;
        memmove(buf, buf + step.keep_from, kept);
    }
    r->out[r->out_len] = '\0';
    free(buf);
}

static void read_text(const char *stream, struct reading *r)
{
    read_stream(stream, strlen(stream), 0, r);
}

static void test_sound_heads_pass_trimmed(void)
{
    struct reading r;

    read_text("GET /a HTTP/1.1\r\nHost: h \r\nX-API-Key: alice \t\r\nX-Empty:   \r\n\r\n", &r);
    CU_ASSERT_EQUAL(r.head.fault, 0);
    CU_ASSERT_STRING_EQUAL(r.out,
                           "GET /a HTTP/1.1\r\nHost: h\r\nX-API-Key: alice\r\nX-Empty:\r\n\r\n");
    CU_ASSERT_EQUAL(r.head.heads, 1);
    CU_ASSERT_EQUAL(r.head.messages, 1);

    /* The worked example of head.h. */
    {
        char buf[] = "GET /a HTTP/1.1\r\nHost: h \r\n\r\nGET /b HT";
        struct gw_head h;
        struct gw_head_step step;

        gw_head_init(&h, GW_HEAD_MAX, 2 * GW_HEAD_MAX);
        step = gw_head_feed(&h, buf, strlen(buf));
        CU_ASSERT_EQUAL(step.ready, 28);
        CU_ASSERT_EQUAL(step.keep_from, 29);
        CU_ASSERT_EQUAL(h.heads, 1);
        CU_ASSERT_EQUAL(h.messages, 1);
    }

    /* Empty lines before a request line are allowed (RFC 9112 section 2.2); HTTP/1.0 needs
     * no Host. */
    read_text("\r\n\r\nGET / HTTP/1.0\r\n\r\n", &r);
    CU_ASSERT_EQUAL(r.head.fault, 0);
    CU_ASSERT_EQUAL(r.head.messages, 1);
}

static void test_bodies_are_followed(void)
{
    static const char stream[] =
        "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked \r\n\r\n"
        "5;ext=\"x\"\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer-Field: t\r\n\r\n"
        "GET /c HTTP/1.1\r\nHost: h\r\n\r\n";
    struct reading whole, piecewise;

    read_text(stream, &whole);
    CU_ASSERT_EQUAL(whole.head.fault, 0);
    CU_ASSERT_EQUAL(whole.head.messages, 3);
    /* Only the trailing space of "chunked " is gone. */
    CU_ASSERT_EQUAL(whole.out_len, strlen(stream) - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(whole.out, "Transfer-Encoding: chunked\r\n"));
    /* Whatever the pieces, the same reading. */
    for (size_t piece = 1; piece < 40; piece++) {
        read_stream(stream, strlen(stream), piece, &piecewise);
        CU_ASSERT_EQUAL(piecewise.head.messages, 3);
        CU_ASSERT_EQUAL(piecewise.out_len, whole.out_len);
        CU_ASSERT_EQUAL(memcmp(piecewise.out, whole.out, whole.out_len), 0);
    }
}

/* Each refused, with its status, the message it concerns, and nothing of it passed on. */
static void test_faults(void)
{
#define CASE(stream, status)                                                                       \
    {                                                                                              \
        stream, sizeof stream - 1, status                                                          \
    }
    static const struct {
        const char *stream;
        size_t len;
        unsigned status;
    } cases[] = {
        CASE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 41\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length\t: 41\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n 41\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n", 400),       /* obs-fold */
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n\tX-B: b\r\n\r\n", 400), /* with a colon */
        CASE("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400),                      /* after the line */
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", 400),          /* bare CR */
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\nX-B: b\r\n\r\n", 400),     /* bare LF */
        CASE("GET / HTTP/1.1\nHost: h\n\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n", 400), /* NUL */
        CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400),
        CASE("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        CASE("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400),
        CASE("GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        CASE("GET /\x80 HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        CASE("GET / http/1.1\r\nHost: h\r\n\r\n", 400),
        CASE("GET /\r\n\r\n", 400),
        CASE("GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505),
        CASE("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505),
        CASE("GET / HTTP/1.1\r\n\r\n", 400),
        CASE("GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n", 400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n", 400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", 400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1234567890123456789\r\n\r\n", 400),
        CASE(
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
             "chunked\r\n\r\n",
             400),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        CASE("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    };
#undef CASE
    struct reading r;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        read_stream(cases[i].stream, cases[i].len, 0, &r);
        CU_ASSERT_EQUAL(r.head.fault, cases[i].status);
        CU_ASSERT_EQUAL(r.head.fault_at, 0);
        CU_ASSERT_FALSE(r.head.fault_in_body);
        CU_ASSERT_EQUAL(r.out_len, 0);
        CU_ASSERT_PTR_NOT_NULL(r.head.reason);
    }
}

static void test_fault_after_a_sound_message(void)
{
    static const char stream[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                                 "GET /b HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"
                                 "GET /c HTTP/1.1\r\nHost: h\r\n\r\n";
    struct reading r;

    read_text(stream, &r);
    CU_ASSERT_EQUAL(r.head.fault, 400);
    CU_ASSERT_EQUAL(r.head.fault_at, 1);
    CU_ASSERT_EQUAL(r.head.messages, 1);
    CU_ASSERT_STRING_EQUAL(r.out, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
}

static void test_chunked_faults(void)
{
    static const char *const bodies[] = {
        "5 \r\nhello\r\n0\r\n\r\n",         /* space after the size */
        " 5\r\nhello\r\n0\r\n\r\n",         /* before it */
        "0x5\r\nhello\r\n0\r\n\r\n",        /* a prefix */
        "5\nhello\r\n0\r\n\r\n",            /* bare LF */
        "5\r\nhelloX\r\n0\r\n\r\n",         /* longer than its size */
        "5\r\nhello\r\n0\r\n T: x\r\n\r\n", /* folded trailer */
        "5\r\nhello\r\n0\r\nT x\r\n\r\n",   /* trailer without colon */
        "11111111111111111\r\n",            /* 17 hex digits */
        ";x\r\n",                           /* no size */
    };
    static const char head[] = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    char stream[256];
    struct reading r;

    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        snprintf(stream, sizeof stream, "%s%s", head, bodies[i]);
        read_text(stream, &r);
        CU_ASSERT_EQUAL(r.head.fault, 400);
        CU_ASSERT_TRUE(r.head.fault_in_body);
        CU_ASSERT_EQUAL(r.head.fault_at, 0);
        CU_ASSERT_EQUAL(r.head.heads, 1);
        CU_ASSERT_EQUAL(r.head.messages, 0);
    }
}

static void test_head_size_bound(void)
{
    char *stream = malloc(GW_HEAD_MAX + 64), *fields = malloc(GW_HEAD_MAX);
    size_t len;
    struct reading r;

    /* Many tiny fields weigh what libmicrohttpd spends on each: 200 of them pass, 260 do
     * not, though their bytes alone are well within the limit. */
    for (unsigned n = 200; n <= 260; n += 60) {
        len = (size_t)snprintf(fields, GW_HEAD_MAX, "GET / HTTP/1.1\r\nHost: h\r\n");
        for (unsigned i = 0; i < n; i++)
            len += (size_t)snprintf(fields + len, GW_HEAD_MAX - len, "A%u: b\r\n", i);
        len += (size_t)snprintf(fields + len, GW_HEAD_MAX - len, "\r\n");
        CU_ASSERT_TRUE(len < GW_HEAD_MAX / 4);
        read_stream(fields, len, 0, &r);
        CU_ASSERT_EQUAL(r.head.fault, n == 200 ? 0 : 431);
    }
    free(fields);

    memcpy(stream, "GET / HTTP/1.1\r\nX: ", 19);
    memset(stream + 19, 'a', GW_HEAD_MAX + 40);
    read_stream(stream, GW_HEAD_MAX + 59, 0, &r);
    CU_ASSERT_EQUAL(r.head.fault, 431);
    free(stream);
}

/* The status `stream` (`len` bytes) is refused with, 0 if none, the same whether it is read
 * whole or 7 bytes at a time; the reading read whole in `r`. */
static unsigned refusal(const char *stream, size_t len, struct reading *r)
{
    struct reading pieces;

    CU_ASSERT_FATAL(len <= GW_HEAD_MAX * 2);
    read_stream(stream, len, 7, &pieces);
    read_stream(stream, len, 0, r);
    CU_ASSERT_EQUAL(pieces.head.fault, r->head.fault);
    CU_ASSERT_EQUAL(pieces.head.messages, r->head.messages);
    return r->head.fault;
}

/* A head "GET `target` HTTP/1.1" with a Host field and the field `name`: `n` times `unit`;
 * the status it is refused with, 0 if none. */
static unsigned head_with(const char *target, const char *name, const char *unit, unsigned n)
{
    static char head[GW_HEAD_MAX * 2];
    struct reading r;
    size_t len;

    CU_ASSERT_FATAL(strlen(target) + strlen(name) + n * strlen(unit) + 64 < sizeof head);
    len = (size_t)snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: h\r\n%s: ", target, name);
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(head + len, sizeof head - len, "%s", unit);
    len += (size_t)snprintf(head + len, sizeof head - len, "\r\n\r\n");
    return refusal(head, len, &r);
}

/* libmicrohttpd stores a record per cookie and per query argument: each counts, so that a
 * small head cannot fill its memory. */
static void test_cookies_and_query_arguments_count(void)
{
    static char many[4096], few[512];
    struct {
        const char *name, *unit;
        unsigned n, fault;
    } cookies[] = {
        {"Cookie", "a=b; ", 100, 0},    /* 500 bytes, 100 records */
        {"Cookie", "a=b; ", 1000, 431}, /* 5 KB, 1,000 records */
        {"cookie", "a=b; ", 1000, 431}, /* the name in any case */
        {"COOKIE", "a=b,", 1000, 431},  /* split at commas too */
        {"Cookie", "a;", 1000, 431},    /* cookies without a value */
        {"Cookie", "a", 15000, 0},      /* one 15 KB cookie: its bytes and two records */
        {"Cookie", "a", 16400, 431},    /* its bytes alone over the limit */
        {"X-Cookie", "a=b; ", 1000, 0}, /* not a Cookie field: 5 KB and one record */
    };
    struct {
        const char *target;
        unsigned fault;
    } targets[] = {
        {many, 431},   /* 1,000 query arguments in 2 KB */
        {few, 0},      /* 100 */
        {many + 3, 0}, /* '&' with no '?' before it: part of the path */
    };
    size_t len = 0;

    for (size_t i = 0; i < sizeof cookies / sizeof cookies[0]; i++)
        CU_ASSERT_EQUAL(head_with("/", cookies[i].name, cookies[i].unit, cookies[i].n),
                        cookies[i].fault);
    len = (size_t)snprintf(many, sizeof many, "/x?/");
    for (unsigned i = 0; i < 1000; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "a&");
    len = (size_t)snprintf(few, sizeof few, "/x?");
    for (unsigned i = 0; i < 100; i++)
        len += (size_t)snprintf(few + len, sizeof few - len, "a&");
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        CU_ASSERT_EQUAL(head_with(targets[i].target, "X", "y", 1), targets[i].fault);
}

/* A chunked POST with `big` bytes of an X-Big field and `n` trailer fields; the status it is
 * refused with, 0 if none. */
static unsigned trailers(size_t big, unsigned n, struct reading *r)
{
    static char stream[GW_HEAD_MAX * 2];
    size_t len;

    CU_ASSERT_FATAL(big + n * 16 + 128 < sizeof stream);
    len = (size_t)snprintf(stream, sizeof stream,
                           "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX-Big: ");
    memset(stream + len, 'a', big);
    len += big;
    len += (size_t)snprintf(stream + len, sizeof stream - len, "\r\n\r\n3\r\nabc\r\n0\r\n");
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(stream + len, sizeof stream - len, "T%u: b\r\n", i);
    len += (size_t)snprintf(stream + len, sizeof stream - len, "\r\n");
    return refusal(stream, len, r);
}

/* libmicrohttpd keeps trailer fields beside the head: they count toward the same limit. */
static void test_trailer_fields_count(void)
{
    struct reading r;

    CU_ASSERT_EQUAL(trailers(1, 100, &r), 0); /* 100 x (8 + 64) bytes */
    CU_ASSERT_EQUAL(r.head.messages, 1);
    CU_ASSERT_EQUAL(trailers(1, 300, &r), 431); /* 300 x (8 + 64) bytes */
    CU_ASSERT_TRUE(r.head.fault_in_body);
    CU_ASSERT_EQUAL(r.head.messages, 0);
    CU_ASSERT_EQUAL(trailers(14000, 0, &r), 0);
    /* a head near the limit leaves little for trailers */
    CU_ASSERT_EQUAL(trailers(14000, 40, &r), 431);
    CU_ASSERT_TRUE(r.head.fault_in_body);
}

/* A GET with `fields` tiny fields and `cookie` bytes of Cookie, then `behind` pipelined
 * behind it in the same read of libmicrohttpd's; the reading (whole) in `r`, the GET's length
 * returned. */
static size_t pipelined(unsigned fields, size_t cookie, const char *behind, struct reading *r)
{
    static char stream[GW_HEAD_MAX * 4];
    size_t len = (size_t)snprintf(stream, sizeof stream, "GET /a HTTP/1.1\r\nHost: h\r\n");

    CU_ASSERT_FATAL(fields * 16 + cookie + strlen(behind) + 64 < sizeof stream);
    for (unsigned i = 0; i < fields; i++)
        len += (size_t)snprintf(stream + len, sizeof stream - len, "A%u: b\r\n", i);
    if (cookie > 0) {
        len += (size_t)snprintf(stream + len, sizeof stream - len, "Cookie: ");
        memset(stream + len, 'c', cookie);
        len += cookie;
        len += (size_t)snprintf(stream + len, sizeof stream - len, "\r\n");
    }
    len += (size_t)snprintf(stream + len, sizeof stream - len, "\r\n");
    snprintf(stream + len, sizeof stream - len, "%s", behind);
    refusal(stream, len + strlen(behind), r); /* one read, whole or in pieces */
    return len;
}

/* A POST with a Content-Length body of `size` bytes, or a chunked one; into `out`. */
static const char *post(size_t size, bool chunked)
{
    static char out[GW_HEAD_MAX * 3];
    size_t len = (size_t)snprintf(out, sizeof out, "POST /b HTTP/1.1\r\nHost: h\r\n");

    CU_ASSERT_FATAL(size + 128 < sizeof out);
    if (chunked)
        len += (size_t)snprintf(out + len, sizeof out - len,
                                "Transfer-Encoding: chunked\r\n\r\n%zx\r\n", size);
    else
        len += (size_t)snprintf(out + len, sizeof out - len, "Content-Length: %zu\r\n\r\n", size);
    memset(out + len, 'x', size);
    len += size;
    snprintf(out + len, sizeof out - len, "%s", chunked ? "\r\n0\r\n\r\n" : "");
    return out;
}

/* What waits behind a request in libmicrohttpd's memory leaves room for its answer: twice the
 * head limit, less the request's head, records and Cookie copy (head.h). */
static void test_pipelined_requests_leave_room(void)
{
    struct reading r;
    size_t first;

    pipelined(150, 0, post(20000, false), &r); /* 10.9 KB held: 21.8 KB of room */
    CU_ASSERT_EQUAL(r.head.fault, 0);
    CU_ASSERT_EQUAL(r.head.messages, 2);
    first = pipelined(150, 0, post(22000, false), &r);
    CU_ASSERT_EQUAL(r.head.fault, 503);
    CU_ASSERT_FALSE(r.head.fault_in_body);
    CU_ASSERT_EQUAL(r.head.fault_at, 1);
    CU_ASSERT_EQUAL(r.out_len, first);        /* the GET alone passed */
    pipelined(150, 0, post(22000, true), &r); /* chunked: cut where it passes the room */
    CU_ASSERT_EQUAL(r.head.fault, 503);
    CU_ASSERT_TRUE(r.head.fault_in_body);
    CU_ASSERT_EQUAL(r.head.fault_at, 1);
    CU_ASSERT_EQUAL(r.head.heads, 2);
    CU_ASSERT_TRUE(r.out_len < 32 * 1024 - 10000 + first);
    /* A Cookie is held twice: with 4 KB of it, 13.7 KB of room. */
    pipelined(150, 4000, post(12000, false), &r);
    CU_ASSERT_EQUAL(r.head.fault, 0);
    pipelined(150, 4000, post(14000, false), &r);
    CU_ASSERT_EQUAL(r.head.fault, 503);
    /* Behind a second request holding more (100 cookies in 6 KB), less room is left. */
    {
        static char behind[24 * 1024];
        size_t len =
            (size_t)snprintf(behind, sizeof behind, "GET /c HTTP/1.1\r\nHost: h\r\nCookie: ");

        for (int i = 0; i < 100; i++)
            len += (size_t)snprintf(behind + len, sizeof behind - len, "c%02d=%054d; ", i, i);
        len +=
            (size_t)snprintf(behind + len, sizeof behind - len, "\r\n\r\n%s", post(15000, false));
        CU_ASSERT_FATAL(len < sizeof behind - 1);
        pipelined(0, 0, behind, &r);
        CU_ASSERT_EQUAL(r.head.fault, 503);
        CU_ASSERT_EQUAL(r.head.fault_at, 2);
        CU_ASSERT_EQUAL(r.head.heads, 2);
    }
    /* Only the part of a Content-Length body within the read counts. */
    {
        static char part[24 * 1024];
        size_t len = (size_t)snprintf(
            part, sizeof part, "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n");

        memset(part + len, 'x', 20000);
        part[len + 20000] = '\0';
        pipelined(150, 0, part, &r);
        CU_ASSERT_EQUAL(r.head.fault, 0);
        CU_ASSERT_EQUAL(r.head.heads, 2);
    }
    /* A new read of libmicrohttpd's (its request answered) counts afresh. */
    {
        char *stream = malloc(64 * 1024);
        size_t first, len;
        struct gw_head h;

        gw_head_init(&h, GW_HEAD_MAX, 2 * GW_HEAD_MAX);
        first = (size_t)snprintf(stream, 64 * 1024, "GET /a HTTP/1.1\r\nHost: h\r\n");
        for (int i = 0; i < 200; i++)
            first += (size_t)snprintf(stream + first, 64 * 1024 - first, "A%d: b\r\n", i);
        first += (size_t)snprintf(stream + first, 64 * 1024 - first, "\r\n");
        CU_ASSERT_EQUAL(gw_head_feed(&h, stream, first).ready, first);
        len = (size_t)snprintf(stream, 64 * 1024, "%s", post(30000, false));
        gw_head_read(&h);
        CU_ASSERT_EQUAL(gw_head_feed(&h, stream, len).ready, len);
        CU_ASSERT_EQUAL(h.fault, 0);
        CU_ASSERT_EQUAL(h.messages, 2);
        free(stream);
    }
    /* Many small requests pipelined at once pass. */
    {
        static char many[300 * 40 + 1];
        size_t len = 0;

        for (int i = 0; i < 300; i++)
            len += (size_t)snprintf(many + len, sizeof many - len,
                                    "GET /%03d HTTP/1.1\r\nHost: h\r\n\r\n", i);
        pipelined(0, 0, many, &r);
        CU_ASSERT_EQUAL(r.head.fault, 0);
        CU_ASSERT_EQUAL(r.head.messages, 301);
    }
}

/* How much one read may take (gw_head_take()): at a request's start the bound less max_head;
 * in a body, the rest of it, then no more than may wait behind its message; never 0. */
static void test_reads_take_what_the_bound_allows(void)
{
    static char stream[GW_HEAD_MAX];
    struct gw_head h;
    size_t len;

    gw_head_init(&h, GW_HEAD_MAX, 2 * GW_HEAD_MAX);
    CU_ASSERT_EQUAL(gw_head_take(&h, 1 << 20), GW_HEAD_MAX);
    CU_ASSERT_EQUAL(gw_head_take(&h, 100), 100);
    len = (size_t)snprintf(stream, sizeof stream,
                           "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n");
    CU_ASSERT_EQUAL(gw_head_feed(&h, stream, len).ready, len);
    CU_ASSERT_EQUAL(gw_head_take(&h, 1 << 20), 1000 + GW_HEAD_MAX);
    CU_ASSERT_EQUAL(gw_head_take(&h, 500), 500);
    /* A head whose records and Cookie copy leave less than max_head behind it. */
    gw_head_init(&h, GW_HEAD_MAX, 2 * GW_HEAD_MAX);
    len = (size_t)snprintf(stream, sizeof stream, "POST /b HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 50; i++)
        len += (size_t)snprintf(stream + len, sizeof stream - len, "A%d: b\r\n", i);
    len += (size_t)snprintf(stream + len, sizeof stream - len, "Cookie: ");
    memset(stream + len, 'c', 8000);
    len += 8000;
    len += (size_t)snprintf(stream + len, sizeof stream - len, "\r\nContent-Length: 10\r\n\r\n");
    CU_ASSERT_EQUAL(gw_head_feed(&h, stream, len).ready, len);
    CU_ASSERT_FATAL(h.spent + h.copy > GW_HEAD_MAX);
    CU_ASSERT_EQUAL(gw_head_take(&h, 1 << 20), 10 + 2 * GW_HEAD_MAX - h.spent - h.copy);
    /* No room behind at all: a byte at a time, refused past the bound as before. */
    gw_head_init(&h, 100, 100);
    CU_ASSERT_EQUAL(gw_head_take(&h, 4096), 1);
}

void register_head_tests(void)
{
    CU_pSuite suite = add_suite("head");

    add_test(suite, "sound heads pass, values trimmed", test_sound_heads_pass_trimmed);
    add_test(suite, "bodies are followed, whatever the pieces", test_bodies_are_followed);
    add_test(suite, "malformed and ambiguous heads are refused", test_faults);
    add_test(suite, "a fault after a sound message", test_fault_after_a_sound_message);
    add_test(suite, "malformed chunked bodies are refused", test_chunked_faults);
    add_test(suite, "heads are bounded", test_head_size_bound);
    add_test(suite, "cookies and query arguments count", test_cookies_and_query_arguments_count);
    add_test(suite, "trailer fields count", test_trailer_fields_count);
    add_test(suite, "reads take what the bound allows", test_reads_take_what_the_bound_allows);
    add_test(suite, "pipelined requests leave room for the answer",
             test_pipelined_requests_leave_room);
}
