/* A client daemon: libmicrohttpd's callbacks, which hand each request to request.h, and the
 * fronts (one daemon, or one per event loop) started and stopped. Design in server.h. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/core/runtime.h"
#include "gateway/front/admission.h"
#include "gateway/front/certs.h"
#include "gateway/front/listener.h"
#include "gateway/front/loop.h"
#include "gateway/front/offload.h"
#include "gateway/front/park.h"
#include "gateway/front/request.h"
#include "gateway/front/server_private.h"
#include "gateway/front/sleeper.h"
#include "gateway/front/wire.h"
#include "gateway/ops/metrics.h"
#include "gateway/store/store.h"
#include "gateway/upstream/tunnel.h"
#include "limiter/limiter.h"

/* Connections an event loop's daemon may hold beyond max_connections: those being refused. */
#define REFUSAL_ROOM 256

/* --- proxy daemon callbacks ------------------------------------------------------------ */

static struct watched *watched_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return info ? info->socket_context : NULL;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct front *f = cls;
    struct watched *w = watched_of(c);
    struct gw_request *rq;

    if (w == NULL)
        return NULL; /* not read strictly: on_request drops the connection */
    w->idle_since_ns = 0;
    rq = gw_request_new(gw_front_runtime(f), uri, gw_wire_head(w->wire), &w->memo, w->requests,
                        f->loop, f->server->offload, f->server->sleeper, f->server->tunnels);
    return rq;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct front *f = cls;
    struct watched *w = watched_of(c);
    bool body_piece = *upload_data_size > 0;
    enum MHD_Result ret;

    (void)
        url; /* libmicrohttpd's decoding of the target; the route module reads the target itself */
    if (*req_cls == NULL)
        return MHD_NO; /* no memory for it: drop the connection */
    /* The head came whole in time. From here the body, if any, must keep coming: no pause
     * of the client's longer than client_timeout. The gateway's own waits (for the store, or
     * for the upstream to take more of the body) do not count. */
    if (w != NULL)
        atomic_store_explicit(&w->read_deadline_ns, 0, memory_order_relaxed);
    ret = gw_request_handle(*req_cls, c, method, version, upload_data, upload_data_size);
    if (w != NULL && gw_request_reading_body(*req_cls))
        atomic_store_explicit(&w->read_deadline_ns, limiter_now_ns() + f->server->client_timeout_ns,
                              memory_order_relaxed);
    /* libmicrohttpd's idle timeout would count a wait of this thread's for the upstream as
     * the client's silence: setting the timeout afresh restarts it (a loop's resumption
     * does the same). */
    if (f->loop == NULL && body_piece && ret == MHD_YES) {
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                                  gw_server_client_timeout_s(f->server));
    }
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode why)
{
    struct gw_server *s = ((struct front *)cls)->server;
    struct watched *w = watched_of(c);

    (void)why;
    if (w != NULL) { /* the next request on this connection must come in time, too */
        bool upgraded = *req_cls != NULL && gw_request_upgraded(*req_cls);
        int64_t now = limiter_now_ns();

        w->requests++;
        /* An upgraded connection is a tunnel's now, with an idle timeout of its own. */
        atomic_store_explicit(&w->read_deadline_ns, upgraded ? 0 : now + s->client_timeout_ns,
                              memory_order_relaxed);
        w->idle_since_ns = upgraded ? 0 : now;
    }
    if (*req_cls != NULL)
        gw_request_done(*req_cls);
    *req_cls = NULL;
}

/* libmicrohttpd's memory per connection: one pool holds the request head (read into its
 * first half) and its records of the head's fields, cookies and query arguments (counted in
 * max_header_size: head.h), a copy of the Cookie field (it parses cookies into the pool; the
 * field can be nearly the whole head) and what the client pipelined behind the request:
 * together within twice max_header_size (request_memory(); head.h bounds what is pipelined
 * so). Then the response head it builds, plus bookkeeping. Room for the largest of each, so
 * that a client always gets a status line. libmicrohttpd zeroes the pool after every
 * request, so it is no larger than that. Over TLS the read buffer also has room for a whole
 * record's plaintext beside the largest head, so that the reader never has to leave plaintext
 * inside GnuTLS when it answers less than asked (wire.h). */
static size_t request_memory(uint32_t max_header_size, bool tls)
{
    return 2 * (size_t)max_header_size + (tls ? 2 * (size_t)GW_WIRE_TLS_RECORD : 0);
}

