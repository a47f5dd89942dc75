/* Upgrades (gateway/upstream/upgrade.h, tunnel.h; README "WebSocket and other upgrades"),
 * with real WebSocket peers on both sides (ws_peer.py, Debian's python3-websockets): an echo
 * server upstream, a client that exchanges a text and a 100 KiB binary message and closes
 * with the closing handshake.
 *   - messages pass both ways, and the tunnel is counted in sluice_tunnels_open while open;
 *   - the upgrade is one request to the route's limits: the one past the quota gets 429;
 *   - an upstream's answer other than 101 is passed on (status, fields, body);
 *   - a client that sends bytes after its upgrade request before the 101 gets 400;
 *   - a tunnel idle past tunnel_idle_timeout is closed; open tunnels count toward
 *     max_connections;
 *   - Upgrade: h2c is not a tunnel: the request goes as a plain one, and upgrades: [h2c] is
 *     refused at load;
 *   - a drain closes open tunnels at drain_timeout, and sluice exits 0;
 *   - hostile or broken answers to an upgrade, from a canned upstream: what the client gets,
 *     what the upstream received, and whether the client's connection closed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/recorder.h"

#define PEER "/usr/bin/python3 tests/integration/ws_peer.py"

static struct proc gw, ws; /* ws: the WebSocket echo server */

static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "routes:\n"
    "  - name: twice\n    match: {path_prefix: /twice/}\n"
    "    upstream: \"http://127.0.0.1:%2$u\"\n    strip_prefix: true\n"
    "    limit: {algorithm: fixed_window, requests: 2, per: 1h}\n"
    "  - name: cap\n    match: {path_prefix: /cap/}\n"
    "    upstream: \"http://127.0.0.1:%2$u\"\n    strip_prefix: true\n"
    "    limit: {algorithm: concurrency, requests: 1}\n"
    "  - name: idle\n    match: {path_prefix: /idle/}\n"
    "    upstream: \"http://127.0.0.1:%2$u\"\n    strip_prefix: true\n"
    "    tunnel_idle_timeout: 1s\n"
    "  - name: plain\n    match: {path_prefix: /plain/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    strip_prefix: true\n"
    "  - name: ws\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%2$u\"\n";

static int init(void)
{
    if (start_ws_server(&ws, NULL, NULL) != 0)
        return -1;
    return start_sluice(&gw, config, upstream.port, ws.port);
}

static int clean(void)
{
    stop_ws_server(&ws);
    return stop_sluice(&gw, 5000) == 0 ? 0 : -1;
}

/* Starts the client against `path` on `port` with `options`; read its lines with
 * client_output(). */
static FILE *start_client(unsigned port, const char *path, const char *options)
{
    char command[512];

    snprintf(command, sizeof command, PEER " client ws://127.0.0.1:%u%s %s 2>&1", port, path,
             options);
    return popen(command, "r");
}

/* Everything the client printed, once it has exited (a static buffer). */
static const char *client_output(FILE *client)
{
    static char out[1024];
    size_t len = client != NULL ? fread(out, 1, sizeof out - 1, client) : 0;

    out[len] = '\0';
    if (client != NULL)
        pclose(client);
    return out;
}

static const char *run_client(unsigned port, const char *path, const char *options)
{
    return client_output(start_client(port, path, options));
}

/* Reads the client's lines until one starts with `want` (within 5 s); false if none did. */
static bool client_says(FILE *client, const char *want)
{
    char line[256];

    while (client != NULL && fgets(line, sizeof line, client) != NULL)
        if (strncmp(line, want, strlen(want)) == 0)
            return true;
    return false;
}

static void test_messages_both_ways(void)
{
    const char *out = run_client(gw.port, "/chat", "");

    check_case(strcmp(out, "text ok\nbinary ok\nclosed 1000\n") == 0, "echo through a tunnel",
               "the client said: %s", out);
    /* Closed on both sides: the gauge is back to 0. */
    for (int i = 0; i < 40 && metric_now(&gw, "sluice_tunnels_open{route=\"ws\"}") != 0; i++)
        sleep_ms(50);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_tunnels_open{route=\"ws\"}"), 0);
}

/* Whether the access log has the 101 line of the upgrade of `path`, waiting up to a second for
 * its writer thread. */
static bool logged_switch(const char *path)
{
    char line[128];
    bool found = false;

    snprintf(line, sizeof line, "\"path\":\"%s\",\"status\":101,", path);
    for (int i = 0; i < 20 && !found; i++) {
        char *log = read_file(gw.access_path);

        found = log != NULL && strstr(log, line) != NULL;
        free(log);
        if (!found)
            sleep_ms(50);
    }
    return found;
}

