/* Listening sockets and the PROXY protocol acceptor; design in listener.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "gateway/common/log.h"
#include "gateway/front/listener.h"
#include "gateway/front/proxy_header.h"
#include "gateway/identity/keys.h"
#include "limiter/limiter.h"

/* Why bind() failed, in words an operator can act on. */
static const char *bind_failure(int error)
{
    switch (error) {
    case EADDRINUSE:
        return "the address is in use (another process listens on that port)";
    case EACCES:
        return "permission denied (a port below 1024 needs root or CAP_NET_BIND_SERVICE)";
    case EADDRNOTAVAIL:
        return "no interface of this machine has that address";
    default:
        return strerror(error);
    }
}

int gw_listen_socket(const struct config_endpoint *where, uint16_t port, int share_port,
                     char err[GW_LISTENER_ERR_LEN])
{
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *addr = NULL;
    const int on = 1;
    char service[8];
    int fd = -1, rc;

    snprintf(service, sizeof service, "%u", port);
    rc = getaddrinfo(where->host, service, &hints, &addr);
    if (rc != 0 || addr == NULL) {
        snprintf(err, GW_LISTENER_ERR_LEN, "cannot listen on %.200s:%u: %s", where->host,
                 where->port, rc != 0 ? gai_strerror(rc) : "no address");
        goto out;
    }
    fd = socket(addr->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        (share_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) ||
        (addr->ai_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0)) {
        snprintf(err, GW_LISTENER_ERR_LEN, "cannot make a socket for %.200s:%u: %s", where->host,
                 where->port, strerror(errno));
        goto fail;
    }
    if (bind(fd, addr->ai_addr, addr->ai_addrlen) != 0) {
        snprintf(err, GW_LISTENER_ERR_LEN, "cannot listen on %.200s:%u: %s", where->host,
                 where->port, bind_failure(errno));
        goto fail;
    }
    if (listen(fd, SOMAXCONN) != 0) {
        snprintf(err, GW_LISTENER_ERR_LEN, "cannot listen on %.200s:%u: %s", where->host,
                 where->port, strerror(errno));
        goto fail;
    }
    goto out;
fail:
    if (fd >= 0)
        close(fd);
    fd = -1;
out:
    if (addr != NULL)
        freeaddrinfo(addr);
    return fd;
}

/* "1.2.3.4:80" or "[::1]:80" for `sa`. */
static const char *format_address(const struct sockaddr *sa, char out[GW_ADDRESS_LEN])
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        port = ntohs(sin->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        port = ntohs(sin6->sin6_port);
    }
    snprintf(out, GW_ADDRESS_LEN, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
    return out;
}

const char *gw_socket_address(int fd, char out[GW_ADDRESS_LEN], uint16_t *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = sizeof ss;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        ss.ss_family = AF_UNSPEC;
    format_address((const struct sockaddr *)&ss, out);
    if (port != NULL)
        *port = ss.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                : ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : 0;
    return out;
}

/* --- the acceptor --------------------------------------------------------------------- */

/* A connection whose header is awaited. Kept oldest first: with one timeout for all, that is
 * deadline order, so expiry looks at the head alone. */
struct pending {
    int fd;
    int64_t deadline_ns;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    struct pending *prev, *next;
};

struct gw_acceptor {
    int listen_fd, epoll_fd, stop_fd;
    unsigned versions; /* GW_PROXY_HEADER_V1 | _V2 */
    const struct config_cidrs *from;
    int64_t timeout_ns;
    uint32_t max_pending, n_pending;
    struct pending *oldest, *newest;
    gw_acceptor_hand *hand;
    gw_acceptor_refused *refused;
    void *cls;
    pthread_t thread;
    bool running;
};

static void log_refusal(const struct sockaddr *peer, const char *why)
{
    static struct gw_log_limit refusals;
    char where[GW_ADDRESS_LEN];
    uint64_t more;

    if (gw_log_limit_pass(&refusals, limiter_now_ns(), 1000000000, &more))
        gw_warn("proxy_protocol: closed a connection from %s: %s (and %llu more since the last "
                "such line; at most one a second)",
                format_address(peer, where), why, (unsigned long long)more);
}

static void unlink_pending(struct gw_acceptor *a, struct pending *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        a->oldest = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    else
        a->newest = p->prev;
    a->n_pending--;
}

static void drop(struct gw_acceptor *a, struct pending *p, const char *why)
{
    log_refusal((const struct sockaddr *)&p->peer, why);
    a->refused(a->cls);
    unlink_pending(a, p);
    close(p->fd);
    free(p);
}

/* Peeks at what has arrived; once the header is whole, consumes exactly it and hands the
 * connection over. `hung_up`: the peer will send nothing more. */
static void read_header(struct gw_acceptor *a, struct pending *p, bool hung_up)
{
    unsigned char buf[GW_PROXY_HEADER_MAX];
    struct gw_proxy_header header;
    enum gw_proxy_header_step step;
    ssize_t n = recv(p->fd, buf, sizeof buf, MSG_PEEK);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && !hung_up)
        return;
    if (n <= 0) {
        drop(a, p, "it closed before sending a whole PROXY protocol header");
        return;
    }
    step = gw_proxy_header_read(buf, (size_t)n, a->versions, &header);
    if (step == GW_PROXY_HEADER_MORE && !hung_up)
        return;
    if (step != GW_PROXY_HEADER_DONE) {
        drop(a, p,
             step == GW_PROXY_HEADER_MORE ? "it closed before sending a whole PROXY protocol header"
                                          : header.why);
        return;
    }
    /* What was peeked is there to be read: exactly the header, nothing of what follows. */
    if (recv(p->fd, buf, header.length, 0) != (ssize_t)header.length) {
        drop(a, p, "its PROXY protocol header could not be read again");
        return;
    }
    epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
    unlink_pending(a, p);
    if (header.has_source)
        a->hand(a->cls, p->fd, (const struct sockaddr *)&header.source, header.source_len);
    else
        a->hand(a->cls, p->fd, (const struct sockaddr *)&p->peer, p->peer_len);
    free(p);
}