static size_t connection_memory(uint32_t max_header_size, uint32_t max_response_header_size,
                                bool tls)
{
    return request_memory(max_header_size, tls) + max_response_header_size + 4096;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct front *f = cls;
    struct gw_server *s = f->server;
    struct watched *w = *socket_context;
    const union MHD_ConnectionInfo *info, *client, *tls;

    if (code != MHD_CONNECTION_NOTIFY_STARTED) {
        if (w != NULL && gw_wire_parking(w->wire) && gw_conn_park(f, w))
            return;
        if (w != NULL) {
            gw_conn_unwatch(f, w);
            gw_wire_detach(w->wire);
        }
        gw_metrics_connection(s->metrics, -1);
        gw_conn_release(s, w);
        *socket_context = NULL;
        return;
    }
    info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    client = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    tls = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (f->unparking != NULL && info != NULL && f->unparking->fd == info->connect_fd) {
        w = f->unparking; /* back from the park: counted in all along */
        f->unparking = NULL;
        w->idle_since_ns = 0;
        w->requests = 0; /* a new reader counts from 0 */
    } else {
        w = gw_conn_admit(s, client != NULL ? client->client_addr : NULL);
        if (w != NULL)
            atomic_init(&w->read_deadline_ns, limiter_now_ns() + s->client_timeout_ns);
    }
    if (w != NULL && info != NULL)
        w->wire = gw_wire_attach(info->connect_fd, s->fixed.max_header_size,
                                 (uint32_t)request_memory(s->fixed.max_header_size, s->fixed.tls),
                                 tls != NULL ? tls->tls_session : NULL);
    if (w == NULL || w->wire == NULL) {
        /* A connection that cannot be read strictly is not read at all; its NOTIFY_CLOSED
         * then finds no state and counts it out of the gauge. */
        if (info != NULL)
            shutdown(info->connect_fd, SHUT_RDWR);
        gw_conn_release(s, w);
        return;
    }
    if (f->loop != NULL) {
        const union MHD_DaemonInfo *set = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_EPOLL_FD);

        if (set != NULL)
            gw_wire_edge(w->wire, set->epoll_fd, c);
    }
    w->fd = info->connect_fd;
    w->connection = c;
    gw_conn_watch(f, w);
    *socket_context = w;
}

/* --- the fronts started and stopped ----------------------------------------------------- */

/* What the fronts share: the tunnels in both modes, and in event mode the caps across the
 * loops and the threads for upgrades. 0, or -1 with `err` filled. */
static int start_shared(struct gw_server *s, bool event, char err[GW_ERR_LEN])
{
    s->n_fronts = event ? s->fixed.workers : 1;
    s->fronts = calloc(s->n_fronts, sizeof *s->fronts);
    s->tunnels = gw_tunnels_new();
    s->sleeper = gw_sleeper_new();
    if (event) {
        s->admission = gw_admission_new(s->fixed.max_connections, s->fixed.max_connections_per_ip);
        s->offload = gw_offload_new();
    }
    if (s->fronts == NULL || s->tunnels == NULL || s->sleeper == NULL ||
        (event && (s->admission == NULL || s->offload == NULL))) {
        s->n_fronts = 0;
        snprintf(err, GW_ERR_LEN, "out of memory");
        return -1;
    }
    return 0;
}

/* An event loop for `f`, with its park unless over TLS. 0, or -1 with `err` filled. */
static int make_loop(struct front *f, char err[GW_ERR_LEN])
{
    bool tls = f->server->fixed.tls;

    f->loop = gw_loop_new();
    if (f->loop != NULL && !tls)
        f->park = gw_park_new();
    if (f->loop == NULL ||
        (!tls && (f->park == NULL ||
                  gw_loop_watch(f->loop, gw_park_fd(f->park), gw_conn_unpark_ready, f) != 0))) {
        snprintf(err, GW_ERR_LEN, "cannot make an event loop (out of memory or files)");
        return -1;
    }
    return 0;
}

/* Starts the front `f` with its daemon listening on `*port` (the first one's, when the config
 * says 0, is then the one the others share), or on nothing with the PROXY protocol. 0, or -1
 * with `err` filled. */
