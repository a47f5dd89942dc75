/* TLS on the listener (server.tls), with real clients: libcurl (curl) trusting a test CA made
 * here with `openssl`, `openssl s_client` for protocol versions, and a GnuTLS client of this
 * file's for raw bytes. Certificates: a.test (also for 127.0.0.1), b.test and *.b.test, c.test
 * by its CN alone; a key that goes with another certificate (b.key for a.pem), and a file of
 * garbage.
 *
 * The strict reader over TLS: the same hostile bytes are sent to a plain and a TLS listener in
 * front of the recorder, and the answers (status, body, whether the connection closed) and what
 * the upstream received must be the same, X-Forwarded-Proto aside. */
#include <CUnit/CUnit.h>
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

static char dir[64];                 /* the certificates, made by init() */
static struct proc plain, tls, swap; /* swap: the certificate reload tests' */
static struct recorder rec;

/* The CA, then per name a key and a certificate signed by it. */
static const char make_certs[] =
    "set -e; cd %s; exec 2>openssl.log\n"
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "
    "/CN=sluice-test-ca\n"
    "for n in a b c; do\n"
    "  openssl req -newkey rsa:2048 -nodes -keyout $n.key -out $n.csr -subj /CN=$n.test\n"
    "done\n"
    "printf 'subjectAltName=DNS:a.test,IP:127.0.0.1\\n' > a.ext\n"
    "printf 'subjectAltName=DNS:b.test,DNS:*.b.test\\n' > b.ext\n"
    "printf 'basicConstraints=CA:FALSE\\n' > c.ext\n" /* no subjectAltName: its CN names it */
    "for n in a b c; do\n"
    "  openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $n.pem "
    "-days 2 -extfile $n.ext\n"
    "done\n"
    "printf 'not a certificate\\n' > garbage.pem\n"
    "cp a.pem served.pem; cp a.key served.key\n";

static int shell(const char *fmt, const char *arg)
{
    char command[2048];

    snprintf(command, sizeof command, fmt, arg);
    return system(command) == 0 ? 0 : -1;
}

/* "%2$s": the certificate directory; "%1$u": the upstream (the recorder, for plain and tls).
 * park_idle_after: 1s, so that an idle plain connection would be parked within the 2.5 s
 * test_idle_connection_kept() waits. */
static const char tls_config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  max_body: 1KiB\n"
    "  park_idle_after: 1s\n"
    "  tls:\n"
    "    cert: %2$s/a.pem\n"
    "    key: %2$s/a.key\n"
    "    certificates: [{cert: %2$s/b.pem, key: %2$s/b.key}, {cert: %2$s/c.pem, key: "
    "%2$s/c.key}]\n"
    "routes:\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static const char plain_config[] =
    "server: {listen: \"127.0.0.1:0\", max_body: 1KiB}\n"
    "routes:\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static int init(void)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-tls-XXXXXX");
    if (mkdtemp(dir) == NULL || shell(make_certs, dir) != 0 || recorder_start(&rec) != 0) {
        fprintf(stderr, "cannot make the test certificates in %s (see openssl.log)\n", dir);
        return -1;
    }
    if (start_sluice(&plain, plain_config, rec.port) != 0 ||
        start_sluice(&tls, tls_config, rec.port, dir) != 0)
        return -1;
    return 0;
}

static int clean(void)
{
    int rc = stop_sluice(&plain, 5000) == 0 && stop_sluice(&tls, 5000) == 0 ? 0 : -1;

    recorder_stop(&rec);
    shell("rm -rf %s", dir);
    return rc;
}

/* --- clients -------------------------------------------------------------------------- */

struct tls_reply {
    CURLcode rc;
    long status;
    long connects;     /* new connections made for it: 0 when one was reused */
    char subject[256]; /* the server certificate's subject, when a connection was made */
    char body[4096];
    size_t body_len;
};

static size_t keep_body(char *data, size_t size, size_t n, void *cls)
{
    struct tls_reply *r = cls;
    size_t len = size * n, room = sizeof r->body - 1 - r->body_len;

    memcpy(r->body + r->body_len, data, len < room ? len : room);
    r->body_len += len < room ? len : room;
    r->body[r->body_len] = '\0';
    return len;
}

/* GET https://`host`:`port``target` with curl on `curl` (a handle that may keep its
 * connection), `host` resolved to 127.0.0.1 and the test CA trusted, with `header` (or NULL)
 * and at most TLS `max_version` (a CURL_SSLVERSION_MAX_*; 0: any). */
