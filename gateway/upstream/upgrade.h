/*
 * upgrade: the upstream's side of a protocol upgrade (WebSocket, or another token a route's
 * `upgrades:` lists): a connection of its own, the request sent and the answer's head read on
 * it, and then either the connection handed to a tunnel (tunnel.h) on 101 Switching
 * Protocols, or the answer read whole to be passed on as any other.
 *
 * libcurl makes the connection (CURLOPT_CONNECT_ONLY: TCP, TLS with the route's tls_verify,
 * the route's forward proxy) and carries its bytes (curl_easy_send and curl_easy_recv), so a
 * TLS upstream works as a plain one; its HTTP machinery cannot be used here, as it has no way
 * to hand over a connection after a 101. The request goes as forwarding writes it (the same
 * header list, proxy.h), and the answer is read strictly: a status line "HTTP/1.1 NNN", fields
 * without folding, control characters or space before the colon, within max_head; 1xx
 * answers other than 101 are skipped. Anything else is an invalid answer (502). An answer
 * other than 101 carries a body of at most GW_UPGRADE_MAX_BODY bytes (by Content-Length,
 * chunked, or up to the close), read whole: refusals of an upgrade are small.
 *
 * gw_upgrade_connect() blocks, for at most connect_timeout and then timeout for the answer:
 * in thread_per_connection on the connection's own thread, in event mode on an offload
 * thread (offload.h; the Redis store has threads of its own, so a slow upgrade never delays
 * it).
 */
#ifndef SLUICE_GATEWAY_UPGRADE_H
#define SLUICE_GATEWAY_UPGRADE_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/upstream/proxy.h"

#define GW_UPGRADE_MAX_BODY  (64 * 1024)
#define GW_UPGRADE_ERROR_LEN 256 /* libcurl's CURL_ERROR_SIZE (upgrade.c checks it) */

/* libcurl's handle and socket are held as a void * and an int (as upgrade.c checks), so that
 * the code that holds a gw_upgrade does not include libcurl. */
struct gw_upgrade {
    void *easy; /* the CURL handle: the connection, until a tunnel or gw_upgrade_free() */
    int fd;     /* its socket (a curl_socket_t) */
    long status;
    char *head; /* "name\0value\0" pairs of the final answer's fields (gw_field_next()) */
    size_t head_len;
    char *early;      /* after the head: the body of an answer other than 101, or the upstream's */
    size_t early_len; /* first tunnel bytes after a 101 */
    enum gw_fault fault;
    char error_text[GW_UPGRADE_ERROR_LEN];
};

/* Connects to `fw->url`'s server and sends `fw`'s request (its method, the URL's target, its
 * headers; no body), then reads the answer into `up`. 0 once an answer is in (up->status),
 * or -1 with up->fault and up->error_text saying what failed. Either way the caller frees
 * `up` with gw_upgrade_free() unless a tunnel took its connection. */
int gw_upgrade_connect(const struct gw_forward *fw, struct gw_upgrade *up);

/* Closes the connection (if still held) and frees what `up` holds. */
void gw_upgrade_free(struct gw_upgrade *up);

#endif
