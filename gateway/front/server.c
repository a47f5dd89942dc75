/* The HTTP fronts: the proxy daemon and the admin daemon; design in server.h. */
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/common/log.h"
#include "gateway/front/admission.h"
#include "gateway/front/certs.h"
#include "gateway/front/listener.h"
#include "gateway/front/loop.h"
#include "gateway/front/offload.h"
#include "gateway/front/park.h"
#include "gateway/front/request.h"
#include "gateway/front/server.h"
#include "gateway/front/wire.h"
#include "gateway/modules/forward/upstream_route.h"
#include "gateway/ops/access_log.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/proxy.h"
#include "gateway/upstream/tunnel.h"

/* Connections an event loop's daemon may hold beyond max_connections: those being refused. */
#define REFUSAL_ROOM 256

/* What a running daemon was started with; changing these needs a restart. */
struct fixed_settings {
    struct config_endpoint listen, admin_listen, redis;
    uint32_t max_connections, max_connections_per_ip, max_header_size, max_response_header_size;
    int64_t client_timeout_ns;
    bool watch_config;
    enum config_mode mode;
    uint32_t workers;
    bool tls;
    char *tls_priorities; /* NULL without TLS */
    enum config_proxy_protocol proxy_protocol;
    struct config_cidrs proxy_protocol_from; /* the acceptor's */
};

/* A connection the PROXY protocol acceptor handed to an event loop. */
struct handoff {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct handoff *next;
};

/* A client connection: its strict reader, and a watch for reading its request too slowly.
 * In event mode it outlives libmicrohttpd's connection while parked (park.h). */
struct watched {
    int fd;
    struct gw_wire *wire;              /* NULL while parked */
    struct MHD_Connection *connection; /* libmicrohttpd's; NULL while parked */
    uint32_t requests; /* finished since `wire` started reading: the current one's index there */
    _Atomic int64_t read_deadline_ns;  /* 0 while the gateway, not the client, has the turn */
    int64_t idle_since_ns;             /* its last answer's end; 0 while a request runs */
    bool has_peer;                     /* an IP peer, counted by its address */
    struct gw_addr peer;
    union { /* as libmicrohttpd has it (the PROXY protocol's), to hand it back */
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } address;
    socklen_t address_len; /* 0: not an IP address (never parked) */
    struct gw_access_memo memo;
    struct watched *prev, *next;
};

/* One libmicrohttpd daemon serving clients, and what its callbacks need: the one daemon of
 * thread_per_connection, or one of event mode's, each run by its own loop (loop.h). */
struct front {
    struct gw_server *server;
    struct MHD_Daemon *daemon;
    struct gw_loop *loop;       /* NULL in thread_per_connection */
    pthread_mutex_t watch_lock; /* guards the list below: taken per connection, not request */
    struct watched *watched;
    /* On a loop: the runtime its requests start on, refreshed when `generation` moves, so
     * that taking it costs no lock. */
    struct gw_runtime *runtime;
    unsigned generation;
    bool quiesced;
    /* Event mode over plain HTTP: idle connections held outside the daemon (park.h), and the
     * one being handed back to it, which on_connection() knows by its descriptor. */
    struct gw_park *park;
    struct watched *unparking;
    /* Event mode with the PROXY protocol: connections handed over by the acceptor, which the
     * loop adds to its daemon itself (libmicrohttpd's external mode is not thread-safe). */
    pthread_mutex_t handoff_lock;
    struct handoff *handoffs; /* newest first */
};

struct gw_server {
    pthread_mutex_t swap;   /* guards `current`: held only to take a reference or to swap */
    atomic_uint generation; /* moves on with each swap */
    struct front *fronts;
    size_t n_fronts;
    struct gw_admission *admission; /* event mode's connection caps; NULL otherwise */
    struct gw_offload *offload;     /* event mode's threads for upgrades (the store has its own) */
    struct gw_tunnels *tunnels;     /* upgraded connections, in both modes */
    pthread_t reaper;               /* thread_per_connection: client deadlines and idle upstreams */
    int reaper_stop[2];
    int64_t client_timeout_ns;
    _Atomic int64_t park_idle_after_ns; /* server.park_idle_after, reloadable */
    struct gw_runtime *current;
    struct gw_metrics *metrics;
    struct gw_backends *backends; /* the upstream servers' state, across reloads */
    struct gw_health *health;     /* active checks */
    struct gw_store *store;
    struct fixed_settings fixed;
    struct MHD_Daemon *admin;
    struct gw_acceptor *acceptor; /* with server.proxy_protocol on; NULL otherwise */
    unsigned next_front;          /* the acceptor's round robin over event loops */
    atomic_bool draining;
    uint16_t port, admin_port;
    char address[GW_ADDRESS_LEN], admin_address[GW_ADDRESS_LEN];
};

/* client_timeout in whole seconds, rounded up: libmicrohttpd's idle timeout. */
static unsigned client_timeout_s(const struct gw_server *s)
{
    return (unsigned)((s->fixed.client_timeout_ns + 999999999) / 1000000000);
}

static struct gw_runtime *acquire_runtime(struct gw_server *s)
{
    struct gw_runtime *rt;

    pthread_mutex_lock(&s->swap);
    rt = s->current;
    gw_runtime_hold(rt);
    pthread_mutex_unlock(&s->swap);
    return rt;
}

