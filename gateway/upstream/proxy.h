/*
 * proxy: one request forwarded upstream with libcurl, its answer pulled back piece by piece.
 *
 * A request being forwarded holds one `struct gw_upstream`: a curl easy handle and a multi
 * handle, whose connection cache keeps one upstream connection open. It is taken from its
 * origin's pool for the exchange and given back after, connection and all, so the next
 * request to that origin, from any client, reuses it, and idle keep-alive clients hold no
 * handles. A pool keeps at most server.upstream_max_idle handles (more are closed when given
 * back), and one idle longer than server.upstream_idle_timeout is closed by gw_proxy_prune().
 * The pools' mutex is held for a push, a pop or a prune; a curl share object with one shared
 * connection cache was the alternative, but it locks several times per transfer and measured
 * slower under load.
 *
 * What the upstream sends is trusted to belong to a request only while one is outstanding:
 * before a request goes out on a pooled connection, its socket is polled, and if it has
 * anything to read (a stray answer, or EOF) the connection is closed and a new one made, so
 * a stray answer never reaches the next client (a stray that arrives between that poll and
 * the request still would, as with any proxy). libcurl resends a request whose reused
 * connection died before answering: an idempotent method (RFC 9110) may go twice, any other
 * only once, and the client then gets 502. Proxy environment variables are ignored; a
 * route's `proxy:` is the only forward proxy.
 *
 * The exchange is pull-driven, to fit libmicrohttpd's content reader: gw_upstream_start()
 * runs the transfer until the response head is in, then gw_upstream_read() runs it again each
 * time the client side wants bytes. Body data lands in a fixed 64 KiB buffer; when it is full
 * the transfer is paused until the client has taken it, so a 1 GiB download passes through in
 * bounded memory at the client's pace.
 *
 * Timeouts: `timeout` bounds the wait for the response head, and then every wait for more
 * body; `connect_timeout` bounds the TCP (and TLS) connect.
 */
#ifndef SLUICE_GATEWAY_PROXY_H
#define SLUICE_GATEWAY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct curl_slist;
struct gw_upstream;

enum gw_upstream_error {
    GW_UPSTREAM_OK,
    GW_UPSTREAM_CONNECT, /* refused, unreachable, no answer to connect, TLS failure */
    GW_UPSTREAM_TIMEOUT, /* no response head within `timeout` */
    GW_UPSTREAM_TOO_LARGE, /* a response head over `max_head` */
    GW_UPSTREAM_OTHER,   /* a malformed answer, a reset, no memory, a second send refused */
};

struct gw_forward {
    const char *method;
    const char *url;
    const char *proxy; /* the route's forward proxy URL, or NULL for none */
    uint64_t max_head; /* the longest response head passed on (its fields' bytes) */
    const struct curl_slist *headers; /* sent as given */
    const char *body; /* NULL when the request has none */
    size_t body_len;
    int64_t timeout_ns;
    int64_t connect_timeout_ns;
    bool tls_verify;
};

/* Once per process, before any other call (and cleanup after the last). 0, or -1. */
int gw_proxy_init(void);
void gw_proxy_cleanup(void);

/* Makes later and running transfers give up at their next wait (for shutdown). */
void gw_proxy_abort_all(void);

/* server.upstream_idle_timeout and server.upstream_max_idle; at start and each reload. */
void gw_proxy_configure(int64_t idle_timeout_ns, unsigned max_idle);

/* Closes the connections of handles idle longer than the idle timeout, a batch at a time;
 * called every fraction of a second. */
void gw_proxy_prune(int64_t now_ns);

/* A handle for one exchange with `origin` (scheme://host:port, plus the forward proxy if any),
 * from that origin's pool or new; given back with gw_upstream_release(). NULL when memory is
 * short. */
struct gw_upstream *gw_upstream_acquire(const char *origin);
void gw_upstream_release(struct gw_upstream *upstream);

/* Sends the request and waits for the response head. GW_UPSTREAM_OK, or the kind of
 * failure (then nothing is left running). `forward` and what it points to must stay valid
 * until gw_upstream_finish(). */
enum gw_upstream_error gw_upstream_start(struct gw_upstream *upstream,
                                         const struct gw_forward *forward);

long gw_upstream_status(const struct gw_upstream *upstream);

/* The response's Content-Length, or -1 when it has none. */
int64_t gw_upstream_content_length(const struct gw_upstream *upstream);

/* Walks the response's header fields: start with *cursor = 0; returns false after the last.
 * `name` and `value` stay valid until gw_upstream_finish(). */
bool gw_upstream_next_header(const struct gw_upstream *upstream, size_t *cursor,
                             const char **name, const char **value);

/* True when the transfer has ended and its whole body is buffered: `*body` then points at it
 * (valid until gw_upstream_finish()). Small answers usually arrive whole with their head,
 * and can then be sent to the client in one go. */
bool gw_upstream_whole_body(const struct gw_upstream *upstream, const char **body, size_t *len);

/* Up to `max` body bytes into `buf`: the count, 0 at the end of the body, or -1 when the
 * transfer failed or stalled past `timeout` (the client's copy is then truncated). */
ssize_t gw_upstream_read(struct gw_upstream *upstream, char *buf, size_t max);

/* Ends the exchange, finished or not, and readies the handles for the next request. */
void gw_upstream_finish(struct gw_upstream *upstream);

#endif
