/* The PROXY protocol on the listener (listener.h): the header's address is the client's for
 * keys, deny lists and X-Forwarded-For; every malformed, missing or unwelcome header closes
 * the connection before a byte reaches the upstream; HAProxy's send-proxy and send-proxy-v2
 * work in front. And the listener's own messages: its full address, and bind errors. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static struct recorder rec;
static struct proc gw;

/* A route without a limit for addresses, one keyed by address with 2 an hour. */
static const char config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  admin_listen: \"127.0.0.1:0\"\n"
    "  proxy_protocol: %2$s\n"
    "  proxy_protocol_from: [%3$s]\n"
    "  client_timeout: %4$s\n"
    "  deny: [198.51.100.66/32]\n"
    "routes:\n"
    "  - name: limited\n    match: {path_prefix: /limited/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n"
    "  - name: open\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

/* client_timeout 1 s, unless start_with_timeout() names another. */
static int start_with_timeout(const char *versions, const char *from, const char *timeout)
{
    return start_sluice(&gw, config, rec.port, versions, from, timeout);
}

static int start_with(const char *versions, const char *from)
{
    return start_with_timeout(versions, from, "1s");
}

static int init(void)
{
    if (recorder_start(&rec) != 0)
        return -1;
    return start_with("any", "127.0.0.0/8, \"::1\"");
}

static int clean(void)
{
    int rc = stop_sluice(&gw, 5000);

    recorder_stop(&rec);
    return rc == 0 ? 0 : -1;
}

/* A v2 header: command byte, family byte, then `body_len` bytes of `body`. */
static size_t v2_header(char *out, unsigned char command, unsigned char family, const void *body,
                        size_t body_len)
{
    static const char signature[12] = "\r\n\r\n\0\r\nQUIT\n";

    memcpy(out, signature, 12);
    out[12] = (char)command;
    out[13] = (char)family;
    out[14] = (char)(body_len >> 8);
    out[15] = (char)(body_len & 0xff);
    memcpy(out + 16, body, body_len);
    return 16 + body_len;
}

/* The v2 address block of TCP over IPv4 or IPv6 from `source`:`port`, to a fixed destination;
 * `extra` bytes (TLVs) follow it. Its length. */
static size_t v2_addresses(unsigned char *out, int family, const char *source, unsigned port,
                           const void *extra, size_t extra_len)
{
    size_t addr_len = family == AF_INET ? 4 : 16;

    inet_pton(family, source, out);
    inet_pton(family, family == AF_INET ? "192.0.2.1" : "2001:db8::1", out + addr_len);
    out[2 * addr_len] = (unsigned char)(port >> 8);
    out[2 * addr_len + 1] = (unsigned char)(port & 0xff);
    out[2 * addr_len + 2] = 443 >> 8;
    out[2 * addr_len + 3] = 443 & 0xff;
    memcpy(out + 2 * addr_len + 4, extra, extra_len);
    return 2 * addr_len + 4 + extra_len;
}

/* Sends `header` (`len` bytes) and then a request for `path`; the status, with what came
 * back in `answer`. */
static int send_with_header(const char *header, size_t len, const char *path, char *answer,
                            size_t cap, bool *closed)
{
    char bytes[4096];
    int n = snprintf(bytes + len, sizeof bytes - len,
                     "GET %s HTTP/1.1\r\nHost: pp.test\r\nConnection: close\r\n\r\n", path);

    memcpy(bytes, header, len);
    return raw_session(gw.port, bytes, len + (size_t)n, answer, cap, 3000, closed);
}

/* The X-Forwarded-For the recorder saw on the request for `path`, into `out`; "" if none. */
static const char *forwarded_for_of(const char *path, char *out, size_t cap)
{
    size_t len;
    char *bytes = recorder_bytes(&rec, &len), line[128], *at, *end, *field;

    snprintf(line, sizeof line, "GET %s HTTP/1.1\r\n", path);
    out[0] = '\0';
    at = strstr(bytes, line);
    end = at ? strstr(at, "\r\n\r\n") : NULL;
    field = at ? strstr(at, "\r\nX-Forwarded-For: ") : NULL;
    if (field != NULL && field < end) {
        field += strlen("\r\nX-Forwarded-For: ");
        snprintf(out, cap, "%.*s", (int)(strcspn(field, "\r")), field);
    }
    free(bytes);
    return out;
}