/* The runtime a new request on `f` starts on, held for it. */
static struct gw_runtime *front_runtime(struct front *f)
{
    unsigned generation;

    if (f->loop == NULL)
        return acquire_runtime(f->server);
    generation = atomic_load_explicit(&f->server->generation, memory_order_acquire);
    if (f->runtime == NULL || f->generation != generation) {
        gw_runtime_release(f->runtime);
        f->runtime = acquire_runtime(f->server);
        f->generation = generation;
    }
    gw_runtime_hold(f->runtime);
    return f->runtime;
}

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
    rq = gw_request_new(front_runtime(f), uri, gw_wire_head(w->wire), &w->memo, w->requests,
                        f->loop, f->server->offload, f->server->tunnels);
    return rq;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    struct front *f = cls;
    struct watched *w = watched_of(c);
    bool body_piece = *upload_data_size > 0;
    enum MHD_Result ret;

    (void)url; /* libmicrohttpd's decoding of the target; the route module reads the target itself */
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
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, client_timeout_s(f->server));
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

static void count_refusal(struct gw_server *s);

/* Counts a connection's state out of the caps, and frees it. */
static void release(struct gw_server *s, struct watched *w)
{
    if (w == NULL)
        return;
    if (s->admission != NULL)
        gw_admission_leave(s->admission, w->has_peer ? &w->peer : NULL);
    free(w);
}

/* A new connection counted in, or NULL when the caps refuse it or memory is short. */
static struct watched *connection_admitted(struct gw_server *s, const struct sockaddr *client)
{
    struct watched *w = calloc(1, sizeof *w);

    gw_metrics_connection(s->metrics, 1);
    if (w == NULL)
        return NULL;
    w->has_peer = client != NULL && gw_addr_from_sockaddr(client, &w->peer) == 0;
    if (w->has_peer) {
        w->address_len =
            client->sa_family == AF_INET ? sizeof w->address.in : sizeof w->address.in6;
        memcpy(&w->address, client, w->address_len);
    }
    /* Each loop's daemon sees only its own connections: the caps count them all. */
    if (s->admission != NULL &&
        gw_admission_enter(s->admission, w->has_peer ? &w->peer : NULL) != 0) {
        count_refusal(s);
        free(w);
        return NULL;
    }
    return w;
}

static void watch(struct front *f, struct watched *w)
{
    pthread_mutex_lock(&f->watch_lock);
    w->prev = NULL;
    w->next = f->watched;
    if (f->watched != NULL)
        f->watched->prev = w;
    f->watched = w;
    pthread_mutex_unlock(&f->watch_lock);
}

/* Called before libmicrohttpd closes the socket: once unlinked, the reaper cannot touch an fd
 * number that is about to be reused. */
static void unwatch(struct front *f, struct watched *w)
{
    pthread_mutex_lock(&f->watch_lock);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        f->watched = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&f->watch_lock);
}

/* libmicrohttpd closes the parking connection `w`: its socket goes on waiting in the park,
 * under a duplicate descriptor (park.h). false when it cannot (it then closes). */
static bool park(struct front *f, struct watched *w)
{
    int fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 0);

    if (fd < 0)
        return false;
    if (gw_park_add(f->park, fd, atomic_load(&w->read_deadline_ns), w) != 0) {
        close(fd);
        return false;
    }
    unwatch(f, w);
    gw_wire_detach(w->wire);
    w->wire = NULL;
    w->connection = NULL;
    w->fd = fd;
    gw_metrics_parked(f->server->metrics, 1);
    return true;
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
        if (w != NULL && gw_wire_parking(w->wire) && park(f, w))
            return;
        if (w != NULL) {
            unwatch(f, w);
            gw_wire_detach(w->wire);
        }
        gw_metrics_connection(s->metrics, -1);
        release(s, w);
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
        w = connection_admitted(s, client != NULL ? client->client_addr : NULL);
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
        release(s, w);
        return;
    }
    if (f->loop != NULL) {
        const union MHD_DaemonInfo *set = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_EPOLL_FD);

        if (set != NULL)
            gw_wire_edge(w->wire, set->epoll_fd, c);
    }
    w->fd = info->connect_fd;
    w->connection = c;
    watch(f, w);
    *socket_context = w;
}

/* libmicrohttpd reports refused connections and failed accepts only here, so they are told
 * apart by its message formats (0.9.75, daemon.c; `_()` does not translate there). Both come in
 * floods: a refusal per client retry at max_connections, and, out of file descriptors, two
 * lines per failed accept(), which is retried at once: in thread-per-connection mode the listen
 * loop (MHD_poll_listen_socket) ignores libmicrohttpd's own `at_limit` pause, and the
 * connection waiting in the backlog keeps the socket readable. This callback runs on that
 * loop's thread right after the failure, so pausing here pauses accepting (nginx pauses
 * 500 ms; 100 ms resumes sooner once a connection closes). Each kind is counted and logged at
 * most once a second; test_pressure.c checks that the formats still match. */
static void count_refusal(struct gw_server *s)
{
    static struct gw_log_limit refusals;
    uint64_t more;

    gw_metrics_count_rejected(s->metrics);
    if (gw_log_limit_pass(&refusals, limiter_now_ns(), 1000000000, &more))
        gw_warn("http: connection limit reached (max_connections, max_connections_per_ip, "
                "or the admin port's 64): connection closed (and %llu more since the last "
                "such line; at most one a second)",
                (unsigned long long)more);
}

