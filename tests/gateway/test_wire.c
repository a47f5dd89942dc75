#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/front/wire.h"
#include "tests/unit.h"

/* A connection as libmicrohttpd holds one: [0] read through recv() (the gateway's), [1] the
 * client's end. */
static int ends[2] = {-1, -1};
static struct gw_wire *wire;

static int setup(void)
{
    return gw_wire_init();
}

static int teardown(void)
{
    gw_wire_cleanup();
    return 0;
}

/* A connection read with heads of up to `max_head` bytes, `hold` held (gw_head_init()). */
static void open_connection_holding(uint32_t max_head, uint32_t hold)
{
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
    fcntl(ends[0], F_SETFL, O_NONBLOCK);
    wire = gw_wire_attach(ends[0], max_head, hold, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wire);
}

static void open_connection(void)
{
    open_connection_holding(8 * 1024, 16 * 1024);
}

static void close_connection(void)
{
    gw_wire_detach(wire);
    close(ends[0]);
    close(ends[1]);
}

static void client_sends(const char *bytes)
{
    CU_ASSERT_EQUAL(write(ends[1], bytes, strlen(bytes)), (ssize_t)strlen(bytes));
}

/* What libmicrohttpd's next read gets, at most `len` bytes, as a string ("<again>" when it
 * would wait, "<eof>"); static. */
static const char *gateway_reads(size_t len)
{
    static char got[16384];
    ssize_t n = recv(ends[0], got, len, 0);

    if (n < 0 && errno == EAGAIN)
        return "<again>";
    if (n <= 0)
        return n == 0 ? "<eof>" : "<error>";
    got[n] = '\0';
    return got;
}

static void test_a_head_in_pieces(void)
{
    open_connection();
    client_sends("GET / HTTP/1.1\r\nHo");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<again>");
    client_sends("st: h \r\n");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<again>");
    client_sends("\r\nGET /b");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    client_sends(" HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(gw_wire_head(wire)->messages, 2);
    close_connection();
}

static void test_a_refused_head_becomes_the_stand_in(void)
{
    open_connection();
    client_sends("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), GW_WIRE_STAND_IN);
    CU_ASSERT_EQUAL(gw_wire_head(wire)->fault, 400);
    client_sends("GET /more HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<again>"); /* read and dropped */
    close_connection();
}

/* No room for the whole stand-in behind a sound request: the rest comes at the next read,
 * which a poll would let happen with nothing more from the client. */
static void test_the_stand_in_in_two_reads(void)
{
    static const char sound[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
                      refused[] = "GET / HTTP/1.1\r\nBad Name: 1\r\n";
    size_t room = sizeof refused - 1; /* less than the stand-in */
    char expected[128];

    open_connection();
    client_sends(sound);
    client_sends(refused);
    snprintf(expected, sizeof expected, "%s%.*s", sound, (int)room, GW_WIRE_STAND_IN);
    CU_ASSERT_STRING_EQUAL(gateway_reads(sizeof sound - 1 + room), expected);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), GW_WIRE_STAND_IN + room);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<eof>");
    close_connection();
}

/* A broken chunked body: what came before it goes through, then the stream ends. */
static void test_a_broken_body_ends_the_stream(void)
{
    open_connection();
    client_sends("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                 "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096),
                           "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                           "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5");
    CU_ASSERT_TRUE(gw_wire_head(wire)->fault_in_body);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<eof>");
    close_connection();
}

/* A head longer than the limit (8 KiB here) is refused (431). */
static void test_a_head_too_long(void)
{
    char big[8 * 1024 + 64];

    open_connection();
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    client_sends(big);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "<again>");
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), GW_WIRE_STAND_IN);
    CU_ASSERT_EQUAL(gw_wire_head(wire)->fault, 431);
    close_connection();
}

/* Sockets not attached (libcurl's, hiredis's) are read as they are. */
/* Event mode: a read that hands libmicrohttpd less than it asked for, while the client's next
 * bytes already wait, makes libmicrohttpd's edge-triggered event come again, with its data; a
 * read that drained the socket does not. */