/* Each header's address (or, where it carries none, the peer's) is the client's upstream. */
static void test_addresses(void)
{
    static const unsigned char tlvs[] = {
        0x02, 0x00, 0x07, 'a',  '.',  't', 'e',
        's',  't',  '!',  0x04, 0x00, 0x00}; /* AUTHORITY, then a NOOP */
    struct {
        char header[512];
        size_t len;
        const char *expect;
    } cases[10];
    unsigned char body[300];
    size_t n = 0;

#define V1(text, address)                                                                          \
    do {                                                                                           \
        cases[n].len = (size_t)snprintf(cases[n].header, sizeof cases[n].header, "%s", text);      \
        cases[n++].expect = address;                                                               \
    } while (0)
    V1("PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\n", "203.0.113.7");
    V1("PROXY TCP6 2001:db8::7 2001:db8::1 0 65535\r\n", "2001:db8::7");
    V1("PROXY UNKNOWN\r\n", "127.0.0.1");
    V1("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", "127.0.0.1");
#undef V1
    cases[n].len = v2_header(cases[n].header, 0x21, 0x11, body,
                             v2_addresses(body, AF_INET, "198.51.100.9", 4000, NULL, 0));
    cases[n++].expect = "198.51.100.9";
    cases[n].len = v2_header(cases[n].header, 0x21, 0x21, body,
                             v2_addresses(body, AF_INET6, "2001:db8::9", 4000, tlvs, sizeof tlvs));
    cases[n++].expect = "2001:db8::9";
    cases[n].len = v2_header(cases[n].header, 0x21, 0x11, body,
                             v2_addresses(body, AF_INET, "198.51.100.10", 1, tlvs, sizeof tlvs));
    cases[n++].expect = "198.51.100.10";
    /* LOCAL: the balancer's own check, whatever addresses it holds. */
    cases[n].len = v2_header(cases[n].header, 0x20, 0x11, body,
                             v2_addresses(body, AF_INET, "198.51.100.11", 1, NULL, 0));
    cases[n++].expect = "127.0.0.1";
    cases[n].len = v2_header(cases[n].header, 0x21, 0x00, NULL, 0); /* UNSPEC */
    cases[n++].expect = "127.0.0.1";
    memset(body, 0, 216);
    cases[n].len = v2_header(cases[n].header, 0x21, 0x31, body, 216); /* a UNIX stream */
    cases[n++].expect = "127.0.0.1";

    for (size_t i = 0; i < n; i++) {
        char answer[4096], path[32], seen[128], label[32];
        bool closed;
        int status;

        snprintf(path, sizeof path, "/address/%zu", i);
        snprintf(label, sizeof label, "case %zu", i);
        status =
            send_with_header(cases[i].header, cases[i].len, path, answer, sizeof answer, &closed);
        check_case(status == 200, label, "status %d: %.200s", status, answer);
        forwarded_for_of(path, seen, sizeof seen);
        check_case(strcmp(seen, cases[i].expect) == 0, label,
                   "upstream saw X-Forwarded-For \"%s\", expected \"%s\"", seen, cases[i].expect);
    }
}

/* The header's address is whom limits count and deny lists refuse. */
static void test_keys_and_deny(void)
{
    static const struct {
        const char *header, *path;
        int status;
    } steps[] = {
        {"PROXY TCP4 203.0.113.20 192.0.2.1 1000 80\r\n", "/limited/a1", 200},
        {"PROXY TCP4 203.0.113.20 192.0.2.1 1001 80\r\n", "/limited/a2", 200},
        {"PROXY TCP4 203.0.113.20 192.0.2.1 1002 80\r\n", "/limited/a3", 429},
        {"PROXY TCP4 203.0.113.21 192.0.2.1 1003 80\r\n", "/limited/b1", 200},
        {"PROXY TCP4 198.51.100.66 192.0.2.1 1004 80\r\n", "/open/denied", 403},
    };
    unsigned long before = recorder_received(&rec);

    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        char answer[4096];
        bool closed;
        int status = send_with_header(steps[i].header, strlen(steps[i].header), steps[i].path,
                                      answer, sizeof answer, &closed);

        check_case(status == steps[i].status, steps[i].path, "status %d, expected %d", status,
                   steps[i].status);
    }
    CU_ASSERT_EQUAL(recorder_received(&rec) - before, 3);
}

