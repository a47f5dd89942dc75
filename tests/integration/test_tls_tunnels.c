/* The end of a tunnel whose client came over TLS (gateway/upstream/tunnel.h, front/wire.h):
 * whichever way the client leaves, the upstream hears of it at once and the client's slot
 * comes back.
 *
 * A GnuTLS client of this file's opens upgrades through server.tls (max_connections: 4) to a
 * peer of this file's that answers 101 and keeps every byte it then receives and how its
 * connection ended. The client sends a message on each, the peer gets it, and the client
 * goes away in one of three forms: a plain FIN (no close_notify), a TLS close_notify, or a
 * reset, the first two right after a last few bytes. For each form, with four tunnels (the
 * whole cap): the peer received each message and those last bytes, byte for byte, and then
 * an end of stream (a FIN, not a reset) within a few seconds (the tunnels' idle timeout is
 * an hour), sluice_tunnels_open and sluice_connections_active come back to 0, and a new HTTPS
 * client is served. A fourth case: a client that goes silent without any packet keeps its
 * tunnel until the route's tunnel_idle_timeout (1 s here), and no longer. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define CAP   4 /* server.max_connections */
#define PEERS 16

/* --- the upstream: answers an upgrade with 101, then records ----------------------------- */

enum peer_end { STILL_OPEN, ENDED, FAILED }; /* FAILED: a reset or another error */

struct peer_conn {
    int fd;
    bool switched; /* the 101 went out */
    char got[512]; /* after the head: what the tunnel brought */
    size_t len;
    enum peer_end end;
};

static struct {
    int listen_fd;
    unsigned port;
    pthread_t thread;
    pthread_mutex_t lock;
    bool stop;
    struct peer_conn conns[PEERS];
    int n;
} peer = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char switched[] =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";

/* Reads what came on `c`; under peer.lock. */
static void peer_read(struct peer_conn *c)
{
    char buf[512];
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    size_t room = sizeof c->got - 1 - c->len, take = n > 0 && (size_t)n < room ? (size_t)n : room;
    char *end;

    if (n <= 0) {
        c->end = n == 0 ? ENDED : FAILED;
        close(c->fd);
        c->fd = -1;
        return;
    }
    memcpy(c->got + c->len, buf, take);
    c->len += take;
    c->got[c->len] = '\0';
    end = c->switched ? NULL : strstr(c->got, "\r\n\r\n");
    if (end != NULL) { /* the upgrade request: answered, and forgotten */
        c->len -= (size_t)(end + 4 - c->got);
        memmove(c->got, end + 4, c->len + 1);
        c->switched = send(c->fd, switched, sizeof switched - 1, MSG_NOSIGNAL) > 0;
    }
}

static void *peer_run(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[PEERS + 1] = {{.fd = peer.listen_fd, .events = POLLIN}};
        int n;

        pthread_mutex_lock(&peer.lock);
        if (peer.stop) {
            pthread_mutex_unlock(&peer.lock);
            return NULL;
        }
        n = peer.n;
        for (int i = 0; i < n; i++)
            p[i + 1] = (struct pollfd){.fd = peer.conns[i].fd, .events = POLLIN};
        pthread_mutex_unlock(&peer.lock);
        if (poll(p, (nfds_t)n + 1, 50) <= 0)
            continue;
        pthread_mutex_lock(&peer.lock);
        for (int i = 0; i < n; i++)
            if (p[i + 1].revents != 0 && peer.conns[i].fd >= 0)
                peer_read(&peer.conns[i]);
        if ((p[0].revents & POLLIN) && peer.n < PEERS) {
            int fd = accept(peer.listen_fd, NULL, NULL);

            if (fd >= 0)
                peer.conns[peer.n++] = (struct peer_conn){.fd = fd};
        }
        pthread_mutex_unlock(&peer.lock);
    }
}

static int peer_start(void)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;

    peer.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (peer.listen_fd < 0 || bind(peer.listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(peer.listen_fd, 16) != 0 ||
        getsockname(peer.listen_fd, (struct sockaddr *)&addr, &len) != 0)
        return -1;
    peer.port = ntohs(addr.sin_port);
    return pthread_create(&peer.thread, NULL, peer_run, NULL) == 0 ? 0 : -1;
}

/* Forgets the connections of the case before (closing any still open). */
static void peer_reset(void)
{
    pthread_mutex_lock(&peer.lock);
    for (int i = 0; i < peer.n; i++)
        if (peer.conns[i].fd >= 0)
            close(peer.conns[i].fd);
    peer.n = 0;
    pthread_mutex_unlock(&peer.lock);
}