static void test_open_tunnel_is_counted(void)
{
    FILE *client = start_client(gw.port, "/held", "--hold 1");

    CU_ASSERT_FATAL(client != NULL);
    CU_ASSERT(client_says(client, "holding"));
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_tunnels_open{route=\"ws\"}"), 1);
    /* Its request was answered (the 101): a tunnel is no request in flight, and the request's
     * access log line is written at the switch, not when the tunnel closes. */
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_requests_in_flight"), 0);
    check_case(logged_switch("/held"), "open tunnel", "no access log line for /held yet");
    CU_ASSERT(client_says(client, "closed 1000"));
    pclose(client);
}

static void test_limit_applies_at_upgrade(void)
{
    const char *out;

    for (int i = 0; i < 2; i++) {
        out = run_client(gw.port, "/twice/x", "");
        check_case(strstr(out, "closed 1000") != NULL, "within the quota", "upgrade %d: %s", i + 1,
                   out);
    }
    out = run_client(gw.port, "/twice/x", "");
    check_case(strcmp(out, "status 429\n") == 0, "past the quota", "the client said: %s", out);
}

/* A concurrency slot is held for as long as the tunnel is open, not only until the 101: a
 * second upgrade meanwhile gets 429; once the first closes, the next one passes. */
static void test_concurrency_held_while_open(void)
{
    FILE *client = start_client(gw.port, "/cap/x", "--hold 2");
    const char *out;

    CU_ASSERT_FATAL(client != NULL);
    CU_ASSERT(client_says(client, "holding"));
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_limit_in_flight{route=\"cap\",limit=\"cap\"}"), 1);
    out = run_client(gw.port, "/cap/x", "");
    check_case(strcmp(out, "status 429\n") == 0, "tunnel open", "the second client said: %s", out);
    CU_ASSERT(client_says(client, "closed 1000"));
    pclose(client);
    /* The tunnel's close gives the slot back on the tunnels' thread: wait for it. */
    for (int i = 0; i < 100 && metric_now(&gw, "sluice_limit_in_flight{route=\"cap\","
                                               "limit=\"cap\"}") != 0;
         i++)
        sleep_ms(20);
    out = run_client(gw.port, "/cap/x", "");
    check_case(strstr(out, "closed 1000") != NULL, "tunnel closed", "the next client said: %s",
               out);
}

static const char shared_cap_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\", timeout: 500ms, lease: "
    "%3$s}\n"
    "routes:\n"
    "  - name: cap\n    match: {path_prefix: /cap/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    strip_prefix: true\n"
    "    limit: {algorithm: concurrency, requests: 1}\n";

/* The same in the shared store, over two replicas: a tunnel open on one for 3 s, three times
 * its slot's lease (1 s), keeps it (renewed), so the other refuses an upgrade meanwhile; once
 * the tunnel closes, the other's upgrade passes at once. Then with leases of 30 s, a tunnel's
 * close gives its slot back rather than leaving it to lapse. */
static void test_shared_slot_held_while_open(void)
{
    struct redis redis = {0};
    struct proc pair[2];
    FILE *client;
    const char *out;
    bool passed = false;

    CU_ASSERT_FATAL(start_redis(&redis) == 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(start_sluice(&pair[i], shared_cap_config, ws.port, redis.port, "1s") == 0);
    client = start_client(pair[0].port, "/cap/x", "--hold 3");
    CU_ASSERT_FATAL(client != NULL);
    CU_ASSERT(client_says(client, "holding"));
    out = run_client(pair[1].port, "/cap/x", "");
    check_case(strcmp(out, "status 429\n") == 0, "tunnel open",
               "the other replica's client "
               "said: %s",
               out);
    sleep_ms(2000);
    out = run_client(pair[1].port, "/cap/x", "");
    check_case(strcmp(out, "status 429\n") == 0, "tunnel open 2 s",
               "the other replica's client "
               "said: %s",
               out);
    CU_ASSERT(client_says(client, "closed 1000"));
    pclose(client);
    for (int i = 0; i < 5 && !passed; i++) {
        out = run_client(pair[1].port, "/cap/x", "");
        passed = strstr(out, "closed 1000") != NULL;
        if (!passed)
            sleep_ms(50);
    }
    check_case(passed, "tunnel closed", "the other replica's client said: %s", out);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(stop_sluice(&pair[i], 5000), 0);
        CU_ASSERT_FATAL(start_sluice(&pair[i], shared_cap_config, ws.port, redis.port, "30s") == 0);
    }
    out = run_client(pair[0].port, "/cap/x", "");
    check_case(strstr(out, "closed 1000") != NULL, "30 s leases", "the first client said: %s", out);
    out = run_client(pair[1].port, "/cap/x", "");
    check_case(strstr(out, "closed 1000") != NULL, "30 s leases",
               "a closed tunnel's slot was not given back; the next client said: %s", out);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(stop_sluice(&pair[i], 5000), 0);
    stop_redis(&redis);
}