/* Sends `len` bytes with a request after them; the connection must close with no answer,
 * and nothing may reach the upstream. */
static void expect_closed(const char *label, const char *bytes, size_t len)
{
    char answer[4096], visible[200];
    bool closed = false;
    int status = send_with_header(bytes, len, "/never", answer, sizeof answer, &closed);

    check_case(status == 0 && answer[0] == '\0' && closed, label,
               "status %d, closed %d, answer %.100s (sent %s)", status, closed, answer,
               visible_bytes(bytes, len, visible, sizeof visible));
}

static void test_refused(void)
{
    static const char *const v1[] = {
        "",                                             /* plain HTTP, no header */
        "PROXY TCP4 203.0.113.07 192.0.2.1 1 2\r\n",    /* a leading zero in the address */
        "PROXY TCP4  203.0.113.7 192.0.2.1 1 2\r\n",    /* two spaces */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1\r\n",       /* a port missing */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1 65536\r\n", /* a port too large */
        "PROXY TCP4 203.0.113.7 192.0.2.1 01 2\r\n",    /* a leading zero in a port */
        "PROXY TCP4 203.0.113.7 192.0.2.1 +1 2\r\n",    /* a sign */
        "PROXY TCP4 2001:db8::7 192.0.2.1 1 2\r\n",     /* IPv6 said to be TCP4 */
        "PROXY TCP6 203.0.113.7 2001:db8::1 1 2\r\n",   /* IPv4 said to be TCP6 */
        "proxy TCP4 203.0.113.7 192.0.2.1 1 2\r\n",     /* lower case */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1 2\n",       /* a bare LF */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1 2\r\r\n",   /* a CR not before LF */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1 2 \r\n",    /* a trailing space */
        "PROXY TCP4 203.0.113.7 192.0.2.1 1 2 3\r\n",   /* a field too many */
        "PROXY UDP4 203.0.113.7 192.0.2.1 1 2\r\n",     /* not TCP */
        "PROXY TCP4 203.0.113.7\t192.0.2.1 1 2\r\n",    /* a tab */
        "PROXY \r\n",                                   /* no protocol */
        "PROXY UNKNOWNX\r\n",                           /* UNKNOWN glued to more */
        "XPROXY TCP4 203.0.113.7 192.0.2.1 1 2\r\n",    /* something else first */
    };
    unsigned char body[1100], tlv_overrun[] = {0x04, 0x00, 0x0a, 'x', 'y'};
    char bytes[1200];
    double before = metric(&gw, "sluice_proxy_protocol_refused_total");
    unsigned long received = recorder_received(&rec);
    size_t n, cases = 0;
    char label[48];

    for (size_t i = 0; i < sizeof v1 / sizeof *v1; i++, cases++) {
        snprintf(label, sizeof label, "v1 case %zu", i);
        expect_closed(label, v1[i], strlen(v1[i]));
    }
    /* Longer than v1's 107 bytes without a CRLF. */
    n = (size_t)snprintf(bytes, sizeof bytes, "PROXY UNKNOWN %0100d\r\n", 0);
    expect_closed("v1 too long", bytes, n), cases++;
    n = v2_header(bytes, 0x31, 0x11, body, v2_addresses(body, AF_INET, "1.2.3.4", 1, NULL, 0));
    expect_closed("v2 version 3", bytes, n), cases++;
    n = v2_header(bytes, 0x22, 0x11, body, v2_addresses(body, AF_INET, "1.2.3.4", 1, NULL, 0));
    expect_closed("v2 command 2", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x12, body, v2_addresses(body, AF_INET, "1.2.3.4", 1, NULL, 0));
    expect_closed("v2 UDP over IPv4", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x41, body, v2_addresses(body, AF_INET, "1.2.3.4", 1, NULL, 0));
    expect_closed("v2 unknown family", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x11, body, 8); /* shorter than IPv4's 12 */
    expect_closed("v2 too short for its family", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x21, body, 24); /* shorter than IPv6's 36 */
    expect_closed("v2 too short for IPv6", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x11, body,
                  v2_addresses(body, AF_INET, "1.2.3.4", 1, tlv_overrun, sizeof tlv_overrun));
    expect_closed("v2 TLV past the end", bytes, n), cases++;
    n = v2_header(bytes, 0x21, 0x11, body,
                  v2_addresses(body, AF_INET, "1.2.3.4", 1, tlv_overrun, 2));
    expect_closed("v2 TLV cut short", bytes, n), cases++;
    memset(body, 0, sizeof body);
    n = v2_header(bytes, 0x21, 0x11, body, 1030); /* more than sluice reads */
    expect_closed("v2 too long", bytes, n), cases++;
    memcpy(bytes, "\r\n\r\n\0\r\nQUIX\n", 12);
    expect_closed("v2 signature wrong", bytes, 16), cases++;

    CU_ASSERT_EQUAL(recorder_received(&rec), received);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_proxy_protocol_refused_total") - before, (double)cases);
    /* And the next good one is served. */
    {
        char answer[4096];
        bool closed;
        const char *good = "PROXY TCP4 203.0.113.30 192.0.2.1 1 2\r\n";

        CU_ASSERT_EQUAL(
            send_with_header(good, strlen(good), "/after", answer, sizeof answer, &closed), 200);
    }
}