static void peer_stop(void)
{
    pthread_mutex_lock(&peer.lock);
    peer.stop = true;
    pthread_mutex_unlock(&peer.lock);
    pthread_join(peer.thread, NULL);
    peer_reset();
    close(peer.listen_fd);
}

/* Whether the peer's connection carrying `message` has ended (*end) and what it received,
 * copied into `got`; false when no connection received it. */
static bool peer_conn_of(const char *message, enum peer_end *end, char *got, size_t cap)
{
    bool found = false;

    pthread_mutex_lock(&peer.lock);
    for (int i = 0; i < peer.n && !found; i++)
        if (strstr(peer.conns[i].got, message) != NULL) {
            found = true;
            *end = peer.conns[i].end;
            snprintf(got, cap, "%s", peer.conns[i].got);
        }
    pthread_mutex_unlock(&peer.lock);
    return found;
}

/* Waits up to `timeout_ms` for the connection that received `message` to end. */
static enum peer_end peer_wait_end(const char *message, int timeout_ms, char *got, size_t cap)
{
    enum peer_end end = STILL_OPEN;

    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        if (peer_conn_of(message, &end, got, cap) && end != STILL_OPEN)
            break;
        sleep_ms(20);
    }
    return end;
}

/* --- the TLS client ------------------------------------------------------------------------- */

/* Reads until the head of an answer is whole (or 5 s pass); its status, or 0. */
static int client_read_head(struct tls_client *c)
{
    char head[2048];
    size_t got = 0;
    int status = 0;

    while (got < sizeof head - 1 && strstr(head, "\r\n\r\n") == NULL) {
        struct pollfd p = {c->fd, POLLIN, 0};
        ssize_t n;

        head[got] = '\0';
        if (gnutls_record_check_pending(c->session) == 0 && poll(&p, 1, 5000) <= 0)
            break;
        n = gnutls_record_recv(c->session, head + got, sizeof head - 1 - got);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        head[got] = '\0';
    }
    head[got] = '\0';
    sscanf(head, "HTTP/1.1 %d", &status);
    return status;
}

/* Connects to sluice's TLS listener and sends `request`; the status of the answer's head, 0
 * when none came. */
static int client_open(struct tls_client *c, unsigned port, const char *request)
{
    if (tls_client_open(c, port, NULL, 5000) != 0 ||
        gnutls_record_send(c->session, request, strlen(request)) < 0)
        return 0;
    return client_read_head(c);
}

static const char upgrade_request[] = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                      "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n";

/* An open tunnel: the 101 came, `message` was sent through it and reached the peer. */
static bool open_tunnel(struct tls_client *c, unsigned port, const char *message)
{
    enum peer_end end;
    char got[512];

    if (client_open(c, port, upgrade_request) != 101 ||
        gnutls_record_send(c->session, message, strlen(message)) < 0)
        return false;
    for (int waited = 0; waited < 5000; waited += 20) {
        if (peer_conn_of(message, &end, got, sizeof got))
            return true;
        sleep_ms(20);
    }
    return false;
}

enum leave { FIN, CLOSE_NOTIFY, RESET };

/* The client goes away in the form `how`; its socket stays open (but for RESET) until
 * tls_client_close(), so that what the gateway sees is that form alone. */
static void client_leave(struct tls_client *c, enum leave how)
{
    if (how == CLOSE_NOTIFY) {
        gnutls_bye(c->session, GNUTLS_SHUT_WR);
    } else if (how == FIN) {
        shutdown(c->fd, SHUT_WR);
    } else {
        struct linger abort_it = {.l_onoff = 1, .l_linger = 0};

        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &abort_it, sizeof abort_it);
        close(c->fd);
        c->fd = -1;
    }
}

/* --- the tests ----------------------------------------------------------------------------- */

static struct proc gw;
static char key[64], cert[64];

static const char config[] =
    "server:\n"
    "  listen: \"127.0.0.1:0\"\n"
    "  admin_listen: \"127.0.0.1:0\"\n"
    "  max_connections: 4\n"
    "  tls: {cert: %3$s, key: %4$s}\n"
    "routes:\n"
    "  - name: ws\n    match: {path_prefix: /ws}\n    upstream: \"http://127.0.0.1:%2$u\"\n"
    "  - name: silent\n    match: {path_prefix: /silent}\n"
    "    upstream: \"http://127.0.0.1:%2$u\"\n    tunnel_idle_timeout: 1s\n"
    "  - name: plain\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

static int init(void)
{
    if (make_self_signed("tls-tunnels", key, cert) != 0 || peer_start() != 0)
        return -1;
    return start_sluice(&gw, config, upstream.port, peer.port, cert, key);
}

static int clean(void)
{
    int rc = stop_sluice(&gw, 5000) == 0 ? 0 : -1;

    peer_stop();
    unlink(key);
    unlink(cert);
    return rc;
}

