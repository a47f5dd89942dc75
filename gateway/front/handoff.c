/* The connections the PROXY protocol acceptor (listener.h) hands over once their header is
 * read: in thread_per_connection straight to the one daemon, in event mode to the loops in
 * turn, each of which adds them to its own daemon on its own thread. Design in server.h. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/front/listener.h"
#include "gateway/front/loop.h"
#include "gateway/front/server_private.h"
#include "gateway/ops/metrics.h"

/* A connection the PROXY protocol acceptor handed to an event loop. */
struct handoff {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct handoff *next;
};

/* On the acceptor's thread: a connection whose header was read goes to a daemon, with the
 * address the header gave. libmicrohttpd closes `fd` when it cannot take it. */
static void hand_connection(void *cls, int fd, const struct sockaddr *addr, socklen_t len)
{
    struct gw_server *s = cls;
    struct front *f;
    struct handoff *h;

    if (s->fronts[0].loop == NULL) { /* thread_per_connection: safe from any thread */
        MHD_add_connection(s->fronts[0].daemon, fd, addr, len);
        return;
    }
    f = &s->fronts[s->next_front++ % s->n_fronts];
    h = malloc(sizeof *h);
    if (h == NULL) {
        close(fd);
        return;
    }
    h->fd = fd;
    memcpy(&h->addr, addr, len);
    h->addr_len = len;
    pthread_mutex_lock(&f->handoff_lock);
    h->next = f->handoffs;
    f->handoffs = h;
    pthread_mutex_unlock(&f->handoff_lock);
    gw_loop_wake(f->loop);
}

static void count_proxy_refusal(void *cls)
{
    gw_metrics_count_proxy_refused(((struct gw_server *)cls)->metrics);
}

/* The handed-over connections waiting for `f`, oldest first, taken off its list. */
static struct handoff *take_handoffs(struct front *f)
{
    struct handoff *newest_first, *oldest_first = NULL;

    pthread_mutex_lock(&f->handoff_lock);
    newest_first = f->handoffs;
    f->handoffs = NULL;
    pthread_mutex_unlock(&f->handoff_lock);
    while (newest_first != NULL) {
        struct handoff *h = newest_first;

        newest_first = h->next;
        h->next = oldest_first;
        oldest_first = h;
    }
    return oldest_first;
}

void gw_handoff_take_in(struct front *f)
{
    for (struct handoff *h = take_handoffs(f), *next; h != NULL; h = next) {
        next = h->next;
        MHD_add_connection(f->daemon, h->fd, (const struct sockaddr *)&h->addr, h->addr_len);
        free(h);
    }
}

void gw_handoff_drop(struct front *f)
{
    for (struct handoff *h = take_handoffs(f), *next; h != NULL; h = next) {
        next = h->next;
        close(h->fd);
        free(h);
    }
}

int gw_handoff_start_acceptor(struct gw_server *s, char err[GW_ERR_LEN])
{
    int fd = gw_listen_socket(&s->fixed.listen, s->fixed.listen.port, 0, err);

    if (fd < 0)
        return -1;
    gw_socket_address(fd, s->address, &s->port);
    s->acceptor = gw_acceptor_start(fd, s->fixed.proxy_protocol, &s->fixed.proxy_protocol_from,
                                    s->fixed.client_timeout_ns, s->fixed.max_connections,
                                    hand_connection, count_proxy_refusal, s);
    if (s->acceptor == NULL) {
        snprintf(err, GW_ERR_LEN, "cannot start the PROXY protocol acceptor");
        return -1;
    }
    return 0;
}