static bool peer_allowed(const struct gw_acceptor *a, const struct sockaddr *peer)
{
    struct gw_addr addr;

    return gw_addr_from_sockaddr(peer, &addr) == 0 && gw_cidrs_contain(a->from, &addr);
}

/* Takes one connection off the listening socket. false when there was none (or accept()
 * failed, then after a pause, so that a full fd table does not spin this thread). */
static bool accept_one(struct gw_acceptor *a)
{
    static struct gw_log_limit failures;
    const struct timespec pause = {0, 100 * 1000000};
    struct pending *p = calloc(1, sizeof *p);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};
    uint64_t more;

    if (p == NULL)
        return false;
    p->peer_len = sizeof p->peer;
    p->fd = accept4(a->listen_fd, (struct sockaddr *)&p->peer, &p->peer_len,
                    SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (p->fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
            if (gw_log_limit_pass(&failures, limiter_now_ns(), 1000000000, &more))
                gw_warn("proxy_protocol: accept failed: %s (and %llu more since the last such "
                        "line; at most one a second)",
                        strerror(errno), (unsigned long long)more);
            nanosleep(&pause, NULL);
        }
        free(p);
        return false;
    }
    p->deadline_ns = limiter_now_ns() + a->timeout_ns;
    p->prev = a->newest;
    if (a->newest != NULL)
        a->newest->next = p;
    else
        a->oldest = p;
    a->newest = p;
    a->n_pending++;
    ev.data.ptr = p;
    if (!peer_allowed(a, (const struct sockaddr *)&p->peer))
        drop(a, p, "its address is not in server.proxy_protocol_from");
    else if (a->n_pending > a->max_pending)
        drop(a, p, "max_connections headers are already awaited");
    else if (epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, p->fd, &ev) != 0)
        drop(a, p, "out of memory");
    else
        read_header(a, p, false); /* the header may have come with the handshake's ACK */
    return true;
}

static void *acceptor_main(void *arg)
{
    struct gw_acceptor *a = arg;
    struct epoll_event events[64];

    for (;;) {
        int64_t now = limiter_now_ns();
        int timeout_ms = -1, n;

        while (a->oldest != NULL && a->oldest->deadline_ns <= now)
            drop(a, a->oldest, "no whole PROXY protocol header within server.client_timeout");
        if (a->oldest != NULL)
            timeout_ms = (int)((a->oldest->deadline_ns - now) / 1000000) + 1;
        n = epoll_wait(a->epoll_fd, events, 64, timeout_ms);
        for (int i = 0; i < n; i++) {
            void *which = events[i].data.ptr;

            if (which == &a->stop_fd)
                return NULL;
            if (which == &a->listen_fd) {
                for (int taken = 0; taken < 64 && accept_one(a); taken++)
                    ;
                continue;
            }
            read_header(a, which, (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
        }
    }
}

struct gw_acceptor *gw_acceptor_start(int listen_fd, enum config_proxy_protocol mode,
                                      const struct config_cidrs *from, int64_t timeout_ns,
                                      uint32_t max_pending, gw_acceptor_hand *hand,
                                      gw_acceptor_refused *refused, void *cls)
{
    struct gw_acceptor *a = calloc(1, sizeof *a);
    struct epoll_event listen_ev = {.events = EPOLLIN}, stop_ev = {.events = EPOLLIN};

    if (a == NULL) {
        close(listen_fd);
        return NULL;
    }
    a->listen_fd = listen_fd;
    a->versions = mode == CONFIG_PROXY_PROTOCOL_V1   ? GW_PROXY_HEADER_V1
                  : mode == CONFIG_PROXY_PROTOCOL_V2 ? GW_PROXY_HEADER_V2
                                                     : GW_PROXY_HEADER_V1 | GW_PROXY_HEADER_V2;
    a->timeout_ns = timeout_ns;
    a->max_pending = max_pending;
    a->hand = hand;
    a->refused = refused;
    a->cls = cls;
    a->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    a->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->from = from;
    listen_ev.data.ptr = &a->listen_fd;
    stop_ev.data.ptr = &a->stop_fd;
    if (a->epoll_fd < 0 || a->stop_fd < 0 ||
        epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, listen_fd, &listen_ev) != 0 ||
        epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, a->stop_fd, &stop_ev) != 0)
        goto fail;
    if (pthread_create(&a->thread, NULL, acceptor_main, a) != 0)
        goto fail;
    a->running = true;
    return a;
fail:
    gw_acceptor_free(a);
    return NULL;
}

void gw_acceptor_stop(struct gw_acceptor *a)
{
    uint64_t one = 1;

    if (a == NULL || !a->running)
        return;
    if (write(a->stop_fd, &one, sizeof one) == (ssize_t)sizeof one)
        pthread_join(a->thread, NULL);
    a->running = false;
    close(a->listen_fd);
    a->listen_fd = -1;
    while (a->oldest != NULL) {
        struct pending *p = a->oldest;

        unlink_pending(a, p);
        close(p->fd);
        free(p);
    }
}

void gw_acceptor_free(struct gw_acceptor *a)
{
    if (a == NULL)
        return;
    gw_acceptor_stop(a);
    if (a->listen_fd >= 0)
        close(a->listen_fd);
    if (a->epoll_fd >= 0)
        close(a->epoll_fd);
    if (a->stop_fd >= 0)
        close(a->stop_fd);
    free(a);
}