static void tls_get_on(CURL *curl, unsigned port, const char *host, const char *target,
                       const char *header, long max_version, struct tls_reply *r)
{
    char url[256], resolve[128], ca[128];
    struct curl_slist *resolves, *headers = NULL;
    struct curl_certinfo *info = NULL;

    memset(r, 0, sizeof *r);
    snprintf(url, sizeof url, "https://%s:%u%s", host, port, target);
    snprintf(resolve, sizeof resolve, "%s:%u:127.0.0.1", host, port);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    resolves = curl_slist_append(NULL, resolve);
    if (header != NULL)
        headers = curl_slist_append(NULL, header);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_RESOLVE, resolves);
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca);
    curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(curl, CURLOPT_SSLVERSION,
                     max_version ? CURL_SSLVERSION_TLSv1_2 | max_version : CURL_SSLVERSION_DEFAULT);
    r->rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &r->connects);
    if (curl_easy_getinfo(curl, CURLINFO_CERTINFO, &info) == CURLE_OK && info != NULL &&
        info->num_of_certs > 0)
        for (struct curl_slist *l = info->certinfo[0]; l != NULL; l = l->next)
            if (strncmp(l->data, "Subject:", 8) == 0)
                snprintf(r->subject, sizeof r->subject, "%s", l->data + 8);
    curl_easy_setopt(curl, CURLOPT_RESOLVE, NULL);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(resolves);
    curl_slist_free_all(headers);
}

static void tls_get(unsigned port, const char *host, const char *target, const char *header,
                    long max_version, struct tls_reply *r)
{
    CURL *curl = curl_easy_init();

    tls_get_on(curl, port, host, target, header, max_version, r);
    curl_easy_cleanup(curl);
}

/* Whether the certificate seen for `host` on `port` is the one for `name` ("a.test"). */
static bool serves(unsigned port, const char *host, const char *name)
{
    struct tls_reply r;

    tls_get(port, host, "/x", NULL, 0, &r);
    return r.rc == CURLE_OK && r.status == 200 && strstr(r.subject, name) != NULL;
}

/* Whether `host` on `port` gets the certificate for `name`, whether or not it names `host`
 * (the CA is checked, the name is not). */
static bool presents(unsigned port, const char *host, const char *name)
{
    CURL *curl = curl_easy_init();
    struct tls_reply r;

    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    tls_get_on(curl, port, host, "/x", NULL, 0, &r);
    curl_easy_cleanup(curl);
    return r.rc == CURLE_OK && strstr(r.subject, name) != NULL;
}

/* raw_session() over TLS (GnuTLS, server name a.test, no certificate check: the server's
 * reading is under test, not its certificate): sends `len` bytes (the first `first_record` of
 * them in a record of their own, unless 0), reads until the server closes, `timeout_ms` pass,
 * or `quiet_ms` of quiet after a first whole answer (raw_session() waits a quarter second). */
static int tls_session(unsigned port, const char *bytes, size_t len, size_t first_record,
                       char *answer, size_t cap, int timeout_ms, int quiet_ms, bool *closed)
{
    struct tls_client c;
    int status = 0, ret;
    size_t got = 0, sent = 0;
    double until = seconds_now() + timeout_ms / 1000.0;

    *closed = false;
    answer[0] = '\0';
    if (tls_client_open(&c, port, "a.test", timeout_ms) != 0)
        goto out;
    while (sent < len) {
        size_t piece =
            sent == 0 && first_record > 0 && first_record < len ? first_record : len - sent;

        ret = (int)gnutls_record_send(c.session, bytes + sent, piece);
        if (ret < 0)
            break; /* the server may close before it has read everything */
        sent += (size_t)ret;
    }
    while (got < cap - 1) {
        struct pollfd p = {c.fd, POLLIN, 0};
        int wait = (int)((until - seconds_now()) * 1000);
        ssize_t n;

        if (sscanf(answer, "HTTP/1.%*d %d", &status) == 1 && count_responses(answer) > 0 &&
            strstr(answer, "\r\n\r\n") != NULL && wait > quiet_ms)
            wait = quiet_ms;
        if (gnutls_record_check_pending(c.session) == 0 && (wait <= 0 || poll(&p, 1, wait) <= 0))
            break;
        n = gnutls_record_recv(c.session, answer + got, cap - 1 - got);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            continue;
        if (n <= 0) {
            *closed = true;
            break;
        }
        got += (size_t)n;
        answer[got] = '\0';
    }
    sscanf(answer, "HTTP/1.%*d %d", &status);
out:
    tls_client_close(&c);
    return status;
}

/* --- tests ---------------------------------------------------------------------------- */

/* What `openssl s_client -connect 127.0.0.1:PORT ARGS` printed (stderr too), with nothing to
 * send; a static buffer. */
static const char *s_client(unsigned port, const char *args)
{
    static char out[8192];
    char command[512];
    FILE *f;
    size_t len;

    snprintf(command, sizeof command, "openssl s_client -connect 127.0.0.1:%u %s </dev/null 2>&1",
             port, args);
    f = popen(command, "r");
    len = f != NULL ? fread(out, 1, sizeof out - 1, f) : 0;
    out[len] = '\0';
    if (f != NULL)
        pclose(f);
    return out;
}

