/*
 * The server's own files and what they share; the server's design, and its public interface,
 * are in server.h. Nothing outside these files includes this header.
 *
 * The server is one struct gw_server with one struct front per client daemon (one in
 * thread_per_connection, server.workers in event mode), split by concept:
 *
 *   server.c        the life cycle: start, drain, stop; the addresses bound
 *   front.c         a client daemon: libmicrohttpd's callbacks, and the fronts started and
 *                   stopped
 *   connections.c   a client connection outside its requests: counted in and out under the
 *                   caps (admission.h), watched for slow reading, parked and back (park.h)
 *   mhd_log.c       libmicrohttpd's daemons started with sluice's logger, and its messages
 *                   told apart, counted and logged
 *   admin.c         the admin daemon: /metrics, /healthz, /readyz
 *   admin_quota.c   the admin token checked, and the quota endpoints (/quota, /quota/grant)
 *   housekeeping.c  each mode's periodic work: thread_per_connection's reaper thread, and an
 *                   event loop's tick
 *   handoff.c       the connections the PROXY protocol acceptor (listener.h) hands to the
 *                   daemons
 *   reload.c        the current runtime, taken and swapped; the settings fixed until a restart
 *
 * Locks: `swap` guards gw_server.current and is held only to take a reference or to swap (a
 * loop reads `generation` instead, without it); a front's `watch_lock` guards its list of
 * connections and is taken per connection, not per request, and by the reaper or the tick
 * walking the list; `handoff_lock` guards the connections handed to a loop. In event mode the
 * rest of a front is its loop's alone: the daemon's callbacks run on the loop's thread too.
 */
#ifndef SLUICE_GATEWAY_SERVER_PRIVATE_H
#define SLUICE_GATEWAY_SERVER_PRIVATE_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/config.h"
#include "gateway/front/listener.h"
#include "gateway/front/server.h"
#include "gateway/identity/keys.h"
#include "gateway/ops/access_log.h"

struct gw_acceptor;
struct gw_admission;
struct gw_backends;
struct gw_health;
struct gw_loop;
struct gw_metrics;
struct gw_offload;
struct gw_park;
struct gw_runtime;
struct gw_store;
struct gw_tunnels;
struct gw_wire;
struct handoff; /* handoff.c's */

