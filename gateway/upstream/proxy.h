/*
 * proxy: one request forwarded upstream with libcurl, its answer pulled back piece by piece.
 *
 * A request being forwarded holds one `struct gw_upstream`: a curl easy handle and a multi
 * handle, whose connection cache keeps one upstream connection open. It is taken from its
 * origin's pool for the exchange and given back after, connection and all, so the next
 * request to that origin, from any client, reuses it, and idle keep-alive clients hold no
 * handles. gw_proxy_prune(), every quarter second, closes the handles idle longer than
 * server.upstream_idle_timeout and the least recently used beyond server.upstream_max_idle (a
 * handle given back is kept until then, so a burst of answers does not close the connections
 * the next burst of requests would open again).
 * The pools' mutex is held for a push, a pop or a prune; a curl share object with one shared
 * connection cache was the alternative, but it locks several times per transfer and measured
 * slower under load.
 *
 * What the upstream sends is trusted to belong to a request only while one is outstanding:
 * a pooled connection that has had anything to read (a stray answer, or EOF) is closed and a
 * new one made before the next request goes out, so a stray answer never reaches the next
 * client. Blocking handles poll their socket just before; on a loop the socket stays in the
 * loop's epoll set between exchanges and the event marks the handle (a stray that arrives
 * after that look and before the request still would get through, as with any proxy). libcurl
 * resends a request whose reused connection died before answering: an idempotent method (RFC 9110)
 * may go twice, any other only once, and the client then gets 502. Proxy environment variables
 * (no_proxy too) are ignored; a route's `proxy:` is the only forward proxy.
 *
 * One interface, two ways to run it. An exchange has four steps: gw_upstream_start() sends
 * the request and returns at once; gw_upstream_head() says whether the response head is in
 * (or what failed); gw_upstream_read() hands over body bytes as the client side can take them;
 * gw_upstream_finish() ends it. A handle taken with no loop (thread_per_connection) blocks in
 * head() and read() on a small loop of its own (curl_multi_poll) until it has an answer. A
 * handle taken on a loop (event mode, gw_upstream_loop below) never blocks: head() says
 * GW_UPSTREAM_PENDING and read() GW_UPSTREAM_WOULD_BLOCK, and the loop calls the `notify`
 * given to start() at each later step (head in, body bytes, end, failure, a wait timed out),
 * after which the caller asks again. The forward module (gateway/modules/forward) is the same for
 * both.
 *
 * Body data lands in a fixed 64 KiB buffer; when it is full the transfer is paused until the
 * client has taken it, so a 1 GiB download passes through in bounded memory at the client's
 * pace.
 *
 * An event loop (gw_upstream_loop) keeps its own pools, so its handles, their connections and
 * their sockets are only ever touched by its thread: each handle's multi reports its sockets
 * into the loop's epoll set (CURLMOPT_SOCKETFUNCTION, tagged so that an event leads back to
 * the handle) and its timer to the loop (CURLMOPT_TIMERFUNCTION), and the loop calls
 * curl_multi_socket_action() for exactly the handle an event or timer is for. With several
 * loops, an upstream may hold upstream_max_idle idle connections per loop.
 *
 * Request bodies stream (body.h): the transfer starts with the body's first bytes, or none,
 * in its window, libcurl takes them as the connection can send them and pauses when the
 * window is empty, and gw_upstream_feed() hands it each new piece. A body of known length
 * goes with that Content-Length; one without (chunked from the client) goes chunked. When
 * the upstream answers with a status of 300 or more before the whole body has gone, libcurl
 * stops sending it (and the connection is closed after the answer).
 *
 * Timeouts: `timeout` bounds the wait for the response head (from the body's end), every
 * wait for the upstream to take more of the request body, and every wait for more response
 * body; `connect_timeout` bounds the TCP (and TLS) connect.
 *
 * The files: exchange.c (the four steps, and the blocking wait), transfer.c (what libcurl is
 * told for a transfer and calls back with: options, the head and body landing, the request
 * body taken), pool.c (the pools and their pruning), handle.c (one handle's life and the
 * sockets it holds), loop.c (handles on an event loop), fault.c (enum gw_fault's names and
 * words), proxy.c (libcurl's global state, and the abort). What they share of a handle, a pool
 * and a loop is in handle.h, which only they include.
 */
#ifndef SLUICE_GATEWAY_PROXY_H
#define SLUICE_GATEWAY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gateway/upstream/body.h"

struct curl_slist;
struct gw_upstream;