/* Waits up to 5 s for `series` to read `want`; its last value. */
static double wait_metric(const char *series, double want)
{
    double value = metric_now(&gw, series);

    for (int waited = 0; value != want && waited < 5000; waited += 50) {
        sleep_ms(50);
        value = metric_now(&gw, series);
    }
    return value;
}

/* The cap is free again: a new HTTPS client is served. */
static int served_after(void)
{
    struct tls_client c;
    int status = client_open(&c, gw.port,
                             "GET /after HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Connection: close\r\n\r\n");

    tls_client_close(&c);
    return status;
}

static void check_leaving(enum leave how, const char *label)
{
    struct tls_client clients[CAP];
    char message[CAP][32], want[CAP][160], got[512];
    double left;

    peer_reset();
    for (int i = 0; i < CAP; i++) {
        snprintf(message[i], sizeof message[i], "%s message %d", label, i);
        check_case(open_tunnel(&clients[i], gw.port, message[i]), label, "tunnel %d did not open",
                   i);
    }
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_tunnels_open{route=\"ws\"}"), CAP);
    left = seconds_now();
    for (int i = 0; i < CAP; i++) {
        /* Bytes sent right before the end still reach the upstream, before its end; a reset
         * may discard what it follows, in the gateway's kernel, so it sends none. */
        snprintf(want[i], sizeof want[i], "%s%s", message[i], how == RESET ? "" : ", last");
        if (how != RESET)
            CU_ASSERT_EQUAL(gnutls_record_send(clients[i].session, ", last", 6), 6);
        client_leave(&clients[i], how);
    }
    for (int i = 0; i < CAP; i++) {
        enum peer_end end = peer_wait_end(message[i], 5000, got, sizeof got);

        /* The bytes sent, nothing else, then the end of the stream: the tunnel's half close. */
        check_case(end == ENDED && strcmp(got, want[i]) == 0, label,
                   "tunnel %d: the upstream saw %s after \"%s\"", i,
                   end == ENDED    ? "the end"
                   : end == FAILED ? "a reset"
                                   : "no end",
                   got);
    }
    check_case(seconds_now() - left < 3.0, label, "the upstream heard of it after %.1f s",
               seconds_now() - left);
    check_case(wait_metric("sluice_tunnels_open{route=\"ws\"}", 0) == 0, label,
               "sluice_tunnels_open stays %g",
               metric_now(&gw, "sluice_tunnels_open{route=\"ws\"}"));
    check_case(wait_metric("sluice_connections_active", 0) == 0, label,
               "sluice_connections_active stays %g", metric_now(&gw, "sluice_connections_active"));
    check_case(served_after() == 200, label, "a new HTTPS client at the cap was not served");
    for (int i = 0; i < CAP; i++)
        tls_client_close(&clients[i]);
}

static void test_fin(void)
{
    check_leaving(FIN, "FIN");
}

static void test_close_notify(void)
{
    check_leaving(CLOSE_NOTIFY, "close_notify");
}

static void test_reset(void)
{
    check_leaving(RESET, "reset");
}

/* A client that sends nothing more, not even a FIN: its tunnel lasts until the route's
 * tunnel_idle_timeout (1 s), which then closes it toward the upstream too. */
static void test_silent_client(void)
{
    struct tls_client c;
    enum peer_end end;
    char got[512];
    double opened;

    peer_reset();
    CU_ASSERT_FATAL(client_open(&c, gw.port,
                                "GET /silent HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n") == 101);
    CU_ASSERT(gnutls_record_send(c.session, "silent one", 10) == 10);
    opened = seconds_now();
    end = peer_wait_end("silent one", 8000, got, sizeof got);
    check_case(end == ENDED, "silent", "the upstream saw %s",
               end == FAILED       ? "a reset"
               : end == STILL_OPEN ? "no end"
                                   : "the end");
    /* Not before its idle timeout: the end is the timeout's, not the client's. */
    check_case(seconds_now() - opened >= 0.9, "silent", "closed after %.2f s",
               seconds_now() - opened);
    CU_ASSERT_EQUAL(wait_metric("sluice_tunnels_open{route=\"silent\"}", 0), 0);
    tls_client_close(&c);
}

void register_tls_tunnels_tests(void)
{
    CU_pSuite suite = add_suite_with("tls_tunnels", init, clean);

    add_test(suite, "a TLS client's FIN ends its tunnel", test_fin);
    add_test(suite, "a TLS client's close_notify ends its tunnel", test_close_notify);
    add_test(suite, "a TLS client's reset ends its tunnel", test_reset);
    add_test(suite, "a silent TLS client's tunnel ends at its idle timeout", test_silent_client);
}