/* A header that comes in pieces is read whole; one that never ends is closed at
 * client_timeout (1 s here). */
static void test_pieces_and_timeout(void)
{
    static const char *const pieces[] = {"PROXY TCP4 203.0", ".113.40 192.0.2.1 5", "5 80\r",
                                         "\nGET /pieces HTTP/1.1\r\nHost: pp.test\r\n"
                                         "Connection: close\r\n\r\n"};
    char answer[4096] = "", seen[64];
    int fd = raw_connect(gw.port);
    ssize_t got, total = 0;
    double started;

    CU_ASSERT_FATAL(fd >= 0);
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
        CU_ASSERT(send(fd, pieces[i], strlen(pieces[i]), 0) == (ssize_t)strlen(pieces[i]));
        sleep_ms(100);
    }
    while ((got = recv(fd, answer + total, sizeof answer - 1 - (size_t)total, 0)) > 0)
        total += got;
    answer[total] = '\0';
    close(fd);
    CU_ASSERT(strncmp(answer, "HTTP/1.1 200", 12) == 0);
    CU_ASSERT_STRING_EQUAL(forwarded_for_of("/pieces", seen, sizeof seen), "203.0.113.40");

    fd = raw_connect(gw.port);
    CU_ASSERT_FATAL(fd >= 0);
    started = seconds_now();
    CU_ASSERT(send(fd, "PROXY TCP4 203.0", 16, 0) == 16);
    got = recv(fd, answer, sizeof answer, 0); /* blocks until sluice closes it */
    CU_ASSERT(got <= 0);
    CU_ASSERT(seconds_now() - started >= 0.9 && seconds_now() - started < 3);
    close(fd);
}

/* A peer that hangs up halfway through its header is closed when its end comes, not at
 * client_timeout: 30 s here, so that a close within 10 s (milliseconds, typically) can only
 * be the hang-up's, however loaded the machine. */