static void test_refusal_passed_on(void)
{
    static const char request[] = "GET /deny HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
                                  "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    char answer[4096];
    bool closed;
    int status =
        raw_session(gw.port, request, strlen(request), answer, sizeof answer, 3000, &closed);

    CU_ASSERT_EQUAL(status, 403);
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "\r\nContent-Type: text/plain\r\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "\r\n\r\ndenied\n"));
    CU_ASSERT_PTR_NULL(strstr(answer, "Upgrade:"));
    CU_ASSERT_FALSE(closed); /* an answer like any other: the connection stays */
}

/* HTTP/1.0 has no upgrade: the request goes as a plain one, its Upgrade dropped, and the
 * WebSocket server answers that it wants one (426). */
static void test_http10_is_no_upgrade(void)
{
    static const char request[] = "GET /chat HTTP/1.0\r\nHost: t\r\nConnection: Upgrade\r\n"
                                  "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    char answer[4096];
    bool closed;
    int status =
        raw_session(gw.port, request, strlen(request), answer, sizeof answer, 3000, &closed);

    check_case(status == 426, "an HTTP/1.0 upgrade", "the client got %.80s", answer);
    CU_ASSERT_PTR_NULL(strstr(answer, " 101 "));
}

static void test_bytes_before_the_switch(void)
{
    /* A client that speaks before it has the 101: its bytes would reach the upstream unread. */
    static const char request[] = "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
                                  "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                                  "GET /admin HTTP/1.1\r\nHost: t\r\n";
    char answer[4096];
    bool closed;
    int status =
        raw_session(gw.port, request, strlen(request), answer, sizeof answer, 3000, &closed);

    check_case(status == 400, "bytes before the 101", "the client got %.60s", answer);
    /* No 101 status line (a bare "101" can stand in the random request id). */
    CU_ASSERT_PTR_NULL(strstr(answer, "HTTP/1.1 101"));
    CU_ASSERT(closed);
}

static void test_idle_tunnel_closed(void)
{
    FILE *client = start_client(gw.port, "/idle/x", "--idle 2.5");
    double open;

    CU_ASSERT_FATAL(client != NULL);
    sleep_ms(700);
    open = metric_now(&gw, "sluice_tunnels_open{route=\"idle\"}");
    check_case(open == 1, "idle tunnel", "sluice_tunnels_open %g while it was open", open);
    /* After 1 s without a byte the tunnel is closed under the client. */
    CU_ASSERT_STRING_EQUAL(client_output(client), "dropped\n");
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_tunnels_open{route=\"idle\"}"), 0);
}

static void test_h2c_is_no_tunnel(void)
{
    static const char request[] = "GET /plain/echo HTTP/1.1\r\nHost: t\r\n"
                                  "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                                  "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
    static const char h2c_config[] =
        "server: {listen: \"127.0.0.1:0\"}\nroutes:\n  - name: r\n    match: {path_prefix: /}\n"
        "    upstream: \"http://127.0.0.1:1\"\n    upgrades: [websocket, h2c]\n";
    char answer[4096], out[2048], path[] = "/tmp/sluice-h2c-XXXXXX";
    bool closed;
    int fd, status = raw_session(gw.port, request, strlen(request), answer, sizeof answer, 3000,
                                 &closed);

    /* Forwarded as a plain request: the upstream saw neither Upgrade nor HTTP2-Settings. */
    CU_ASSERT_EQUAL(status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(answer, "target /echo\n"));
    CU_ASSERT_PTR_NULL(strstr(answer, "Upgrade"));
    CU_ASSERT_PTR_NULL(strstr(answer, "HTTP2-Settings"));
    /* And no route may list it. */
    fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, h2c_config, strlen(h2c_config)), (ssize_t)strlen(h2c_config));
    close(fd);
    snprintf(answer, sizeof answer, "--check -c %s", path);
    CU_ASSERT_EQUAL(run_sluice(answer, out, sizeof out), 1);
    check_case(strstr(out, ":6:") != NULL && strstr(out, "h2c is refused") != NULL,
               "upgrades: [h2c]", "sluice --check said: %s", out);
    unlink(path);
}