/* libmicrohttpd's other messages (0.9.75, connection.c and daemon.c; told apart by the start
 * of their format), each logged as one line "http: ..." (gw_log() escapes what could break
 * it) at a level an operator can filter, and at most once a second per kind, since a client
 * can provoke most of them at will. The one that carries the HTML body libmicrohttpd answers
 * with is logged by its status alone; the lines that come just before it to say why are
 * details, at debug. Any message not listed is a warning, rate-limited like the others. */
enum mhd_line { MHD_AS_IS, MHD_ANSWERED };

static struct mhd_message {
    const char *format;
    enum config_log_level level;
    enum mhd_line line;
    struct gw_log_limit limit;
} mhd_messages[] = {
    /* A client that goes away mid-request or mid-answer. */
    {"Socket has been disconnected when reading request", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Connection socket is closed when reading request", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Connection was closed by remote side", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Failed to send", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    /* A request libmicrohttpd itself cannot read (only the admin port's reach it: the proxied
     * port's strict reader, wire.h, answers those first), and the reasons that precede it. */
    {"Error processing request (HTTP response code is %u", CONFIG_LOG_INFO, MHD_ANSWERED, {0}},
    {"Too large value of 'Content-Length'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Failed to parse `Content-Length'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Received HTTP/1.1 request without `Host'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Not enough memory in pool to", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {NULL, CONFIG_LOG_WARN, MHD_AS_IS, {0}}, /* any other */
};

/* libmicrohttpd's message into `out`, without the newline (and full stop) that ends it. */
static void format_mhd_message(char *out, size_t cap, const char *fmt, va_list ap)
{
    size_t len;

    vsnprintf(out, cap, fmt, ap);
    len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '.'))
        out[--len] = '\0';
}

static void log_mhd_message(const char *fmt, va_list ap)
{
    struct mhd_message *m = mhd_messages;
    char message[512], more_text[96] = "";
    uint64_t more;

    while (m->format != NULL && strncmp(fmt, m->format, strlen(m->format)) != 0)
        m++;
    if (!gw_log_enabled(m->level) ||
        !gw_log_limit_pass(&m->limit, limiter_now_ns(), 1000000000, &more))
        return;
    if (m->line == MHD_ANSWERED) {
        unsigned status = va_arg(ap, unsigned); /* then the HTML body, left out */

        snprintf(message, sizeof message,
                 "answered %u to a request it could not read and closed the connection", status);
    } else {
        format_mhd_message(message, sizeof message, fmt, ap);
    }
    if (more > 0)
        snprintf(more_text, sizeof more_text, " (and %llu more since the last such line)",
                 (unsigned long long)more);
    gw_log(m->level, "http: %s%s", message, more_text);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    static const char refused[] = "Server reached connection limit";
    static const char accept_failed[] = "Error accepting connection";
    static const char out_of_resources[] = "Hit process or system resource limit";
    static const char handshake_failed[] = "Error: received handshake message out of context";
    static struct gw_log_limit accept_failures, handshake_failures;
    const struct timespec accept_pause = {0, 100 * 1000000};
    struct gw_server *s = cls;
    char message[512];
    uint64_t more;

    if (strncmp(fmt, refused, sizeof refused - 1) == 0) {
        count_refusal(s);
    } else if (strncmp(fmt, accept_failed, sizeof accept_failed - 1) == 0) {
        gw_metrics_count_accept_error(s->metrics);
        if (gw_log_limit_pass(&accept_failures, limiter_now_ns(), 1000000000, &more)) {
            format_mhd_message(message, sizeof message, fmt, ap);
            gw_warn("http: %s (and %llu more since the last such line; at most one a second)",
                    message, (unsigned long long)more);
        }
    } else if (strncmp(fmt, out_of_resources, sizeof out_of_resources - 1) == 0) {
        /* Follows the line above for EMFILE, ENFILE, ENOMEM and ENOBUFS: only a connection
         * closing helps, so wait for one instead of spinning. (An event loop's daemon stops
         * watching its listening socket by itself until then, and must not sleep.) */
        if (s->fixed.mode == CONFIG_MODE_THREAD_PER_CONNECTION)
            nanosleep(&accept_pause, NULL);
    } else if (strncmp(fmt, handshake_failed, sizeof handshake_failed - 1) == 0) {
        /* Any client can cause one (plain HTTP to the TLS port, TLS 1.1, no common cipher). */
        if (gw_log_limit_pass(&handshake_failures, limiter_now_ns(), 1000000000, &more))
            gw_warn("tls: a handshake failed (plain HTTP, an old TLS version, no cipher in "
                    "common, or an unknown CA): connection closed (and %llu more since the last "
                    "such line; at most one a second)",
                    (unsigned long long)more);
    } else {
        log_mhd_message(fmt, ap);
    }
}

/* --- admin daemon ---------------------------------------------------------------------- */

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *type,
                                    char *body)
{
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;

    if (response == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", type);
    ret = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return ret;
}

/* Hands the health checker the servers of `rt`. 0, or -1 when memory is short. */
static int configure_health(struct gw_server *s, struct gw_runtime *rt)
{
    struct gw_backend_set **sets = gw_forward_backend_sets(rt);

    if (sets == NULL)
        return -1;
    gw_health_configure(s->health, rt->config, sets);
    free(sets);
    return 0;
}

static char *render_metrics(struct gw_server *s)
{
    struct gw_runtime *rt = acquire_runtime(s);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out != NULL) {
        gw_metrics_render(s->metrics, out, gw_runtime_gauges, rt);
        gw_store_render_metrics(s->store, out);
        fclose(out);
    }
    gw_runtime_release(rt);
    return text;
}