static void test_hang_up_halfway(void)
{
    struct timeval tv = {20, 0};
    char answer[256];
    double started;
    ssize_t got;
    int fd;

    CU_ASSERT_EQUAL_FATAL(stop_sluice(&gw, 5000), 0);
    CU_ASSERT_EQUAL_FATAL(start_with_timeout("any", "127.0.0.0/8, \"::1\"", "30s"), 0);
    fd = raw_connect(gw.port);
    CU_ASSERT_FATAL(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    started = seconds_now();
    CU_ASSERT(send(fd, "PROXY TCP4 203.0", 16, 0) == 16);
    shutdown(fd, SHUT_WR);
    errno = 0;
    got = recv(fd, answer, sizeof answer, 0);
    check_case(got == 0 || (got < 0 && errno == ECONNRESET), "hung up halfway",
               "recv %zd (%s) after %.1f s; expected the connection closed", got,
               got < 0 ? strerror(errno) : "bytes", seconds_now() - started);
    check_case(seconds_now() - started < 10, "hung up halfway", "closed after %.1f s",
               seconds_now() - started);
    close(fd);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    CU_ASSERT_EQUAL(start_with("any", "127.0.0.0/8, \"::1\""), 0); /* for the tests after */
}

/* v1 only refuses v2, v2 only refuses v1; a peer outside proxy_protocol_from is closed even
 * with a valid header. */
static void test_versions_and_peers(void)
{
    const char *v1 = "PROXY TCP4 203.0.113.50 192.0.2.1 1 2\r\n";
    unsigned char body[64];
    char v2[128], answer[4096];
    size_t v2_len =
        v2_header(v2, 0x21, 0x11, body, v2_addresses(body, AF_INET, "203.0.113.51", 1, NULL, 0));
    bool closed;

    CU_ASSERT_EQUAL_FATAL(stop_sluice(&gw, 5000), 0);
    CU_ASSERT_EQUAL_FATAL(start_with("v1", "127.0.0.1/32"), 0);
    CU_ASSERT_EQUAL(send_with_header(v1, strlen(v1), "/v1", answer, sizeof answer, &closed), 200);
    expect_closed("v2 to v1 only", v2, v2_len);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    CU_ASSERT_EQUAL_FATAL(start_with("v2", "127.0.0.1/32"), 0);
    CU_ASSERT_EQUAL(send_with_header(v2, v2_len, "/v2", answer, sizeof answer, &closed), 200);
    expect_closed("v1 to v2 only", v1, strlen(v1));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    CU_ASSERT_EQUAL_FATAL(start_with("any", "10.0.0.0/8"), 0);
    expect_closed("a peer not in proxy_protocol_from", v1, strlen(v1));
    CU_ASSERT(wait_for_log(&gw, "not in server.proxy_protocol_from", 1, 2000));
    CU_ASSERT_EQUAL(metric(&gw, "sluice_proxy_protocol_refused_total"), 1);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    CU_ASSERT_EQUAL(start_with("any", "127.0.0.0/8, \"::1\""), 0); /* for the tests after */
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

/* A reload keeps the running proxy_protocol and says so: v2 still served after one asking
 * for v1 only. */
static void test_reload_keeps_it(void)
{
    unsigned char body[64];
    char v2[128], answer[4096];
    size_t v2_len =
        v2_header(v2, 0x21, 0x11, body, v2_addresses(body, AF_INET, "203.0.113.60", 1, NULL, 0));
    bool closed;

    rewrite_config(&gw, false, config, rec.port, "v1", "127.0.0.0/8", "1s");
    CU_ASSERT(wait_for_log(&gw, "server.proxy_protocol(_from) changed; it takes effect on restart",
                           1, 3000));
    CU_ASSERT(wait_for_log(&gw, "reloaded", 1, 3000));
    CU_ASSERT_EQUAL(send_with_header(v2, v2_len, "/reloaded", answer, sizeof answer, &closed), 200);
}

/* GET `path` through 127.0.0.1:`port` from the source address 127.0.0.2; the status. */
static long get_from_127_0_0_2(unsigned port, const char *path)
{
    CURL *curl = curl_easy_init();
    char url[128];
    long status = 0;

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_INTERFACE, "host!127.0.0.2");
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    return status;
}

/* HAProxy in front, in TCP mode, one frontend sending v1 and one v2: the client's address
 * (127.0.0.2, while HAProxy connects from 127.0.0.1) reaches the upstream. */
static void test_haproxy(void)
{
    unsigned ports[2] = {free_port(), free_port()};
    char config_text[1024], seen[64];
    struct haproxy h;

    snprintf(config_text, sizeof config_text,
             "defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 5s\n"
             "  timeout server 5s\n"
             "frontend v1\n  bind 127.0.0.1:%u\n  default_backend sluice_v1\n"
             "frontend v2\n  bind 127.0.0.1:%u\n  default_backend sluice_v2\n"
             "backend sluice_v1\n  server gw 127.0.0.1:%u send-proxy\n"
             "backend sluice_v2\n  server gw 127.0.0.1:%u send-proxy-v2\n",
             ports[0], ports[1], gw.port, gw.port);
    CU_ASSERT_EQUAL_FATAL(start_haproxy(&h, config_text, ports, 2), 0);
    CU_ASSERT_EQUAL(get_from_127_0_0_2(ports[0], "/haproxy/v1"), 200);
    CU_ASSERT_STRING_EQUAL(forwarded_for_of("/haproxy/v1", seen, sizeof seen), "127.0.0.2");
    CU_ASSERT_EQUAL(get_from_127_0_0_2(ports[1], "/haproxy/v2"), 200);
    CU_ASSERT_STRING_EQUAL(forwarded_for_of("/haproxy/v2", seen, sizeof seen), "127.0.0.2");
    stop_haproxy(&h);
}

/* The startup lines name each listener's whole address; a bind error says which it was. */
static void test_listen_messages(void)
{
    static const char yaml[] = "server: {listen: \"%s\", admin_listen: \"%s\"}\n"
                               "routes:\n  - {name: r, match: {path_prefix: /},"
                               " upstream: \"http://127.0.0.1:9\"}\n";
    char path[] = "/tmp/sluice-listen-XXXXXX", args[256], out[8192], line[64];
    struct proc p;
    int fd, taken = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    FILE *f;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&p, yaml, "[::1]:0", "127.0.0.1:0"), 0);
    snprintf(line, sizeof line, "listening on http://[::1]:%u\n", p.port);
    CU_ASSERT(wait_for_log(&p, line, 1, 1000));
    snprintf(line, sizeof line, "/readyz) on http://127.0.0.1:%u\n", p.admin_port);
    CU_ASSERT(wait_for_log(&p, line, 1, 1000));
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);

    /* A port another socket holds. */
    CU_ASSERT_FATAL(bind(taken, (struct sockaddr *)&addr, sizeof addr) == 0 &&
                    listen(taken, 1) == 0 &&
                    getsockname(taken, (struct sockaddr *)&addr, &len) == 0);
    fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    fchmod(fd, 0644);
    f = fdopen(fd, "w");
    fprintf(f, yaml, "127.0.0.1:0", "127.0.0.1:0");
    fclose(f);
    {
        static const struct {
            const char *listen, *says, *as_user;
        } cases[] = {
            {NULL, "the address is in use", NULL},
            {"192.0.2.1:8080", "no interface of this machine has that address", NULL},
            {"127.0.0.1:81", "permission denied (a port below 1024", "nobody"},
        };

        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char where[64];

            if (cases[i].listen == NULL)
                snprintf(where, sizeof where, "127.0.0.1:%u", ntohs(addr.sin_port));
            else
                snprintf(where, sizeof where, "%s", cases[i].listen);
            f = fopen(path, "w");
            fprintf(f, yaml, where, "127.0.0.1:0");
            fclose(f);
            if (cases[i].as_user != NULL) {
                FILE *run;
                size_t n;

                snprintf(args, sizeof args, "runuser -u %s -- %s -c %s 2>&1", cases[i].as_user,
                         sluice_binary(), path);
                run = popen(args, "r");
                n = fread(out, 1, sizeof out - 1, run);
                out[n] = '\0';
                check_case(pclose(run) != 0, where, "started: %s", out);
            } else {
                snprintf(args, sizeof args, "-c %s", path);
                check_case(run_sluice(args, out, sizeof out) == 1, where, "exit: %s", out);
            }
            check_case(strstr(out, cases[i].says) != NULL && strstr(out, where) != NULL, where,
                       "said: %s", out);
        }
    }
    close(taken);
    unlink(path);
}

void register_proxy_protocol_tests(void)
{
    CU_pSuite s = CU_add_suite("proxy_protocol", init, clean);

    CU_add_test(s, "the header's address is the client's", test_addresses);
    CU_add_test(s, "limits and deny lists count by the header's address", test_keys_and_deny);
    CU_add_test(s, "malformed headers close the connection, nothing forwarded", test_refused);
    CU_add_test(s, "a header in pieces; one never finished", test_pieces_and_timeout);
    CU_add_test(s, "a peer that hangs up halfway is closed then", test_hang_up_halfway);
    CU_add_test(s, "v1 only, v2 only, and peers not allowed", test_versions_and_peers);
    CU_add_test(s, "a reload keeps the running proxy_protocol", test_reload_keeps_it);
    CU_add_test(s, "HAProxy send-proxy and send-proxy-v2 in front", test_haproxy);
    CU_add_test(s, "listen addresses and bind errors", test_listen_messages);
}