static void test_a_short_read_rearms_the_event(void)
{
    int libmicrohttpd, epoll_fd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLET,
                             .data.ptr = &libmicrohttpd},
                       got;

    open_connection();
    CU_ASSERT_EQUAL_FATAL(epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ends[0], &ev), 0);
    gw_wire_edge(wire, epoll_fd, &libmicrohttpd);
    client_sends("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 1); /* the bytes' arrival */
    /* The head's start, kept back: nothing yet, though more waits. */
    CU_ASSERT_STRING_EQUAL(gateway_reads(20), "<again>");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 1);
    CU_ASSERT_PTR_EQUAL(got.data.ptr, &libmicrohttpd);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096),
                           "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 0); /* drained */

    /* A full read whose head is rewritten shorter. */
    client_sends("GET /b HTTP/1.1\r\nHost: h \r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 1);
    CU_ASSERT_STRING_EQUAL(gateway_reads(30), "GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 1);
    CU_ASSERT_STRING_EQUAL(gateway_reads(4096), "GET /c HTTP/1.1\r\nHost: h\r\n\r\n");
    CU_ASSERT_EQUAL(epoll_wait(epoll_fd, &got, 1, 0), 0);
    close_connection();
    close(epoll_fd);
}

/* The client sends `len` bytes of `sent`; reads of `read` bytes each (as libmicrohttpd's)
 * until the socket is drained pass them all unchanged, with no fault, and the reader has read
 * `messages` messages whole by then. */
static void expect_passed_whole(const char *sent, size_t len, size_t read, uint32_t messages)
{
    static char passed[128 * 1024];
    size_t got = 0;
    ssize_t n;

    CU_ASSERT_EQUAL_FATAL(write(ends[1], sent, len), (ssize_t)len);
    while (got + read <= sizeof passed && (n = recv(ends[0], passed + got, read, 0)) > 0)
        got += (size_t)n;
    CU_ASSERT_EQUAL(gw_wire_head(wire)->fault, 0);
    CU_ASSERT_EQUAL(gw_wire_head(wire)->messages, messages);
    CU_ASSERT_TRUE(got == len && memcmp(passed, sent, len) == 0);
}

/* What a client pipelines is taken from the socket only as far as the bound behind each
 * request allows (head.h), so none of it is refused: a request whose 100 fields leave less
 * room behind it than libmicrohttpd's buffer, a body, then small requests, all in one write.
 * Each read asks for 13 KiB, as libmicrohttpd does with 8 KiB heads. */
static void test_pipelined_bytes_wait_in_the_socket(void)
{
    static char sent[64 * 1024];
    size_t len = (size_t)snprintf(sent, sizeof sent, "GET /a HTTP/1.1\r\nHost: h\r\n");

    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(sent + len, sizeof sent - len, "F%d: v\r\n", i);
    len += (size_t)snprintf(sent + len, sizeof sent - len,
                            "\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 20000\r\n\r\n");
    memset(sent + len, 'x', 20000);
    len += 20000;
    for (int i = 0; i < 50; i++)
        len += (size_t)snprintf(sent + len, sizeof sent - len,
                                "GET /c%d HTTP/1.1\r\nHost: h\r\n\r\n", i);
    open_connection();
    expect_passed_whole(sent, len, 13 * 1024, 52);
    close_connection();
}

/* Behind messages whose records and copies weigh more than their bytes, reads of 26 KiB (as
 * libmicrohttpd's with 16 KiB heads) still take no more than may wait: a chunked POST with a 9 KB
 * Cookie whose 90 trailer fields come in a later read, with 14 GETs of 1 KB behind them; a head of
 * ten Cookie fields counted at max_head, with a GET behind it. */
static void test_heavy_heads_leave_room(void)
{
    static char sent[64 * 1024];
    size_t len, records = 1 + 2 * 10, values;

    open_connection_holding(16 * 1024, 32 * 1024);
    len = (size_t)snprintf(sent, sizeof sent,
                           "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nCookie: ");
    memset(sent + len, 'a', 9000);
    len += 9000;
    len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\n\r\n5\r\nhello\r\n");
    expect_passed_whole(sent, len, 26 * 1024, 0);
    len = (size_t)snprintf(sent, sizeof sent, "0\r\n");
    for (int i = 0; i < 90; i++)
        len += (size_t)snprintf(sent + len, sizeof sent - len, "T%02d:v\r\n", i);
    len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\n");
    for (int i = 0; i < 14; i++) {
        len += (size_t)snprintf(sent + len, sizeof sent - len,
                                "GET /%d HTTP/1.1\r\nHost: h\r\nX: ", i);
        memset(sent + len, 'p', 950);
        len += 950;
        len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\n\r\n");
    }
    expect_passed_whole(sent, len, 26 * 1024, 15);
    close_connection();

    /* Ten Cookie fields, the head as large as max_head allows: its bytes, 64 per record and
     * 16 per Cookie field. */
    open_connection_holding(16 * 1024, 32 * 1024);
    len = (size_t)snprintf(sent, sizeof sent, "GET / HTTP/1.1\r\nHost:h\r\n");
    values = 16 * 1024 - records * 64 - 10 * 16 - len - 2 - 10 * 9;
    for (int i = 0; i < 10; i++) {
        size_t value = values / 10 + (i == 0 ? values % 10 : 0);

        len += (size_t)snprintf(sent + len, sizeof sent - len, "Cookie:");
        memset(sent + len, 'c', value);
        len += value;
        len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\n");
    }
    len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\nGET /2 HTTP/1.1\r\nHost: h\r\nX: ");
    memset(sent + len, 'p', 1300);
    len += 1300;
    len += (size_t)snprintf(sent + len, sizeof sent - len, "\r\n\r\n");
    expect_passed_whole(sent, len, 26 * 1024, 2);
    close_connection();
}

static void test_other_sockets_pass_untouched(void)
{
    int other[2];
    char got[64];

    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
    CU_ASSERT_EQUAL(write(other[1], "X: a \r\n", 7), 7);
    CU_ASSERT_EQUAL(recv(other[0], got, sizeof got, 0), 7);
    CU_ASSERT_EQUAL(memcmp(got, "X: a \r\n", 7), 0);
    close(other[0]);
    close(other[1]);
}

void register_wire_tests(void)
{
    CU_pSuite suite = add_suite_with("wire", setup, teardown);

    add_test(suite, "a head in pieces is handed over whole", test_a_head_in_pieces);
    add_test(suite, "a refused head becomes the stand-in",
             test_a_refused_head_becomes_the_stand_in);
    add_test(suite, "the stand-in over two reads", test_the_stand_in_in_two_reads);
    add_test(suite, "a broken chunked body ends the stream", test_a_broken_body_ends_the_stream);
    add_test(suite, "a head too long for the buffer", test_a_head_too_long);
    add_test(suite, "a short read rearms the event", test_a_short_read_rearms_the_event);
    add_test(suite, "pipelined bytes wait in the socket", test_pipelined_bytes_wait_in_the_socket);
    add_test(suite, "heavy heads leave room behind them", test_heavy_heads_leave_room);
    add_test(suite, "other sockets pass untouched", test_other_sockets_pass_untouched);
}