/* /readyz: 503 while draining, or (unless server.ready_needs_upstreams is false) while some
 * route has no server believed healthy. */
static enum MHD_Result ready(struct gw_server *s, struct MHD_Connection *c)
{
    struct gw_runtime *rt;
    bool upstreams;

    if (atomic_load(&s->draining))
        return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", strdup("draining\n"));
    rt = acquire_runtime(s);
    upstreams = !rt->config->server.ready_needs_upstreams ||
                gw_forward_upstreams_ready(rt, limiter_now_ns());
    gw_runtime_release(rt);
    if (!upstreams)
        return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                            strdup("a route has no upstream server believed healthy\n"));
    return respond_text(c, MHD_HTTP_OK, "text/plain", strdup("ready\n"));
}

static enum MHD_Result on_admin(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls)
{
    struct gw_server *s = cls;
    char *body;

    (void)version, (void)upload_data, (void)req_cls;
    if (*upload_data_size > 0 || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0))
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("GET only\n"));
    if (strcmp(url, "/metrics") == 0) {
        body = render_metrics(s);
        return body ? respond_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", body) : MHD_NO;
    }
    if (strcmp(url, "/healthz") == 0)
        return respond_text(c, MHD_HTTP_OK, "text/plain", strdup("ok\n"));
    if (strcmp(url, "/readyz") == 0)
        return ready(s, c);
    return respond_text(c, MHD_HTTP_NOT_FOUND, "text/plain",
                        strdup("not found: try /metrics, /healthz or /readyz\n"));
}

/* --- slow clients --------------------------------------------------------------------- */

/* libmicrohttpd's timeout is an idle one: a client sending a byte now and then would keep
 * its connection, and its thread, forever. Every connection must deliver a whole request
 * head within client_timeout of the connection opening or of the last answer, and then its
 * body without a pause longer than that (on_request()); the reaper shuts down the socket of
 * one that does not, and libmicrohttpd then closes it as broken. */
static void reap_slow_clients(struct front *f, int64_t now)
{
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        int64_t deadline = atomic_load_explicit(&w->read_deadline_ns, memory_order_relaxed);

        if (deadline != 0 && now > deadline &&
            atomic_compare_exchange_strong(&w->read_deadline_ns, &deadline, 0))
            shutdown(w->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&f->watch_lock);
}

/* thread_per_connection's housekeeping thread. */
static void *reaper(void *arg)
{
    struct gw_server *s = arg;
    struct pollfd stop = {s->reaper_stop[0], POLLIN, 0};

    while (poll(&stop, 1, (int)(GW_LOOP_TICK_NS / 1000000)) == 0) {
        int64_t now = limiter_now_ns();

        gw_proxy_prune(now);
        reap_slow_clients(&s->fronts[0], now);
    }
    return NULL;
}

/* --- the PROXY protocol acceptor's connections ------------------------------------------ */

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

/* --- parked connections (park.h) ------------------------------------------------------ */

/* Closes the parked connections whose deadline is at or before `now` (INT64_MAX: all). */
static void close_parked(struct front *f, int64_t now)
{
    struct gw_server *s = f->server;

    for (;;) {
        int fd;
        struct watched *w = gw_park_take_expired(f->park, now, &fd);

        if (w == NULL)
            break;
        close(fd);
        gw_metrics_parked(s->metrics, -1);
        gw_metrics_connection(s->metrics, -1);
        release(s, w);
    }
}

/* The loop's watch on its park: each parked connection the client wrote to (or closed) goes
 * back to the daemon, which on_connection() tells by `unparking`. */
static void unpark_ready(void *cls)
{
    struct front *f = cls;
    struct gw_server *s = f->server;

    for (;;) {
        int fd;
        struct watched *w = gw_park_take_ready(f->park, &fd);

        if (w == NULL)
            break;
        gw_metrics_parked(s->metrics, -1);
        w->fd = fd;
        f->unparking = w;
        MHD_add_connection(f->daemon, fd, &w->address.sa, w->address_len);
        if (f->unparking == w) { /* refused before it started: libmicrohttpd closed `fd` */
            f->unparking = NULL;
            gw_metrics_connection(s->metrics, -1);
            release(s, w);
        }
    }
}

/* Parks the connections idle for park_idle_after with nothing read since their last answer:
 * with their timeout set to lapse at once, the daemon starts closing its side of them (and
 * finishes on its next run: on_connection() then parks them); any it does not close get
 * their timeout back. */
static void park_idle(struct front *f, int64_t now)
{
    int64_t after = atomic_load_explicit(&f->server->park_idle_after_ns, memory_order_relaxed);
    unsigned parking = 0;

    if (after == 0)
        return;
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        if (w->idle_since_ns == 0 || now - w->idle_since_ns < after || w->address_len == 0 ||
            gw_wire_head(w->wire)->messages != w->requests || !gw_wire_park(w->wire))
            continue;
        MHD_set_connection_option(w->connection, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
        parking++;
    }
    pthread_mutex_unlock(&f->watch_lock);
    if (parking == 0)
        return;
    MHD_run(f->daemon);
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        if (!gw_wire_unpark(w->wire))
            continue;
        MHD_set_connection_option(w->connection, MHD_CONNECTION_OPTION_TIMEOUT,
                                  client_timeout_s(f->server));
    }
    pthread_mutex_unlock(&f->watch_lock);
}