/* The server name picks the certificate; no match, or none sent, gets the first. */
static void test_sni_picks_the_certificate(void)
{
    struct tls_reply r;

    CU_ASSERT_TRUE(serves(tls.port, "a.test", "a.test"));
    CU_ASSERT_TRUE(serves(tls.port, "b.test", "b.test"));
    CU_ASSERT_TRUE(serves(tls.port, "api.b.test", "b.test")); /* *.b.test */
    CU_ASSERT_TRUE(serves(tls.port, "c.test", "c.test"));     /* by its CN */
    /* Names compare without case (curl may fold the name it sends; s_client does not). */
    CU_ASSERT_PTR_NOT_NULL(strstr(s_client(tls.port, "-servername B.TEST"), "subject=CN = b.test"));
    /* 127.0.0.1: no server name is sent (an address), so the first: a.test's, which names it */
    CU_ASSERT_TRUE(serves(tls.port, "127.0.0.1", "a.test"));
    /* Unknown names get the first certificate, which curl then refuses for that name. */
    CU_ASSERT_TRUE(presents(tls.port, "d.test", "a.test"));
    tls_get(tls.port, "d.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.rc, CURLE_PEER_FAILED_VERIFICATION);
    /* One label only: x.y.b.test is no *.b.test, nor b.test itself */
    CU_ASSERT_TRUE(presents(tls.port, "x.y.b.test", "a.test"));
}

/* `openssl s_client` offering only `version` (with its own security level lowered, so that it
 * does offer it): whether a session was made. */
static bool s_client_connects(unsigned port, const char *version)
{
    char args[128];
    const char *out;

    snprintf(args, sizeof args, "-servername a.test %s -cipher DEFAULT@SECLEVEL=0", version);
    out = s_client(port, args);
    /* The client must have offered the version: else the test would prove nothing. */
    CU_ASSERT_PTR_NULL(strstr(out, "no protocols available"));
    return strstr(out, "Cipher is (NONE)") == NULL && strstr(out, "New, ") != NULL;
}

/* Whether the access log's line for `path` says `tls` and HTTP/1.1. */
static bool logged_over(const struct proc *p, const char *path, const char *tls)
{
    char want[64], *line = access_log_line(p, path);
    bool found;

    snprintf(want, sizeof want, "\"tls\":\"%s\",\"protocol\":\"HTTP/1.1\"}", tls);
    found = line != NULL && strstr(line, want) != NULL;
    if (!found)
        fprintf(stderr, "\nexpected %s in %s\n", want, line ? line : "no line");
    free(line);
    return found;
}

static void test_versions(void)
{
    struct tls_reply r;

    CU_ASSERT_TRUE(s_client_connects(tls.port, "-tls1_2"));
    CU_ASSERT_TRUE(s_client_connects(tls.port, "-tls1_3"));
    CU_ASSERT_FALSE(s_client_connects(tls.port, "-tls1_1"));
    CU_ASSERT_FALSE(s_client_connects(tls.port, "-tls1"));
    tls_get(tls.port, "a.test", "/over-tls-12", NULL, CURL_SSLVERSION_MAX_TLSv1_2, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    tls_get(tls.port, "a.test", "/over-tls-13", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(get_status(plain.port, "/over-plain", NULL), 200);
    /* The access log says how each came. */
    CU_ASSERT_TRUE(logged_over(&tls, "/over-tls-12", "TLS1.2"));
    CU_ASSERT_TRUE(logged_over(&tls, "/over-tls-13", "TLS1.3"));
    CU_ASSERT_TRUE(logged_over(&plain, "/over-plain", ""));
}

/* min_version 1.3: TLS 1.2 is refused, 1.3 served. */
static void test_min_version_13(void)
{
    struct proc p;
    struct tls_reply r;

    if (start_sluice(&p,
                     "server:\n  listen: \"127.0.0.1:0\"\n"
                     "  tls: {cert: %2$s/a.pem, key: %2$s/a.key, min_version: \"1.3\"}\n"
                     "routes:\n  - name: main\n    match: {path_prefix: /}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n",
                     rec.port, dir) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    tls_get(p.port, "a.test", "/x", NULL, CURL_SSLVERSION_MAX_TLSv1_2, &r);
    CU_ASSERT_EQUAL(r.rc, CURLE_SSL_CONNECT_ERROR);
    CU_ASSERT_FALSE(s_client_connects(p.port, "-tls1_2"));
    tls_get(p.port, "a.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_TRUE(s_client_connects(p.port, "-tls1_3"));
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

/* Plain HTTP to the TLS port: no HTTP answer (a client can't read one), the connection closed,
 * and one log line. */
static void test_plain_http_to_the_tls_port(void)
{
    static const char request[] = "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n";
    char answer[1024];
    bool closed;
    unsigned long before = recorder_received(&rec);

    CU_ASSERT_EQUAL(
        raw_session(tls.port, request, strlen(request), answer, sizeof answer, 3000, &closed), 0);
    CU_ASSERT_TRUE(closed);
    CU_ASSERT_EQUAL(strstr(answer, "HTTP/") == NULL, true);
    CU_ASSERT_EQUAL(recorder_received(&rec), before);
    CU_ASSERT_TRUE(wait_for_log(&tls, "tls: a handshake failed", 1, 2000));
}

/* X-Forwarded-Proto: https for TLS clients, http for plain ones; a client's own is replaced
 * unless it is a trusted proxy (test_file_change_swaps_the_certificate()). */
static void test_forwarded_proto(void)
{
    struct tls_reply r;
    char *got;
    size_t len;

    recorder_reset(&rec);
    tls_get(tls.port, "a.test", "/proto", "X-Forwarded-Proto: http", 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    got = recorder_bytes(&rec, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\r\nX-Forwarded-Proto: https\r\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "X-Forwarded-Proto: http\r\n"));
    free(got);
}

/* `answer` without what differs between two answers to the same bytes: its Date fields, and
 * the request ids the gateway made (X-Request-Id and problem+json's "request_id" become
 * 32 'x's). */
static void drop_varying(char *answer)
{
    static const char *const ids[] = {"X-Request-Id: ", "\"request_id\":\""};
    char *date, *end, *at;

    while ((date = strstr(answer, "\r\nDate: ")) != NULL &&
           (end = strstr(date + 2, "\r\n")) != NULL)
        memmove(date, end, strlen(end) + 1);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        for (at = answer; (at = strstr(at, ids[i])) != NULL; at++)
            if (strspn(at + strlen(ids[i]), "0123456789abcdef") == 32)
                memset(at + strlen(ids[i]), 'x', 32);
}

/* Hostile heads, over plain HTTP and over TLS: the same answers, the same bytes upstream. */
static void test_strict_reader_over_tls(void)
{
    static char huge[70 * 1024];
    static const struct {
        const char *label, *bytes;
        int status; /* the first answer's */
    } cases[] = {
        {"obs-fold", "GET /x HTTP/1.1\r\nHost: x\r\n Folded: y\r\n\r\n", 400},
        {"bare LF", "GET /x HTTP/1.1\nHost: x\n\n", 400},
        {"two lengths",
         "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
         400},
        {"CL and TE",
         "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
         "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
         400},
        {"space before colon", "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello",
         400},
        {"trailing whitespace, pipelined",
         "GET /a HTTP/1.1\r\nHost: x \t\r\nX-A: b  \r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
         200},
        {"smuggled after a body",
         "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
         "helloGET /smuggled HTTP/1.1\r\nHost: x\r\n Fold: y\r\n\r\n",
         200},
        {"bad chunk in the body",
         "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
         "\r\n5\r\nhello\r\nZZ\r\n\r\n",
         400},
        {"oversized head", huge, 431},
    };
    int n = snprintf(huge, sizeof huge, "GET /x HTTP/1.1\r\nHost: x\r\nX-Big: ");

    memset(huge + n, 'a', sizeof huge - (size_t)n - 5);
    memcpy(huge + sizeof huge - 5, "\r\n\r\n", 5);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char over_plain[8192], over_tls[8192], *sent_plain, *sent_tls, *proto;
        size_t len_plain, len_tls, len = strlen(cases[i].bytes);
        bool closed_plain, closed_tls;
        int status_plain, status_tls;

        recorder_reset(&rec);
        status_plain = raw_session(plain.port, cases[i].bytes, len, over_plain, sizeof over_plain,
                                   3000, &closed_plain);
        sleep_ms(100);
        sent_plain = recorder_bytes(&rec, &len_plain);
        recorder_reset(&rec);
        status_tls = tls_session(tls.port, cases[i].bytes, len, 0, over_tls, sizeof over_tls, 3000,
                                 250, &closed_tls);
        sleep_ms(100);
        sent_tls = recorder_bytes(&rec, &len_tls);
        /* The only difference upstream: the scheme the client used. */
        while ((proto = strstr(sent_tls, "X-Forwarded-Proto: https\r\n")) != NULL) {
            memmove(proto + 23, proto + 24, strlen(proto + 24) + 1);
            len_tls--;
        }
        drop_varying(over_plain);
        drop_varying(over_tls);
        recorder_strip_request_ids(sent_plain, &len_plain);
        recorder_strip_request_ids(sent_tls, &len_tls);
        check_case(status_plain == cases[i].status && status_tls == cases[i].status, cases[i].label,
                   "status %d over plain HTTP, %d over TLS", status_plain, status_tls);
        check_case(count_responses(over_plain) == count_responses(over_tls), cases[i].label,
                   "%d answers over plain HTTP, %d over TLS", count_responses(over_plain),
                   count_responses(over_tls));
        check_case(strcmp(over_plain, over_tls) == 0, cases[i].label,
                   "answers differ:\n%s\n----\n%s", over_plain, over_tls);
        check_case(closed_plain == closed_tls, cases[i].label, "closed: %d over plain, %d over TLS",
                   closed_plain, closed_tls);
        check_case(len_plain == len_tls && memcmp(sent_plain, sent_tls, len_plain) == 0,
                   cases[i].label, "upstream received %zu bytes over plain, %zu over TLS",
                   len_plain, len_tls);
        free(sent_plain);
        free(sent_tls);
    }
}

/* A head split over two records that arrive together is read whole: in event mode the reader,
 * holding the first part back, answers libmicrohttpd "nothing yet" while the second record
 * already waits in the socket (wire.h), and the request would wait for client_timeout. */
static void test_head_over_two_records(void)
{
    static const struct {
        const char *label, *bytes, *upstream;
    } cases[] = {
        {"a GET", "GET /x HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\r\n",
         "GET /x HTTP/1.1\r\nHost: x\r\nX-A: b\r\nX-Forwarded-For: 127.0.0.1\r\n"
         "X-Forwarded-Proto: https\r\nX-Forwarded-Host: x\r\n\r\n"},
        {"a POST with its body", "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
         "POST /x HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 127.0.0.1\r\n"
         "X-Forwarded-Proto: https\r\nX-Forwarded-Host: x\r\nContent-Length: 5\r\n\r\nhello"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char answer[8192], *sent, shown[512];
        size_t sent_len;
        bool closed;
        int status;

        recorder_reset(&rec);
        status = tls_session(tls.port, cases[i].bytes, strlen(cases[i].bytes), 20, answer,
                             sizeof answer, 3000, 250, &closed);
        sleep_ms(100);
        sent = recorder_bytes(&rec, &sent_len);
        recorder_strip_request_ids(sent, &sent_len);
        check_case(status == 200 && count_responses(answer) == 1, cases[i].label,
                   "status %d, %d answers", status, count_responses(answer));
        check_case(sent_len == strlen(cases[i].upstream) &&
                       memcmp(sent, cases[i].upstream, sent_len) == 0,
                   cases[i].label, "the upstream got \"%s\"",
                   visible_bytes(sent, sent_len, shown, sizeof shown));
        check_case(!closed, cases[i].label, "the connection was closed");
        free(sent);
    }
}

/* Bodies across many TLS records, and a request pipelined behind one, reach the upstream
 * whole (the reader's reads of GnuTLS's plaintext: wire.h). */
#define PIPELINED 400

static void test_large_bodies_over_tls(void)
{
    static char request[300 * 1024];
    struct proc p;
    char answer[8192], *sent;
    size_t len, sent_len;
    bool closed;
    int head;

    /* The smallest buffers: libmicrohttpd then asks for less than a TLS record holds. */
    if (start_sluice(&p,
                     "server:\n  listen: \"127.0.0.1:0\"\n"
                     "  max_header_size: 4KiB\n  max_response_header_size: 4KiB\n"
                     "  tls: {cert: %2$s/a.pem, key: %2$s/a.key}\n"
                     "routes:\n  - name: main\n    match: {path_prefix: /}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n",
                     rec.port, dir) != 0) {
        CU_FAIL("sluice did not start");
        return;
    }
    head = snprintf(request, sizeof request,
                    "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                    sizeof request - 1024);
    for (size_t i = (size_t)head; i < (size_t)head + sizeof request - 1024; i++)
        request[i] = (char)('a' + i % 26);
    len = (size_t)head + sizeof request - 1024;
    len += (size_t)snprintf(request + len, sizeof request - len,
                            "GET /after HTTP/1.1\r\nHost: x \r\n\r\n");
    recorder_reset(&rec);
    tls_session(p.port, request, len, 0, answer, sizeof answer, 5000, 1000, &closed);
    /* Two answers ("ok" bodies end without a line break, so count_responses() sees one). */
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "\r\n\r\nokHTTP/1.1 200 OK\r\n"));
    sleep_ms(100);
    sent = recorder_bytes(&rec, &sent_len);
    CU_ASSERT_PTR_NOT_NULL(memmem(sent, sent_len, request + head, sizeof request - 1024));
    CU_ASSERT_PTR_NOT_NULL(strstr(sent, "GET /after HTTP/1.1\r\nHost: x\r\n"));
    free(sent);

    /* Many pipelined heads, each rewritten (its trailing space goes), in few records: the
     * reader hands over less than it read, and GnuTLS holds the rest. Every one is answered. */
    len = 0;
    for (int i = 0; i < PIPELINED; i++)
        len += (size_t)snprintf(request + len, sizeof request - len,
                                "GET /p%d HTTP/1.1\r\nHost: x \r\nX-Pad: %0200d \r\n\r\n", i, i);
    tls_session(p.port, request, len, 0, request + len, sizeof request - len, 10000, 2000, &closed);
    {
        int answered = 0;

        for (const char *at = request + len; (at = strstr(at, "200 OK")) != NULL; at++)
            answered++;
        check_case(answered == PIPELINED, "pipelined", "%d answered", answered);
    }
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

/* --- reloads -------------------------------------------------------------------------- */

/* "%3$s": server.watch_config. This sluice trusts 127.0.0.1. */
static const char swap_config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  trusted_proxies: [127.0.0.1]\n"
    "  watch_config: %3$s\n"
    "  tls: {cert: %2$s/served.pem, key: %2$s/served.key}\n"
    "routes:\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

/* The served files become those of `name` ("a", "b" or "garbage" for both), as a certificate
 * tool renews them: a new file renamed over each. */
static void serve_files_of(const char *name)
{
    char command[512];
    bool garbage = strcmp(name, "garbage") == 0;

    snprintf(command, sizeof command,
             "cd %s && cp %s.pem new.pem && cp %s.key new.key && mv new.key served.key && "
             "mv new.pem served.pem",
             dir, name, garbage ? "a" : name);
    CU_ASSERT_EQUAL(system(command), 0);
}

/* `kept`'s connection (made before) is still served: reused, not made again. */
static void assert_kept_connection_served(CURL *kept, unsigned port)
{
    struct tls_reply r;

    tls_get_on(kept, port, "a.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(r.connects, 0);
}

/* A TLS connection idle for longer than park_idle_after stays in libmicrohttpd (its session is
 * there: park.h), so its next request is served on it. */
static void test_idle_connection_kept(void)
{
    CURL *kept = curl_easy_init();
    struct tls_reply r;

    tls_get_on(kept, tls.port, "a.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    sleep_ms(2500);
    assert_kept_connection_served(kept, tls.port);
    curl_easy_cleanup(kept);
}

/* SIGHUP swaps the certificate for the next connection (files changed without it are not
 * read); a connection open across it keeps working; a bad certificate keeps the old one, and
 * the log says why. */
static void test_sighup_swaps_the_certificate(void)
{
    CURL *kept = curl_easy_init();
    struct tls_reply r;

    serve_files_of("a");
    if (start_sluice(&swap, swap_config, rec.port, dir, "false") != 0) {
        CU_FAIL("sluice did not start");
        curl_easy_cleanup(kept);
        return;
    }
    tls_get_on(kept, swap.port, "a.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.subject, "a.test"));
    serve_files_of("b");
    sleep_ms(500);
    CU_ASSERT_TRUE(presents(swap.port, "b.test", "a.test")); /* not read again by themselves */
    kill(swap.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&swap, "reloaded", 1, 3000));
    CU_ASSERT_TRUE(serves(swap.port, "b.test", "b.test"));
    CU_ASSERT_TRUE(presents(swap.port, "a.test", "b.test")); /* the only one now */
    assert_kept_connection_served(kept, swap.port);

    serve_files_of("garbage");
    kill(swap.pid, SIGHUP);
    CU_ASSERT_TRUE(wait_for_log(&swap, "served.pem holds no PEM certificate", 1, 3000));
    CU_ASSERT_TRUE(wait_for_log(&swap, "reload rejected", 1, 100));
    CU_ASSERT_TRUE(serves(swap.port, "b.test", "b.test"));
    assert_kept_connection_served(kept, swap.port);
    curl_easy_cleanup(kept);
    CU_ASSERT_EQUAL(stop_sluice(&swap, 5000), 0);
}

/* With server.watch_config (the default), replacing the files is a reload. */
static void test_file_change_swaps_the_certificate(void)
{
    CURL *kept = curl_easy_init();
    struct tls_reply r;
    char *got;
    size_t len;

    serve_files_of("a");
    if (start_sluice(&swap, swap_config, rec.port, dir, "true") != 0) {
        CU_FAIL("sluice did not start");
        curl_easy_cleanup(kept);
        return;
    }
    tls_get_on(kept, swap.port, "a.test", "/x", NULL, 0, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_files_of("b");
    CU_ASSERT_TRUE(wait_for_log(&swap, "reloaded", 1, 3000));
    CU_ASSERT_TRUE(serves(swap.port, "b.test", "b.test"));
    assert_kept_connection_served(kept, swap.port);

    /* A trusted peer's X-Forwarded-Proto is kept as it sent it. */
    recorder_reset(&rec);
    tls_get(swap.port, "b.test", "/x", "X-Forwarded-Proto: http", 0, &r);
    got = recorder_bytes(&rec, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\r\nX-Forwarded-Proto: http\r\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "X-Forwarded-Proto: https"));
    free(got);

    /* Versions, and TLS itself, wait for a restart: said, and the listener goes on as it was. */
    rewrite_config(&swap, false,
                   "server:\n  listen: \"127.0.0.1:0\"\n"
                   "  tls: {cert: %2$s/served.pem, key: %2$s/served.key, min_version: \"1.3\"}\n"
                   "routes:\n  - name: main\n    match: {path_prefix: /}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n",
                   rec.port, dir);
    CU_ASSERT_TRUE(wait_for_log(&swap, "server.tls.min_version or ciphers changed", 1, 3000));
    tls_get(swap.port, "b.test", "/x", NULL, CURL_SSLVERSION_MAX_TLSv1_2, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    rewrite_config(&swap, false,
                   "server: {listen: \"127.0.0.1:0\"}\n"
                   "routes:\n  - name: main\n    match: {path_prefix: /}\n"
                   "    upstream: \"http://127.0.0.1:%1$u\"\n",
                   rec.port);
    CU_ASSERT_TRUE(wait_for_log(&swap, "server.tls was removed", 1, 3000));
    CU_ASSERT_TRUE(serves(swap.port, "b.test", "b.test"));
    assert_kept_connection_served(kept, swap.port);
    curl_easy_cleanup(kept);
    CU_ASSERT_EQUAL(stop_sluice(&swap, 5000), 0);
}

/* A WebSocket over TLS (wss://), both ways, through the tunnel (ws_peer.py, as
 * test_tunnels.c uses it): the echo server plain, the client trusting the test CA. */
static void test_websocket_over_tls(void)
{
    struct proc p, ws;
    double started = 0, took = 99;
    char command[512], out[1024] = "";
    FILE *client;
    size_t len;

    if (start_ws_server(&ws, NULL, NULL) != 0) {
        CU_FAIL("ws_peer.py server did not start");
        return;
    }
    if (start_sluice(&p,
                     "server:\n  listen: \"127.0.0.1:0\"\n"
                     "  tls: {cert: %2$s/a.pem, key: %2$s/a.key}\n"
                     "routes:\n  - name: ws\n    match: {path_prefix: /}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n",
                     ws.port, dir) != 0) {
        CU_FAIL("sluice did not start");
        stop_ws_server(&ws);
        return;
    }
    snprintf(command, sizeof command,
             "SSL_CERT_FILE=%s/ca.pem /usr/bin/python3 tests/integration/ws_peer.py client "
             "wss://127.0.0.1:%u/ 2>&1",
             dir, p.port);
    client = popen(command, "r");
    /* Line by line: the close is timed from "binary ok" (after Python's start-up and the
     * handshakes) to "closed". */
    for (len = 0; client != NULL && fgets(out + len, (int)(sizeof out - len), client) != NULL;
         len += strlen(out + len)) {
        if (strcmp(out + len, "binary ok\n") == 0)
            started = seconds_now();
        if (strncmp(out + len, "closed", 6) == 0)
            took = seconds_now() - started;
    }
    if (client != NULL)
        pclose(client);
    check_case(strstr(out, "text ok\nbinary ok\nclosed 1000") != NULL, "wss", "client: %s", out);
    /* The upstream's end reaches the client as the connection's: it does not wait out its
     * own close timeout (3 s) for it. */
    check_case(took < 2.5, "wss", "the close took %.1f s", took);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
    stop_ws_server(&ws);
}

/* `sluice --check` names the line of the file at fault, and why. */
/* The PROXY protocol header first, then the handshake: HAProxy in TCP mode passes the TLS
 * through with send-proxy-v2 in front of it; the client's address (127.0.0.2) is the one the
 * upstream hears of, the certificate is picked by SNI as ever, and a TLS client that skips
 * the header is closed. */
static const char proxied_tls_config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  proxy_protocol: v2\n"
    "  proxy_protocol_from: [127.0.0.1/32]\n"
    "  tls: {cert: %2$s/a.pem, key: %2$s/a.key, certificates: [{cert: %2$s/b.pem, key: "
    "%2$s/b.key}]}\n"
    "routes:\n"
    "  - name: main\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static void test_proxy_protocol_then_tls(void)
{
    unsigned port = free_port();
    char haproxy_config[512], *got;
    struct haproxy h;
    struct tls_reply r;
    struct proc p;
    CURL *curl;
    size_t len;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&p, proxied_tls_config, rec.port, dir), 0);
    snprintf(haproxy_config, sizeof haproxy_config,
             "defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 5s\n"
             "  timeout server 5s\n"
             "frontend tls\n  bind 127.0.0.1:%u\n  default_backend sluice\n"
             "backend sluice\n  server gw 127.0.0.1:%u send-proxy-v2\n",
             port, p.port);
    CU_ASSERT_EQUAL_FATAL(start_haproxy(&h, haproxy_config, &port, 1), 0);
    recorder_reset(&rec);
    curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_INTERFACE, "host!127.0.0.2");
    tls_get_on(curl, port, "b.test", "/behind", NULL, 0, &r);
    curl_easy_cleanup(curl);
    CU_ASSERT_EQUAL(r.rc, CURLE_OK);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.subject, "b.test"));
    got = recorder_bytes(&rec, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\r\nX-Forwarded-For: 127.0.0.2\r\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\r\nX-Forwarded-Proto: https\r\n"));
    free(got);
    /* Straight to sluice, from an allowed peer but with no header: closed. */
    tls_get(p.port, "a.test", "/direct", NULL, 0, &r);
    CU_ASSERT_NOT_EQUAL(r.rc, CURLE_OK);
    CU_ASSERT_EQUAL(r.status, 0);
    stop_haproxy(&h);
    CU_ASSERT_EQUAL(stop_sluice(&p, 5000), 0);
}

static void test_check_errors(void)
{
    static const struct {
        const char *label, *tls, *want;
    } cases[] = {
        {"missing", "    cert: %1$s/missing.pem\n    key: %1$s/a.key\n",
         ":4:11: cert: cannot read %1$s/missing.pem"},
        {"garbage", "    cert: %1$s/garbage.pem\n    key: %1$s/a.key\n",
         ":4:11: cert: %1$s/garbage.pem holds no PEM certificate"},
        {"key of another", "    cert: %1$s/a.pem\n    key: %1$s/b.key\n",
         ":5:10: key: %1$s/b.key does not go with %1$s/a.pem"},
        {"a key that is a certificate", "    cert: %1$s/a.pem\n    key: %1$s/a.pem\n",
         ":5:10: key: %1$s/a.pem holds no PEM private key"},
        {"listed",
         "    certificates:\n      - {cert: %1$s/a.pem, key: %1$s/a.key}\n"
         "      - {cert: %1$s/b.pem, key: %1$s/missing.key}\n",
         ":6:%2$zu: key: cannot read %1$s/missing.key"},
        {"cert alone", "    cert: %1$s/a.pem\n", ":4:5: tls: cert and key go together"},
        {"ciphers", "    cert: %1$s/a.pem\n    key: %1$s/a.key\n    ciphers: \"NORMAL:+NOPE\"\n",
         ":6:14: ciphers: \"NORMAL:+NOPE\" is not a GnuTLS priority string"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128], tls_text[1024], yaml[2048], want[512], args[256], out[4096];
        FILE *f;

        snprintf(path, sizeof path, "%s/check.yaml", dir);
        snprintf(tls_text, sizeof tls_text, cases[i].tls, dir);
        snprintf(yaml, sizeof yaml,
                 "server:\n  listen: \"127.0.0.1:0\"\n  tls:\n%sroutes:\n  - name: main\n"
                 "    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n",
                 tls_text);
        f = fopen(path, "w");
        if (f == NULL)
            continue;
        fputs(yaml, f);
        fclose(f);
        /* The listed key's column moves with the directory's name. */
        snprintf(want, sizeof want, cases[i].want, dir,
                 strlen("      - {cert: /b.pem, key: ") + strlen(dir) + 1);
        snprintf(args, sizeof args, "--check -c %s", path);
        check_case(run_sluice(args, out, sizeof out) == 1, cases[i].label, "exit not 1: %s", out);
        check_case(strstr(out, want) != NULL, cases[i].label, "wanted \"%s\" in: %s", want, out);
        /* Nor does sluice start with it. */
        snprintf(args, sizeof args, "-c %s", path);
        check_case(run_sluice(args, out, sizeof out) == 1 && strstr(out, want) != NULL,
                   cases[i].label, "started, or without \"%s\": %s", want, out);
    }
}

void register_tls_tests(void)
{
    CU_pSuite s = add_suite_with("tls", init, clean);

    add_test(s, "the server name picks the certificate", test_sni_picks_the_certificate);
    add_test(s, "TLS 1.2 and 1.3 served, 1.0 and 1.1 refused", test_versions);
    add_test(s, "min_version 1.3 refuses 1.2", test_min_version_13);
    add_test(s, "plain HTTP to the TLS port is closed", test_plain_http_to_the_tls_port);
    add_test(s, "X-Forwarded-Proto: https", test_forwarded_proto);
    add_test(s, "the strict reader over TLS", test_strict_reader_over_tls);
    add_test(s, "a head over two records that arrive together", test_head_over_two_records);
    add_test(s, "large bodies and pipelining over TLS", test_large_bodies_over_tls);
    add_test(s, "an idle connection is kept, and serves its next request",
             test_idle_connection_kept);
    add_test(s, "SIGHUP swaps the certificate", test_sighup_swaps_the_certificate);
    add_test(s, "a changed file swaps the certificate", test_file_change_swaps_the_certificate);
    add_test(s, "WebSocket over TLS", test_websocket_over_tls);
    add_test(s, "the PROXY protocol before the handshake", test_proxy_protocol_then_tls);
    add_test(s, "--check: the file, the line, the reason", test_check_errors);
}
