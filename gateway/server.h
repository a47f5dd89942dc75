/*
 * server: the HTTP front of sluice, on libmicrohttpd in thread-per-connection mode.
 *
 * Each request's life: libmicrohttpd hands over the raw request URI first (kept byte for byte
 * for forwarding) and then the parsed request. With the headers in, the route is matched, the
 * client key extracted and the route's limiter asked; a denied request is answered 429 there
 * and then, without reading its body or touching the upstream. An allowed one has its body
 * gathered (up to server.max_body, else 413), is forwarded with the connection's upstream
 * handles (proxy.h), and its answer streamed back with the RateLimit fields added.
 *
 * Per-request state lives in libmicrohttpd's req_cls and is freed in the completion callback;
 * per-connection state (the reusable libcurl handles) in the connection's socket context.
 */
#ifndef SLUICE_GATEWAY_SERVER_H
#define SLUICE_GATEWAY_SERVER_H

#include <stdint.h>

#include "config.h"

#define GW_ERR_LEN 512

struct gw_server;

/* Builds every route's limiter and starts listening on config->server.listen. Returns the
 * server, or NULL with the reason in `err`. `config` must outlive the server. */
struct gw_server *gw_server_start(const struct config *config, char err[GW_ERR_LEN]);

/* The port actually bound (useful when the config says port 0). */
uint16_t gw_server_port(const struct gw_server *server);

/* Stops accepting connections and waits up to `timeout_ns` for requests in flight to end.
 * Returns how many were still running. */
unsigned gw_server_drain(struct gw_server *server, int64_t timeout_ns);

/* Closes every connection and frees the server. */
void gw_server_stop(struct gw_server *server);

#endif