/* What a running daemon was started with; changing these needs a restart. */
struct fixed_settings {
    struct config_endpoint listen, admin_listen;
    unsigned char redis[16]; /* a digest of where the store connects (reload.c) */
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

/* A client connection: its strict reader, and a watch for reading its request too slowly.
 * In event mode it outlives libmicrohttpd's connection while parked (park.h). */
struct watched {
    int fd;
    struct gw_wire *wire;              /* NULL while parked */
    struct MHD_Connection *connection; /* libmicrohttpd's; NULL while parked */
    uint32_t requests; /* finished since `wire` started reading: the current one's index there */
    _Atomic int64_t read_deadline_ns; /* 0 while the gateway, not the client, has the turn */
    int64_t idle_since_ns;            /* its last answer's end; 0 while a request runs */
    bool has_peer;                    /* an IP peer, counted by its address */
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
    struct gw_sleeper *sleeper;     /* requests waiting for their turn (delay:), both modes */
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
    struct {
        _Atomic uint64_t resets, grants, refused; /* quota changes; calls without the token */
    } admin_counts;
    unsigned next_front; /* the acceptor's round robin over event loops */
    atomic_bool draining;
    uint16_t port, admin_port;
    char address[GW_ADDRESS_LEN], admin_address[GW_ADDRESS_LEN];
};

/* client_timeout in whole seconds, rounded up: libmicrohttpd's idle timeout. */
static inline unsigned gw_server_client_timeout_s(const struct gw_server *s)
{
    return (unsigned)((s->fixed.client_timeout_ns + 999999999) / 1000000000);
}

/* --- front.c ------------------------------------------------------------------------------ */

/* The client fronts: one thread-per-connection daemon, or server.workers event loops, each
 * with a daemon of its own on the same port (SO_REUSEPORT: the kernel spreads connections
 * over them). With the PROXY protocol the daemons listen on nothing, and the acceptor, started
 * once they run, hands them the connections. 0, or -1 with `err` filled; either way
 * gw_fronts_stop() frees what was started. */
int gw_fronts_start(struct gw_server *s, char err[GW_ERR_LEN]);

/* Stops the client fronts: event loops first, then the store's and the upgrades' threads (the
 * daemons cannot stop with connections suspended; loop.h), then the daemons, then what the
 * loops leave. */
void gw_fronts_stop(struct gw_server *s);

/* --- connections.c ------------------------------------------------------------------------ */

/* A new connection from `client` (NULL: not an IP peer) counted in: its state, the caller's
 * until gw_conn_release(). NULL when the caps refuse it (counted and logged) or memory is
 * short. Counted in the connections gauge either way. */
struct watched *gw_conn_admit(struct gw_server *s, const struct sockaddr *client);

/* Counts a connection's state out of the caps, and frees it. Takes NULL. */
void gw_conn_release(struct gw_server *s, struct watched *w);

/* Puts `w` on, or takes it off, the list of `f`'s connections that the reaper and the tick
 * walk. Taken off before libmicrohttpd closes the socket: once unlinked, the reaper cannot
 * touch an fd number that is about to be reused. */
void gw_conn_watch(struct front *f, struct watched *w);
void gw_conn_unwatch(struct front *f, struct watched *w);

/* libmicrohttpd closes the parking connection `w`: its socket goes on waiting in the park,
 * under a duplicate descriptor (park.h). false when it cannot (it then closes). */
bool gw_conn_park(struct front *f, struct watched *w);

/* Closes the parked connections whose deadline is at or before `now` (INT64_MAX: all). */
void gw_conn_close_parked(struct front *f, int64_t now);

/* The loop's watch on its park (gw_loop_watch(), `cls` the front): each parked connection the
 * client wrote to (or closed) goes back to the daemon, which on_connection() tells by
 * `unparking`. */
void gw_conn_unpark_ready(void *cls);

/* Parks `f`'s connections idle for park_idle_after with nothing read since their last answer
 * (see connections.c). On the loop's thread. */
void gw_conn_park_idle(struct front *f, int64_t now);

/* --- mhd_log.c ---------------------------------------------------------------------------- */

/* Starts a daemon that logs through sluice's logger, on the listening socket `fd` (handed
 * over), or on none (-1: connections come by MHD_add_connection). NULL with `err` filled. */
struct MHD_Daemon *gw_mhd_start_daemon(int fd, unsigned flags, MHD_AccessHandlerCallback handler,
                                       void *handler_cls, struct gw_server *s,
                                       const struct MHD_OptionItem *options, char err[GW_ERR_LEN]);

/* Counts a connection refused at the caps, and logs it at most once a second. */
void gw_mhd_count_refusal(struct gw_server *s);

/* --- admin.c ------------------------------------------------------------------------------ */

/* The admin daemon on server.admin_listen (which must be set). 0, or -1 with `err` filled. */
int gw_admin_start(struct gw_server *s, char err[GW_ERR_LEN]);

/* --- admin_quota.c ------------------------------------------------------------------------ */

/* Queues `body` (taken, NULL: memory short) as the answer with `status` and Content-Type
 * `type`, and WWW-Authenticate `authenticate` unless NULL. */
enum MHD_Result gw_admin_respond(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, const char *authenticate);

/* Whether the call carries the admin token of `admin` (counted when not). */
enum gw_admin_auth { GW_ADMIN_AUTHORIZED, GW_ADMIN_NO_CREDENTIAL, GW_ADMIN_BAD_CREDENTIAL };
enum gw_admin_auth gw_admin_check(struct gw_server *s, struct MHD_Connection *c,
                                  const struct config_admin *admin);

/* 401 for a call without the token (NO_CREDENTIAL) or with another (BAD_CREDENTIAL). */
enum MHD_Result gw_admin_refuse(struct MHD_Connection *c, enum gw_admin_auth auth);

/* A quota endpoint's call (`url` /quota or /quota/grant), authorized, on `rt`. */
enum MHD_Result gw_admin_quota(struct gw_server *s, struct MHD_Connection *c, const char *url,
                               const char *method, struct gw_runtime *rt);

/* --- housekeeping.c ----------------------------------------------------------------------- */

/* thread_per_connection's reaper thread: client deadlines and idle upstream connections.
 * Start: 0, or -1. Stop joins it; it takes a server whose reaper never started. */
int gw_reaper_start(struct gw_server *s);
void gw_reaper_stop(struct gw_server *s);

/* An event loop's housekeeping (gw_loop_start(), `cls` the front), on the loop's thread. */
void gw_front_tick(void *cls, int64_t now);

/* --- handoff.c ---------------------------------------------------------------------------- */

/* The PROXY protocol acceptor, on a listening socket of its own, handing its connections to
 * the fronts. 0, or -1 with `err` filled. */
int gw_handoff_start_acceptor(struct gw_server *s, char err[GW_ERR_LEN]);

/* On `f`'s loop: adds the connections handed to it to its daemon, oldest first. */
void gw_handoff_take_in(struct front *f);

/* Closes the connections still handed to `f`, once its loop has stopped. */
void gw_handoff_drop(struct front *f);

/* --- reload.c ----------------------------------------------------------------------------- */

/* The current runtime, held for the caller, who lets go of it with gw_runtime_release(). */
struct gw_runtime *gw_server_runtime(struct gw_server *s);

/* The runtime a new request on `f` starts on, held for it: on a loop, the front's own copy,
 * taken afresh when a reload has moved the generation on. */
struct gw_runtime *gw_front_runtime(struct front *f);

/* Hands the health checker the servers of `rt`. 0, or -1 when memory is short. */
int gw_server_configure_health(struct gw_server *s, struct gw_runtime *rt);

/* Copies from `config` the settings that need a restart to change (not tls_priorities: the
 * TLS start sets it). 0, or -1 when memory is short; either way gw_fixed_settings_free()
 * frees what was copied. */
int gw_fixed_settings_init(struct fixed_settings *fixed, const struct config *config);
void gw_fixed_settings_free(struct fixed_settings *fixed);

#endif