enum gw_upstream_error {
    GW_UPSTREAM_OK,
    GW_UPSTREAM_CONNECT,   /* refused, unreachable, no answer to connect, TLS failure */
    GW_UPSTREAM_TIMEOUT,   /* no response head within `timeout` */
    GW_UPSTREAM_TOO_LARGE, /* a response head over `max_head` */
    GW_UPSTREAM_OTHER,     /* a malformed answer, a reset, no memory, a second send refused */
    GW_UPSTREAM_PENDING,   /* on a loop: not yet; `notify` is called at the next step */
    GW_UPSTREAM_ANSWERED,  /* gw_upstream_feed(): the upstream answered and takes no more */
};

/* What went wrong with an exchange, finer than gw_upstream_error: the access log's
 * upstream_error, and what passive health and retries go by. */
enum gw_fault {
    GW_FAULT_NONE, /* a response head came (and, for a read, the body so far) */
    GW_FAULT_DNS,
    GW_FAULT_REFUSED, /* refused or unreachable */
    GW_FAULT_CONNECT_TIMEOUT,
    GW_FAULT_TLS,       /* handshake or certificate verification */
    GW_FAULT_RESET,     /* the connection dropped before a response head */
    GW_FAULT_TIMEOUT,   /* no response head (or no more body) within `timeout` */
    GW_FAULT_CUT,       /* the body ended before its length */
    GW_FAULT_TOO_LARGE, /* a response head over `max_head` */
    GW_FAULT_INVALID,   /* not an HTTP/1.1 answer */
    GW_FAULT_OTHER,
    GW_N_FAULTS,
};

/* The access log's upstream_error code: "dns", "refused", "connect_timeout", "tls", "reset",
 * "timeout", "cut", "too_large", "invalid", "other"; "" for none. */
const char *gw_fault_name(enum gw_fault fault);

/* What a client answered 502 or 504 for `fault` is told: the kind, never the server. */
const char *gw_fault_detail(enum gw_fault fault);

/* The fault a libcurl result code (CURLcode) stands for, and the kind of failure a fault is. */
enum gw_fault gw_fault_of(int code);

/* Sends what the libcurl handle `easy` carries through `proxy` (a route's `proxy:`), or
 * through no proxy when NULL, whatever the environment's proxy variables say. */
void gw_upstream_set_proxy(void *easy, const char *proxy);
enum gw_upstream_error gw_fault_error(enum gw_fault fault);

/* gw_upstream_read() on a loop: no bytes yet; `notify` is called at the next step. */
#define GW_UPSTREAM_WOULD_BLOCK (-2)

/* Called on the loop's thread when an exchange on a loop has taken a step. */
typedef void gw_upstream_notify(void *cls);

/* The list gw_forward.headers takes, over `n_lines` (at least 1) NUL-terminated lines laid
 * end to end in `text`, each "Name: value", or "Name:" to keep libcurl from adding that field
 * of its own: one malloc'd array of nodes that point into `text`, which must outlive it. The
 * caller frees the array with free(), and `text` apart. NULL when memory is short. */
struct curl_slist *gw_upstream_header_list(const char *text, size_t n_lines);

struct gw_forward {
    const char *method;
    const char *url;
    const char *proxy;                /* the route's forward proxy URL, or NULL for none */
    uint64_t max_head;                /* the longest response head passed on (its fields' bytes) */
    const struct curl_slist *headers; /* sent as given (gw_upstream_header_list()) */
    struct gw_body *body; /* NULL when the request has none; sent as it fills (body.h) */
    int64_t timeout_ns;
    int64_t connect_timeout_ns;
    bool tls_verify;
};

/* Once per process, before any other call (and cleanup after the last). 0, or -1. */
int gw_proxy_init(void);

/* The version of libcurl this process runs with (static), for sluice_build_info. */
const char *gw_proxy_library_version(void);
void gw_proxy_cleanup(void);

/* Makes later and running transfers give up at their next wait (for shutdown). */
void gw_proxy_abort_all(void);

/* Whether gw_proxy_abort_all() was called: a failure now says nothing of the upstream, and
 * no new attempt is to be made. */
bool gw_proxy_aborting(void);

/* server.upstream_idle_timeout and server.upstream_max_idle; at start and each reload. */
void gw_proxy_configure(int64_t idle_timeout_ns, unsigned max_idle);

/* Closes the connections of handles idle longer than the idle timeout, a batch at a time;
 * called every fraction of a second. */
void gw_proxy_prune(int64_t now_ns);

/* --- event loops ---------------------------------------------------------------------- */

struct gw_upstream_loop;

/* The upstream side of one event loop, whose epoll set is `epoll_fd` (the caller's). NULL
 * when memory is short; freed with gw_upstream_loop_free() once no exchange runs on it. */