static int start_front(struct front *f, uint16_t *port, char err[GW_ERR_LEN])
{
    struct gw_server *s = f->server;
    bool event = s->fixed.mode == CONFIG_MODE_EVENT;
    /* In event mode the caps are admission.c's, across the loops; a daemon at its own limit
     * would stop accepting, and leave connections waiting in its backlog instead of refusing
     * them, so its limit leaves room for those being refused. */
    const struct MHD_OptionItem options[] = {
        {MHD_OPTION_CONNECTION_LIMIT,
         (intptr_t)s->fixed.max_connections + (event ? REFUSAL_ROOM : 0), NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, event ? 0 : (intptr_t)s->fixed.max_connections_per_ip,
         NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)gw_server_client_timeout_s(s), NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT,
         (intptr_t)connection_memory(s->fixed.max_header_size, s->fixed.max_response_header_size,
                                     s->fixed.tls),
         NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, f},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, f},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, f},
        {MHD_OPTION_THREAD_STACK_SIZE, 512 * 1024, NULL}, /* thread_per_connection's */
        /* TLS last: without it, these end the list. */
        {s->fixed.tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, 0,
         (void *)gw_certs_retrieve},
        {s->fixed.tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, 0, s->fixed.tls_priorities},
        {MHD_OPTION_END, 0, NULL},
    };
    unsigned flags = MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | (s->fixed.tls ? MHD_USE_TLS : 0) |
                     (event ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                            : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                  MHD_USE_POLL | MHD_USE_ITC);
    int fd = -1;

    pthread_mutex_init(&f->watch_lock, NULL);
    pthread_mutex_init(&f->handoff_lock, NULL);
    if (event && make_loop(f, err) != 0)
        return -1;
    if (s->fixed.proxy_protocol == CONFIG_PROXY_PROTOCOL_OFF) {
        fd = gw_listen_socket(&s->fixed.listen, *port, event, err);
        if (fd < 0)
            return -1;
        gw_socket_address(fd, s->address, &s->port);
        *port = s->port;
    }
    f->daemon = gw_mhd_start_daemon(fd, flags, on_request, f, s, options, err);
    if (f->daemon == NULL)
        return -1;
    if (event && gw_loop_start(f->loop, f->daemon, gw_front_tick, f) != 0) {
        snprintf(err, GW_ERR_LEN, "cannot start an event loop");
        return -1;
    }
    return 0;
}

int gw_fronts_start(struct gw_server *s, char err[GW_ERR_LEN])
{
    uint16_t port = s->fixed.listen.port;

    if (start_shared(s, s->fixed.mode == CONFIG_MODE_EVENT, err) != 0)
        return -1;
    for (size_t i = 0; i < s->n_fronts; i++) {
        s->fronts[i].server = s;
        if (start_front(&s->fronts[i], &port, err) != 0)
            return -1;
    }
    if (s->fixed.proxy_protocol != CONFIG_PROXY_PROTOCOL_OFF)
        return gw_handoff_start_acceptor(s, err);
    return 0;
}

void gw_fronts_stop(struct gw_server *s)
{
    /* No new connections; then tunnels: closing one hands its client's socket back to a
     * running daemon. */
    gw_acceptor_free(s->acceptor);
    s->acceptor = NULL;
    /* Requests waiting for their turn go on at once (refused, their places given back) while
     * their loops and the store still run to finish them. */
    gw_sleeper_stop(s->sleeper);
    gw_tunnels_stop(s->tunnels);
    for (size_t i = 0; i < s->n_fronts; i++) {
        gw_loop_stop(s->fronts[i].loop);
        if (s->fronts[i].park != NULL)
            gw_conn_close_parked(&s->fronts[i], INT64_MAX);
    }
    /* The last answers of the store and of upgrades resume their connections, which the
     * daemons then close. */
    gw_store_stop(s->store);
    gw_offload_free(s->offload);
    s->offload = NULL;
    for (size_t i = 0; i < s->n_fronts; i++) {
        struct front *f = &s->fronts[i];

        if (f->daemon != NULL)
            MHD_stop_daemon(f->daemon);
        gw_loop_free(f->loop);
        gw_park_free(f->park);
        gw_runtime_release(f->runtime);
        gw_handoff_drop(f);
        pthread_mutex_destroy(&f->watch_lock);
        pthread_mutex_destroy(&f->handoff_lock);
    }
    free(s->fronts);
    s->fronts = NULL;
    s->n_fronts = 0;
    gw_tunnels_free(s->tunnels);
    gw_sleeper_free(s->sleeper);
    s->sleeper = NULL;
    s->tunnels = NULL;
    gw_admission_free(s->admission);
    s->admission = NULL;
}