/* An event loop's housekeeping, on its own thread (loop.h). */
static void loop_tick(void *cls, int64_t now)
{
    struct front *f = cls;
    struct gw_server *s = f->server;

    for (struct handoff *h = take_handoffs(f), *next; h != NULL; h = next) {
        next = h->next;
        MHD_add_connection(f->daemon, h->fd, (const struct sockaddr *)&h->addr, h->addr_len);
        free(h);
    }
    gw_upstream_loop_prune(gw_loop_upstream(f->loop), now);
    /* The first tick comes before the loop's first request. Shard 0 is other threads'. */
    gw_metrics_use_shard((unsigned)(f - s->fronts) + 1);
    reap_slow_clients(f, now);
    if (atomic_load(&s->draining) && !f->quiesced) {
        MHD_socket listener = MHD_quiesce_daemon(f->daemon);

        if (listener != MHD_INVALID_SOCKET)
            close(listener);
        f->quiesced = true;
    }
    if (f->park != NULL) {
        /* A drain closes idle connections at once, as a stopping daemon would. */
        close_parked(f, f->quiesced ? INT64_MAX : now);
        if (!f->quiesced)
            park_idle(f, now);
    }
    /* Lets go of a replaced runtime even when no request comes. */
    if (f->runtime != NULL && f->generation != atomic_load(&s->generation)) {
        gw_runtime_release(f->runtime);
        f->runtime = NULL;
    }
}

/* --- life cycle ------------------------------------------------------------------------ */

/* Starts a daemon on the listening socket `fd` (handed over), or on none (-1: connections
 * come by MHD_add_connection). NULL with `err` filled. */
static struct MHD_Daemon *start_daemon(int fd, unsigned flags, MHD_AccessHandlerCallback handler,
                                       void *handler_cls, struct gw_server *s,
                                       const struct MHD_OptionItem *options, char err[GW_ERR_LEN])
{
    struct MHD_Daemon *d;

    if (fd < 0)
        d = MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handler, handler_cls,
                             MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_ARRAY, options,
                             MHD_OPTION_END);
    else
        d = MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_EXTERNAL_LOGGER,
                             on_mhd_log, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                             MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (d == NULL)
        snprintf(err, GW_ERR_LEN, "cannot start the HTTP daemon (out of memory or threads)");
    return d;
}

static int copy_endpoint(struct config_endpoint *to, const struct config_endpoint *from)
{
    to->port = from->port;
    to->host = from->host ? strdup(from->host) : NULL;
    return from->host != NULL && to->host == NULL ? -1 : 0;
}

/* Stops the client fronts: event loops first, then the store's and the upgrades' threads (the
 * daemons cannot stop with connections suspended; loop.h), then the daemons, then what the
 * loops leave. */
static void stop_fronts(struct gw_server *s)
{
    /* No new connections; then tunnels: closing one hands its client's socket back to a
     * running daemon. */
    gw_acceptor_free(s->acceptor);
    s->acceptor = NULL;
    gw_tunnels_stop(s->tunnels);
    for (size_t i = 0; i < s->n_fronts; i++) {
        gw_loop_stop(s->fronts[i].loop);
        if (s->fronts[i].park != NULL)
            close_parked(&s->fronts[i], INT64_MAX);
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
        for (struct handoff *h = take_handoffs(f), *next; h != NULL; h = next) {
            next = h->next;
            close(h->fd);
            free(h);
        }
        pthread_mutex_destroy(&f->watch_lock);
        pthread_mutex_destroy(&f->handoff_lock);
    }
    free(s->fronts);
    s->fronts = NULL;
    s->n_fronts = 0;
    gw_tunnels_free(s->tunnels);
    s->tunnels = NULL;
    gw_admission_free(s->admission);
    s->admission = NULL;
}

static void free_server(struct gw_server *s)
{
    if (s->reaper_stop[1] > 0) {
        if (write(s->reaper_stop[1], "x", 1) == 1)
            pthread_join(s->reaper, NULL);
        close(s->reaper_stop[0]);
        close(s->reaper_stop[1]);
    }
    stop_fronts(s);
    gw_health_stop(s->health);
    gw_wire_cleanup();
    gw_certs_use(NULL);
    free(s->fixed.tls_priorities);
    gw_runtime_release(s->current);
    gw_backends_free(s->backends);
    gw_metrics_free(s->metrics);
    gw_store_free(s->store);
    free(s->fixed.listen.host);
    free(s->fixed.admin_listen.host);
    free(s->fixed.redis.host);
    free(s->fixed.proxy_protocol_from.items);
    pthread_mutex_destroy(&s->swap);
    free(s);
}

static int start_reaper(struct gw_server *s)
{
    if (pipe(s->reaper_stop) != 0) {
        s->reaper_stop[0] = s->reaper_stop[1] = 0;
        return -1;
    }
    if (pthread_create(&s->reaper, NULL, reaper, s) != 0) {
        close(s->reaper_stop[0]);
        close(s->reaper_stop[1]);
        s->reaper_stop[0] = s->reaper_stop[1] = 0;
        return -1;
    }
    return 0;
}