/* Open tunnels are connections: at max_connections the next client is turned away. */
static void test_tunnels_count_as_connections(void)
{
    struct proc capped;
    FILE *held[2];
    const char *out;

    CU_ASSERT_FATAL(start_sluice(&capped,
                                 "server: {listen: \"127.0.0.1:0\", max_connections: 2}\n"
                                 "routes:\n  - name: ws\n    match: {path_prefix: /}\n"
                                 "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                 ws.port) == 0);
    for (int i = 0; i < 2; i++) {
        held[i] = start_client(capped.port, "/held", "--hold 2");
        CU_ASSERT_FATAL(held[i] != NULL);
        CU_ASSERT(client_says(held[i], "holding"));
    }
    out = run_client(capped.port, "/third", "");
    check_case(strcmp(out, "dropped\n") == 0, "a third connection", "the client said: %s", out);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT(client_says(held[i], "closed 1000"));
        pclose(held[i]);
    }
    CU_ASSERT_EQUAL(stop_sluice(&capped, 5000), 0);
}

static void test_drain_closes_tunnels(void)
{
    struct proc draining;
    FILE *client;
    double started;
    int status;

    CU_ASSERT_FATAL(start_sluice(&draining,
                                 "server: {listen: \"127.0.0.1:0\", drain_timeout: 1s}\nroutes:\n"
                                 "  - name: ws\n    match: {path_prefix: /}\n"
                                 "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                 ws.port) == 0);
    client = start_client(draining.port, "/long", "--hold 20");
    CU_ASSERT_FATAL(client != NULL);
    CU_ASSERT(client_says(client, "holding"));
    started = seconds_now();
    status = stop_sluice(&draining, 5000);
    check_case(status == 0, "drain with a tunnel open", "exit status %d after %.1f s", status,
               seconds_now() - started);
    CU_ASSERT(seconds_now() - started < 4);
    CU_ASSERT_STRING_EQUAL(client_output(client), "dropped\n");
}

/* A wss upstream: libcurl makes the TLS connection, and the tunnel carries the bytes through
 * it; with tls_verify on, its self-signed certificate is refused. */
static void test_tls_upstream(void)
{
    struct proc tls, via;
    const char *out;
    char key[64], cert[64];

    CU_ASSERT_EQUAL_FATAL(make_self_signed("ws", key, cert), 0);
    CU_ASSERT_EQUAL_FATAL(start_ws_server(&tls, cert, key), 0);
    CU_ASSERT_FATAL(
        start_sluice(&via,
                     "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                     "  - name: checked\n    match: {path_prefix: /checked/}\n"
                     "    upstream: \"https://127.0.0.1:%1$u\"\n"
                     "  - name: unchecked\n    match: {path_prefix: /}\n"
                     "    upstream: \"https://127.0.0.1:%1$u\"\n    tls_verify: false\n",
                     tls.port) == 0);
    out = run_client(via.port, "/x", "");
    check_case(strcmp(out, "text ok\nbinary ok\nclosed 1000\n") == 0, "a wss upstream",
               "the client said: %s", out);
    out = run_client(via.port, "/checked/x", "");
    check_case(strcmp(out, "status 502\n") == 0, "an unverified certificate", "the client said: %s",
               out);
    CU_ASSERT_EQUAL(stop_sluice(&via, 5000), 0);
    stop_ws_server(&tls);
    unlink(key);
    unlink(cert);
}

/* --- canned answers ------------------------------------------------------------------------ */

static void test_hostile_answers(void)
{
    static const struct {
        const char *label, *answer;
        int status;       /* what the client gets */
        const char *body; /* in its answer, or NULL */
        bool closed;      /* its connection closed after */
    } cases[] = {
        {"101 to another protocol",
         "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 502,
         "(invalid)", false},
        {"101 without Upgrade", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n",
         502, "(invalid)", false},
        {"a folded field",
         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n X-Fold: a\r\n\r\n", 502,
         "(invalid)", false},
        {"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 502, "(invalid)", false},
        {"space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", 502,
         "(invalid)", false},
        {"Content-Length beside chunked",
         "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n0\r\n\r\n",
         502, "(invalid)", false},
        {"a chunk size 0x5",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 502,
         "(invalid)", false},
        {"a chunked refusal, passed on",
         "HTTP/1.1 426 Upgrade Required\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n0\r\n\r\n",
         426, "\r\n\r\nhello", false},
        {"a refusal ended by the close", "HTTP/1.1 403 Forbidden\r\n\r\nno entry", 403,
         "\r\n\r\nno entry", false},
        {"101 without Connection: upgrade",
         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 502, "(invalid)", false},
        {"101 with two Upgrade fields",
         "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
         "Upgrade: h2c\r\n\r\n",
         502, "(invalid)", false},
        {"101 from HTTP/1.0",
         "HTTP/1.0 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
         502, "(invalid)", false},
        {"a control character in the reason",
         "HTTP/1.1 101 Switching\x01\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 502,
         "(invalid)", false},
        {"1xx without end",
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
         "HTTP/1.1 100 Continue\r\n\r\n",
         502, "(invalid)", false},
        {"101 with early bytes",
         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
         "EARLY",
         101, "\r\n\r\nEARLY", true},
    };
    static const char request[] = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
                                  "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct canned up;
        struct proc via;
        char answer[4096];
        bool closed = false;
        int status;

        CU_ASSERT_FATAL(start_canned(&up, cases[i].answer) == 0);
        CU_ASSERT_FATAL(start_sluice(&via,
                                     "server: {listen: \"127.0.0.1:0\"}\nroutes:\n  - name: r\n"
                                     "    match: {path_prefix: /}\n"
                                     "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                     up.port) == 0);
        status =
            raw_session(via.port, request, strlen(request), answer, sizeof answer, 3000, &closed);
        check_case(status == cases[i].status, cases[i].label, "status %d; the client got %.200s",
                   status, answer);
        check_case(strstr(answer, cases[i].body) != NULL, cases[i].label,
                   "no \"%s\" in what the client got: %.200s", cases[i].body, answer);
        check_case(closed == cases[i].closed, cases[i].label, "the client's connection %s",
                   closed ? "closed" : "stayed open");
        /* A 101 names the upgrade once, in one Connection field (RFC 9110 7.6.1, 7.8). */
        if (status == 101)
            check_case(strstr(answer, "\r\nConnection: Upgrade\r\n") != NULL &&
                           strstr(strstr(answer, "\r\nConnection:") + 1, "\r\nConnection:") ==
                               NULL &&
                           strstr(answer, "\r\nUpgrade: websocket\r\n") != NULL,
                       cases[i].label, "the 101's head: %.200s", answer);
        /* The upstream got the upgrade request: the route's fields, and the two of this hop. */
        check_case(strncmp(up.received, "GET /x HTTP/1.1\r\n", 17) == 0 &&
                       strstr(up.received, "\r\nConnection: Upgrade\r\n") != NULL &&
                       strstr(up.received, "\r\nUpgrade: websocket\r\n") != NULL &&
                       strstr(up.received, "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
                   cases[i].label, "the upstream received %.300s", up.received);
        CU_ASSERT_EQUAL(stop_sluice(&via, 5000), 0);
        stop_canned(&up);
    }
}

void register_tunnels_tests(void)
{
    CU_pSuite s = add_suite_with("tunnels", init, clean);

    add_test(s, "messages both ways, and the closing handshake", test_messages_both_ways);
    add_test(s, "an open tunnel is counted", test_open_tunnel_is_counted);
    add_test(s, "the limit applies at the upgrade", test_limit_applies_at_upgrade);
    add_test(s, "a concurrency slot is held while the tunnel is open",
             test_concurrency_held_while_open);
    add_test(s, "a concurrency slot in Redis is held while the tunnel is open",
             test_shared_slot_held_while_open);
    add_test(s, "an answer other than 101 is passed on", test_refusal_passed_on);
    add_test(s, "bytes before the 101: 400, closed", test_bytes_before_the_switch);
    add_test(s, "HTTP/1.0 has no upgrade", test_http10_is_no_upgrade);
    add_test(s, "an idle tunnel is closed", test_idle_tunnel_closed);
    add_test(s, "Upgrade: h2c is no tunnel", test_h2c_is_no_tunnel);
    add_test(s, "a wss upstream, verified and not", test_tls_upstream);
    add_test(s, "open tunnels count toward max_connections", test_tunnels_count_as_connections);
    add_test(s, "a drain closes tunnels at drain_timeout", test_drain_closes_tunnels);
    add_test(s, "hostile and broken answers to an upgrade", test_hostile_answers);
}