struct gw_upstream_loop *gw_upstream_loop_new(int epoll_fd);
void gw_upstream_loop_free(struct gw_upstream_loop *loop);

/* An epoll event whose data.ptr is not the caller's own: it is one of this loop's. */
void gw_upstream_loop_event(struct gw_upstream_loop *loop, void *tag, uint32_t events);

/* Runs libcurl's due timers and ends the waits that passed their `timeout`. Returns when
 * to call again (limiter_now_ns() time), or -1 when nothing is waiting. */
int64_t gw_upstream_loop_run_timers(struct gw_upstream_loop *loop, int64_t now_ns);

/* Whether any exchange's `notify` was called since the last call: the caller may have work
 * to do at once (a connection resumed) before it waits. */
bool gw_upstream_loop_told(struct gw_upstream_loop *loop);

/* Makes every exchange running on the loop fail (for shutdown); each is told. */
void gw_upstream_loop_abort(struct gw_upstream_loop *loop);

/* gw_proxy_prune() for the loop's own pools, on the loop's thread. */
void gw_upstream_loop_prune(struct gw_upstream_loop *loop, int64_t now_ns);

/* --- one exchange ---------------------------------------------------------------------- */

/* A handle for one exchange with `origin` (scheme://host:port, plus the forward proxy if any),
 * from that origin's pool on `loop` (NULL: the blocking handles' pool) or new; given back
 * with gw_upstream_release() on the same thread. NULL when memory is short. */
struct gw_upstream *gw_upstream_acquire(struct gw_upstream_loop *loop, const char *origin);
void gw_upstream_release(struct gw_upstream *upstream);

/* Sends the request. GW_UPSTREAM_OK, or the kind of failure (then nothing is left running).
 * `forward` and what it points to must stay valid until gw_upstream_finish(); on a loop,
 * `notify(cls)` is called at each later step until then. */
enum gw_upstream_error gw_upstream_start(struct gw_upstream *upstream,
                                         const struct gw_forward *forward,
                                         gw_upstream_notify *notify, void *cls);

/* The body given to start() has new bytes, or has ended: libcurl sends them. With `more` (the
 * caller has more bytes to put in), GW_UPSTREAM_OK once its window has room again, or the
 * body has ended; GW_UPSTREAM_PENDING on a loop while it has none (`notify` is called when the
 * upstream has taken some); without a loop it waits for room. Without `more`, GW_UPSTREAM_OK
 * at once. Either way GW_UPSTREAM_ANSWERED when the upstream answered and takes no more of it
 * (gw_upstream_head() then has the answer), or the kind of failure (then nothing is left
 * running). */
enum gw_upstream_error gw_upstream_feed(struct gw_upstream *upstream, bool more);

/* GW_UPSTREAM_OK once the response head is in; GW_UPSTREAM_PENDING on a loop while it is
 * not; or the kind of failure (then nothing is left running). Without a loop it waits. */
enum gw_upstream_error gw_upstream_head(struct gw_upstream *upstream);

long gw_upstream_status(const struct gw_upstream *upstream);

/* What made the exchange fail (gw_upstream_head() or gw_upstream_read()), kept until the next
 * gw_upstream_start(); `*text` is libcurl's own words for it, or ours ("" when none). */
enum gw_fault gw_upstream_fault(const struct gw_upstream *upstream, const char **text);

/* The response's Content-Length, or -1 when it has none. */
int64_t gw_upstream_content_length(const struct gw_upstream *upstream);

/* The response's header fields, as "name\0value\0" pairs in `*len` bytes (walked with
 * gw_field_next(), headers.h); valid until gw_upstream_finish(). */
const char *gw_upstream_fields(const struct gw_upstream *upstream, size_t *len);

/* True when the transfer has ended and its whole body is buffered: `*body` then points at it
 * (valid until gw_upstream_finish()). Small answers usually arrive whole with their head,
 * and can then be sent to the client in one go. */
bool gw_upstream_whole_body(const struct gw_upstream *upstream, const char **body, size_t *len);

/* Up to `max` body bytes into `buf`: the count, 0 at the end of the body, -1 when the
 * transfer failed or stalled past `timeout` (the client's copy is then truncated), or, on a
 * loop, GW_UPSTREAM_WOULD_BLOCK. Without a loop it waits for bytes. */
ssize_t gw_upstream_read(struct gw_upstream *upstream, char *buf, size_t max);

/* Ends the exchange, finished or not, and readies the handles for the next request. */
void gw_upstream_finish(struct gw_upstream *upstream);

#endif