/* The PROXY protocol acceptor, on a listening socket of its own. 0, or -1 with `err` filled. */
static int start_acceptor(struct gw_server *s, char err[GW_ERR_LEN])
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

/* The client fronts: one thread-per-connection daemon, or server.workers event loops, each
 * with a daemon of its own on the same port (SO_REUSEPORT: the kernel spreads connections
 * over them). With the PROXY protocol the daemons listen on nothing, and the acceptor, started
 * once they run, hands them the connections. 0, or -1 with `err` filled. */
static int start_fronts(struct gw_server *s, char err[GW_ERR_LEN])
{
    bool event = s->fixed.mode == CONFIG_MODE_EVENT;
    bool proxy_protocol = s->fixed.proxy_protocol != CONFIG_PROXY_PROTOCOL_OFF;
    unsigned timeout_s = client_timeout_s(s);
    uint16_t port = s->fixed.listen.port;

    s->n_fronts = event ? s->fixed.workers : 1;
    s->fronts = calloc(s->n_fronts, sizeof *s->fronts);
    s->tunnels = gw_tunnels_new();
    if (event) {
        s->admission = gw_admission_new(s->fixed.max_connections, s->fixed.max_connections_per_ip);
        s->offload = gw_offload_new();
    }
    if (s->fronts == NULL || s->tunnels == NULL ||
        (event && (s->admission == NULL || s->offload == NULL))) {
        s->n_fronts = 0;
        snprintf(err, GW_ERR_LEN, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->n_fronts; i++) {
        struct front *f = &s->fronts[i];
        /* In event mode the caps are admission.c's, across the loops; a daemon at its own
         * limit would stop accepting, and leave connections waiting in its backlog instead of
         * refusing them, so its limit leaves room for those being refused. */
        const struct MHD_OptionItem options[] = {
            {MHD_OPTION_CONNECTION_LIMIT,
             (intptr_t)s->fixed.max_connections + (event ? REFUSAL_ROOM : 0), NULL},
            {MHD_OPTION_PER_IP_CONNECTION_LIMIT,
             event ? 0 : (intptr_t)s->fixed.max_connections_per_ip, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout_s, NULL},
            {MHD_OPTION_CONNECTION_MEMORY_LIMIT,
             (intptr_t)connection_memory(s->fixed.max_header_size,
                                         s->fixed.max_response_header_size, s->fixed.tls),
             NULL},
            {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
            {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, f},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, f},
            {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, f},
            {MHD_OPTION_THREAD_STACK_SIZE, 512 * 1024, NULL}, /* thread_per_connection's */
            /* TLS last: without it, these end the list. */
            {s->fixed.tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, 0,
             (void *)gw_certs_retrieve},
            {s->fixed.tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, 0,
             s->fixed.tls_priorities},
            {MHD_OPTION_END, 0, NULL},
        };
        unsigned flags = MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | (s->fixed.tls ? MHD_USE_TLS : 0) |
                         (event ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                                : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                      MHD_USE_POLL | MHD_USE_ITC);

        int fd = -1;

        f->server = s;
        pthread_mutex_init(&f->watch_lock, NULL);
        pthread_mutex_init(&f->handoff_lock, NULL);
        if (event && ((f->loop = gw_loop_new()) == NULL ||
                      (!s->fixed.tls &&
                       ((f->park = gw_park_new()) == NULL ||
                        gw_loop_watch(f->loop, gw_park_fd(f->park), unpark_ready, f) != 0)))) {
            snprintf(err, GW_ERR_LEN, "cannot make an event loop (out of memory or files)");
            return -1;
        }
        if (!proxy_protocol) {
            fd = gw_listen_socket(&s->fixed.listen, port, event, err);
            if (fd < 0)
                return -1;
            /* The first socket's port, when the config says 0, is the one the others share. */
            gw_socket_address(fd, s->address, &s->port);
            port = s->port;
        }
        f->daemon = start_daemon(fd, flags, on_request, f, s, options, err);
        if (f->daemon == NULL)
            return -1;
        if (event && gw_loop_start(f->loop, f->daemon, loop_tick, f) != 0) {
            snprintf(err, GW_ERR_LEN, "cannot start an event loop");
            return -1;
        }
    }
    if (proxy_protocol)
        return start_acceptor(s, err);
    return 0;
}

/* The listener's TLS: libmicrohttpd's certificate callback, then the first certificates and
 * the priority string (config/tls.h). 0, or -1 with `err` filled. */
static int start_tls(struct gw_server *s, const struct config_tls *tls, char err[GW_ERR_LEN])
{
    char why[GW_ERR_LEN - 64];
    struct gw_certs *certs;

    if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES) {
        snprintf(err, GW_ERR_LEN,
                 "server.tls: this libmicrohttpd cannot pick certificates by "
                 "server name (no MHD_FEATURE_HTTPS_CERT_CALLBACK)");
        return -1;
    }
    certs = gw_certs_load(tls, why, sizeof why);
    s->fixed.tls_priorities = strdup(tls->priorities);
    if (certs == NULL || s->fixed.tls_priorities == NULL) {
        gw_certs_release(certs);
        snprintf(err, GW_ERR_LEN, "server.tls: %s", certs == NULL ? why : "out of memory");
        return -1;
    }
    gw_certs_use(certs);
    return 0;
}

struct gw_server *gw_server_start(struct config *config, char err[GW_ERR_LEN])
{
    struct gw_server *s = calloc(1, sizeof *s);

