/*
 * proxy: one request forwarded upstream with libcurl, its answer pulled back piece by piece.
 *
 * Each client connection's thread owns one `struct gw_upstream`: a curl easy handle and a multi
 * handle that it reuses for every request on that connection. All of them share one connection
 * cache (a curl share object), so a keep-alive client, or the next client, reuses an idle
 * upstream connection instead of opening a new one.
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
    GW_UPSTREAM_OTHER,   /* a malformed answer, a reset, no memory */
};

struct gw_forward {
    const char *method;
    const char *url;
    const struct curl_slist *headers; /* sent as given */
    const char *body; /* NULL when the request has none */
    size_t body_len;
    int64_t timeout_ns;
    int64_t connect_timeout_ns;
    bool tls_verify;
};

/* Once per process, before any other call: libcurl and the shared connection cache.
 * 0, or -1. */
int gw_proxy_init(void);
void gw_proxy_cleanup(void);

/* Makes later and running transfers give up at their next wait (for shutdown). */
void gw_proxy_abort_all(void);

/* A connection thread's handles; freed with gw_upstream_free(). NULL when memory is short. */
struct gw_upstream *gw_upstream_new(void);
void gw_upstream_free(struct gw_upstream *upstream);

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

/* Up to `max` body bytes into `buf`: the count, 0 at the end of the body, or -1 when the
 * transfer failed or stalled past `timeout` (the client's copy is then truncated). */
ssize_t gw_upstream_read(struct gw_upstream *upstream, char *buf, size_t max);

/* Ends the exchange, finished or not, and readies the handles for the next request. */
void gw_upstream_finish(struct gw_upstream *upstream);

#endif