    if (s == NULL) {
        config_free(config);
        snprintf(err, GW_ERR_LEN, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->swap, NULL);
    s->client_timeout_ns = config->server.client_timeout_ns;
    atomic_init(&s->park_idle_after_ns, config->server.park_idle_after_ns);
    if (gw_wire_init() != 0) {
        config_free(config);
        snprintf(err, GW_ERR_LEN, "cannot read client connections strictly (recv() is not "
                                  "sluice's, or memory is short)");
        goto fail;
    }
    s->fixed.mode = config->server.mode;
    s->fixed.workers = config->server.workers;
    s->fixed.max_connections = config->server.max_connections;
    s->fixed.max_header_size = (uint32_t)config->server.max_header_size;
    s->fixed.max_response_header_size = (uint32_t)config->server.max_response_header_size;
    gw_proxy_configure(config->server.upstream_idle_timeout_ns, config->server.upstream_max_idle);
    s->fixed.max_connections_per_ip = config->server.max_connections_per_ip;
    s->fixed.client_timeout_ns = config->server.client_timeout_ns;
    s->fixed.watch_config = config->server.watch_config;
    s->fixed.proxy_protocol = config->server.proxy_protocol;
    s->fixed.proxy_protocol_from = config->server.proxy_protocol_from;
    s->fixed.proxy_protocol_from.items =
        malloc((s->fixed.proxy_protocol_from.n + 1) * sizeof *s->fixed.proxy_protocol_from.items);
    if (s->fixed.proxy_protocol_from.items != NULL && s->fixed.proxy_protocol_from.n > 0)
        memcpy(s->fixed.proxy_protocol_from.items, config->server.proxy_protocol_from.items,
               config->server.proxy_protocol_from.n *
                   sizeof *config->server.proxy_protocol_from.items);
    s->fixed.tls = config->server.tls.on;
    s->metrics = gw_metrics_new();
    s->backends = gw_backends_new();
    s->health = gw_health_start();
    s->store = gw_store_new(config);
    if (s->metrics == NULL || s->backends == NULL || s->health == NULL || s->store == NULL ||
        s->fixed.proxy_protocol_from.items == NULL ||
        copy_endpoint(&s->fixed.listen, &config->server.listen) != 0 ||
        copy_endpoint(&s->fixed.admin_listen, &config->server.admin_listen) != 0 ||
        copy_endpoint(&s->fixed.redis, &config->redis.address) != 0) {
        config_free(config);
        snprintf(err, GW_ERR_LEN, "out of memory");
        goto fail;
    }
    if (s->fixed.tls && start_tls(s, &config->server.tls, err) != 0) {
        config_free(config);
        goto fail;
    }
    s->current = gw_runtime_build(config, NULL, s->metrics, s->backends, s->store, err, GW_ERR_LEN);
    if (s->current == NULL || configure_health(s, s->current) != 0 || start_fronts(s, err) != 0)
        goto fail;
    if (s->fixed.mode == CONFIG_MODE_THREAD_PER_CONNECTION && start_reaper(s) != 0) {
        snprintf(err, GW_ERR_LEN, "cannot start the slow-client reaper");
        goto fail;
    }
    if (s->fixed.admin_listen.host != NULL) {
        const struct MHD_OptionItem options[] = {
            {MHD_OPTION_CONNECTION_LIMIT, 64, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, 10, NULL},
            {MHD_OPTION_END, 0, NULL},
        };

        int fd = gw_listen_socket(&s->fixed.admin_listen, s->fixed.admin_listen.port, 0, err);

        if (fd < 0)
            goto fail;
        gw_socket_address(fd, s->admin_address, &s->admin_port);
        s->admin =
            start_daemon(fd, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG,
                         on_admin, s, s, options, err);
        if (s->admin == NULL)
            goto fail;
    }
    return s;

fail:
    free_server(s);
    return NULL;
}

uint16_t gw_server_port(const struct gw_server *s)
{
    return s->port;
}

uint16_t gw_server_admin_port(const struct gw_server *s)
{
    return s->admin_port;
}

const char *gw_server_address(const struct gw_server *s)
{
    return s->address;
}

const char *gw_server_admin_address(const struct gw_server *s)
{
    return s->admin_port != 0 ? s->admin_address : NULL;
}

static bool same_endpoint(const struct config_endpoint *a, const struct config_endpoint *b)
{
    if (a->host == NULL || b->host == NULL)
        return a->host == b->host;
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Says which changed settings wait for a restart; the running values stay. */
static void warn_restart_needed(const struct fixed_settings *fixed, const struct config *next)
{
    if (!same_endpoint(&fixed->listen, &next->server.listen))
        gw_warn("reload: server.listen changed; it takes effect on restart (still listening on "
                "%s:%u)",
                fixed->listen.host, fixed->listen.port);
    if (!same_endpoint(&fixed->admin_listen, &next->server.admin_listen))
        gw_warn("reload: server.admin_listen changed; it takes effect on restart");
    if (fixed->max_connections != next->server.max_connections ||
        fixed->max_connections_per_ip != next->server.max_connections_per_ip)
        gw_warn("reload: server.max_connections(_per_ip) changed; it takes effect on restart");
    if (fixed->client_timeout_ns != next->server.client_timeout_ns)
        gw_warn("reload: server.client_timeout changed; it takes effect on restart");
    if (fixed->max_header_size != next->server.max_header_size ||
        fixed->max_response_header_size != next->server.max_response_header_size)
        gw_warn("reload: server.max_(response_)header_size changed; it takes effect on restart");
    if (!same_endpoint(&fixed->redis, &next->redis.address))
        gw_warn("reload: limiter.redis changed; it takes effect on restart");
    if (fixed->watch_config != next->server.watch_config)
        gw_warn("reload: server.watch_config changed; it takes effect on restart");
    if (fixed->mode != next->server.mode ||
        (fixed->mode == CONFIG_MODE_EVENT && fixed->workers != next->server.workers))
        gw_warn("reload: server.mode or server.workers changed; it takes effect on restart");
    if (fixed->proxy_protocol != next->server.proxy_protocol ||
        fixed->proxy_protocol_from.n != next->server.proxy_protocol_from.n ||
        (fixed->proxy_protocol_from.n > 0 &&
         memcmp(fixed->proxy_protocol_from.items, next->server.proxy_protocol_from.items,
                fixed->proxy_protocol_from.n * sizeof *fixed->proxy_protocol_from.items) != 0))
        gw_warn("reload: server.proxy_protocol(_from) changed; it takes effect on restart");
    if (fixed->tls != next->server.tls.on)
        gw_warn("reload: server.tls was %s; it takes effect on restart (the listener still "
                "speaks %s)",
                fixed->tls ? "removed" : "added", fixed->tls ? "TLS only" : "plain HTTP only");
    else if (fixed->tls && strcmp(fixed->tls_priorities, next->server.tls.priorities) != 0)
        gw_warn("reload: server.tls.min_version or ciphers changed; it takes effect on restart "
                "(certificates are replaced now)");
}

int gw_server_reload(struct gw_server *s, struct config *config, char err[GW_ERR_LEN])
{
    struct gw_runtime *next, *old;
    struct gw_certs *certs = NULL;
    char why[GW_ERR_LEN - 64];

    warn_restart_needed(&s->fixed, config);
    /* Read again even when the config names the same files: they may have been renewed. */
    if (s->fixed.tls && config->server.tls.on) {
        certs = gw_certs_load(&config->server.tls, why, sizeof why);
        if (certs == NULL) {
            snprintf(err, GW_ERR_LEN, "server.tls: %s (the certificates in use stay)", why);
            config_free(config);
            gw_metrics_count_reload(s->metrics, false);
            return -1;
        }
    }
    /* The head limits size each connection's memory: the running ones stay in force. */
    config->server.max_header_size = s->fixed.max_header_size;
    config->server.max_response_header_size = s->fixed.max_response_header_size;
    pthread_mutex_lock(&s->swap);
    old = s->current;
    pthread_mutex_unlock(&s->swap);
    /* Only the reloading thread swaps, so `old` stays current while the next is built. */
    next = gw_runtime_build(config, old, s->metrics, s->backends, s->store, err, GW_ERR_LEN);
    if (next == NULL) {
        gw_metrics_count_reload(s->metrics, false);
        gw_certs_release(certs);
        return -1;
    }
    if (certs != NULL)
        gw_certs_use(certs);
    if (configure_health(s, next) != 0)
        gw_warn("reload: out of memory for the health checks; the last ones go on");
    gw_proxy_configure(next->config->server.upstream_idle_timeout_ns,
                       next->config->server.upstream_max_idle);
    atomic_store(&s->park_idle_after_ns, next->config->server.park_idle_after_ns);
    pthread_mutex_lock(&s->swap);
    s->current = next;
    atomic_fetch_add_explicit(&s->generation, 1, memory_order_release);
    pthread_mutex_unlock(&s->swap);
    /* Counted once in force: a request that follows the count is served by the new config. */
    gw_metrics_count_reload(s->metrics, true);
    gw_runtime_release(old); /* freed once its last request ends */
    return 0;
}

void gw_server_reload_failed(struct gw_server *s)
{
    gw_metrics_count_reload(s->metrics, false);
}

unsigned gw_server_drain(struct gw_server *s)
{
    struct gw_runtime *rt = acquire_runtime(s);
    int64_t timeout_ns = rt->config->server.drain_timeout_ns;
    MHD_socket listener;
    struct timespec pause = {0, 10 * 1000000};
    unsigned running;

    gw_runtime_release(rt);
    atomic_store(&s->draining, true);
    gw_acceptor_stop(s->acceptor);
    if (s->fronts[0].loop == NULL) {
        listener = MHD_quiesce_daemon(s->fronts[0].daemon);
        if (listener != MHD_INVALID_SOCKET)
            close(listener);
    }
    for (size_t i = 0; i < s->n_fronts; i++) /* each loop quiesces its own daemon */
        if (s->fronts[i].loop != NULL)
            gw_loop_wake(s->fronts[i].loop);
    /* Requests in flight and open tunnels have until drain_timeout to end by themselves. */
    for (int64_t waited = 0;; waited += pause.tv_nsec) {
        running = gw_metrics_requests_in_flight(s->metrics);
        if ((running == 0 && gw_tunnels_count(s->tunnels) == 0) || waited >= timeout_ns)
            break;
        nanosleep(&pause, NULL);
    }
    gw_tunnels_close_all(s->tunnels);
    return running;
}

void gw_server_stop(struct gw_server *s)
{
    if (s == NULL)
        return;
    if (s->admin != NULL)
        MHD_stop_daemon(s->admin);
    free_server(s);
}
